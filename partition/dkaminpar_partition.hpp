// dKaMinPar behind halo::partition_distributed (partition/dkaminpar_partition.cpp, built with
// HALO_WITH_KAMINPAR). Internal to halo_partition_mpi.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/partition_mpi/distributed_partition.hpp"
#include "mpi_comm.hpp"

namespace halo::detail {

/// The part of each row of this rank's block (rows [first_row, first_row + pattern.num_rows) of a
/// block distribution over the ranks of `c`) from dKaMinPar: `pattern` is symmetric (global column
/// ids); its diagonal is left out; node weights 1 + degree (or 1 without weight_by_degree),
/// epsilon imbalance - 1, options.threads threads per rank, options.kaminpar_preset. Collective.
/// Throws halo::InputError for an unknown preset (on every rank).
std::vector<std::int32_t> dkaminpar_partition(const Comm& c, const Csr& pattern,
                                              std::int64_t first_row,
                                              const DistributedOptions& options);

/// dKaMinPar's preset names, sorted.
std::vector<std::string> dkaminpar_preset_names();

/// Threads per rank for `requested` (0: the node's processors shared among its ranks, at most
/// OMP_NUM_THREADS where set, else at most the processors this rank is bound to; at least 1).
/// Collective.
int dkaminpar_threads(const Comm& c, int requested);

}  // namespace halo::detail
