// The lane/column mapping of the row-split SpMM kernel (rowsplit.cu), written once for the
// device and for the host: the kernel and the CPU emulation in tests/kernels/reference/test_rowsplit_layout
// call the same functions, so a mapping bug shows up in CI without a GPU.
//
// A group of `group` lanes (4, 8, 16 or 32 of one warp) owns one row at a time. Each lane holds
// `vec` adjacent columns (one 16-byte load of x: 4 fp32 or 8 fp16/bf16 columns, when x, y and the
// width allow it, see feature_vec.hpp; else 1).
// A pass covers group * vec columns; widths beyond that loop over `chunks` passes. The group is
// the smallest power of two, at least 4, whose lanes cover the width in one pass (capped at a
// warp), so narrow widths do not leave most of a warp idle.
#pragma once

#include <cmath>
#include <cstdint>

#include "halo/core/detail/host_device.hpp"

namespace halo::cuda::rowsplit {

inline constexpr int kWarp = 32;
inline constexpr int kMinGroup = 4;

struct Layout {
    int group = kWarp;        // lanes per row: 4, 8, 16 or 32
    int vec = 1;              // columns per lane and pass: 1, 4 (fp32) or 8 (fp16/bf16)
    std::int64_t chunks = 0;  // passes over the width
};

/// True when columns may be read and written as float4: both base pointers 16-byte aligned and
/// width, x.ld and y.ld multiples of 4 (so every row start stays aligned).
inline bool vectorizable(const void* x, std::int64_t ldx, const void* y, std::int64_t ldy,
                         std::int64_t width)
{
    const auto aligned = [](const void* p) {
        return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
    };
    return aligned(x) && aligned(y) && width % 4 == 0 && ldx % 4 == 0 && ldy % 4 == 0;
}

/// The layout of a width (>= 1) with `vec` columns per lane: 1, 4 (one float4 of fp32 features)
/// or 8 (16 bytes of fp16/bf16 features); width must be a multiple of vec.
inline Layout make_layout(std::int64_t width, int vec)
{
    Layout l;
    l.vec = vec;
    const std::int64_t units = (width + l.vec - 1) / l.vec;
    l.group = kMinGroup;
    while (l.group < kWarp && l.group < units) {
        l.group *= 2;
    }
    const std::int64_t pass = std::int64_t{l.group} * l.vec;
    l.chunks = (width + pass - 1) / pass;
    return l;
}

/// The layout of a width (>= 1) with or without float4 accesses.
inline Layout make_layout(std::int64_t width, bool vector)
{
    return make_layout(width, vector ? 4 : 1);
}

/// First column of lane `lane` (0 .. group - 1) in pass `chunk`; the lane covers
/// [first, first + vec) intersected with [0, width). With vec == 4 the width is a multiple of 4,
/// so a lane's columns are either all inside or all outside.
HALO_HOST_DEVICE constexpr std::int64_t first_column(int group, int vec, std::int64_t chunk,
                                                     int lane)
{
    return (chunk * group + lane) * vec;
}

/// The chunked kernel (make_rowchunk_spmm_plan) cuts a row of more than `length` nonzeros into
/// units of unit_length(degree, length) nonzeros: `length`, or ceil(sqrt(degree)) where that is
/// larger, so that the last unit's sum over the row's units stays as short as a unit (a row of a
/// million nonzeros: 1000 units of 1000, not 31250 of 32). The host decides; the kernel reads the
/// length per long row.
inline std::int64_t unit_length(std::int64_t degree, std::int64_t length)
{
    auto root = static_cast<std::int64_t>(std::sqrt(static_cast<double>(degree)));
    while (root * root < degree) {
        ++root;
    }
    while (root > 0 && (root - 1) * (root - 1) >= degree) {
        --root;
    }
    return root > length ? root : length;
}

}  // namespace halo::cuda::rowsplit
