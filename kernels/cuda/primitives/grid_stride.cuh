// Grid-stride loops over int64 element counts: a bounded grid runs any size, each thread taking
// the elements first_index(), first_index() + stride(), ... Internal to halo_kernels.
#pragma once

#include <cstdint>

namespace halo::cuda::detail {

/// Blocks of `block` threads for `count` elements (one per thread), at most `max_blocks`: larger
/// counts loop in the kernel. 0 for count 0 (the caller launches nothing).
inline unsigned grid_blocks(std::int64_t count, int block, std::int64_t max_blocks)
{
    const std::int64_t blocks = (count + block - 1) / block;
    return static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
}

__device__ __forceinline__ std::int64_t first_index()
{
    return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ std::int64_t stride()
{
    return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace halo::cuda::detail
