// The gather model of SpMM (host only, no CUDA): how many rows of X a kernel computing Y = A X
// must bring from DRAM when A's nonzeros are visited in CSR order (row by row, each row's columns
// in stored order) and X's rows pass through a cache that holds `capacity` of them.
//
// Where X does not fit in L2, the gathers of X rows, not the compulsory bytes, bound an SpMM
// (docs/NOTEBOOK.md, "The gather-bound limit"): every row-ordered kernel (cuSPARSE's CSR
// algorithms, MergePath, row-split) reads A in this order, and every re-read of an evicted X row
// comes from DRAM. Two caches are simulated over the same access sequence:
//   - Belady's MIN (OPT; Belady 1966, with bypass, Mattson et al. 1970): on a miss it keeps the
//     rows used soonest and does not keep a row used later than every cached one. No replacement
//     policy of a cache of that capacity misses less on the sequence, so its misses give a lower
//     bound on DRAM bytes: the gather-bound limit;
//   - LRU: what a recency-based cache of that capacity misses, the estimate to compare with
//     measured DRAM bytes (a GPU's L2 is set-associative and shared by all resident warps, so
//     neither simulation is exact for it).
// Both count a row's first use as a miss (a cold miss); a capacity at least the number of distinct
// columns read leaves the cold misses only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "halo/core/csr.hpp"

namespace halo {

/// The X-row misses of one cache capacity.
struct GatherTraffic {
    std::int64_t capacity_rows = 0;  // X rows the cache holds
    std::int64_t accesses = 0;       // X rows read: A's nonzeros
    std::int64_t distinct = 0;       // distinct columns read: the cold misses
    std::int64_t min_misses = 0;     // Belady's MIN: the fewest any cache of this capacity has
    std::int64_t lru_misses = 0;     // an LRU cache's
};

/// The misses of each capacity (each at least 1) for A's gathers in CSR order. The capacities are
/// simulated in parallel (OpenMP) over one shared next-use pass; the result does not depend on the
/// thread count. Cost: O(nnz log capacity) time and 4 bytes per nonzero (8 past 2^32 nonzeros)
/// plus O(columns) per capacity. Throws halo::Error on a column index outside [0, num_cols).
std::vector<GatherTraffic> gather_traffic(const CsrView& a,
                                          std::span<const std::int64_t> capacities_rows);

/// X rows of `row_bytes` bytes each that fit in `cache_bytes` (at least 1).
std::int64_t cache_capacity_rows(std::int64_t cache_bytes, std::int64_t row_bytes);

}  // namespace halo
