// fp16/bf16 features on the CPU (include/halo/core/feature_type.hpp,
// kernels/cuda/primitives/feature_vec.hpp): parsing, the host rounding that GPU tests build their
// references with (every fp16 value round trips, midpoints go to the even neighbour, overflow,
// subnormals, random values land on the nearest neighbour), and which lanes may use 16-byte loads.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cuda/primitives/feature_vec.hpp"
#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "halo_test.hpp"

namespace {

using halo::FeatureType;

TEST(FeatureType, ParsesAndNames)
{
    for (const FeatureType t : {FeatureType::fp32, FeatureType::fp16, FeatureType::bf16}) {
        EXPECT_EQ(halo::parse_feature_type(halo::to_string(t)), t);
    }
    EXPECT_EQ(halo::feature_bytes(FeatureType::fp32), 4u);
    EXPECT_EQ(halo::feature_bytes(FeatureType::fp16), 2u);
    EXPECT_EQ(halo::feature_bytes(FeatureType::bf16), 2u);
    try {
        (void)halo::parse_feature_type("fp8");
        FAIL() << "fp8 accepted";
    } catch (const halo::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("'fp8'"), std::string::npos) << e.what();
    }
}

TEST(FeatureType, EveryHalfRoundTrips)
{
    for (std::uint32_t h = 0; h < 0x10000u; ++h) {
        const auto bits = static_cast<std::uint16_t>(h);
        const float f = halo::half_bits_to_float(bits);
        if (std::isnan(f)) {
            EXPECT_EQ(bits & 0x7C00u, 0x7C00u);
            EXPECT_TRUE(std::isnan(halo::half_bits_to_float(halo::float_to_half_bits(f))));
            continue;
        }
        ASSERT_EQ(halo::float_to_half_bits(f), bits) << "half 0x" << std::hex << h;
    }
    EXPECT_EQ(halo::half_bits_to_float(0x3C00), 1.0f);
    EXPECT_EQ(halo::half_bits_to_float(0x7BFF), 65504.0f);
    EXPECT_EQ(halo::half_bits_to_float(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(halo::half_bits_to_float(0x8400), -std::ldexp(1.0f, -14));
}

// Every fp16 bit pattern widened by half_bits_to_float and by decode_features (the store's
// vectorized loop) equals the value the format defines, computed another way: ldexp of the
// integer significand, all-ones exponents mapped by hand.
TEST(FeatureType, EveryHalfWidensToItsDefinedValue)
{
    std::vector<std::uint16_t> all(0x10000);
    for (std::uint32_t h = 0; h < 0x10000u; ++h) {
        all[h] = static_cast<std::uint16_t>(h);
    }
    std::vector<float> decoded(all.size());
    halo::decode_features(all, halo::FeatureType::fp16, decoded);
    for (std::uint32_t h = 0; h < 0x10000u; ++h) {
        const bool negative = (h & 0x8000u) != 0;
        const int exponent = static_cast<int>((h >> 10) & 0x1Fu);
        const int significand = static_cast<int>(h & 0x3FFu);
        std::uint32_t want = 0;
        if (exponent == 0x1F) {
            want = 0x7F800000u | (static_cast<std::uint32_t>(significand) << 13);
        } else {
            const float magnitude = exponent == 0 ? std::ldexp(float(significand), -24)
                                                  : std::ldexp(float(1024 + significand),
                                                               exponent - 25);
            want = std::bit_cast<std::uint32_t>(magnitude);
        }
        want |= negative ? 0x80000000u : 0u;
        ASSERT_EQ(std::bit_cast<std::uint32_t>(halo::half_bits_to_float(all[h])), want)
            << "half 0x" << std::hex << h;
        ASSERT_EQ(std::bit_cast<std::uint32_t>(decoded[h]), want) << "half 0x" << std::hex << h;
    }
}

TEST(FeatureType, HalfRoundsToNearestEven)
{
    // Midpoints between consecutive finite halves of one sign go to the even one.
    for (std::uint32_t h = 0; h < 0x7BFFu; h += 37) {
        const float lo = halo::half_bits_to_float(static_cast<std::uint16_t>(h));
        const float hi = halo::half_bits_to_float(static_cast<std::uint16_t>(h + 1));
        const double mid = (static_cast<double>(lo) + hi) / 2;
        const auto mid_f = static_cast<float>(mid);
        ASSERT_EQ(static_cast<double>(mid_f), mid) << "midpoint not representable";
        const std::uint16_t even =
            (h % 2 == 0) ? static_cast<std::uint16_t>(h) : static_cast<std::uint16_t>(h + 1);
        ASSERT_EQ(halo::float_to_half_bits(mid_f), even) << "half 0x" << std::hex << h;
        ASSERT_EQ(halo::float_to_half_bits(-mid_f), even | 0x8000u);
        // Just above / below the midpoint: the nearer neighbour.
        ASSERT_EQ(halo::float_to_half_bits(std::nextafter(mid_f, 1e30f)), h + 1);
        ASSERT_EQ(halo::float_to_half_bits(std::nextafter(mid_f, -1e30f)), h);
    }
    EXPECT_EQ(halo::float_to_half_bits(65519.0f), 0x7BFFu);
    EXPECT_EQ(halo::float_to_half_bits(65520.0f), 0x7C00u);  // the tie with 2^16 overflows
    EXPECT_EQ(halo::float_to_half_bits(-1e10f), 0xFC00u);
    EXPECT_EQ(halo::float_to_half_bits(std::numeric_limits<float>::infinity()), 0x7C00u);
    EXPECT_EQ(halo::float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000u);  // tie with 0: even
    EXPECT_EQ(halo::float_to_half_bits(std::ldexp(1.5f, -25)), 0x0001u);
    EXPECT_EQ(halo::float_to_half_bits(std::ldexp(1.0f, -30)), 0x0000u);
    EXPECT_EQ(halo::float_to_half_bits(-0.0f), 0x8000u);
    EXPECT_EQ(halo::float_to_half_bits(std::ldexp(1023.5f, -24)), 0x0400u);  // into the normals
    EXPECT_TRUE(std::isnan(
        halo::round_feature(std::numeric_limits<float>::quiet_NaN(), FeatureType::fp16)));
}

TEST(FeatureType, Bf16RoundsToNearestEven)
{
    EXPECT_EQ(halo::float_to_bf16_bits(1.0f), 0x3F80u);
    EXPECT_EQ(halo::bf16_bits_to_float(0x3F80u), 1.0f);
    // 1 + 2^-8 is the midpoint of 1 and 1 + 2^-7: even (1). 1 + 3 * 2^-8: even (1 + 2^-6).
    EXPECT_EQ(halo::float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80u);
    EXPECT_EQ(halo::float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82u);
    EXPECT_EQ(halo::float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80u);
    EXPECT_EQ(halo::float_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xFF80u);
    EXPECT_TRUE(std::isnan(
        halo::round_feature(std::numeric_limits<float>::quiet_NaN(), FeatureType::bf16)));
}

TEST(FeatureType, RandomValuesLandOnTheNearestNeighbour)
{
    const auto xs = halo::testing::random_floats(200000, 42, -70000.0f, 70000.0f);
    auto small = halo::testing::random_floats(200000, 43, -1e-3f, 1e-3f);
    std::vector<float> all(xs);
    all.insert(all.end(), small.begin(), small.end());
    for (const FeatureType t : {FeatureType::fp16, FeatureType::bf16}) {
        const bool half = t == FeatureType::fp16;
        for (const float v : all) {
            const float r = halo::round_feature(v, t);
            if (half && std::abs(v) >= 65520.0f) {
                ASSERT_TRUE(std::isinf(r)) << v;
                continue;
            }
            // r's neighbours in the format: no representable value is nearer to v.
            const std::uint16_t bits =
                half ? halo::float_to_half_bits(v) : halo::float_to_bf16_bits(v);
            const auto widen = [&](std::uint16_t b) {
                return half ? halo::half_bits_to_float(b) : halo::bf16_bits_to_float(b);
            };
            ASSERT_EQ(widen(bits), r);
            const double err = std::abs(static_cast<double>(r) - v);
            for (const int step : {-1, 1}) {
                const auto nb = static_cast<std::uint16_t>(bits + step);
                const float n = widen(nb);
                if ((nb & 0x7FFFu) == 0x7FFFu || std::isinf(n) || std::isnan(n) ||
                    (std::signbit(n) != std::signbit(r) && r != 0.0f)) {
                    continue;
                }
                ASSERT_LE(err, std::abs(static_cast<double>(n) - v)) << v << " -> " << r;
            }
        }
    }
    std::vector<float> copy(all.begin(), all.begin() + 1000);
    halo::round_features(copy, FeatureType::bf16);
    for (std::size_t i = 0; i < copy.size(); ++i) {
        ASSERT_EQ(copy[i], halo::round_feature(all[i], FeatureType::bf16));
    }
}

TEST(FeatureType, LaneColumnsNeedAlignedRowsOfXAndY)
{
    using halo::cuda::detail::lane_columns;
    alignas(16) static float buffer[64];
    const float* x = buffer;
    // fp32: 4 columns per lane.
    EXPECT_EQ(lane_columns(FeatureType::fp32, x, 8, buffer + 4, 4, 4), 4);
    EXPECT_EQ(lane_columns(FeatureType::fp32, x, 8, buffer + 4, 4, 6), 1);
    // fp16/bf16: 8 columns of x (16 bytes) per lane; y still needs 16-byte row starts.
    EXPECT_EQ(lane_columns(FeatureType::fp16, x, 8, buffer, 4, 8), 8);
    EXPECT_EQ(lane_columns(FeatureType::bf16, x, 16, buffer, 12, 16), 8);
    EXPECT_EQ(lane_columns(FeatureType::fp16, x, 12, buffer, 4, 8), 1);  // x.ld
    EXPECT_EQ(lane_columns(FeatureType::fp16, x, 8, buffer, 6, 8), 1);   // y.ld
    EXPECT_EQ(lane_columns(FeatureType::fp16, x, 8, buffer, 4, 12), 1);  // width
    EXPECT_EQ(lane_columns(FeatureType::fp16, buffer + 1, 8, buffer, 4, 8), 1);
    EXPECT_EQ(lane_columns(FeatureType::fp16, x, 8, buffer + 2, 4, 8), 1);
}

}  // namespace
