// Zeroing listed rows (zero_rows.hpp): one thread an element, grid-stride.
#include "cuda/primitives/grid_stride.cuh"
#include "cuda/primitives/zero_rows.hpp"
#include "halo/cuda_error.hpp"

namespace halo::cuda::detail {
namespace {

constexpr int kBlock = 256;
constexpr std::int64_t kMaxBlocks = 65535;

template <typename Row>
__global__ void __launch_bounds__(kBlock)
    zero_rows_kernel(const Row* __restrict__ rows, std::int64_t count, std::int64_t width, float* y,
                     std::int64_t ld)
{
    const std::int64_t total = count * width;
    for (std::int64_t t = first_index(); t < total; t += stride()) {
        const std::int64_t i = t / width;
        y[static_cast<std::int64_t>(rows[i]) * ld + (t - i * width)] = 0.0f;
    }
}

template <typename Row>
void launch(cudaStream_t stream, const Row* rows, std::int64_t count, std::int64_t width, float* y,
            std::int64_t ld)
{
    if (count == 0 || width == 0) {
        return;
    }
    zero_rows_kernel<<<grid_blocks(count * width, kBlock, kMaxBlocks), kBlock, 0, stream>>>(
        rows, count, width, y, ld);
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace

void zero_rows(cudaStream_t stream, const std::int32_t* rows, std::int64_t count,
               std::int64_t width, float* y, std::int64_t ld)
{
    launch(stream, rows, count, width, y, ld);
}

void zero_rows(cudaStream_t stream, const std::int64_t* rows, std::int64_t count,
               std::int64_t width, float* y, std::int64_t ld)
{
    launch(stream, rows, count, width, y, ld);
}

}  // namespace halo::cuda::detail
