// Element-wise device kernels of the CUDA backend: grid-stride loops over int64 element counts,
// so any size runs with a bounded grid.
#include <algorithm>

#include "cuda/backend/cuda_kernels.hpp"
#include "cuda/primitives/grid_stride.cuh"
#include "halo/cuda_error.hpp"
#include "halo/detail/counter_random.hpp"

namespace halo::cuda::detail {
namespace {

constexpr int kBlock = 256;
// Enough blocks to fill any current GPU several times over; larger counts loop in the kernel.
constexpr std::int64_t kMaxBlocks = 8192;

unsigned grid_for(std::int64_t count)
{
    return grid_blocks(count, kBlock, kMaxBlocks);
}

__global__ void axpby_kernel(std::int64_t rows, std::int64_t cols, float alpha, const float* x,
                             std::int64_t ldx, float beta, float* y, std::int64_t ldy)
{
    const std::int64_t count = rows * cols;
    for (std::int64_t k = first_index(); k < count; k += stride()) {
        const std::int64_t i = k / cols;
        const std::int64_t j = k - i * cols;
        float* out = y + i * ldy + j;
        const float ax = alpha * x[i * ldx + j];
        *out = beta == 0.0f ? ax : ax + beta * *out;
    }
}

__global__ void argmax_rows_kernel(const float* x, std::int64_t rows, std::int64_t cols,
                                   std::int64_t ld, std::int32_t* best)
{
    for (std::int64_t i = first_index(); i < rows; i += stride()) {
        const float* row = x + i * ld;
        std::int64_t b = 0;
        float v = row[0];
        for (std::int64_t j = 1; j < cols; ++j) {
            const float w = row[j];
            if (v < w) {
                v = w;
                b = j;
            }
        }
        best[i] = static_cast<std::int32_t>(b);
    }
}

__global__ void bias_activation_kernel(float* y, std::int64_t rows, std::int64_t cols,
                                       std::int64_t ld, const float* bias, bool relu)
{
    const std::int64_t count = rows * cols;
    for (std::int64_t k = first_index(); k < count; k += stride()) {
        const std::int64_t i = k / cols;
        const std::int64_t j = k - i * cols;
        float v = y[i * ld + j] + (bias != nullptr ? bias[j] : 0.0f);
        if (relu) {
            v = v > 0.0f ? v : 0.0f;
        }
        y[i * ld + j] = v;
    }
}

// One element per thread: the generator is a pure function of (seed, node id, column).
__global__ void random_features_kernel(const std::int64_t* ids, std::int64_t rows,
                                       std::int64_t cols, std::uint64_t seed, float* y,
                                       std::int64_t ld)
{
    const std::int64_t count = rows * cols;
    for (std::int64_t i = first_index(); i < count; i += stride()) {
        const std::int64_t r = i / cols;
        const std::int64_t j = i - r * cols;
        y[r * ld + j] = ::halo::detail::random_feature(seed, ids[r], cols, j);
    }
}

}  // namespace

void random_features(cudaStream_t stream, const std::int64_t* ids, std::int64_t rows,
                     std::int64_t cols, std::uint64_t seed, float* y, std::int64_t ld)
{
    if (rows <= 0 || cols <= 0) {
        return;
    }
    // Grid-stride over rows * cols with a grid larger than kMaxBlocks: the generator is
    // arithmetic-bound (three 64-bit mixes an element), so the whole device is wanted.
    const auto blocks = static_cast<unsigned>(
        std::min<std::int64_t>((rows * cols + kBlock - 1) / kBlock, 16 * kMaxBlocks));
    random_features_kernel<<<blocks, kBlock, 0, stream>>>(ids, rows, cols, seed, y, ld);
    HALO_CUDA_CHECK_LAUNCH();
}

void argmax_rows(cudaStream_t stream, const float* x, std::int64_t rows, std::int64_t cols,
                 std::int64_t ld, std::int32_t* best)
{
    if (rows <= 0 || cols <= 0) {
        return;
    }
    argmax_rows_kernel<<<grid_for(rows), kBlock, 0, stream>>>(x, rows, cols, ld, best);
    HALO_CUDA_CHECK_LAUNCH();
}

void axpby(cudaStream_t stream, std::int64_t rows, std::int64_t cols, float alpha, const float* x,
           std::int64_t ldx, float beta, float* y, std::int64_t ldy)
{
    if (rows <= 0 || cols <= 0) {
        return;
    }
    axpby_kernel<<<grid_for(rows * cols), kBlock, 0, stream>>>(rows, cols, alpha, x, ldx, beta, y,
                                                               ldy);
    HALO_CUDA_CHECK_LAUNCH();
}

void bias_activation(cudaStream_t stream, float* y, std::int64_t rows, std::int64_t cols,
                     std::int64_t ld, const float* bias, bool relu)
{
    if (rows <= 0 || cols <= 0) {
        return;
    }
    bias_activation_kernel<<<grid_for(rows * cols), kBlock, 0, stream>>>(y, rows, cols, ld, bias,
                                                                         relu);
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace halo::cuda::detail
