// INT8 feature quantization (paper 004, section 2.3, Eq. 1-2): features are stored and moved as
// int8 with a scale and a zero point per column, and dequantized where they are read
// (x^ = scale * (q - zero_point)), so feature memory and traffic drop about 4x.
//
// Two deliberate departures from Eq. 1-2, both documented in docs/AES.md:
// - Rounding to nearest (ties to even) instead of Eq. 1's floor: the error bound is
//   |x^ - x| <= scale / 2 instead of a whole scale.
// - The range [x_min, x_max] is widened to contain 0, so the zero point is an integer inside the
//   int8 range and 0 is represented exactly (sparse and padded features stay exactly zero). With
//   q_u of Eq. 1 in [0, 255] and q = q_u - 128, Eq. 2 reads x^ = scale * (q - zero_point) with
//   scale = (x_max - x_min) / 255 and zero_point = round(-128 - x_min / scale).
//
// The parameter and value functions are host/device inline so that the CUDA kernels (the int8
// gather of kernels/cuda/aes/aes.cu, the row packing of comm/quantized_pack.cu) round exactly as
// the CPU code here does.
#pragma once

// The C headers: their global rintf, rint, nextafterf, fmaxf and fminf are the names that host
// and device code share.
#include <float.h>
#include <math.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "halo/core/dense.hpp"
#include "halo/core/detail/host_device.hpp"

namespace halo {

inline constexpr std::int32_t kInt8Min = -128;
inline constexpr std::int32_t kInt8Max = 127;
/// 2^b - 1 of Eq. 1-2 for b = 8: the number of steps between the smallest and largest level.
inline constexpr int kInt8Steps = 255;

/// The affine map of one column (or one packed row): x^ = scale * (q - zero_point).
struct QuantParams {
    float scale = 1.0f;
    std::int32_t zero_point = 0;
};

/// Parameters for values in [lo, hi] (finite, lo <= hi). The range is widened to contain 0;
/// scale = (hi - lo) / 255 rounded up to a float whose 255 steps cover the range (at least
/// FLT_MIN; 1 for an all-zero range), zero_point = round(-128 - lo / scale), which lies in
/// [-128, 127]. Non-finite lo or hi give a NaN scale (every dequantized value is then NaN, so an
/// error upstream is not hidden).
HALO_HOST_DEVICE inline QuantParams int8_params(float lo, float hi)
{
    if (!(lo - lo == 0.0f) || !(hi - hi == 0.0f)) {
        return {NAN, 0};
    }
    const double l = lo < 0.0f ? static_cast<double>(lo) : 0.0;
    const double h = hi > 0.0f ? static_cast<double>(hi) : 0.0;
    const double range = h - l;  // exact enough: both are floats, the difference fits a double
    if (range == 0.0) {
        return {1.0f, kInt8Min};
    }
    float scale = static_cast<float>(range / kInt8Steps);
    if (scale < FLT_MIN) {
        scale = FLT_MIN;
    }
    if (static_cast<double>(scale) * kInt8Steps < range) {
        scale = nextafterf(scale, INFINITY);
    }
    double zero = rint(static_cast<double>(kInt8Min) - l / static_cast<double>(scale));
    zero = zero < kInt8Min ? kInt8Min : (zero > kInt8Max ? kInt8Max : zero);
    return {scale, static_cast<std::int32_t>(zero)};
}

/// q = clamp(round(x / scale) + zero_point, -128, 127), ties to even. NaN maps to -128.
HALO_HOST_DEVICE inline std::int8_t quantize_int8(float x, QuantParams p)
{
    float v = rintf(x / p.scale) + static_cast<float>(p.zero_point);
    v = fmaxf(v, static_cast<float>(kInt8Min));
    v = fminf(v, static_cast<float>(kInt8Max));
    return static_cast<std::int8_t>(static_cast<int>(v));
}

/// x^ = scale * (q - zero_point): one rounding (the difference is exact), never fused into a
/// neighbouring add, so host and device give the same bits.
HALO_HOST_DEVICE inline float dequantize_int8(std::int32_t q, QuantParams p)
{
    const float steps = static_cast<float>(q - p.zero_point);
#ifdef __CUDA_ARCH__
    return __fmul_rn(p.scale, steps);
#else
    return p.scale * steps;
#endif
}

/// 2^23 + 128 + zero_point, exactly (|zero_point| <= 2^22): what dequantize_int8_byte subtracts.
HALO_HOST_DEVICE inline float int8_bias(std::int32_t zero_point)
{
    return 8388736.0f + static_cast<float>(zero_point);
}

/// dequantize_int8 of byte kByte of a word of four int8 values, as the GPU's int8 gathers compute
/// it: `offset_word` is the word XOR 0x80808080 (each byte q + 128); the byte becomes the low byte
/// of the float 2^23 (bits 0x4B0000xx, exactly 2^23 + 128 + q), from which `bias`
/// (int8_bias(zero_point)) is subtracted: q - zero_point, exact (both operands are integers
/// below 2^24). Then the same single rounded product, so the bits equal dequantize_int8's, with
/// a byte permute and an add instead of an int-to-float conversion (16 per clock per SM on
/// sm_90, a quarter of the fp32 rate). Sampled AES over int8 features uses it (4-8% faster on
/// R-MAT 22/64, docs/AES.md "The byte form, measured").
template <int kByte>
HALO_HOST_DEVICE inline float dequantize_int8_byte(std::uint32_t offset_word, float bias,
                                                   float scale)
{
    static_assert(kByte >= 0 && kByte < 4, "a word holds four bytes");
#ifdef __CUDA_ARCH__
    const float biased = __uint_as_float(__byte_perm(offset_word, 0x4B000000u, 0x7440u | kByte));
    return __fmul_rn(scale, __fsub_rn(biased, bias));
#else
    const std::uint32_t bits = 0x4B000000u | ((offset_word >> (8 * kByte)) & 0xFFu);
    float biased;
    std::memcpy(&biased, &bits, sizeof biased);
    return scale * (biased - bias);
#endif
}

/// Non-owning view of a column-quantized matrix: element (i, j) is
/// scale[j] * (data[i * ld + j] - zero_point[j]). The pointers may be host or device memory.
struct QuantizedView {
    const std::int8_t* data = nullptr;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t ld = 0;                       // >= cols
    const float* scale = nullptr;              // cols entries
    const std::int32_t* zero_point = nullptr;  // cols entries

