// Element types of dense feature matrices that the exact SpMM kernels read:
// fp32, or fp16 / bf16 features with fp32 accumulation and fp32 output. Host only (no CUDA), so
// that the rounding the device applies can be reproduced on the CPU: a reference computed on
// round_features(x) differs from a low-precision kernel only in the order of the fp32 sums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace halo {

enum class FeatureType {
    fp32,
    fp16,  // IEEE binary16: 11-bit significand, range +-65504
    bf16,  // bfloat16: 8-bit significand, the range of fp32
};

/// Parses "fp32" | "fp16" | "bf16"; throws halo::InputError naming the text otherwise.
FeatureType parse_feature_type(std::string_view text);
std::string to_string(FeatureType type);
/// Bytes of one element: 4 or 2.
std::size_t feature_bytes(FeatureType type);

/// Round to nearest, ties to even, as CUDA's __float2half_rn / __float2bfloat16_rn for finite
/// inputs (fp16: beyond +-65504 rounds to +-inf, below 2^-24 to subnormals or zero). NaN stays a
/// quiet NaN (its payload may differ from the device's).
std::uint16_t float_to_half_bits(float value);
std::uint16_t float_to_bf16_bits(float value);
/// Exact widening back to fp32.
float half_bits_to_float(std::uint16_t bits);
float bf16_bits_to_float(std::uint16_t bits);

/// The fp32 value a kernel sees after `value` is stored as `type` (fp32: value itself).
float round_feature(float value, FeatureType type);
/// round_feature() on every element, in place.
void round_features(std::span<float> values, FeatureType type);

/// Encodes `values` as fp16 or bf16 bit patterns into `bits` (same length), rounding as
/// float_to_half_bits / float_to_bf16_bits, on every core. Returns the index of the first finite
/// value whose encoding is infinite (fp16: |value| >= 65520; bf16: beyond 3.3895e38), or -1 when
/// there is none; every element is encoded either way.
std::int64_t encode_features(std::span<const float> values, FeatureType type,
                             std::span<std::uint16_t> bits);
/// encode_features' range check alone, without storing anything: the index of the first finite
/// value that `type` would store as infinity, or -1.
std::int64_t first_out_of_range(std::span<const float> values, FeatureType type);
/// Widens fp16 or bf16 bit patterns exactly into `values` (same length), on every core.
void decode_features(std::span<const std::uint16_t> bits, FeatureType type,
                     std::span<float> values);

/// The name of a stored feature type in a dataset's root attribute feature_type
/// (docs/FORMAT.md): "float32", "float16", "bfloat16"; and back (nullopt for another name,
/// "int8" included).
std::string stored_feature_type_name(FeatureType type);
std::optional<FeatureType> feature_type_from_stored_name(std::string_view name);

}  // namespace halo
