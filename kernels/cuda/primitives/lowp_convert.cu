// Device conversion of fp32 features to fp16 / bf16 (include/halo/kernels/cuda/lowp_spmm.hpp):
// round to nearest even with CUDA's intrinsics, which lowp_features.cpp reproduces bit for bit on
// the host.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "cuda/primitives/feature_store.cuh"
#include "cuda/primitives/grid_stride.cuh"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65536;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    convert_kernel(const float* __restrict__ src, std::int64_t ld_src, std::int64_t rows,
                   std::int64_t cols, T* __restrict__ dst, std::int64_t ld_dst)
{
    const std::int64_t total = rows * cols;
    for (std::int64_t t = detail::first_index(); t < total; t += detail::stride()) {
        const std::int64_t i = t / cols;
        const std::int64_t j = t - i * cols;
        dst[i * ld_dst + j] = detail::narrow_feature<T>(src[i * ld_src + j]);
    }
}

template <typename T>
void launch(cudaStream_t stream, DenseView<const float> src, void* dst, std::int64_t ld_dst)
{
    const std::int64_t total = src.rows * src.cols;
    const std::int64_t blocks =
        std::clamp<std::int64_t>((total + kThreads - 1) / kThreads, 1, kMaxBlocks);
    convert_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        src.data, src.ld, src.rows, src.cols, static_cast<T*>(dst), ld_dst);
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace

void convert_features(cudaStream_t stream, DenseView<const float> src, FeatureType type, void* dst,
                      std::int64_t ld_dst)
{
    HALO_EXPECTS(src.rows >= 0 && src.cols >= 0 && src.ld >= src.cols, "source ", src.rows, " x ",
                 src.cols, " with ld ", src.ld);
    HALO_EXPECTS(ld_dst >= src.cols, "destination ld ", ld_dst, " below the width ", src.cols);
    if (src.rows == 0 || src.cols == 0) {
        return;
    }
    HALO_EXPECTS(src.data != nullptr && dst != nullptr, "null device matrices");
    switch (type) {
        case FeatureType::fp32:
            return launch<float>(stream, src, dst, ld_dst);
        case FeatureType::fp16:
            return launch<__half>(stream, src, dst, ld_dst);
        case FeatureType::bf16:
            return launch<__nv_bfloat16>(stream, src, dst, ld_dst);
    }
    HALO_EXPECTS(false, "unknown feature type ", static_cast<int>(type));
}

}  // namespace halo::cuda
