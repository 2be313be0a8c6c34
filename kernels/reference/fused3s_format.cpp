// Host construction and checks of the BSB format (include/halo/kernels_host/fused3s.hpp, paper 002
// section 3.1).
//
// Choices:
// - Two passes over row windows, both parallel: the first sorts and dedupes each window's column
//   ids in a scratch copy of the indices (one array of nnz, no per-window allocations) and counts
//   its blocks; after a prefix sum, the second writes the column map and sets each nonzero's bit,
//   finding its compacted position by binary search in the window's sorted columns.
// - A row that lists a column twice cannot be encoded (a bit holds one entry) and would count
//   twice in a CSR-based softmax, so it is rejected rather than merged silently.
// - Windows are ordered by decreasing block count with a stable sort, so equal counts keep their
//   natural order and the order is deterministic.
#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/kernels_host/fused3s.hpp"

namespace halo {
namespace {

constexpr std::int64_t kRows = kBsbWindowRows;
constexpr std::int64_t kCols = kBsbBlockCols;

std::int64_t window_count(std::int64_t num_rows)
{
    return (num_rows + kRows - 1) / kRows;
}

std::int64_t window_end_row(std::int64_t w, std::int64_t num_rows)
{
    return std::min((w + 1) * kRows, num_rows);
}

// The first duplicate found in a window: row and column, or row -1 when none.
struct Duplicate {
    std::int64_t row = -1;
    std::int32_t column = 0;
};

}  // namespace

Bsb build_bsb(const Csr& a)
{
    validate(a, "the operator of a BSB build");
    HALO_EXPECTS(a.num_cols <= INT_MAX, "column count ", a.num_cols, " exceeds int32");
    Bsb bsb;
    bsb.num_rows = a.num_rows;
    bsb.num_cols = a.num_cols;
    bsb.nnz = a.nnz();
    const std::int64_t windows = window_count(a.num_rows);

    // Pass 1: each window's sorted distinct columns at the start of its slice of `scratch`.
    std::vector<std::int32_t> scratch(a.indices);
    std::vector<std::int64_t> distinct(static_cast<std::size_t>(windows), 0);
#pragma omp parallel for schedule(dynamic, 64)
    for (std::int64_t w = 0; w < windows; ++w) {
        const auto first = a.indptr[w * kRows];
        const auto last = a.indptr[window_end_row(w, a.num_rows)];
        const auto begin = scratch.begin() + first;
        const auto end = scratch.begin() + last;
        std::sort(begin, end);
        distinct[w] = std::unique(begin, end) - begin;
    }
    bsb.window_blocks.assign(static_cast<std::size_t>(windows) + 1, 0);
    for (std::int64_t w = 0; w < windows; ++w) {
        bsb.window_blocks[w + 1] = bsb.window_blocks[w] + (distinct[w] + kCols - 1) / kCols;
    }
    const std::int64_t blocks = bsb.window_blocks.back();
    bsb.block_columns.assign(static_cast<std::size_t>(blocks * kCols), kBsbNoColumn);
    bsb.block_bitmaps.assign(static_cast<std::size_t>(blocks * 2), 0);

    // Pass 2: the column map and the bits.
    std::vector<Duplicate> duplicates(static_cast<std::size_t>(windows));
#pragma omp parallel for schedule(dynamic, 64)
    for (std::int64_t w = 0; w < windows; ++w) {
        const auto cols_begin = scratch.begin() + a.indptr[w * kRows];
        const auto cols_end = cols_begin + distinct[w];
        const std::int64_t first_block = bsb.window_blocks[w];
        std::copy(cols_begin, cols_end, bsb.block_columns.begin() + first_block * kCols);
        for (std::int64_t row = w * kRows; row < window_end_row(w, a.num_rows); ++row) {
            const std::int64_t r = row - w * kRows;
            for (auto k = a.indptr[row]; k < a.indptr[row + 1]; ++k) {
                const std::int32_t col = a.indices[k];
                const std::int64_t pos = std::lower_bound(cols_begin, cols_end, col) - cols_begin;
                const std::int64_t b = first_block + pos / kCols;
                const std::uint64_t bit = std::uint64_t{1} << (8 * (r % 8) + pos % kCols);
                std::uint64_t& word = bsb.block_bitmaps[2 * b + r / 8];
                if ((word & bit) != 0 && duplicates[w].row < 0) {
                    duplicates[w] = {row, col};
                }
                word |= bit;
            }
        }
    }
    for (const auto& d : duplicates) {
        if (d.row >= 0) {
            HALO_THROW(InputError, "the operator of a BSB build: row ", d.row, " lists column ",
                       d.column, " more than once (a BSB bitmap holds each entry once)");
        }
    }

    bsb.window_order.resize(static_cast<std::size_t>(windows));
    std::iota(bsb.window_order.begin(), bsb.window_order.end(), 0);
    std::stable_sort(bsb.window_order.begin(), bsb.window_order.end(),
                     [&](std::int32_t x, std::int32_t y) {
                         return bsb.window_block_count(x) > bsb.window_block_count(y);
                     });
    return bsb;
}

void validate(const Bsb& bsb, const char* what)
{
    if (bsb.num_rows < 0 || bsb.num_cols < 0 || bsb.num_cols > INT_MAX) {
        HALO_THROW(InputError, what, ": BSB shape ", bsb.num_rows, " x ", bsb.num_cols,
                   " is invalid");
    }
    const std::int64_t windows = window_count(bsb.num_rows);
    if (static_cast<std::int64_t>(bsb.window_blocks.size()) != windows + 1) {
        HALO_THROW(InputError, what, ": window_blocks has ", bsb.window_blocks.size(),
                   " entries, expected ", windows + 1, " for ", bsb.num_rows, " rows");
    }
    if (bsb.window_blocks[0] != 0) {
        HALO_THROW(InputError, what, ": window_blocks[0] is ", bsb.window_blocks[0],
                   ", expected 0");
    }
    for (std::int64_t w = 0; w < windows; ++w) {
        if (bsb.window_blocks[w + 1] < bsb.window_blocks[w]) {
            HALO_THROW(InputError, what, ": window ", w, ": window_blocks decreases from ",
                       bsb.window_blocks[w], " to ", bsb.window_blocks[w + 1]);
        }
    }
    const std::int64_t blocks = bsb.window_blocks.back();
    if (static_cast<std::int64_t>(bsb.block_columns.size()) != blocks * kCols) {
        HALO_THROW(InputError, what, ": block_columns has ", bsb.block_columns.size(),
                   " entries, expected ", blocks * kCols, " for ", blocks, " blocks");
    }
    if (static_cast<std::int64_t>(bsb.block_bitmaps.size()) != blocks * 2) {
        HALO_THROW(InputError, what, ": block_bitmaps has ", bsb.block_bitmaps.size(),
                   " words, expected ", blocks * 2, " for ", blocks, " blocks");
    }

    std::int64_t nnz = 0;
    for (std::int64_t w = 0; w < windows; ++w) {
        const std::int64_t rows_in_window = window_end_row(w, bsb.num_rows) - w * kRows;
        const std::int64_t first = bsb.window_blocks[w] * kCols;
        const std::int64_t last = bsb.window_blocks[w + 1] * kCols;
        std::int64_t previous = -1;
        bool padding = false;
        for (std::int64_t slot = first; slot < last; ++slot) {
            const std::int64_t b = slot / kCols;
            const int s = static_cast<int>(slot % kCols);
            const std::int32_t col = bsb.block_columns[slot];
            int bits = 0;
            for (int r = 0; r < kRows; ++r) {
                if (bsb.bit(b, r, s)) {
                    ++bits;
                    if (r >= rows_in_window) {
                        HALO_THROW(InputError, what, ": window ", w, " block ", b, " slot ", s,
                                   ": bit set for row ", w * kRows + r, " past the last row ",
                                   bsb.num_rows - 1);
                    }
                }
            }
            if (col == kBsbNoColumn) {
                padding = true;
                if (bits != 0) {
                    HALO_THROW(InputError, what, ": window ", w, " block ", b, " slot ", s,
                               ": padding slot has ", bits, " bits set");
                }
                continue;
            }
            if (padding) {
                HALO_THROW(InputError, what, ": window ", w, " block ", b, " slot ", s, ": column ",
                           col, " after a padding slot (padding only ends a window)");
            }
            if (col < 0 || col >= bsb.num_cols) {
                HALO_THROW(InputError, what, ": window ", w, " block ", b, " slot ", s, ": column ",
                           col, " outside [0, ", bsb.num_cols, ")");
            }
            if (col <= previous) {
                HALO_THROW(InputError, what, ": window ", w, " block ", b, " slot ", s, ": column ",
                           col, " does not ascend (previous ", previous, ")");
            }
            if (bits == 0) {
                HALO_THROW(InputError, what, ": window ", w, " block ", b, " slot ", s, ": column ",
                           col, " has no nonzero (columns are compacted)");
            }
            previous = col;
            nnz += bits;
        }
        if (last > first && bsb.block_columns[last - kCols] == kBsbNoColumn) {
            HALO_THROW(InputError, what, ": window ", w, " block ", last / kCols - 1,
                       " is padding only");
        }
    }
    if (nnz != bsb.nnz) {
        HALO_THROW(InputError, what, ": the bitmaps hold ", nnz, " nonzeros, nnz says ", bsb.nnz);
    }

    if (static_cast<std::int64_t>(bsb.window_order.size()) != windows) {
        HALO_THROW(InputError, what, ": window_order has ", bsb.window_order.size(),
                   " entries, expected ", windows);
    }
    std::vector<char> seen(static_cast<std::size_t>(windows), 0);
    for (std::int64_t i = 0; i < windows; ++i) {
        const std::int32_t w = bsb.window_order[i];
        if (w < 0 || w >= windows || seen[w] != 0) {
            HALO_THROW(InputError, what, ": window_order[", i, "] = ", w,
                       " is out of range or repeated (not a permutation of the ", windows,
                       " windows)");
        }
        seen[w] = 1;
        if (i > 0 && bsb.window_block_count(w) > bsb.window_block_count(bsb.window_order[i - 1])) {
            HALO_THROW(InputError, what, ": window_order[", i, "] = window ", w, " has ",
                       bsb.window_block_count(w), " blocks, more than the window before it (",
                       bsb.window_block_count(bsb.window_order[i - 1]), ")");
        }
    }
}

void validate(const Bsb& bsb, const Csr& a, const char* what)
{
    validate(bsb, what);
    if (bsb.num_rows != a.num_rows || bsb.num_cols != a.num_cols) {
        HALO_THROW(InputError, what, ": BSB is ", bsb.num_rows, " x ", bsb.num_cols,
                   ", the CSR matrix ", a.num_rows, " x ", a.num_cols);
    }
    if (bsb.nnz != a.nnz()) {
        HALO_THROW(InputError, what, ": BSB has ", bsb.nnz, " nonzeros, the CSR matrix ", a.nnz());
    }
    const Csr pattern = bsb_pattern(bsb);
    std::vector<std::int32_t> want;
    for (std::int64_t row = 0; row < a.num_rows; ++row) {
        want.assign(a.indices.begin() + a.indptr[row], a.indices.begin() + a.indptr[row + 1]);
        std::sort(want.begin(), want.end());
        const auto got = pattern.indices.begin() + pattern.indptr[row];
        const auto got_count = pattern.row_nnz(row);
        const auto w = row / kRows;
        for (std::int64_t k = 0; k < std::max<std::int64_t>(got_count, want.size()); ++k) {
            const bool have_got = k < got_count;
            const bool have_want = k < static_cast<std::int64_t>(want.size());
            if (have_got && have_want && got[k] == want[k]) {
                continue;
            }
            if (!have_want || (have_got && got[k] < want[k])) {
                HALO_THROW(InputError, what, ": window ", w, " row ", row, ": the BSB has column ",
                           got[k], ", which the CSR row lacks");
            }
            HALO_THROW(InputError, what, ": window ", w, " row ", row, ": CSR column ", want[k],
                       " is missing from the BSB");
        }
    }
}

Csr bsb_pattern(const Bsb& bsb)
{
    Csr a;
    a.num_rows = bsb.num_rows;
    a.num_cols = bsb.num_cols;
    a.indptr.assign(static_cast<std::size_t>(bsb.num_rows) + 1, 0);
    a.indices.reserve(static_cast<std::size_t>(bsb.nnz));
    for (std::int64_t w = 0; w < bsb.num_windows(); ++w) {
        for (std::int64_t row = w * kRows; row < window_end_row(w, bsb.num_rows); ++row) {
            const int r = static_cast<int>(row - w * kRows);
            for (auto b = bsb.window_blocks[w]; b < bsb.window_blocks[w + 1]; ++b) {
                for (int s = 0; s < kCols; ++s) {
                    if (bsb.bit(b, r, s)) {
                        a.indices.push_back(bsb.block_columns[b * kCols + s]);
                    }
                }
            }
            a.indptr[row + 1] = static_cast<offset_t>(a.indices.size());
        }
    }
    return a;
}

BsbStats bsb_stats(const Bsb& bsb)
{
    BsbStats s;
    s.windows = bsb.num_windows();
    s.blocks = bsb.num_blocks();
    if (s.windows > 0) {
        double sum = 0;
        double sum_sq = 0;
        for (std::int64_t w = 0; w < s.windows; ++w) {
            const auto n = bsb.window_block_count(w);
            s.max_blocks_per_window = std::max(s.max_blocks_per_window, n);
            sum += static_cast<double>(n);
            sum_sq += static_cast<double>(n) * static_cast<double>(n);
        }
        s.blocks_per_window = sum / static_cast<double>(s.windows);
        const double var = std::max(0.0, sum_sq / static_cast<double>(s.windows) -
                                             s.blocks_per_window * s.blocks_per_window);
        s.blocks_per_window_cv = s.blocks_per_window > 0 ? std::sqrt(var) / s.blocks_per_window : 0;
    }
    if (s.blocks > 0) {
        double sum = 0;
        double sum_sq = 0;
        for (std::int64_t b = 0; b < s.blocks; ++b) {
            const double n = std::popcount(bsb.block_bitmaps[2 * b]) +
                             std::popcount(bsb.block_bitmaps[2 * b + 1]);
            sum += n;
            sum_sq += n * n;
        }
        s.nnz_per_block = sum / static_cast<double>(s.blocks);
        const double var = std::max(
            0.0, sum_sq / static_cast<double>(s.blocks) - s.nnz_per_block * s.nnz_per_block);
        s.nnz_per_block_cv = s.nnz_per_block > 0 ? std::sqrt(var) / s.nnz_per_block : 0;
        s.fill = static_cast<double>(bsb.nnz) / (128.0 * static_cast<double>(s.blocks));
    }
    return s;
}

}  // namespace halo
