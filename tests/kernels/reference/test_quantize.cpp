// INT8 feature quantization (include/halo/quantize/quantize.hpp): the parameters of Eq. 1-2 per
// column, the error bound |dequant(quant(x)) - x| <= scale / 2, the checks that reject corrupt
// scales and zero points with messages naming the column and value, and the CPU reference of the
// per-row packing that the int8 halo exchange uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "halo/core/dense.hpp"
#include "halo/core/error.hpp"
#include "halo/quantize/quantize.hpp"
#include "halo_test.hpp"

namespace {

using halo::QuantParams;
using halo::testing::tolerance;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The bound of the format: round to nearest gives at most half a step. The division x / scale and
// the product scale * (q - z) each round once in float, which can move the result by a few ulps
// of max(|x|, step): the slack below, far smaller than a step for any real column.
double bound(float x, float scale)
{
    return 0.5 * scale + tolerance<float>(4, std::abs(x) + scale);
}

// Throws unless `body` throws halo::InputError whose message contains every one of `parts`.
template <typename Body>
void expect_input_error(Body body, const std::vector<std::string>& parts)
{
    try {
        body();
        ADD_FAILURE() << "no halo::InputError thrown";
    } catch (const halo::InputError& e) {
        for (const auto& part : parts) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
                << "message '" << e.what() << "' lacks '" << part << "'";
        }
    }
}

TEST(Int8Params, RangesWidenedToZeroGiveInRangeZeroPoints)
{
    // [-1, 1]: 255 steps of 2/255 (rounded up to a float), zero point round(-128 + 1 / scale):
    // 1 / scale is a hair below 127.5, so the zero point is round(-0.5 - hair) = -1.
    auto p = halo::int8_params(-1.0f, 1.0f);
    EXPECT_NEAR(p.scale, 2.0 / 255.0, 1e-9);
    EXPECT_GE(static_cast<double>(p.scale) * 255.0, 2.0);
    EXPECT_EQ(p.zero_point, -1);
    // Non-negative columns (bag-of-words, post-ReLU): the range starts at 0, zero point -128.
    p = halo::int8_params(0.0f, 1.0f);
    EXPECT_EQ(p.zero_point, -128);
    p = halo::int8_params(0.5f, 1.0f);
    EXPECT_EQ(p.zero_point, -128) << "the range [0.5, 1] is widened to [0, 1]";
    EXPECT_GE(static_cast<double>(p.scale) * 255.0, 1.0);
    // Non-positive columns: zero at the top level.
    p = halo::int8_params(-2.0f, -1.0f);
    EXPECT_EQ(p.zero_point, 127);
    // All zeros: any positive scale represents the column; 0 maps to a level that gives 0 back.
    p = halo::int8_params(0.0f, 0.0f);
    EXPECT_EQ(p.scale, 1.0f);
    EXPECT_EQ(halo::dequantize_int8(halo::quantize_int8(0.0f, p), p), 0.0f);
    // The widest float range still has a finite scale.
    p = halo::int8_params(std::numeric_limits<float>::lowest(), std::numeric_limits<float>::max());
    EXPECT_TRUE(std::isfinite(p.scale));
    EXPECT_GE(p.zero_point, halo::kInt8Min);
    EXPECT_LE(p.zero_point, halo::kInt8Max);
    // Tiny ranges keep a normal scale.
    p = halo::int8_params(0.0f, 1e-40f);
    EXPECT_GE(p.scale, std::numeric_limits<float>::min());
    // Non-finite bounds poison the scale instead of hiding the error.
    EXPECT_TRUE(std::isnan(halo::int8_params(kNaN, 1.0f).scale));
    EXPECT_TRUE(std::isnan(halo::int8_params(0.0f, kInf).scale));
}

