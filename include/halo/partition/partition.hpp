// Graph partitioners: assign every node of a (symmetric) adjacency to one of P parts.
//
// metis  METIS_PartGraphKway on the symmetrized pattern without self-loops; vertex weights
//        1 + degree, so that parts balance nonzeros as well as rows.
// kaminpar  KaMinPar (shared memory, TBB threads) on the same pattern and node weights as METIS,
//        with one of KaMinPar's presets (default, eco, strong, fast, ...); 64-bit edge ids, so
//        past METIS's 2^31 entries. Only in builds with HALO_WITH_KAMINPAR (kaminpar_available()).
// block  contiguous ranges of node ids, equal in node count (a baseline).
// random a seeded uniform assignment (a baseline; what hashing-based systems do).
// P = 1 puts every node in part 0 whatever the method.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "halo/core/csr.hpp"

namespace halo {

enum class Partitioner {
    metis,
    block,
    random,
    ptscotch,   // distributed (halo/partition_mpi/distributed_partition.hpp); partition_graph
                // rejects it
    kaminpar,   // shared memory, in-process
    dkaminpar,  // distributed (halo/partition_mpi/distributed_partition.hpp); partition_graph
                // rejects it
};

struct PartitionOptions {
    Partitioner method = Partitioner::metis;
    int num_parts = 1;
    double imbalance = 1.03;       // METIS ufactor = (imbalance - 1) * 1000: max part weight / mean
    std::uint64_t seed = 1;        // METIS_OPTION_SEED, and the random partitioner's seed
    bool weight_by_degree = true;  // METIS vertex weights 1 + degree (else 1)
    /// METIS with two balance constraints, rows (weight 1) and nonzeros (weight 1 + degree), each
    /// within `imbalance`, instead of the one weight above: for work that grows with a part's rows
    /// as well as its nonzeros (the dense transform, the output rows). Ignores weight_by_degree.
    bool balance_rows = false;
    /// kaminpar: TBB threads (0: kaminpar_threads(0), OpenMP's count).
    int threads = 0;
    /// kaminpar: the preset (kaminpar_presets()).
    std::string kaminpar_preset = "default";
    /// kaminpar: runs with seeds seed, seed + 1, ..., the smallest cut kept (0:
    /// kaminpar_tries(0, nonzeros)).
    int kaminpar_tries = 0;
    /// The adjacency is known to be symmetric (built with --symmetrize): KaMinPar takes its
    /// pattern minus the diagonal as it is, without building A | A^T (which needs twice the
    /// memory).
    bool symmetric = false;
};

/// Whether this build has KaMinPar and dKaMinPar (CMake option HALO_WITH_KAMINPAR).
bool kaminpar_available();

/// KaMinPar's threads for --threads `requested` (0: OMP_NUM_THREADS where set, else the processors
/// this process may run on).
int kaminpar_threads(int requested);

/// KaMinPar's runs for --kaminpar-tries `requested` on a matrix of `nonzeros` entries (0: 4 up to
/// 2^24 nonzeros, where a run takes well under a second and its cut varies run to run by up to
/// 1.8x on the shared graphs; 1 above).
int kaminpar_tries(int requested, std::int64_t nonzeros);

/// KaMinPar's preset names that --kaminpar-preset takes (shared memory), sorted; empty without
/// KaMinPar.
std::vector<std::string> kaminpar_presets();

/// owner[v] in [0, num_parts) for every node v of `adjacency` (square). The adjacency should be
/// symmetric (METIS requires it; its pattern is symmetrized here if it is not). Throws
/// halo::InputError when num_parts < 1 or exceeds the node count, when the adjacency has 2^31 or
/// more entries for METIS (its 32-bit idx_t), or for kaminpar in a build without it, an unknown
/// preset or balance_rows (KaMinPar balances one weight per node).
std::vector<std::int32_t> partition_graph(const CsrView& adjacency,
                                          const PartitionOptions& options);

/// Throws halo::InputError naming METIS's 2^31 - 1 limit and suggesting --partitioner ptscotch
/// when a graph of `num_nodes` nodes and `adjacency_entries` symmetrized off-diagonal entries
/// exceeds what METIS's 32-bit idx_t holds. partition_graph calls it before METIS.
void check_metis_limit(std::int64_t num_nodes, std::int64_t adjacency_entries);

Partitioner parse_partitioner(std::string_view text);
std::string to_string(Partitioner method);

/// Quality of an assignment, as halo-partition reports it.
struct PartitionQuality {
    struct Part {
        std::int64_t owned_rows = 0;
        std::int64_t nnz = 0;         // nonzeros of the owned rows
        std::int64_t halo_rows = 0;   // distinct off-part columns referenced by owned rows
        std::int32_t neighbours = 0;  // parts that own one of those columns
    };
    std::vector<Part> parts;
    std::int64_t edge_cut = 0;     // nonzeros (i, j), i < j, with owner[i] != owner[j]
    std::int64_t halo_volume = 0;  // sum of halo_rows over parts
    double row_imbalance = 1.0;    // max / mean owned rows
    double nnz_imbalance = 1.0;    // max / mean nonzeros
};

PartitionQuality partition_quality(const CsrView& adjacency, const std::vector<std::int32_t>& owner,
                                   int num_parts);

}  // namespace halo
