// The CUDA backend's 16-bit stores in fp32 memory (cuda_activations.hpp): one kernel a store,
// rounding as __float2half_rn / __float2bfloat16_rn (= halo::round_feature for finite values and
// infinities; NaN stays NaN), the first out-of-range element kept in a device record.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <optional>

#include "cuda/backend/cuda_activations.hpp"
#include "cuda/backend/cuda_overflow.cuh"
#include "cuda/primitives/grid_stride.cuh"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {
namespace {

constexpr int kBlock = 256;
constexpr std::int64_t kMaxBlocks = 8192;

template <bool Half>
__device__ __forceinline__ float rounded(float v)
{
    if constexpr (Half) {
        return __half2float(__float2half_rn(v));
    } else {
        return __bfloat162float(__float2bfloat16_rn(v));
    }
}

// A block covers kBlock / tpr rows at a time (tpr threads a row), grid-stride over rows. An
// element the type stores as infinity is left unrounded and its index offered to the record;
// the last block to finish takes the first one's value, then rounds those elements too (an
// error path: one block over the matrix), and resets the launch's fields for the next store.
template <bool Half>
__global__ void round_kernel(float* y, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                             int tpr, OverflowRecord* rec, int store)
{
    const int rows_per_block = kBlock / tpr;
    const int lane = static_cast<int>(threadIdx.x) % tpr;
    unsigned long long mine = 0;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * rows_per_block +
                          static_cast<int>(threadIdx.x) / tpr;
         i < rows; i += static_cast<std::int64_t>(gridDim.x) * rows_per_block) {
        float* yr = y + i * ld;
        for (std::int64_t j = lane; j < cols; j += tpr) {
            const float v = yr[j];
            const float q = rounded<Half>(v);
            if (isinf(q) && isfinite(v)) {
                const auto key = ~static_cast<unsigned long long>(i * cols + j);
                mine = key > mine ? key : mine;
            } else {
                yr[j] = q;
            }
        }
    }
    unsigned long long first = 0;
    if (!last_block_of_launch(rec, mine, first)) {
        return;
    }
    if (first != 0) {
        if (threadIdx.x == 0 && rec->set == 0) {
            const auto index = static_cast<std::int64_t>(~first);
            rec->row = index / cols;
            rec->col = index % cols;
            rec->value = y[rec->row * ld + rec->col];
            rec->store = store;
            rec->set = 1;
        }
        __syncthreads();
        for (std::int64_t k = threadIdx.x; k < rows * cols; k += blockDim.x) {
            float* p = y + (k / cols) * ld + k % cols;
            *p = rounded<Half>(*p);
        }
    }
    end_launch(rec);
}

}  // namespace

void ActivationStores::round(DenseView<float> y, FeatureType type, std::int32_t store)
{
    if (type == FeatureType::fp32 || y.rows == 0 || y.cols == 0) {
        return;
    }
    HALO_EXPECTS(y.data != nullptr && y.ld >= y.cols && y.rows > 0 && y.cols > 0,
                 "round_activations needs a device view with ld >= cols, got ", y.rows, " x ",
                 y.cols, " (ld ", y.ld, ")");
    const cudaStream_t stream = ctx_.compute_stream();
    OverflowRecord* rec = record();
    int tpr = 1;
    while (tpr < kBlock && tpr < y.cols) {
        tpr *= 2;
    }
    const auto blocks = grid_blocks(y.rows, kBlock / tpr, kMaxBlocks);
    if (type == FeatureType::fp16) {
        round_kernel<true>
            <<<blocks, kBlock, 0, stream>>>(y.data, y.rows, y.cols, y.ld, tpr, rec, store);
    } else {
        round_kernel<false>
            <<<blocks, kBlock, 0, stream>>>(y.data, y.rows, y.cols, y.ld, tpr, rec, store);
    }
    HALO_CUDA_CHECK_LAUNCH();
}

OverflowRecord* ActivationStores::record()
{
    if (record_.data() == nullptr) {
        const cudaStream_t stream = ctx_.compute_stream();
        cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
        HALO_CUDA_TRY(cudaStreamIsCapturing(stream, &capture));
        HALO_EXPECTS(capture == cudaStreamCaptureStatusNone,
                     "the first 16-bit store of a CUDA backend is being recorded: its overflow "
                     "record cannot be allocated in a capture");
        record_ = DeviceBuffer<std::uint64_t>(ctx_, kRecordWords);
        HALO_CUDA_TRY(cudaMemsetAsync(record_.data(), 0, record_.bytes(), stream));
    }
    return reinterpret_cast<OverflowRecord*>(record_.data());
}

std::optional<ActivationOverflow> ActivationStores::take()
{
    if (record_.data() == nullptr) {
        return std::nullopt;
    }
    const cudaStream_t stream = ctx_.compute_stream();
    OverflowRecord host{};
    HALO_CUDA_TRY(
        cudaMemcpyAsync(&host, record_.data(), sizeof host, cudaMemcpyDeviceToHost, stream));
    HALO_CUDA_TRY(cudaStreamSynchronize(stream));
    if (host.set == 0) {
        return std::nullopt;
    }
    HALO_CUDA_TRY(cudaMemsetAsync(record_.data(), 0, record_.bytes(), stream));
    return ActivationOverflow{host.row, host.col, host.value, host.store};
}

}  // namespace halo::cuda::detail