    HALO_HOST_DEVICE QuantParams params(std::int64_t j) const { return {scale[j], zero_point[j]}; }
};

/// The int8 feature format (docs/AES.md): data int8 [rows, cols] row-major (ld == cols),
/// scale float32 [cols], zero_point int32 [cols] with values in [-128, 127].
struct QuantizedMatrix {
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::vector<std::int8_t> data;
    std::vector<float> scale;
    std::vector<std::int32_t> zero_point;

    QuantizedView view() const noexcept
    {
        return {data.data(), rows, cols, cols, scale.data(), zero_point.data()};
    }
};

/// Quantizes every column of x with its own parameters (int8_params of the column's min and
/// max). Throws halo::InputError naming `what`, the row, the column and the value when an element
/// is not finite.
QuantizedMatrix quantize_columns(DenseView<const float> x, const char* what);

/// out(i, j) = dequantize_int8(q(i, j), q.params(j)); shapes must agree.
void dequantize(const QuantizedView& q, DenseView<float> out);

/// Checks the parameters of a host view: data, scale and zero_point present when the matrix
/// holds anything, ld >= cols, every scale finite and positive, every zero point in [-128, 127].
/// Throws halo::InputError naming `what`, the column and the offending value.
void validate(const QuantizedView& q, const char* what);

/// validate(view) plus the sizes: data rows * cols, scale and zero_point cols entries each (a
/// missing zero point is an array shorter than the columns).
void validate(const QuantizedMatrix& q, const char* what);

// -------------------------------------------------------------------------------------------------
// Rows with their own parameters: the int8 halo-exchange format (comm/quantized_pack.cu packs on
// the device; these are its CPU reference, with the same rounding).
//
// A packed row is a record of int8_record_bytes(cols) bytes: the cols quantized values, zero
// padding up to a multiple of 4, then the row's float scale and its int32 zero point. Records are
// contiguous, so a run of rows is one contiguous message. A buffer of records must be 4-byte
// aligned.

/// round_up(cols, 4) + 8.
HALO_HOST_DEVICE constexpr std::int64_t int8_record_bytes(std::int64_t cols)
{
    return (cols + 3) / 4 * 4 + 8;
}

/// Record r of `out` (count * int8_record_bytes(x.cols) bytes) gets row rows[r] of x (row r when
/// rows is null), quantized with int8_params of that row's min and max. A row holding a NaN or
/// an infinity gets a NaN scale, so it unpacks to NaN.
void pack_rows_int8_reference(DenseView<const float> x, const std::int32_t* rows,
                              std::int64_t count, std::uint8_t* out);

/// y(r, j) = dequantize_int8(q, params of record r) for r in [0, y.rows), j in [0, y.cols).
void unpack_rows_int8_reference(const std::uint8_t* in, DenseView<float> y);

}  // namespace halo
