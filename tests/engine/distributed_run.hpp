// What the distributed engine tests share: the first P world ranks as a group, and a group's
// output rows gathered at its rank 0 in global id order.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "halo/core/shard.hpp"
#include "mpi_world.hpp"

namespace halo::testing {

/// Runs fn(group, lead) on a communicator of the first `parts` world ranks (lead: world rank 0);
/// the other ranks skip it; all meet at a barrier afterwards.
template <typename Fn>
void with_group(int parts, Fn&& fn)
{
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm group = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank < parts ? 0 : MPI_UNDEFINED, world_rank, &group);
    if (group != MPI_COMM_NULL) {
        fn(group, world_rank == 0);
        MPI_Comm_free(&group);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/// The rows `out` (shard.num_owned x m, this rank's) of every rank of `comm`, in global id order
/// of a graph of `num_nodes` nodes, at rank 0 of comm; other ranks get an empty vector. On
/// MPI_COMM_SELF (one part) the rank's own rows, reordered.
inline std::vector<float> gather_by_global_id(MPI_Comm comm, const Shard& shard,
                                              const std::vector<float>& out, std::int64_t m,
                                              std::int64_t num_nodes)
{
    int rank = 0;
    int parts = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &parts);
    const int rows = static_cast<int>(shard.num_owned);
    std::vector<int> counts(parts);
    MPI_Gather(&rows, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm);
    std::vector<int> displs(parts, 0);
    if (rank == 0) {
        std::partial_sum(counts.begin(), counts.end() - 1, displs.begin() + 1);
    }
    std::vector<global_id> ids(static_cast<std::size_t>(rank == 0 ? num_nodes : 0));
    MPI_Gatherv(shard.global_ids.data(), rows, MPI_INT64_T, ids.data(), counts.data(),
                displs.data(), MPI_INT64_T, 0, comm);
    std::vector<int> value_counts(parts);
    std::vector<int> value_displs(parts);
    for (int p = 0; p < parts; ++p) {
        value_counts[p] = counts[p] * static_cast<int>(m);
        value_displs[p] = displs[p] * static_cast<int>(m);
    }
    std::vector<float> rows_out(static_cast<std::size_t>(rank == 0 ? num_nodes * m : 0));
    MPI_Gatherv(out.data(), rows * static_cast<int>(m), MPI_FLOAT, rows_out.data(),
                value_counts.data(), value_displs.data(), MPI_FLOAT, 0, comm);
    if (rank != 0) {
        return {};
    }
    std::vector<float> ordered(rows_out.size());
    for (std::int64_t r = 0; r < num_nodes; ++r) {
        std::memcpy(&ordered[ids[r] * m], &rows_out[r * m], m * sizeof(float));
    }
    return ordered;
}

}  // namespace halo::testing
