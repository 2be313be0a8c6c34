// Host half of the low-precision feature support (include/halo/core/feature_type.hpp): parsing and
// the bit-exact fp32 -> fp16 / bf16 rounding that the device conversion (lowp_convert.cu) performs,
// so CPU references and unit tests see the same rounded features; the stored fp16 / bf16 features'
// encoding and decoding (the dataset reader and writer). No CUDA needed.
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"

namespace halo {

FeatureType parse_feature_type(std::string_view text)
{
    if (text == "fp32") {
        return FeatureType::fp32;
    }
    if (text == "fp16") {
        return FeatureType::fp16;
    }
    if (text == "bf16") {
        return FeatureType::bf16;
    }
    HALO_THROW(InputError, "feature type '", std::string(text), "' is not fp32, fp16 or bf16");
}

std::string to_string(FeatureType type)
{
    switch (type) {
        case FeatureType::fp32:
            return "fp32";
        case FeatureType::fp16:
            return "fp16";
        case FeatureType::bf16:
            return "bf16";
    }
    HALO_THROW(LogicError, "unknown feature type ", static_cast<int>(type));
}

std::size_t feature_bytes(FeatureType type)
{
    return type == FeatureType::fp32 ? 4 : 2;
}

std::uint16_t float_to_half_bits(float value)
{
    const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t abs = x & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) {
        return static_cast<std::uint16_t>(sign | 0x7E00u);  // quiet NaN
    }
    if (abs >= 0x477FF000u) {
        // 65520 and above (the tie between 65504 and 2^16 included) round to infinity.
        return static_cast<std::uint16_t>(sign | 0x7C00u);
    }
    if (abs < 0x38800000u) {
        // Below 2^-14: a subnormal m * 2^-24. The scaling by 2^24 is exact; nearbyint rounds to
        // nearest even in the default mode, and m == 1024 is the smallest normal's bit pattern.
        const float scaled = std::bit_cast<float>(abs) * 16777216.0f;
        return static_cast<std::uint16_t>(sign |
                                          static_cast<std::uint16_t>(std::nearbyint(scaled)));
    }
    // Normal: rebias the exponent (127 - 15 = 112) and round the 13 dropped bits to nearest even;
    // a carry out of the significand correctly bumps the exponent.
    const std::uint32_t rebased = abs - 0x38000000u;
    const std::uint32_t rounded = rebased + 0xFFFu + ((rebased >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

std::uint16_t float_to_bf16_bits(float value)
{
    const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) {
        return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    }
    // Ties to even on the 16 dropped bits; overflow past the largest finite bf16 gives infinity.
    return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

namespace {

// fp16 -> fp32 without branches, so that a loop of it vectorizes: the exponent and significand
// shifted into fp32's places read as a float 2^112 too small (fp32's bias 127 against fp16's 15),
// for subnormals too (m * 2^-136 * 2^112 = m * 2^-24); the product by 2^112 is exact. Infinity
// and NaN (exponent all ones) get fp32's all-ones exponent and keep their significand.
inline float half_to_float(std::uint16_t bits)
{
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t magnitude = bits & 0x7FFFu;
    const float scaled = std::bit_cast<float>(magnitude << 13) * 0x1p112f;
    const std::uint32_t special = magnitude >= 0x7C00u ? 0x7F800000u : 0u;
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(scaled) | special | sign);
}

}  // namespace

float half_bits_to_float(std::uint16_t bits)
{
    return half_to_float(bits);
}

float bf16_bits_to_float(std::uint16_t bits)
{
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

float round_feature(float value, FeatureType type)
{
    switch (type) {
        case FeatureType::fp32:
            return value;
        case FeatureType::fp16:
            return half_bits_to_float(float_to_half_bits(value));
        case FeatureType::bf16:
            return bf16_bits_to_float(float_to_bf16_bits(value));
    }
    HALO_THROW(LogicError, "unknown feature type ", static_cast<int>(type));
}

void round_features(std::span<float> values, FeatureType type)
{
    if (type == FeatureType::fp32) {
        return;
    }
    for (float& v : values) {
        v = round_feature(v, type);
    }
}

namespace {

// encode_features, or with bits empty only its range check.
std::int64_t encode_or_check(std::span<const float> values, FeatureType type,
                             std::span<std::uint16_t> bits)
{
    HALO_EXPECTS(type != FeatureType::fp32, "encode_features: fp32 is not a 16-bit type");
    const bool store = !bits.empty();
    HALO_EXPECTS(!store || bits.size() == values.size(), "encode_features: ", values.size(),
                 " values into ", bits.size(), " elements");
    const auto n = static_cast<std::int64_t>(values.size());
    // Infinity: exponent all ones, significand zero, either sign.
    const std::uint16_t infinity = type == FeatureType::fp16 ? 0x7C00u : 0x7F80u;
    std::int64_t first_overflow = n;
    // The conversion as a lambda, not a function pointer, so that it is inlined into the loop.
    auto encode_all = [&](auto encode) {
#pragma omp parallel for schedule(static) reduction(min : first_overflow)
        for (std::int64_t i = 0; i < n; ++i) {
            const float v = values[static_cast<std::size_t>(i)];
            const std::uint16_t b = encode(v);
            if (store) {
                bits[static_cast<std::size_t>(i)] = b;
            }
            if ((b & 0x7FFFu) == infinity && std::isfinite(v) && i < first_overflow) {
                first_overflow = i;
            }
        }
    };
    if (type == FeatureType::fp16) {
        encode_all([](float v) { return float_to_half_bits(v); });
    } else {
        encode_all([](float v) { return float_to_bf16_bits(v); });
    }
    return first_overflow == n ? -1 : first_overflow;
}

}  // namespace

std::int64_t encode_features(std::span<const float> values, FeatureType type,
                             std::span<std::uint16_t> bits)
{
    HALO_EXPECTS(!bits.empty() || values.empty(), "encode_features: ", values.size(),
                 " values into 0 elements");
    return encode_or_check(values, type, bits);
}

std::int64_t first_out_of_range(std::span<const float> values, FeatureType type)
{
    return encode_or_check(values, type, {});
}

void decode_features(std::span<const std::uint16_t> bits, FeatureType type,
                     std::span<float> values)
{
    HALO_EXPECTS(type != FeatureType::fp32, "decode_features: fp32 is not a 16-bit type");
    HALO_EXPECTS(bits.size() == values.size(), "decode_features: ", bits.size(),
                 " elements into ", values.size(), " values");
    const auto n = static_cast<std::int64_t>(bits.size());
    auto decode_all = [&](auto decode) {
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n; ++i) {
            values[static_cast<std::size_t>(i)] = decode(bits[static_cast<std::size_t>(i)]);
        }
    };
    if (type == FeatureType::fp16) {
        decode_all([](std::uint16_t b) { return half_to_float(b); });
    } else {
        decode_all([](std::uint16_t b) {
            return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
        });
    }
}

std::string stored_feature_type_name(FeatureType type)
{
    switch (type) {
        case FeatureType::fp32:
            return "float32";
        case FeatureType::fp16:
            return "float16";
        case FeatureType::bf16:
            return "bfloat16";
    }
    HALO_THROW(LogicError, "unknown feature type ", static_cast<int>(type));
}

std::optional<FeatureType> feature_type_from_stored_name(std::string_view name)
{
    for (const auto type : {FeatureType::fp32, FeatureType::fp16, FeatureType::bf16}) {
        if (name == stored_feature_type_name(type)) {
            return type;
        }
    }
    return std::nullopt;
}

}  // namespace halo
