// Accel-GCN preprocessing (paper 001, section III-C), host only: degree sorting of the rows of a
// range by counting sort and the block-level partition of Algorithms 1 and 2, whose per-block
// metadata is one int4 (four int32) that the CUDA kernel (kernels/cuda/spmm/accel_gcn.cu) reads.
//
// A partition may cover several consecutive row ranges ("segments"), each sorted on its own: the
// plan prepares, say, the interior and the boundary rows of a shard this way, and the whole range
// is then the concatenation of the two block lists, with one reordered copy of the nonzeros.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"

namespace halo {

/// The int4 of one thread block (layout of CUDA's int4: x, y, z, w).
/// - degree: nonzeros of each row of the block (all rows of a block share it).
/// - first_row: position of the block's first row in AccelGcnPartition::sorted_rows.
/// - first_nonzero: index of the block's first nonzero in AccelGcnPartition::indices.
/// - info: degree <= deg_bound: (nonzeros per warp << 16) | rows of the block;
///         degree > deg_bound (a split row): the nonzeros of this block's chunk of the row.
struct AccelGcnBlock {
    std::int32_t degree = 0;
    std::int32_t first_row = 0;
    std::int32_t first_nonzero = 0;
    std::int32_t info = 0;

    bool split(std::int32_t deg_bound) const noexcept { return degree > deg_bound; }
    std::int32_t warp_nonzeros() const noexcept { return (info >> 16) & 0xFFFF; }
    std::int32_t rows() const noexcept { return info & 0xFFFF; }
    friend bool operator==(const AccelGcnBlock&, const AccelGcnBlock&) = default;
};

struct AccelGcnPartitionOptions {
    /// Warps of a thread block (max_block_warps); 1 .. 32.
    std::int32_t warps_per_block = 12;
    /// Nonzeros one block takes (max_block_warps * max_warp_nzs); a multiple of warps_per_block
    /// with deg_bound / warps_per_block <= 65535. Longer rows are split over several blocks.
    std::int32_t deg_bound = 96;
    /// Section III-C's degree sorting (on by default). Off, for halo-bench's ablation: rows keep
    /// their original order and Algorithm 2 runs over maximal runs of consecutive rows of one
    /// degree instead of over degree classes. A block still holds rows of a single degree (its
    /// int4 has one degree field), so a change of degree from one row to the next closes the block
    /// early: on an unsorted graph most blocks hold one row and many warps idle, which is what
    /// the sort avoids. Rows longer than deg_bound are split in place, as with sorting.
    bool degree_sort = true;

    std::int32_t warp_nonzeros() const noexcept { return deg_bound / warps_per_block; }
    friend bool operator==(const AccelGcnPartitionOptions&,
                           const AccelGcnPartitionOptions&) = default;
};

/// Throws halo::InputError naming the offending option.
void validate(const AccelGcnPartitionOptions& options);

/// One pattern of Algorithm 1: rows of degree `deg` take `warps_per_row` warps (the smallest
/// divisor f of warps_per_block with f * warp_nonzeros >= deg), block_rows = warps_per_block / f
/// rows per block and warp_nonzeros = ceil(deg / f) nonzeros per warp. Degree 0 gets one warp per
/// row and 0 nonzeros (the rows are written as zeros). Requires deg <= deg_bound.
struct AccelGcnPattern {
    std::int32_t warps_per_row = 1;
    std::int32_t block_rows = 1;
    std::int32_t warp_nonzeros = 0;
};
AccelGcnPattern accel_gcn_pattern(const AccelGcnPartitionOptions& options, std::int32_t deg);

struct AccelGcnPartition {
    AccelGcnPartitionOptions options;
    /// Rows of the segments, concatenated; segment s covers positions [segment_rows[s],
    /// segment_rows[s + 1]) of sorted_rows.
    std::vector<RowRange> segments;
    std::vector<std::int64_t> segment_rows{0};
    /// Blocks of segment s: [segment_blocks[s], segment_blocks[s + 1]); split rows likewise.
    std::vector<std::int64_t> segment_blocks{0};
    std::vector<std::int64_t> segment_split_rows{0};

