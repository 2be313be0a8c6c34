// MPI helpers of the distributed partitioning path (distributed_partition.cpp,
// distributed_refine.cpp): typed collectives on one communicator and the block distribution of
// node ids. Internal to halo_partition_mpi.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/mpi/mpi_error.hpp"

namespace halo::detail {

template <typename T>
MPI_Datatype mpi_type()
{
    if constexpr (std::is_same_v<T, std::int32_t>) {
        return MPI_INT32_T;
    } else if constexpr (std::is_same_v<T, std::int64_t>) {
        return MPI_INT64_T;
    } else if constexpr (std::is_same_v<T, float>) {
        return MPI_FLOAT;
    } else if constexpr (std::is_same_v<T, double>) {
        return MPI_DOUBLE;
    } else {
        static_assert(std::is_same_v<T, std::uint8_t>);
        return MPI_UINT8_T;
    }
}

struct Comm {
    MPI_Comm comm;
    int rank = 0;
    int size = 1;

    explicit Comm(MPI_Comm c) : comm(c)
    {
        HALO_MPI_TRY(MPI_Comm_rank(comm, &rank));
        HALO_MPI_TRY(MPI_Comm_size(comm, &size));
    }

    std::int64_t max(std::int64_t v) const
    {
        HALO_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_MAX, comm));
        return v;
    }
    std::int64_t sum(std::int64_t v) const
    {
        HALO_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_SUM, comm));
        return v;
    }
    void sum(std::vector<std::int64_t>& v) const
    {
        HALO_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_INT64_T,
                                   MPI_SUM, comm));
    }

    // Every rank's `mine`, concatenated in rank order.
    template <typename T>
    std::vector<T> allgatherv(const std::vector<T>& mine) const
    {
        HALO_EXPECTS(mine.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
                     "allgatherv of ", mine.size(), " values from one rank");
        int count = static_cast<int>(mine.size());
        std::vector<int> counts(size);
        HALO_MPI_TRY(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm));
        std::vector<int> displs(size, 0);
        std::int64_t total = 0;
        for (int r = 0; r < size; ++r) {
            HALO_EXPECTS(total <= std::numeric_limits<int>::max(), "allgatherv of ", total,
                         "+ values: more than MPI's int displacements hold");
            displs[r] = static_cast<int>(total);
            total += counts[r];
        }
        std::vector<T> all(total);
        HALO_MPI_TRY(MPI_Allgatherv(mine.data(), count, mpi_type<T>(), all.data(), counts.data(),
                                    displs.data(), mpi_type<T>(), comm));
        return all;
    }

    // One MPI_Alltoallv of `send` (grouped by destination, counts[d] values for rank d); what
    // arrives is appended to `out` in source-rank order. Returns how many came from each rank.
    template <typename T>
    std::vector<int> alltoallv_append(const std::vector<T>& send, const std::vector<int>& counts,
                                      std::vector<T>& out) const
    {
        std::vector<int> recv_counts(size);
        HALO_MPI_TRY(MPI_Alltoall(counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm));
        std::vector<int> send_displs(size, 0);
        std::vector<int> recv_displs(size, 0);
        std::int64_t send_total = 0;
        std::int64_t recv_total = 0;
        for (int r = 0; r < size; ++r) {
            send_displs[r] = static_cast<int>(send_total);
            recv_displs[r] = static_cast<int>(recv_total);
            send_total += counts[r];
            recv_total += recv_counts[r];
        }
        HALO_EXPECTS(recv_total <= std::numeric_limits<int>::max(), "one exchange round brings ",
                     recv_total, " values: lower chunk_entries");
        const auto base = out.size();
        out.resize(base + static_cast<std::size_t>(recv_total));
        HALO_MPI_TRY(MPI_Alltoallv(send.data(), counts.data(), send_displs.data(), mpi_type<T>(),
                                   out.data() + base, recv_counts.data(), recv_displs.data(),
                                   mpi_type<T>(), comm));
        return recv_counts;
    }
};

// Block distribution of the node ids: rank r holds rows [first[r], first[r + 1]).
struct Blocks {
    std::vector<std::int64_t> first;

    Blocks(std::int64_t n, int size) : first(size + 1)
    {
        for (int r = 0; r <= size; ++r) {
            first[r] = n * r / size;
        }
    }
    int rank_of(std::int64_t v) const
    {
        return static_cast<int>(std::upper_bound(first.begin(), first.end(), v) - first.begin()) -
               1;
    }
};

}  // namespace halo::detail
