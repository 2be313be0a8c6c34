// Distributed partitioning with PT-Scotch or dKaMinPar (docs/PARTITION.md): the ranks of a
// communicator read one graph together, each its slice, partition it with SCOTCH_dgraphPart or
// dKaMinPar and build the shards and halo plans of the parts they own, without any rank holding
// the global CSR.
//
// Pipeline (every step on every rank, collective over `comm`):
//   1. slice: edge list byte ranges split at line boundaries (io.hpp, read_edge_list_slice),
//      generator edge ranges; other formats are read whole by every rank and cut into edge ranges.
//   2. block rows: entries go to the rank owning their row in a block distribution of the node
//      ids (MPI_Alltoallv in rounds of at most chunk_entries per rank), which sorts, merges and
//      adds or drops self-loops as build_csr does, and normalizes with allgathered degrees.
//   3. PT-Scotch: the symmetrized pattern without diagonal, vertex weights 1 + degree, as a
//      SCOTCH_Dgraph (64-bit SCOTCH_Num); SCOTCH_dgraphPart into num_parts parts, then a
//      distributed greedy k-way boundary refinement (distributed_refine.hpp). Or dKaMinPar on the
//      same pattern and weights in ParMETIS layout (64-bit global ids), with one of its presets.
//   4. shards: the owner array and each node's boundary flag are allgathered (O(num_nodes) bytes
//      per rank), rows move to the rank handling their part (part p on rank p % size, again in
//      bounded rounds), which builds the shard (build_shard_rows); send plans come from the peers'
//      receive blocks.
//
// Invariants: the shards reassemble build_csr's CSR of the same input exactly, for any rank
// count. The partition itself is PT-Scotch's, refined, which depends on the rank count: for a
// given (input, parts, seed, strategy, ranks) the dataset is the same on every run. dKaMinPar's
// depends on the rank count and on its threads per rank (docs/PARTITION.md says what repeats).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/core/shard.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo/store/store.hpp"

namespace halo {

struct DistributedOptions {
    /// Partitioner::ptscotch or Partitioner::dkaminpar (the latter only where
    /// kaminpar_available()).
    Partitioner method = Partitioner::ptscotch;
    int num_parts = 1;
    std::uint64_t seed = 1;
    double imbalance = 1.03;  // max part weight / mean (PT-Scotch's kbalval = imbalance - 1)
    /// auto (tuned up to tuned_max_nonzeros symmetrized entries, quality above) | tuned
    /// (SCOTCH_STRATQUALITY and two more thorough variants of it, the smallest cut kept;
    /// docs/PARTITION.md) | quality | default | speed | balance | scalability (SCOTCH_STRAT*)
    std::string strategy = "auto";
    /// PT-Scotch runs with seeds seed .. seed + tries - 1 (each with the three variants of
    /// "tuned"); the smallest edge cut (after refinement) is kept.
    int tries = 1;
    /// Passes of the distributed greedy k-way refinement after each PT-Scotch run
    /// (distributed_refine.hpp); 0 keeps PT-Scotch's partition.
    int refine_passes = 8;
    BuildOptions build;
    GraphReadOptions read;
    /// Entries (or row nonzeros) a rank sends per MPI_Alltoallv round: bounds the send and
    /// receive buffers, and keeps every count below 2^31.
    std::int64_t chunk_entries = std::int64_t{1} << 24;
    bool weight_by_degree = true;
    /// dkaminpar: TBB threads per rank (0: the node's processors shared among its ranks, at most
    /// OMP_NUM_THREADS where set, else at most those the rank is bound to).
    int threads = 0;
    /// dkaminpar: the preset (dkaminpar_presets()).
    std::string kaminpar_preset = "default";
};

/// dKaMinPar's preset names (sorted; empty without KaMinPar).
std::vector<std::string> dkaminpar_presets();

/// Above this many entries of the symmetric pattern "auto" runs PT-Scotch once (quality) instead
/// of tuned's three runs: there PT-Scotch's own time is most of the job (R-MAT 20, 31M entries:
/// 557 s for one run on 2 ranks of the development VM).
inline constexpr std::int64_t tuned_max_nonzeros = std::int64_t{1} << 24;

/// The strategy "auto" stands for on a pattern of `nonzeros` entries; any other name unchanged.
inline std::string resolve_strategy(const std::string& name, std::int64_t nonzeros)
{
    if (name != "auto") {
        return name;
    }
    return nonzeros <= tuned_max_nonzeros ? "tuned" : "quality";
}

struct DistributedPartition {
    std::string strategy;  // the PT-Scotch strategy run (resolve_strategy), or dKaMinPar's preset
    int threads = 1;       // dkaminpar: threads per rank
    std::int64_t num_nodes = 0;
    std::int64_t num_nonzeros = 0;
    bool has_values = false;
    std::vector<std::int32_t> owner;        // every node's part, on every rank
    std::vector<Shard> shards;              // the parts this rank handles: p with p % size == rank
    PartitionQuality quality;               // the same on every rank
    std::map<std::string, double> seconds;  // phase times of this rank
};

/// Rank that handles part p when `size` ranks build `num_parts` parts.
inline int part_rank(int part, int size)
{
    return part % size;
}

/// Reads `input` (a graph file or generator spec, as halo-partition takes it) on all ranks of
/// `comm` and partitions it with PT-Scotch or dKaMinPar (options.method). Throws halo::InputError
/// for bad input or options (the same on every rank where the cause is global), halo::Error when
/// the partitioner fails. MPI must be initialized with MPI_THREAD_MULTIPLE (PT-Scotch's threads
/// call MPI).
DistributedPartition partition_distributed(MPI_Comm comm, const std::string& input,
                                           const DistributedOptions& options);

/// Writes the dataset of `result` together (docs/FORMAT.md, "Joined datasets"): one rank writes
/// a plain dataset; several ranks each write a part file "<path>.rank<r>-of-<size>" with their
/// parts, and rank 0 then writes `path`, whose /parts/<p> are external links into them. The root
/// file is removed first and published last (after every part file is committed), so an
/// interrupted run never leaves a `path` that reads as valid. `extra` is called for each shard
/// after it is written (kernel metadata). Collective.
void write_distributed_dataset(MPI_Comm comm, const std::filesystem::path& path, DatasetInfo info,
                               const DistributedPartition& result,
                               const std::function<void(DatasetWriter&, const Shard&)>& extra = {});

/// Part file name of rank `rank` of `size` for the dataset `path`.
std::filesystem::path part_file_path(const std::filesystem::path& path, int rank, int size);

}  // namespace halo
