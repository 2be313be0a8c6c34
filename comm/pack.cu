// The pack kernel of the device exchangers: gathers the send rows of a feature matrix into one
// contiguous buffer, in plan order, so that each peer's block goes out as one message.
#include <cuda_runtime.h>

#include <cstdint>

#include "device_exchange.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "warp_rows.cuh"

namespace halo::detail {
namespace {

// T is float or float4: the vector path moves 16 bytes per lane when rows and their starts allow.
template <typename T>
__global__ void pack_rows_kernel(const T* __restrict__ x, std::int64_t ld,
                                 const std::int32_t* __restrict__ rows, std::int64_t num_rows,
                                 std::int64_t cols, T* __restrict__ out)
{
    for_each_warp_row(num_rows, [&](std::int64_t i) {
        const T* src = x + static_cast<std::int64_t>(rows[i]) * ld;
        T* dst = out + i * cols;
        for (auto c = static_cast<std::int64_t>(threadIdx.x); c < cols; c += kWarp) {
            dst[c] = src[c];
        }
    });
}

bool aligned16(const void* p)
{
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

}  // namespace

void pack_rows(const float* x, std::int64_t ld, const std::int32_t* rows, std::int64_t num_rows,
               std::int64_t cols, float* out, cudaStream_t stream)
{
    HALO_EXPECTS(num_rows >= 0 && cols >= 0 && ld >= cols, "pack of ", num_rows, " rows of ", cols,
                 " columns with leading dimension ", ld);
    if (num_rows == 0 || cols == 0) {
        return;
    }
    const dim3 block = warp_rows_block();
    const dim3 grid = warp_rows_grid(num_rows);
    if (cols % 4 == 0 && ld % 4 == 0 && aligned16(x) && aligned16(out)) {
        pack_rows_kernel<float4><<<grid, block, 0, stream>>>(reinterpret_cast<const float4*>(x),
                                                             ld / 4, rows, num_rows, cols / 4,
                                                             reinterpret_cast<float4*>(out));
    } else {
        pack_rows_kernel<float><<<grid, block, 0, stream>>>(x, ld, rows, num_rows, cols, out);
    }
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace halo::detail
