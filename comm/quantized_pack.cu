// Int8 row packing for the halo exchange (include/halo/comm/quantized_pack.hpp).
//
// Choices:
// - A warp per row: its lanes find the row's min and max (exact in any order, so the parameters
//   equal the CPU reference's), then each lane writes whole 32-bit words of 4 quantized values,
//   the padding bytes as zeros, so a record has no uninitialized byte and equals the reference's.
// - halo::int8_params, quantize_int8 and dequantize_int8 are the host/device functions of
//   halo/quantize/quantize.hpp: one definition of the rounding for the CPU and the GPU.
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>

#include <cstdint>

#include "halo/comm/quantized_pack.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/quantize/quantize.hpp"
#include "warp_rows.cuh"

namespace halo::cuda {
namespace {

using halo::detail::for_each_warp_row;
using halo::detail::kWarp;
using halo::detail::warp_rows_block;
using halo::detail::warp_rows_grid;

__global__ void pack_kernel(const float* __restrict__ x, std::int64_t ld,
                            const std::int32_t* __restrict__ rows, std::int64_t count,
                            std::int64_t cols, std::uint8_t* __restrict__ out)
{
    const std::int64_t record = int8_record_bytes(cols);
    const std::int64_t words = (cols + 3) / 4;
    const int lane = static_cast<int>(threadIdx.x);
    for_each_warp_row(count, [&](std::int64_t r) {
        const float* src = x + (rows != nullptr ? static_cast<std::int64_t>(rows[r]) : r) * ld;
        float lo = FLT_MAX;
        float hi = -FLT_MAX;
        bool finite = true;
        for (std::int64_t c = lane; c < cols; c += kWarp) {
            const float v = src[c];
            finite = finite && isfinite(v);
            lo = fminf(lo, v);
            hi = fmaxf(hi, v);
        }
        for (int offset = kWarp / 2; offset > 0; offset /= 2) {
            lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, offset));
            hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, offset));
        }
        finite = __all_sync(0xffffffffu, finite);
        const QuantParams p = cols == 0 ? int8_params(0.0f, 0.0f)
                              : finite  ? int8_params(lo, hi)
                                        : int8_params(NAN, NAN);
        std::uint8_t* rec = out + r * record;
        auto* rec_words = reinterpret_cast<std::uint32_t*>(rec);
        for (std::int64_t w = lane; w < words; w += kWarp) {
            std::uint32_t word = 0;
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                const std::int64_t c = 4 * w + t;
                if (c < cols) {
                    const auto q = static_cast<std::uint8_t>(quantize_int8(src[c], p));
                    word |= static_cast<std::uint32_t>(q) << (8 * t);
                }
            }
            rec_words[w] = word;
        }
        if (lane == 0) {
            *reinterpret_cast<float*>(rec + record - 8) = p.scale;
            *reinterpret_cast<std::int32_t*>(rec + record - 4) = p.zero_point;
        }
    });
}

__global__ void unpack_kernel(const std::uint8_t* __restrict__ in, std::int64_t count,
                              std::int64_t cols, float* __restrict__ y, std::int64_t ld)
{
    const std::int64_t record = int8_record_bytes(cols);
    const std::int64_t words = (cols + 3) / 4;
    const int lane = static_cast<int>(threadIdx.x);
    for_each_warp_row(count, [&](std::int64_t r) {
        const std::uint8_t* rec = in + r * record;
        const QuantParams p{*reinterpret_cast<const float*>(rec + record - 8),
                            *reinterpret_cast<const std::int32_t*>(rec + record - 4)};
        const auto* rec_words = reinterpret_cast<const std::uint32_t*>(rec);
        float* dst = y + r * ld;
        for (std::int64_t w = lane; w < words; w += kWarp) {
            const std::uint32_t word = rec_words[w];
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                const std::int64_t c = 4 * w + t;
                if (c < cols) {
                    const auto q = static_cast<std::int8_t>((word >> (8 * t)) & 0xffu);
                    dst[c] = dequantize_int8(q, p);
                }
            }
        }
    });
}

bool aligned4(const void* p)
{
    return reinterpret_cast<std::uintptr_t>(p) % 4 == 0;
}

}  // namespace

void pack_rows_int8(cudaStream_t stream, DenseView<const float> x, const std::int32_t* rows,
                    std::int64_t count, std::uint8_t* out)
{
    HALO_EXPECTS(count >= 0 && x.cols >= 0 && x.ld >= x.cols, "int8 pack of ", count, " rows of ",
                 x.cols, " columns with leading dimension ", x.ld);
    HALO_EXPECTS(aligned4(out), "int8 records need a 4-byte aligned buffer");
    if (count == 0) {
        return;
    }
    pack_kernel<<<warp_rows_grid(count), warp_rows_block(), 0, stream>>>(x.data, x.ld, rows, count,
                                                                         x.cols, out);
    HALO_CUDA_CHECK_LAUNCH();
}

void unpack_rows_int8(cudaStream_t stream, const std::uint8_t* in, DenseView<float> y)
{
    HALO_EXPECTS(y.rows >= 0 && y.cols >= 0 && y.ld >= y.cols, "int8 unpack of ", y.rows,
                 " rows of ", y.cols, " columns with leading dimension ", y.ld);
    HALO_EXPECTS(aligned4(in), "int8 records need a 4-byte aligned buffer");
    if (y.rows == 0 || y.cols == 0) {
        return;
    }
    unpack_kernel<<<warp_rows_grid(y.rows), warp_rows_block(), 0, stream>>>(in, y.rows, y.cols,
                                                                            y.data, y.ld);
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace halo::cuda
