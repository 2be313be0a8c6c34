// KaMinPar behind halo::partition_graph (partition/kaminpar_partition.cpp, built with
// HALO_WITH_KAMINPAR). Internal to halo_partition.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/partition/partition.hpp"

namespace halo::detail {

/// owner[v] for every node of `a` from KaMinPar with options.kaminpar_preset on options.threads
/// threads: the pattern of A | A^T without the diagonal (taken as it is when options.symmetric),
/// nodes without an off-diagonal entry left out and spread afterwards (onto the parts with the
/// fewest nonzeros, then rows), node weights the row's nonzeros in `a`, at least 1 (or 1 without
/// weight_by_degree), epsilon imbalance - 1. Throws halo::InputError for an unknown preset,
/// balance_rows, or a part left empty.
std::vector<std::int32_t> kaminpar_partition(const CsrView& a, const PartitionOptions& options);

/// How many of `count` unit items each part takes so that the lowest loads rise to one level
/// (ties: lower part ids first); the takes sum to `count`.
std::vector<std::int64_t> water_fill(const std::vector<std::int64_t>& load, std::int64_t count);

/// Throws halo::InputError "unknown <which> preset 'name' (known: a, b, ...)" unless `name` is
/// one of `known`.
void require_preset(const std::string& name, const std::vector<std::string>& known,
                    const char* which);

/// KaMinPar's shared-memory preset names, sorted.
std::vector<std::string> kaminpar_preset_names();

}  // namespace halo::detail