TEST(Int8Params, EveryZeroPointIsInRangeAndZeroIsExact)
{
    const auto lows = halo::testing::random_floats(2000, 11, -100.0f, 100.0f);
    const auto widths = halo::testing::random_floats(2000, 12, 0.0f, 50.0f);
    for (std::size_t k = 0; k < lows.size(); ++k) {
        const float lo = lows[k];
        const float hi = lo + widths[k];
        const auto p = halo::int8_params(lo, hi);
        ASSERT_GT(p.scale, 0.0f) << "[" << lo << ", " << hi << "]";
        ASSERT_GE(p.zero_point, halo::kInt8Min) << "[" << lo << ", " << hi << "]";
        ASSERT_LE(p.zero_point, halo::kInt8Max) << "[" << lo << ", " << hi << "]";
        ASSERT_EQ(halo::dequantize_int8(halo::quantize_int8(0.0f, p), p), 0.0f)
            << "0 is not exact for [" << lo << ", " << hi << "]";
    }
}

TEST(Int8Values, RoundsToNearestTiesToEvenAndClamps)
{
    const QuantParams p{0.5f, 3};
    EXPECT_EQ(halo::quantize_int8(1.0f, p), 5);   // 2 steps above the zero point
    EXPECT_EQ(halo::quantize_int8(1.2f, p), 5);   // 2.4 steps -> 2
    EXPECT_EQ(halo::quantize_int8(1.3f, p), 6);   // 2.6 steps -> 3
    EXPECT_EQ(halo::quantize_int8(1.25f, p), 5);  // 2.5 steps -> 2 (even)
    EXPECT_EQ(halo::quantize_int8(1.75f, p), 7);  // 3.5 steps -> 4 (even)
    EXPECT_EQ(halo::quantize_int8(1000.0f, p), 127);
    EXPECT_EQ(halo::quantize_int8(-1000.0f, p), -128);
    EXPECT_EQ(halo::quantize_int8(kNaN, p), -128);
    EXPECT_EQ(halo::dequantize_int8(5, p), 1.0f);
    EXPECT_EQ(halo::dequantize_int8(-128, p), -65.5f);
}

// Columns of many shapes: symmetric, positive only, negative only, constant, tiny and huge
// magnitudes, exact zeros mixed in; every element within scale/2 of its original, zeros exact.
// The GPU gathers' form (a byte placed in the float 2^23, the biased zero point subtracted) gives
// dequantize_int8's bits for every value, zero point, byte position and these scales.
TEST(Int8Values, ByteFormEqualsDequantizeBitForBit)
{
    const float scales[] = {1.0f, FLT_MIN, 3.0e-3f, 0.0078431377f, 1.7f, 6.5e4f, 3.0e38f};
    int checked = 0;
    for (const float scale : scales) {
        for (std::int32_t zero = halo::kInt8Min; zero <= halo::kInt8Max; ++zero) {
            const QuantParams p{scale, zero};
            const float bias = halo::int8_bias(zero);
            for (std::int32_t q = halo::kInt8Min; q <= halo::kInt8Max; ++q) {
                // q in byte (q & 3) of the word, other bytes different values
                const auto b = static_cast<std::uint32_t>(static_cast<std::uint8_t>(q));
                const int at = q & 3;
                std::uint32_t word = 0x5A2C7F81u;
                word = (word & ~(0xFFu << (8 * at))) | (b << (8 * at));
                const std::uint32_t offset = word ^ 0x80808080u;
                const float got = at == 0   ? halo::dequantize_int8_byte<0>(offset, bias, scale)
                                  : at == 1 ? halo::dequantize_int8_byte<1>(offset, bias, scale)
                                  : at == 2 ? halo::dequantize_int8_byte<2>(offset, bias, scale)
                                            : halo::dequantize_int8_byte<3>(offset, bias, scale);
                const float want = halo::dequantize_int8(q, p);
                std::uint32_t gb = 0;
                std::uint32_t wb = 0;
                std::memcpy(&gb, &got, 4);
                std::memcpy(&wb, &want, 4);
                ASSERT_EQ(gb, wb) << "q " << q << " zero point " << zero << " scale " << scale
                                  << " byte " << at << ": " << got << " against " << want;
                ++checked;
            }
        }
    }
    EXPECT_EQ(checked, 7 * 256 * 256);
}

