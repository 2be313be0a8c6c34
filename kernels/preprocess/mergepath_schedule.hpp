// Host-side preprocessing of the MergePath-SpMM kernel (paper 003, Algorithm 1): the merge-path
// partition of a row range of a CSR matrix into segments of `cost` merge items (one item per row
// end, one per nonzero), and the rows that the partition splits across segments. Host-only (no
// CUDA), so that its unit test runs in CI; the kernel (mergepath.cu) walks exactly these segments,
// and emulate_merge_path_spmm() does the same walk on the CPU.
#pragma once

#include <cstdint>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"

namespace halo::mergepath {

/// A point of the merge grid: `row` row ends and `nonzero` nonzeros consumed, as absolute ids of
/// the matrix (row in [range.begin, range.end], nonzero in [indptr[begin], indptr[end]]).
struct Coordinate {
    std::int64_t row = 0;
    std::int64_t nonzero = 0;
};

/// Algorithm 1's BINARYSEARCH: the point of the merge path of rows `range` on diagonal `diagonal`
/// (0 <= diagonal <= range.size() + nnz of the range), i.e. the first point (i, j) with
/// i + j == diagonal (relative to the range) whose row end indptr[begin + i + 1] exceeds j - 1
/// nonzeros: the path consumes row ends before the nonzeros after them.
Coordinate merge_path_search(const offset_t* indptr, RowRange range, std::int64_t diagonal);

/// Segment s covers diagonals [s * cost, min((s + 1) * cost, items)) of the range's merge path,
/// items = range.size() + nnz(range). Only the start row of every segment is stored: its start
/// nonzero follows from the diagonal (nonzero_begin(s)), which halves the metadata.
struct Schedule {
    RowRange range;
    std::int64_t cost = 1;           // merge items per segment (after min_segments)
    std::int64_t items = 0;          // rows + nonzeros of the range
    std::int64_t first_nonzero = 0;  // indptr[range.begin]
    /// num_segments() + 1 entries: row coordinate of segment s's start diagonal; the last is
    /// range.end.
    std::vector<std::int64_t> segment_rows;
    /// Rows of the range whose nonzeros lie in more than one segment (ascending, unique): the
    /// kernel zeroes them first and every segment adds its part with atomics. Every other row is
    /// written once, by a plain store of the segment holding its start and its end.
    std::vector<std::int64_t> split_rows;

    std::int64_t num_segments() const noexcept
    {
        return static_cast<std::int64_t>(segment_rows.size()) - 1;
    }
    std::int64_t diagonal(std::int64_t s) const noexcept
    {
        return s * cost < items ? s * cost : items;
    }
    Coordinate start(std::int64_t s) const noexcept
    {
        const std::int64_t row = segment_rows[static_cast<std::size_t>(s)];
        return {row, first_nonzero + diagonal(s) - (row - range.begin)};
    }
};

/// The paper's merge-path cost for a dense width (its Fig. 6 on a V100-class GPU, fp32):
/// width <= 2: 50 (16+ segments per warp diverge; fewer, longer segments), <= 8: 15, <= 16: 20,
/// <= 32: 30, <= 64: 35, wider: 50 (each segment spans several warps, so fewer segments suffice
/// and longer ones cut the atomics).
std::int64_t default_cost(std::int64_t width);

/// Section III-C-1: when items / cost gives fewer than `min_segments` segments, the cost drops so
/// that about min_segments segments exist (never below 1).
std::int64_t effective_cost(std::int64_t items, std::int64_t cost, std::int64_t min_segments);

/// The merge-path schedule of `range` with `cost` items per segment (cost >= 1 is used as given;
/// apply effective_cost() first for the parallelism floor). One binary search per segment
/// boundary (OpenMP across boundaries), then a sequential pass for the split rows. Measured on the
/// development machine (2021-era x86 core) for 10^7 rows and 10^8 nonzeros: 0.28 s on one thread
/// at cost 30 (3.7M segments), 0.50 s at cost 15, 0.18 s at cost 50; 0.17 s at cost 30 on two
/// threads. Cheap next to reading such a matrix, so it runs on the host, once per range and cost.
/// Throws halo::InputError on a range outside the matrix or cost < 1.
Schedule make_schedule(const CsrView& a, RowRange range, std::int64_t cost);

/// What the kernel's writes will be, for the paper's Fig. 5: rows written with plain stores,
/// partial-row atomic updates (per output row, not per element), and split rows zeroed first.
struct WriteCounts {
    std::int64_t plain_rows = 0;
    std::int64_t atomic_updates = 0;
    std::int64_t split_rows = 0;
};

/// CPU emulation of the kernel's walk, segment by segment, in the kernel's order: zero the split
/// rows, then for each segment sum its complete rows (plain store) and its partial start/end rows
/// (added to y). y rows outside the schedule's range are untouched. Used by the tests to check the
/// schedule without a GPU.
WriteCounts emulate_merge_path_spmm(const CsrView& a, const Schedule& schedule,
                                    DenseView<const float> x, DenseView<float> y);

}  // namespace halo::mergepath
