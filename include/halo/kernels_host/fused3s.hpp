// The Binary Sparse Block (BSB) format of Fused3S (paper 002, section 3.1): the sparsity pattern of
// an attention mask cut into tensor-core tiles, built once per shard on the host and stored in the
// dataset under /parts/<p>/kernels/fused3s (plain vectors, no device types here).
//
// Construction: rows are grouped into row windows of 16 (the mma M); within a window the columns
// without a nonzero are dropped and the remaining ones, in ascending order, are cut into blocks of
// 8 (the mma N of S = Q K^T), so a window of c distinct columns has ceil(c / 8) tensor-core blocks
// (TCBs). Each block stores its 8 original column ids (the compacted-to-original map the kernel
// gathers K and V rows with) and a 128-bit bitmap of which of its 16 x 8 entries are nonzeros. The
// values of the matrix are not stored: attention masks are binary. Windows are also listed in
// decreasing order of block count (the paper's row-window reordering, section 3.2), so heavy
// windows start first and light ones fill the tail.
#pragma once

#include <cstdint>
#include <vector>

#include "halo/core/csr.hpp"

namespace halo {

/// Rows per row window (the mma M dimension).
inline constexpr int kBsbWindowRows = 16;
/// Columns per tensor-core block (the mma N dimension of S = Q K^T).
inline constexpr int kBsbBlockCols = 8;
/// Column id of a padding slot (past the last compacted column of a window's last block).
inline constexpr std::int32_t kBsbNoColumn = -1;

/// A BSB matrix; every member is a plain vector so that the store can write it as datasets.
struct Bsb {
    std::int64_t num_rows = 0;
    std::int64_t num_cols = 0;
    std::int64_t nnz = 0;
    /// Window w covers rows [16 w, min(16 w + 16, num_rows)) and owns blocks
    /// [window_blocks[w], window_blocks[w + 1]) (the paper's tcb_row_offset). num_windows + 1.
    std::vector<std::int64_t> window_blocks{0};
    /// Original column of slot s of block b at [8 b + s], ascending within a window across its
    /// blocks; kBsbNoColumn pads the last block of a window. 8 * num_blocks.
    std::vector<std::int32_t> block_columns;
    /// Bitmap of block b in words [2 b] (rows 0..7) and [2 b + 1] (rows 8..15): bit 8 (r % 8) + s
    /// of word r / 8 is set when row r of the window has column block_columns[8 b + s]. So byte r
    /// % 8 of a word is one row's mask. 2 * num_blocks.
    std::vector<std::uint64_t> block_bitmaps;
    /// Window ids in processing order: decreasing block count, ties by increasing id.
    std::vector<std::int32_t> window_order;

    std::int64_t num_windows() const noexcept
    {
        return static_cast<std::int64_t>(window_blocks.size()) - 1;
    }
    std::int64_t num_blocks() const noexcept { return window_blocks.back(); }
    std::int64_t window_block_count(std::int64_t w) const
    {
        return window_blocks[w + 1] - window_blocks[w];
    }
    /// Whether entry (r, s) of block b (r in [0, 16), s in [0, 8)) is a nonzero.
    bool bit(std::int64_t b, int r, int s) const
    {
        return ((block_bitmaps[2 * b + r / 8] >> (8 * (r % 8) + s)) & 1u) != 0;
    }
};

/// Builds the BSB of `a`'s pattern (values are ignored). Throws halo::InputError when `a` is not
/// a valid CSR matrix or a row lists a column twice (the bitmap holds each entry once), naming
/// the row and column.
Bsb build_bsb(const Csr& a);

/// Checks every invariant the fused kernel relies on, and that `bsb` encodes exactly the pattern
/// of `a` (same shape, nnz and nonzeros). Throws halo::InputError naming `what` (a file or
/// dataset), the window, block, slot or row at fault and the offending value.
void validate(const Bsb& bsb, const Csr& a, const char* what);

/// Checks the invariants that need no CSR (sizes, offsets, columns in range and ascending per
/// window, padding only at a window's end and without bits, no bits past the last row, no empty
/// column, window_order a permutation sorted by decreasing block count): what a reader checks
/// before handing a stored BSB to the kernel. Throws halo::InputError like validate().
void validate(const Bsb& bsb, const char* what);

/// The pattern the BSB encodes, as a CSR matrix without values, columns ascending in each row.
Csr bsb_pattern(const Bsb& bsb);

/// The shape figures of paper 002's Table 6: blocks per window and nonzeros per block, each with
/// its mean and coefficient of variation (population standard deviation / mean; 0 for an empty
/// set), and the largest block count of a window.
struct BsbStats {
    std::int64_t windows = 0;
    std::int64_t blocks = 0;
    std::int64_t max_blocks_per_window = 0;
    double blocks_per_window = 0;
    double blocks_per_window_cv = 0;
    double nnz_per_block = 0;
    double nnz_per_block_cv = 0;
    /// nnz / (128 * blocks): the fraction of tensor-core work that is not masked out.
    double fill = 0;
};

BsbStats bsb_stats(const Bsb& bsb);

}  // namespace halo