TEST(QuantizeColumns, ErrorAtMostHalfAStepPerElement)
{
    constexpr std::int64_t rows = 3000;
    const std::vector<std::pair<float, float>> ranges = {
        {-1.0f, 1.0f}, {0.0f, 1.0f},    {0.25f, 0.75f}, {-3.0f, -2.0f}, {-1e-6f, 3e-6f},
        {-1e6f, 2e5f}, {-1e30f, 1e30f}, {5.0f, 5.0f},   {0.0f, 0.0f},   {-7.0f, 0.0f},
    };
    const std::int64_t cols = static_cast<std::int64_t>(ranges.size());
    const std::int64_t ld = cols + 3;
    std::vector<float> x(static_cast<std::size_t>(rows * ld), kNaN);
    const auto u =
        halo::testing::random_floats(static_cast<std::size_t>(rows * cols), 21, 0.0f, 1.0f);
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < cols; ++j) {
            const auto [lo, hi] = ranges[j];
            // Every 7th element an exact zero where the range holds one.
            const bool zero = i % 7 == 0 && lo <= 0.0f && hi >= 0.0f;
            x[i * ld + j] = zero ? 0.0f : lo + (hi - lo) * u[i * cols + j];
        }
    }
    const halo::DenseView<const float> xv{x.data(), rows, cols, ld};
    const auto q = halo::quantize_columns(xv, "test features");
    ASSERT_NO_THROW(halo::validate(q, "test features"));
    ASSERT_EQ(q.data.size(), static_cast<std::size_t>(rows * cols));
    std::vector<float> back(static_cast<std::size_t>(rows * cols), kNaN);
    halo::dequantize(q.view(), halo::dense_view(back.data(), rows, cols));
    for (std::int64_t j = 0; j < cols; ++j) {
        double worst = 0.0;
        for (std::int64_t i = 0; i < rows; ++i) {
            const float orig = x[i * ld + j];
            const float got = back[i * cols + j];
            const double err = std::abs(static_cast<double>(got) - orig);
            ASSERT_LE(err, bound(orig, q.scale[j]))
                << "column " << j << " row " << i << ": " << orig << " came back as " << got
                << " (scale " << q.scale[j] << ", zero point " << q.zero_point[j] << ")";
            if (orig == 0.0f) {
                ASSERT_EQ(got, 0.0f) << "column " << j << " row " << i << ": zero not exact";
            }
            worst = std::max(worst, err / q.scale[j]);
        }
        // Random values land anywhere between levels: the bound is reached, not loose (a floor
        // rounding as in Eq. 1 would reach a whole step and fail above).
        const auto [lo, hi] = ranges[j];
        if (lo != hi) {
            EXPECT_GT(worst, 0.45) << "column " << j;
        }
    }
}

TEST(QuantizeColumns, NonFiniteFeaturesAreRejectedWithTheirPosition)
{
    std::vector<float> x = {0.0f, 1.0f, 2.0f, 3.0f, kNaN, 5.0f};
    expect_input_error(
        [&] { halo::quantize_columns(halo::dense_view<const float>(x.data(), 2, 3), "feat.h5"); },
        {"feat.h5", "row 1", "column 1", "nan"});
    x[4] = -kInf;
    expect_input_error(
        [&] { halo::quantize_columns(halo::dense_view<const float>(x.data(), 2, 3), "feat.h5"); },
        {"row 1", "column 1", "-inf"});
}

TEST(QuantizeColumns, EmptyMatricesHaveValidParameters)
{
    const auto q = halo::quantize_columns(halo::DenseView<const float>{nullptr, 0, 4, 4}, "empty");
    EXPECT_EQ(q.scale.size(), 4u);
    EXPECT_NO_THROW(halo::validate(q, "empty"));
}

