// dKaMinPar behind halo::partition_distributed (partition/dkaminpar_partition.hpp).
#include "dkaminpar_partition.hpp"

#include <dkaminpar.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/mpi/mpi_error.hpp"
#include "kaminpar_partition.hpp"  // require_preset

namespace halo::detail {

std::vector<std::string> dkaminpar_preset_names()
{
    const auto names = kaminpar::dist::get_preset_names();
    std::vector<std::string> sorted(names.begin(), names.end());
    std::sort(sorted.begin(), sorted.end());
    return sorted;
}

int dkaminpar_threads(const Comm& c, int requested)
{
    if (requested > 0) {
        return requested;
    }
    MPI_Comm node = MPI_COMM_NULL;
    HALO_MPI_TRY(MPI_Comm_split_type(c.comm, MPI_COMM_TYPE_SHARED, c.rank, MPI_INFO_NULL, &node));
    int ranks_on_node = 1;
    MPI_Comm_size(node, &ranks_on_node);
    MPI_Comm_free(&node);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int node_share = static_cast<int>(std::max(1L, online) / std::max(1, ranks_on_node));
    // omp_get_max_threads: OMP_NUM_THREADS where set, else the processors this rank is bound to
    // (mpirun binds to a core for 1 or 2 ranks by default, to a socket above).
    return std::max(1, std::min(node_share, omp_get_max_threads()));
}

std::vector<std::int32_t> dkaminpar_partition(const Comm& c, const Csr& pattern,
                                              std::int64_t first_row, const DistributedOptions& o)
{
    using kaminpar::dist::BlockID;
    using kaminpar::dist::GlobalEdgeID;
    using kaminpar::dist::GlobalNodeID;
    using kaminpar::dist::GlobalNodeWeight;
    require_preset(o.kaminpar_preset, dkaminpar_preset_names(), "dKaMinPar");
    const auto n_local = pattern.num_rows;
    // ParMETIS layout: vtxdist from every rank's row count (checked against the block rows).
    const auto counts = c.allgatherv(std::vector<std::int64_t>{n_local});
    std::vector<GlobalNodeID> vtxdist(counts.size() + 1, 0);
    for (std::size_t r = 0; r < counts.size(); ++r) {
        vtxdist[r + 1] = vtxdist[r] + static_cast<GlobalNodeID>(counts[r]);
    }
    HALO_EXPECTS(vtxdist[static_cast<std::size_t>(c.rank)] == static_cast<GlobalNodeID>(first_row),
                 "rank ", c.rank, ": block rows start at ", first_row, ", vtxdist says ",
                 vtxdist[static_cast<std::size_t>(c.rank)]);
    std::vector<GlobalEdgeID> xadj(static_cast<std::size_t>(n_local) + 1, 0);
    std::vector<GlobalNodeWeight> vwgt(o.weight_by_degree ? static_cast<std::size_t>(n_local) : 0);
    for (std::int64_t i = 0; i < n_local; ++i) {
        GlobalEdgeID degree = 0;
        for (auto k = pattern.indptr[i]; k < pattern.indptr[i + 1]; ++k) {
            degree += pattern.indices[k] != first_row + i ? 1 : 0;
        }
        xadj[static_cast<std::size_t>(i) + 1] = xadj[static_cast<std::size_t>(i)] + degree;
        if (o.weight_by_degree) {
            vwgt[static_cast<std::size_t>(i)] = 1 + static_cast<GlobalNodeWeight>(degree);
        }
    }
    std::vector<GlobalNodeID> adjncy(xadj.back());
#pragma omp parallel for schedule(dynamic, 4096)
    for (std::int64_t i = 0; i < n_local; ++i) {
        auto out = xadj[static_cast<std::size_t>(i)];
        for (auto k = pattern.indptr[i]; k < pattern.indptr[i + 1]; ++k) {
            if (pattern.indices[k] != first_row + i) {
                adjncy[out++] = static_cast<GlobalNodeID>(pattern.indices[k]);
            }
        }
    }

    kaminpar::dKaMinPar partitioner(
        c.comm, dkaminpar_threads(c, o.threads),
        kaminpar::dist::create_context_by_preset_name(o.kaminpar_preset));
    partitioner.set_output_level(kaminpar::OutputLevel::QUIET);
    kaminpar::dKaMinPar::reseed(static_cast<int>(o.seed % 2147483647ULL));
    std::vector<BlockID> part(static_cast<std::size_t>(n_local));
    try {
        partitioner.copy_graph(vtxdist, xadj, adjncy, vwgt);
        // dKaMinPar holds its own copy (32-bit local ids) from here on.
        adjncy = {};
        xadj = {};
        vwgt = {};
        partitioner.compute_partition(static_cast<BlockID>(o.num_parts),
                                      std::max(1e-3, o.imbalance - 1.0), part);
    } catch (const std::exception& e) {
        HALO_THROW(Error, "dKaMinPar failed on rank ", c.rank, " for ", vtxdist.back(),
                   " nodes and ", o.num_parts, " parts: ", e.what());
    }
    std::vector<std::int32_t> result(part.size());
    for (std::size_t i = 0; i < part.size(); ++i) {
        HALO_EXPECTS(part[i] < static_cast<BlockID>(o.num_parts), "dKaMinPar put node ",
                     first_row + static_cast<std::int64_t>(i), " into part ", part[i], " of ",
                     o.num_parts);
        result[i] = static_cast<std::int32_t>(part[i]);
    }
    return result;
}

}  // namespace halo::detail