    /// Original row id of each sorted position (degree ascending, stable within a segment; the
    /// original order without degree_sort).
    std::vector<local_id> sorted_rows;
    /// The segments' nonzeros in sorted row order (a row's nonzeros keep their order). Derived
    /// data: accel_gcn_gather_nonzeros() rebuilds indices and values from sorted_rows and the
    /// matrix, so a stored partition needs only the other arrays.
    std::vector<local_id> indices;
    std::vector<float> values;  // empty for a pattern matrix
    std::vector<AccelGcnBlock> blocks;
    /// Original ids of the rows with degree > deg_bound: their outputs are zeroed, then the blocks
    /// of the row add their chunks atomically.
    std::vector<local_id> split_rows;

    std::int64_t num_segments() const noexcept
    {
        return static_cast<std::int64_t>(segments.size());
    }
};

/// Degree sort and block-level partition of each segment of `a` (segments: row ranges inside
/// [0, a.num_rows), empty ones allowed). Counting sort with one bucket per degree up to deg_bound
/// and one for the longer rows: O(rows + deg_bound) per segment, plus the copy of the nonzeros.
/// Throws halo::InputError when the nonzeros of all segments exceed the int32 offsets of the int4
/// metadata, or when a segment leaves [0, a.num_rows).
AccelGcnPartition build_accel_gcn_partition(const CsrView& a, std::span<const RowRange> segments,
                                            const AccelGcnPartitionOptions& options);

/// Fills p.indices and p.values (values only for a valued matrix, else empty) with the nonzeros
/// of the rows p.sorted_rows lists, in that order: what build_accel_gcn_partition() stores there.
/// Throws halo::InputError when a listed row lies outside `a` or the nonzeros exceed int32.
void accel_gcn_gather_nonzeros(const CsrView& a, AccelGcnPartition& p);

/// Checks that `p` is a partition of `a` that the kernel can run safely and correctly, in
/// O(rows + blocks + nnz): valid options; consistent segment tables; each segment's sorted rows a
/// permutation of its rows; every block's degree equal to its rows' degrees, its nonzero offset
/// equal to theirs, its rows and nonzeros per warp within Algorithm 1's pattern (the kernel's
/// shared memory is sized by it); every row written by exactly one block or, above deg_bound,
/// covered by consecutive chunks and listed once among the split rows; indices and values (when
/// present; empty indices are allowed, to be gathered) equal to the matrix's. Throws
/// halo::InputError naming the first mismatch (a partition of another matrix fails here).
void validate_accel_gcn_partition(const CsrView& a, const AccelGcnPartition& p);

/// The checks a plan makes on a stored partition before using it instead of building one:
/// validate_accel_gcn_partition(), p.options == options, segments that tile [0, a.num_rows) in
/// ascending order (so sorted positions and row ids share their segment bounds), and every one of
/// `ranges` a union of consecutive segments. Throws halo::InputError naming the mismatch.
void check_stored_accel_gcn_partition(const CsrView& a, const AccelGcnPartition& p,
                                      const AccelGcnPartitionOptions& options,
                                      std::span<const RowRange> ranges);

/// The segments that the boundaries of `ranges` (and 0, num_rows) cut [0, num_rows) into,
/// ascending, without empty ones: every range is a union of consecutive segments.
std::vector<RowRange> accel_gcn_segments(std::int64_t num_rows, std::span<const RowRange> ranges);

/// Host emulation of the CUDA kernel's schedule over segments [first, last) of `p`: zero the
/// split rows, then for every block and warp the same nonzeros, partial sums and accumulation
/// order as on the device (the atomics in block order). For tests; y rows elsewhere untouched.
void accel_gcn_emulate(const AccelGcnPartition& p, std::int64_t first_segment,
                       std::int64_t last_segment, DenseView<const float> x, DenseView<float> y);

}  // namespace halo
