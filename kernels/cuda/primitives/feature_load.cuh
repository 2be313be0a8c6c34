// Device loads of dense features of any FeatureType (include/halo/core/feature_type.hpp) widened to
// fp32, shared by the SpMM kernels: the accumulation stays fp32 whatever the storage type.
// Internal to halo_kernels; kVec columns per load as chosen by feature_vec.hpp's lane_columns().
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace halo::cuda::detail {

/// One feature as fp32 (read-only cache load).
template <typename T>
__device__ __forceinline__ float load_feature(const T* p)
{
    if constexpr (std::is_same_v<T, float>) {
        return __ldg(p);
    } else if constexpr (std::is_same_v<T, __half>) {
        return __half2float(__ldg(p));
    } else {
        static_assert(std::is_same_v<T, __nv_bfloat16>, "fp32, fp16 or bf16 features");
        return __bfloat162float(__ldg(p));
    }
}

// The two features packed in a 32-bit word (lower address in the low half), widened exactly.
template <typename T>
__device__ __forceinline__ void widen_pair(unsigned int word, float& lo, float& hi)
{
    if constexpr (std::is_same_v<T, __half>) {
        lo = __half2float(__ushort_as_half(static_cast<unsigned short>(word & 0xFFFFu)));
        hi = __half2float(__ushort_as_half(static_cast<unsigned short>(word >> 16)));
    } else {
        // bf16 is the upper half of an fp32: widening is a shift.
        lo = __uint_as_float(word << 16);
        hi = __uint_as_float(word & 0xFFFF0000u);
    }
}

/// kVec consecutive features at p as fp32: one load of 16 bytes when kVec is 4 (fp32) or 8
/// (fp16/bf16), in which case p must be 16-byte aligned; else kVec == 1.
template <typename T, int kVec>
__device__ __forceinline__ void load_features(const T* p, float (&out)[kVec])
{
    if constexpr (kVec == 1) {
        out[0] = load_feature(p);
    } else if constexpr (std::is_same_v<T, float>) {
        static_assert(kVec == 4, "fp32 vectors are float4");
        const float4 v = __ldg(reinterpret_cast<const float4*>(p));
        out[0] = v.x;
        out[1] = v.y;
        out[2] = v.z;
        out[3] = v.w;
    } else {
        static_assert(kVec == 8, "fp16/bf16 vectors are 8 halves (16 bytes)");
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
        widen_pair<T>(v.x, out[0], out[1]);
        widen_pair<T>(v.y, out[2], out[3]);
        widen_pair<T>(v.z, out[4], out[5]);
        widen_pair<T>(v.w, out[6], out[7]);
    }
}

/// L2 cache policies for loads (PTX createpolicy, sm_80 and later): evict_first for rows read once
/// or rarely, evict_last for rows read again soon. One instruction, made per thread.
__device__ __forceinline__ unsigned long long l2_evict_first_policy()
{
    unsigned long long policy;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

__device__ __forceinline__ unsigned long long l2_evict_last_policy()
{
    unsigned long long policy;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

/// load_features of fp32 with an L2 cache policy (read-only path, ld.global.nc.L2::cache_hint).
template <int kVec>
__device__ __forceinline__ void load_features_with_policy(const float* p, float (&out)[kVec],
                                                          unsigned long long policy)
{
    if constexpr (kVec == 1) {
        asm("ld.global.nc.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(out[0]) : "l"(p), "l"(policy));
    } else {
        static_assert(kVec == 4, "fp32 vectors are float4");
        asm("ld.global.nc.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
            : "=f"(out[0]), "=f"(out[1]), "=f"(out[2]), "=f"(out[3])
            : "l"(p), "l"(policy));
    }
}

/// Stores kVec fp32 results at p: float4 stores when kVec > 1 (p 16-byte aligned).
template <int kVec>
__device__ __forceinline__ void store_results(float* p, const float (&v)[kVec])
{
    if constexpr (kVec == 1) {
        *p = v[0];
    } else {
        static_assert(kVec % 4 == 0, "vector stores are float4");
#pragma unroll
        for (int i = 0; i < kVec; i += 4) {
            *reinterpret_cast<float4*>(p + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
        }
    }
}

/// Adds kVec fp32 results to those at p (each read and written once, float4 when kVec > 1): the
/// same bits as storing them elsewhere and adding that copy to p.
template <int kVec>
__device__ __forceinline__ void add_results(float* p, const float (&v)[kVec])
{
    if constexpr (kVec == 1) {
        *p += v[0];
    } else {
        static_assert(kVec % 4 == 0, "vector stores are float4");
#pragma unroll
        for (int i = 0; i < kVec; i += 4) {
            auto* q = reinterpret_cast<float4*>(p + i);
            const float4 old = *q;
            *q = make_float4(old.x + v[i], old.y + v[i + 1], old.z + v[i + 2], old.w + v[i + 3]);
        }
    }
}

/// Stores kVec fp32 results at p, or adds them to those there (add_results).
template <int kVec>
__device__ __forceinline__ void write_results(float* p, const float (&v)[kVec], bool add)
{
    if (add) {
        add_results<kVec>(p, v);
    } else {
        store_results<kVec>(p, v);
    }
}

/// atomicAdd of each of kVec fp32 results at p.
template <int kVec>
__device__ __forceinline__ void atomic_add_results(float* p, const float (&v)[kVec])
{
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
        atomicAdd(p + i, v[i]);
    }
}

}  // namespace halo::cuda::detail
