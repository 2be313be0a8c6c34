// Reductions across a warp, or across each aligned group of Width lanes of it, by butterfly
// shuffles (every lane of the group ends with the result; all 32 lanes must take part). The
// offsets run from Width / 2 down to 1 in every kernel, so a floating-point sum adds its terms in
// one fixed order: lane 0's result equals a shuffle-down tree's bit for bit. Unsigned integers
// over a whole warp use the sm_80 reduction instructions (exact in any order). Internal to
// halo_kernels.
#pragma once

#include <type_traits>

namespace halo::cuda::detail {

inline constexpr unsigned kFullWarpMask = 0xffffffffu;

// Whether a whole-warp reduction of T has an instruction of its own on this architecture.
template <int Width, typename T>
__device__ constexpr bool has_reduce_instruction()
{
#if __CUDA_ARCH__ >= 800
    return Width == 32 && std::is_same_v<T, unsigned>;
#else
    return false;
#endif
}

// v combined across each aligned group of Width lanes: op(v, partner's v) at offsets Width / 2,
// ..., 1.
template <int Width, typename T, typename Op>
__device__ __forceinline__ T butterfly(T v, Op op)
{
    static_assert(Width >= 1 && Width <= 32 && (Width & (Width - 1)) == 0,
                  "a power-of-two group of lanes");
#pragma unroll
    for (int offset = Width / 2; offset > 0; offset /= 2) {
        v = op(v, __shfl_xor_sync(kFullWarpMask, v, offset));
    }
    return v;
}

template <int Width = 32, typename T>
__device__ __forceinline__ T warp_sum(T v)
{
    if constexpr (has_reduce_instruction<Width, T>()) {
        return __reduce_add_sync(kFullWarpMask, v);
    } else {
        return butterfly<Width>(v, [](T a, T b) { return a + b; });
    }
}

/// fmaxf / fmax for floating point (a NaN loses to a number), `<` otherwise.
template <int Width = 32, typename T>
__device__ __forceinline__ T warp_max(T v)
{
    if constexpr (has_reduce_instruction<Width, T>()) {
        return __reduce_max_sync(kFullWarpMask, v);
    } else if constexpr (std::is_same_v<T, float>) {
        return butterfly<Width>(v, [](float a, float b) { return fmaxf(a, b); });
    } else if constexpr (std::is_same_v<T, double>) {
        return butterfly<Width>(v, [](double a, double b) { return fmax(a, b); });
    } else {
        return butterfly<Width>(v, [](T a, T b) { return a < b ? b : a; });
    }
}

}  // namespace halo::cuda::detail
