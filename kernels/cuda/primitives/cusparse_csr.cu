// The index conversions of the cuSPARSE CSR (cusparse_csr.hpp): rebasing and narrowing row
// offsets, widening columns, filling values.
#include "cuda/primitives/cusparse_csr.hpp"
#include "cuda/primitives/grid_stride.cuh"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {
namespace {

constexpr int kBlock = 256;
// Enough blocks to fill any current GPU several times over; larger counts loop in the kernel.
constexpr std::int64_t kMaxBlocks = 8192;

template <typename In, typename Out>
__global__ void shift_kernel(const In* in, Out* out, std::int64_t count, std::int64_t base)
{
    for (std::int64_t k = first_index(); k < count; k += stride()) {
        out[k] = static_cast<Out>(static_cast<std::int64_t>(in[k]) - base);
    }
}

__global__ void fill_kernel(float* data, std::int64_t count, float value)
{
    for (std::int64_t k = first_index(); k < count; k += stride()) {
        data[k] = value;
    }
}

// A warp per row (grid-stride over rows), its lanes over the row's nonzeros: coalesced, and a
// long row costs its length / 32 steps of one warp.
template <typename Offset, typename Index>
__global__ void scaled_values_kernel(std::int64_t rows, const Offset* offsets, const Index* columns,
                                     const float* row_scale, const float* col_scale, float* values)
{
    const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
    const int lane = static_cast<int>(threadIdx.x % 32);
    for (std::int64_t i = first_index() / 32; i < rows; i += warps) {
        const float r = row_scale != nullptr ? row_scale[i] : 1.0f;
        const std::int64_t end = offsets[i + 1];
        for (std::int64_t k = static_cast<std::int64_t>(offsets[i]) + lane; k < end; k += 32) {
            values[k] = col_scale != nullptr ? r * col_scale[columns[k]] : r;
        }
    }
}

__global__ void scale_rows_kernel(float* data, std::int64_t rows, std::int64_t cols,
                                  std::int64_t ld, const float* scale)
{
    const std::int64_t count = rows * cols;
    for (std::int64_t k = first_index(); k < count; k += stride()) {
        const std::int64_t i = k / cols;
        data[i * ld + k % cols] *= scale[i];
    }
}

template <typename Offset, typename Index>
void launch_scaled_values(cudaStream_t stream, std::int64_t rows, const Offset* offsets,
                          const Index* columns, const float* row_scale, const float* col_scale,
                          float* values)
{
    if (rows <= 0) {
        return;
    }
    scaled_values_kernel<<<grid_blocks(rows * 32, kBlock, kMaxBlocks), kBlock, 0, stream>>>(
        rows, offsets, columns, row_scale, col_scale, values);
    HALO_CUDA_CHECK_LAUNCH();
}

template <typename In, typename Out>
void launch_shift(cudaStream_t stream, const In* in, Out* out, std::int64_t count,
                  std::int64_t base)
{
    if (count <= 0) {
        return;
    }
    shift_kernel<<<grid_blocks(count, kBlock, kMaxBlocks), kBlock, 0, stream>>>(in, out, count,
                                                                                base);
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace

void shift_offsets(cudaStream_t stream, const std::int64_t* in, std::int64_t* out,
                   std::int64_t count, std::int64_t base)
{
    launch_shift(stream, in, out, count, base);
}

void shift_offsets(cudaStream_t stream, const std::int64_t* in, std::int32_t* out,
                   std::int64_t count, std::int64_t base)
{
    launch_shift(stream, in, out, count, base);
}

void shift_offsets(cudaStream_t stream, const std::int32_t* in, std::int32_t* out,
                   std::int64_t count, std::int64_t base)
{
    launch_shift(stream, in, out, count, base);
}

void widen_indices(cudaStream_t stream, const std::int32_t* in, std::int64_t* out,
                   std::int64_t count)
{
    launch_shift(stream, in, out, count, 0);
}

void scaled_values(cudaStream_t stream, std::int64_t rows, const std::int32_t* offsets,
                   const std::int32_t* columns, const float* row_scale, const float* col_scale,
                   float* values)
{
    launch_scaled_values(stream, rows, offsets, columns, row_scale, col_scale, values);
}

void scaled_values(cudaStream_t stream, std::int64_t rows, const std::int64_t* offsets,
                   const std::int32_t* columns, const float* row_scale, const float* col_scale,
                   float* values)
{
    launch_scaled_values(stream, rows, offsets, columns, row_scale, col_scale, values);
}

void scaled_values(cudaStream_t stream, std::int64_t rows, const std::int64_t* offsets,
                   const std::int64_t* columns, const float* row_scale, const float* col_scale,
                   float* values)
{
    launch_scaled_values(stream, rows, offsets, columns, row_scale, col_scale, values);
}

void scale_rows(cudaStream_t stream, float* data, std::int64_t rows, std::int64_t cols,
                std::int64_t ld, const float* scale)
{
    if (rows <= 0 || cols <= 0) {
        return;
    }
    scale_rows_kernel<<<grid_blocks(rows * cols, kBlock, kMaxBlocks), kBlock, 0, stream>>>(
        data, rows, cols, ld, scale);
    HALO_CUDA_CHECK_LAUNCH();
}

void fill(cudaStream_t stream, float* data, std::int64_t count, float value)
{
    if (count <= 0) {
        return;
    }
    fill_kernel<<<grid_blocks(count, kBlock, kMaxBlocks), kBlock, 0, stream>>>(data, count, value);
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace halo::cuda::detail
