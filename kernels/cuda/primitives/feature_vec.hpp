// How many adjacent columns one lane of an SpMM kernel (MergePath, row-split) loads at once:
// 16 bytes of features, i.e. 4 fp32 or 8 fp16/bf16 columns, when every such access of x and the
// matching fp32 accesses of y (one or two float4) are 16-byte aligned; otherwise 1. Host code
// (the plans choose the kernel instantiation with it; the CPU unit test checks it), internal to
// halo_kernels.
#pragma once

#include <cstdint>

#include "halo/core/feature_type.hpp"

namespace halo::cuda::detail {

/// Columns per 16-byte load of `type`: 4 for fp32, 8 for fp16 and bf16.
constexpr int vector_columns(FeatureType type)
{
    return type == FeatureType::fp32 ? 4 : 8;
}

/// vector_columns(type) when x and y start 16-byte aligned and the width and both leading
/// dimensions keep every row start aligned (x.ld and the width multiples of the vector, y.ld a
/// multiple of 4 floats), else 1.
inline int lane_columns(FeatureType type, const void* x, std::int64_t ldx, const void* y,
                        std::int64_t ldy, std::int64_t width)
{
    const auto aligned = [](const void* p) {
        return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
    };
    const int vec = vector_columns(type);
    const bool ok = aligned(x) && aligned(y) && width % vec == 0 && ldx % vec == 0 && ldy % 4 == 0;
    return ok ? vec : 1;
}

}  // namespace halo::cuda::detail