halo::QuantizedMatrix small_matrix()
{
    std::vector<float> x = {-1.0f, 0.0f, 2.0f, 0.5f, 1.0f, 4.0f, -3.0f, 0.25f};
    return halo::quantize_columns(halo::dense_view<const float>(x.data(), 2, 4), "small");
}

TEST(ValidateQuantized, RejectsCorruptScalesNamingColumnAndValue)
{
    ASSERT_NO_THROW(halo::validate(small_matrix(), "features.h5"));
    const std::vector<std::pair<float, std::string>> bad = {
        {0.0f, "is 0;"}, {-0.5f, "is -0.5;"}, {kNaN, "is nan;"}, {kInf, "is inf;"}};
    for (const auto& [value, text] : bad) {
        auto q = small_matrix();
        q.scale[2] = value;
        expect_input_error([&] { halo::validate(q, "features.h5"); },
                           {"features.h5", "scale of column 2", text, "finite and positive"});
    }
}

TEST(ValidateQuantized, RejectsZeroPointsOutsideInt8)
{
    for (const std::int32_t z : {128, -129, 1000, -100000}) {
        auto q = small_matrix();
        q.zero_point[3] = z;
        expect_input_error([&] { halo::validate(q, "features.h5"); },
                           {"features.h5", "zero point of column 3 is " + std::to_string(z),
                            "outside the int8 range [-128, 127]"});
    }
    auto q = small_matrix();
    q.zero_point[0] = 127;
    q.zero_point[1] = -128;
    EXPECT_NO_THROW(halo::validate(q, "features.h5")) << "the int8 bounds themselves are valid";
}

TEST(ValidateQuantized, RejectsMissingParametersAndWrongSizes)
{
    auto q = small_matrix();
    q.zero_point.pop_back();
    expect_input_error([&] { halo::validate(q, "f.h5"); }, {"f.h5", "3 zero points for 4 columns"});
    q = small_matrix();
    q.zero_point.clear();
    expect_input_error([&] { halo::validate(q, "f.h5"); }, {"0 zero points for 4 columns"});
    q = small_matrix();
    q.scale.resize(5, 1.0f);
    expect_input_error([&] { halo::validate(q, "f.h5"); }, {"5 scales for 4 columns"});
    q = small_matrix();
    q.data.pop_back();
    expect_input_error([&] { halo::validate(q, "f.h5"); }, {"7 values, expected 2 x 4 = 8"});

    // Views (e.g. of a file's datasets) without a zero-point or scale array.
    q = small_matrix();
    auto v = q.view();
    v.zero_point = nullptr;
    expect_input_error([&] { halo::validate(v, "f.h5"); }, {"4 columns has no zero points"});
    v = q.view();
    v.scale = nullptr;
    expect_input_error([&] { halo::validate(v, "f.h5"); }, {"4 columns has no scales"});
    v = q.view();
    v.ld = 3;
    expect_input_error([&] { halo::validate(v, "f.h5"); }, {"leading dimension 3"});
}

