// Host-side preprocessing of the resident-slice SpMM (kernels/cuda/spmm/resident.cu): the rows of
// a range packed into chunks of 32 lanes, sliced-ELL style (SELL-32, rows sorted by length), with
// each row's nonzeros on one lane or split over a power-of-two group of lanes, and each lane's
// nonzeros ordered so that the 8 lanes of a 128-bit shared-memory phase read different banks
// where they can. Host-only (no CUDA), so that its unit test runs in CI; the kernel walks exactly
// this layout, and emulate() does the same walk on the CPU, in the same order of operations.
//
// The kernel holds a slice of 4 feature columns of every X row in shared memory (16 bytes a row,
// row j at byte 16 j) and reads A once per slice. Row j's 16 bytes lie in banks 4 (j mod 8) ..
// 4 (j mod 8) + 3: the 8 lanes of one phase of a 128-bit load conflict when two of them read
// different rows of one residue j mod 8. In CSR order a lane's columns are as good as random, and
// 8 lanes then take 2.5 wavefronts a phase on average where 1 would do; the schedule picks, at
// each step, a column of a residue no other lane of the phase has taken.
#pragma once

#include <cstdint>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"

namespace halo::resident {

inline constexpr int kLanes = 32;        // lanes per chunk (a warp)
inline constexpr int kPhaseLanes = 8;    // lanes per phase of a 128-bit shared-memory load
inline constexpr int kSliceColumns = 4;  // feature columns per slice: one float4 per X row
inline constexpr int kResidues = 8;      // 16-byte bank groups of shared memory
inline constexpr int kGroupShift = 27;   // lane_info: items | log2(group) << kGroupShift
inline constexpr std::int32_t kItemsMask = (1 << kGroupShift) - 1;

/// The layout of the rows `rows` of an operator.
struct Layout {
    RowRange rows;
    /// Chunk c's entries are [chunk_start[c], chunk_start[c + 1]): steps(c) steps of kLanes
    /// entries each, lane l's k-th entry at chunk_start[c] + k * kLanes + l. num_chunks() + 1
    /// entries.
    std::vector<std::int64_t> chunk_start{0};
    /// Per lane of every chunk (num_chunks() * kLanes): the row its sum belongs to (every lane of a
    /// row's group names the row), or -1 for a lane without a row.
    std::vector<std::int32_t> lane_row;
    /// Per lane: its number of entries (low kGroupShift bits) and log2 of its group's size.
    std::vector<std::int32_t> lane_info;
    /// Per entry: the column (below 2^16) and the value (empty for a pattern operator). Entries
    /// past a lane's item count are padding: column `zero_row` (the kernel's row of zeros after
    /// the slice's X rows), value 0, so that every lane runs its chunk's steps unpredicated.
    std::vector<std::uint16_t> columns;
    std::vector<float> values;
    /// The padding's column: the operator's column count.
    std::int64_t zero_row = 0;
    /// Nonzeros of the range (entries that are not padding).
    std::int64_t nonzeros = 0;
    /// The segment limit the layout was built with (segment_limit()).
    std::int64_t segment = 0;

    std::int64_t num_chunks() const noexcept
    {
        return static_cast<std::int64_t>(chunk_start.size()) - 1;
    }
    std::int64_t steps(std::int64_t c) const noexcept
    {
        return (chunk_start[static_cast<std::size_t>(c) + 1] -
                chunk_start[static_cast<std::size_t>(c)]) /
               kLanes;
    }
    static int items(std::int32_t info) noexcept { return info & kItemsMask; }
    static int group(std::int32_t info) noexcept { return 1 << (info >> kGroupShift); }
};

/// The automatic segment limit of an operator of `nnz` nonzeros: 8 below 2^17 nonzeros, 16 below
/// 2^18, 32 below 2^19, else 64. A row of more nonzeros than the limit is split over the fewest
/// lanes (a power of two, at most 32) that hold at most the limit each; the smallest graphs then
/// spread their few nonzeros over more lanes.
std::int64_t segment_limit(std::int64_t nnz);

/// The layout of rows `rows` of `a` (a.num_cols at most 65535: columns, and the padding's zero
/// row, are 16-bit). `segment`: 0
/// for segment_limit(nnz of the range). `schedule`: order each lane's nonzeros against bank
/// conflicts (false: CSR order, for comparison). Rows are ordered by group size, then by
/// nonzeros per lane, both descending (every row of the range gets a lane, empty ones too, so
/// that its output is written). Throws halo::InputError on a range outside `a`, more than 65535
/// columns, or a segment limit below 1.
Layout build_layout(const CsrView& a, RowRange rows, std::int64_t segment = 0,
                    bool schedule = true);

/// Shared-memory wavefronts of the kernel's 128-bit X loads over the whole layout under the bank
/// model above (per step and phase: the largest number of distinct rows of one residue among
/// the phase's lanes, the padding's zero row included), and the least possible (one a phase).
struct Wavefronts {
    std::int64_t model = 0;
    std::int64_t ideal = 0;
};
Wavefronts count_wavefronts(const Layout& layout);

/// y[rows] = A[rows] * x (row_scale / col_scale as the kernel applies them: x's row j times
/// col_scale[j] rounded once to float, each lane's entries added with fmaf in layout order, the
/// padding entries too: zero_row reads zeros), the group's lanes added pairwise by the kernel's
/// butterfly, the row's sum times row_scale[row]),
/// computed on the CPU in exactly the kernel's order of operations, so that the device result
/// must equal it bit for bit. Rows outside the range are untouched. Either scale may be null.
void emulate(const Layout& layout, DenseView<const float> x, DenseView<float> y,
             const float* row_scale = nullptr, const float* col_scale = nullptr);

}  // namespace halo::resident
