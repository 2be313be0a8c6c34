// Zeroing listed rows (zero_rows.hpp): one warp a row, grid-stride over the rows, the lanes
// striding over its width, with float4 stores where the width, the leading dimension and y allow.
// (It was one thread an element, each dividing its int64 index by the width: for MaxK's shared rows
// of BlogCatalog at width 256 that executed more instructions than the SSD kernel after it.)
#include <cstdint>

#include "cuda/primitives/dependent_launch.cuh"
#include "cuda/primitives/grid_stride.cuh"
#include "cuda/primitives/zero_rows.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {
namespace {

constexpr int kWarps = 8;
constexpr std::int64_t kMaxBlocks = 65535;

template <typename Row>
__global__ void __launch_bounds__(kWarps * 32)
    zero_rows_kernel(const Row* __restrict__ rows, std::int64_t count, std::int64_t width, float* y,
                     std::int64_t ld, bool vec4)
{
    allow_dependent_launch();  // the kernel that adds into these rows waits for the zeros itself
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kWarps;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
         i < count; i += warps) {
        float* row = y + static_cast<std::int64_t>(rows[i]) * ld;
        if (vec4) {
            auto* row4 = reinterpret_cast<float4*>(row);
            for (std::int64_t j = lane; j < width / 4; j += 32) {
                row4[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        } else {
            for (std::int64_t j = lane; j < width; j += 32) {
                row[j] = 0.0f;
            }
        }
    }
}

template <typename Row>
bool launch_zero(cudaStream_t stream, const Row* rows, std::int64_t count, std::int64_t width,
                 float* y, std::int64_t ld)
{
    if (count == 0 || width == 0) {
        return false;
    }
    const bool vec4 =
        width % 4 == 0 && ld % 4 == 0 && reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
    zero_rows_kernel<<<grid_blocks(count, kWarps, kMaxBlocks), kWarps * 32, 0, stream>>>(
        rows, count, width, y, ld, vec4);
    HALO_CUDA_CHECK_LAUNCH();
    return true;
}

}  // namespace

bool zero_rows(cudaStream_t stream, const std::int32_t* rows, std::int64_t count,
               std::int64_t width, float* y, std::int64_t ld)
{
    return launch_zero(stream, rows, count, width, y, ld);
}

bool zero_rows(cudaStream_t stream, const std::int64_t* rows, std::int64_t count,
               std::int64_t width, float* y, std::int64_t ld)
{
    return launch_zero(stream, rows, count, width, y, ld);
}

}  // namespace halo::cuda::detail
