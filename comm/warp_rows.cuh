// The launch shape of the halo exchange's row kernels (pack.cu, quantized_pack.cu): one warp a
// row, kRowsPerBlock rows a 256-thread block, a grid of at most kMaxBlocks blocks that strides over
// the rows beyond it (the cap keeps the grid within every device's limits whatever the row count).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace halo::detail {

inline constexpr int kWarp = 32;
inline constexpr int kRowsPerBlock = 8;
inline constexpr std::int64_t kMaxBlocks = 65535;

inline dim3 warp_rows_block()
{
    return dim3(kWarp, kRowsPerBlock);
}

/// The grid for `rows` rows.
inline dim3 warp_rows_grid(std::int64_t rows)
{
    return dim3(static_cast<unsigned>(
        std::min<std::int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock, kMaxBlocks)));
}

/// Calls body(r) for each row r of [0, rows) that this thread's warp handles.
template <typename Body>
__device__ __forceinline__ void for_each_warp_row(std::int64_t rows, Body&& body)
{
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kRowsPerBlock;
    for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.y;
         r < rows; r += stride) {
        body(r);
    }
}

}  // namespace halo::detail
