// Device rounding of fp32 values to a feature type and back (include/halo/core/feature_type.hpp):
// to nearest even with CUDA's intrinsics, which halo::round_feature reproduces bit for bit on the
// host (infinities and NaN included). Shared by convert_features and the CUDA backend's 16-bit
// stores. Internal to halo_kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace halo::cuda::detail {

/// v stored as T (float: v itself).
template <typename T>
__device__ __forceinline__ T narrow_feature(float v)
{
    if constexpr (std::is_same_v<T, __half>) {
        return __float2half_rn(v);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        return __float2bfloat16_rn(v);
    } else {
        static_assert(std::is_same_v<T, float>, "fp32, fp16 or bf16 features");
        return v;
    }
}

/// A stored T widened exactly to fp32.
template <typename T>
__device__ __forceinline__ float widen_feature(T v)
{
    if constexpr (std::is_same_v<T, __half>) {
        return __half2float(v);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        return __bfloat162float(v);
    } else {
        static_assert(std::is_same_v<T, float>, "fp32, fp16 or bf16 features");
        return v;
    }
}

}  // namespace halo::cuda::detail