// The packed-row format: records of round_up(cols, 4) + 8 bytes, values then zero padding, then
// the row's scale and zero point.
TEST(PackRowsReference, RecordLayoutAndRoundTrip)
{
    EXPECT_EQ(halo::int8_record_bytes(0), 8);
    EXPECT_EQ(halo::int8_record_bytes(1), 12);
    EXPECT_EQ(halo::int8_record_bytes(4), 12);
    EXPECT_EQ(halo::int8_record_bytes(33), 44);
    EXPECT_EQ(halo::int8_record_bytes(256), 264);

    for (const std::int64_t cols : {1, 3, 4, 33, 128}) {
        SCOPED_TRACE(testing::Message() << cols << " columns");
        constexpr std::int64_t rows = 50;
        const std::int64_t ld = cols + 5;
        auto x = halo::testing::random_floats(static_cast<std::size_t>(rows * ld), 40 + cols, -3.0f,
                                              2.0f);
        // Row 7 positive only, row 8 constant, row 9 zeros: the range rules per row.
        for (std::int64_t j = 0; j < cols; ++j) {
            x[7 * ld + j] = std::abs(x[7 * ld + j]) + 1.0f;
            x[8 * ld + j] = 0.75f;
            x[9 * ld + j] = 0.0f;
        }
        const halo::DenseView<const float> xv{x.data(), rows, cols, ld};
        // Rows in a scrambled order, one twice: what a send list looks like.
        const std::vector<std::int32_t> send = {9, 0, 7, 8, 49, 7, 23};
        const auto count = static_cast<std::int64_t>(send.size());
        const auto record = halo::int8_record_bytes(cols);
        std::vector<std::uint8_t> buf(static_cast<std::size_t>(count * record), 0xAB);
        halo::pack_rows_int8_reference(xv, send.data(), count, buf.data());
        std::vector<float> y(static_cast<std::size_t>(count * (cols + 1)), kNaN);
        halo::unpack_rows_int8_reference(buf.data(), {y.data(), count, cols, cols + 1});
        for (std::int64_t r = 0; r < count; ++r) {
            const auto* rec = buf.data() + r * record;
            float scale = 0.0f;
            std::int32_t zero = 0;
            std::memcpy(&scale, rec + record - 8, 4);
            std::memcpy(&zero, rec + record - 4, 4);
            ASSERT_GT(scale, 0.0f);
            ASSERT_GE(zero, halo::kInt8Min);
            ASSERT_LE(zero, halo::kInt8Max);
            for (std::int64_t b = cols; b < record - 8; ++b) {
                ASSERT_EQ(rec[b], 0) << "padding byte " << b << " of record " << r;
            }
            for (std::int64_t j = 0; j < cols; ++j) {
                const float orig = x[send[r] * ld + j];
                const float got = y[r * (cols + 1) + j];
                ASSERT_LE(std::abs(static_cast<double>(got) - orig), bound(orig, scale))
                    << "record " << r << " (row " << send[r] << ") column " << j;
            }
            ASSERT_TRUE(std::isnan(y[r * (cols + 1) + cols])) << "padding of y written";
        }
        // The same row packed twice gives the same bytes; a null row list packs rows 0, 1, ...
        EXPECT_EQ(std::memcmp(buf.data() + 2 * record, buf.data() + 5 * record, record), 0);
        std::vector<std::uint8_t> first(static_cast<std::size_t>(record), 0);
        halo::pack_rows_int8_reference(xv, nullptr, 1, first.data());
        EXPECT_EQ(std::memcmp(first.data(), buf.data() + 1 * record, record), 0) << "row 0";
        // Constant and zero rows come back exactly.
        for (std::int64_t j = 0; j < cols; ++j) {
            EXPECT_EQ(y[0 * (cols + 1) + j], 0.0f);
            EXPECT_NEAR(y[3 * (cols + 1) + j], 0.75f, 0.75f / 255.0f);
        }
    }
}

TEST(PackRowsReference, NonFiniteRowsUnpackToNaN)
{
    std::vector<float> x = {1.0f, 2.0f, 3.0f, kInf, 5.0f, 6.0f};
    std::vector<std::uint8_t> buf(static_cast<std::size_t>(2 * halo::int8_record_bytes(3)));
    halo::pack_rows_int8_reference(halo::dense_view<const float>(x.data(), 2, 3), nullptr, 2,
                                   buf.data());
    std::vector<float> y(6, 0.0f);
    halo::unpack_rows_int8_reference(buf.data(), halo::dense_view(y.data(), 2, 3));
    for (int j = 0; j < 3; ++j) {
        EXPECT_TRUE(std::isfinite(y[j])) << "row 0 is finite";
        EXPECT_TRUE(std::isnan(y[3 + j])) << "row 1 holds an infinity: every value must be NaN";
    }
}

}  // namespace
