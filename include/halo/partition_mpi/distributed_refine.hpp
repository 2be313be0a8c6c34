// Distributed greedy k-way boundary refinement (docs/PARTITION.md, "Refinement"): improves a
// partition of a graph whose rows are spread over the ranks of a communicator, in the style of
// METIS's and ParMETIS's greedy k-way refinement. halo-partition runs it after PT-Scotch.
//
// Each rank holds a block of consecutive rows of a symmetric pattern (global column ids) and their
// part labels; the labels of the columns it references but does not own (ghosts) come from their
// owners (MPI_Alltoallv in bounded rounds). A pass has two sub-phases, moves to higher part ids
// only and then to lower ones only, so that two neighbours on different ranks never swap places
// in one sub-phase; each owned boundary vertex moves to the neighbouring part with the largest
// positive gain (ties: the lighter part, then the smaller id) if the part's capacity allows it;
// a move without gain is made only towards a part lighter by more than twice the vertex weight.
// Each part's remaining capacity under the bound is split evenly among the ranks (plus what a
// rank moved out of the part in the same sub-phase), so the bound holds after every sub-phase
// without further communication. A sub-phase whose moves, made on stale ghost labels, increased
// the global cut is undone.
//
// Guarantees: the cut never increases; a part above the bound never grows, and no part is pushed
// above it; the result is a function of (pattern, labels, options, rank count), independent of
// the thread count (vertices are visited in row order on one thread).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "halo/core/csr.hpp"

namespace halo {

struct RefineOptions {
    int num_parts = 1;
    /// Bound on every part's weight: floor(imbalance * total weight / num_parts).
    double imbalance = 1.03;
    /// Stops after this many passes, or earlier after a pass that moved nothing.
    int passes = 8;
    /// Vertex weight 1 + (off-diagonal degree), as halo-partition gives METIS and PT-Scotch;
    /// otherwise 1.
    bool weight_by_degree = true;
    /// Ghost ids (and labels) a rank sends per MPI_Alltoallv round.
    std::int64_t chunk_entries = std::int64_t{1} << 24;
};

struct RefineStats {
    std::int64_t cut_before = 0;  // edges {i, j}, i != j, with ends in different parts
    std::int64_t cut_after = 0;
    std::int64_t moves = 0;  // vertices moved (in kept sub-phases), over all ranks
    int passes = 0;          // passes run
};

/// Refines `parts` (the part of each of this rank's rows) in place. `pattern` holds this rank's
/// rows [first_row, first_row + pattern.num_rows) of a symmetric pattern with global column ids;
/// the ranks' row blocks must be consecutive in rank order and cover every column. Diagonal
/// entries are ignored. Collective over `comm`; the returned stats are the same on every rank.
RefineStats refine_partition(MPI_Comm comm, const Csr& pattern, std::int64_t first_row,
                             std::vector<std::int32_t>& parts, const RefineOptions& options);

}  // namespace halo
