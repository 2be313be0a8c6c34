// KaMinPar behind halo::partition_graph (partition/kaminpar_partition.cpp, built with
// HALO_WITH_KAMINPAR). Internal to halo_partition.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halo/csr.hpp"
#include "halo/partition.hpp"

namespace halo::detail {

/// owner[v] for every node of `a` from KaMinPar with options.kaminpar_preset on options.threads
/// threads: the pattern of A | A^T without the diagonal (taken as it is when options.symmetric),
/// node weights 1 + degree (or 1 without weight_by_degree), epsilon imbalance - 1. Throws
/// halo::InputError for an unknown preset, balance_rows, or a part left empty.
std::vector<std::int32_t> kaminpar_partition(const CsrView& a, const PartitionOptions& options);

/// KaMinPar's shared-memory preset names, sorted.
std::vector<std::string> kaminpar_preset_names();

}  // namespace halo::detail
