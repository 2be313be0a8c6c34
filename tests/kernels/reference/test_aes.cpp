// AES-SpMM's sampling rule and CPU reference (include/halo/kernels_host/aes.hpp), on the CPU. The
// rule is checked against Table 1 and Eq. 3 as written in the paper (boundaries of R, the
// constraints N >= 1 and sample_cnt <= W, start indices), against properties that follow from them
// (positions inside the row, runs of N consecutive nonzeros, count = min(row_nnz, W) for W a power
// of two, repeats where runs overlap), and the reference SpMM against independent loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels_host/aes.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo/quantize/quantize.hpp"
#include "halo_test.hpp"
#include "spmm_fixtures.hpp"

namespace {

using halo::AesOptions;
using halo::AesScaling;
using halo::testing::csr_with_rows;
using halo::testing::HostMatrix;
using halo::testing::kNaN;
using halo::testing::random_matrix;
using halo::testing::tolerance;

const std::vector<std::int64_t> kWidths = {16, 32, 64, 128, 256, 512, 1024};

// Table 1 read directly, one line per row of the table: R <= bound -> (W / div, div).
struct TableLine {
    std::int64_t r_bound;  // 0: no bound (the last line)
    std::int64_t divisor;
};
const std::vector<TableLine> kTable1 = {{2, 4}, {36, 8}, {54, 16}, {0, 32}};

TEST(AesRule, Table1BoundariesAtW128)
{
    constexpr std::int64_t w = 128;
    struct Case {
        std::int64_t nnz, run, samples;
    };
    const std::vector<Case> cases = {
        {0, 0, 1},           {1, 1, 1},       {w, w, 1},  // R <= 1: the whole row
        {w + 1, 32, 4},      {2 * w, 32, 4},              // 1 < R <= 2
        {2 * w + 1, 16, 8},  {36 * w, 16, 8},             // 2 < R <= 36
        {36 * w + 1, 8, 16}, {54 * w, 8, 16},             // 36 < R <= 54
        {54 * w + 1, 4, 32}, {100000, 4, 32},             // R > 54
    };
    for (const auto& c : cases) {
        const auto s = halo::aes_row_strategy(c.nnz, w);
        EXPECT_EQ(s.run, c.run) << "row_nnz " << c.nnz;
        EXPECT_EQ(s.samples, c.samples) << "row_nnz " << c.nnz;
    }
}

TEST(AesRule, ConstraintsForSmallAndUnevenWidths)
{
    // W = 16, R > 54: W / 32 = 0 -> N = 1; sample_cnt 32 > W -> 16.
    auto s = halo::aes_row_strategy(16 * 54 + 1, 16);
    EXPECT_EQ(s.run, 1);
    EXPECT_EQ(s.samples, 16);
    // W = 24 (not a power of two): N = floor(W / div), so N * sample_cnt may fall below W.
    s = halo::aes_row_strategy(24 * 2, 24);
    EXPECT_EQ(s.count(), 24);  // N = 6, 4 samples
    s = halo::aes_row_strategy(24 * 40, 24);
    EXPECT_EQ(s.run, 1);  // 24 / 16 = 1
    EXPECT_EQ(s.samples, 16);
    EXPECT_EQ(s.count(), 16);
    s = halo::aes_row_strategy(24 * 100, 24);
    EXPECT_EQ(s.run, 1);
    EXPECT_EQ(s.samples, 24);  // min(32, W)
}

// Every (row_nnz, W): the table's line, the count, and the positions as Eq. 3 defines them,
// computed here independently of the library's helpers.
TEST(AesRule, PositionsFollowEq3AndStayInTheRow)
{
    std::vector<std::int64_t> widths = kWidths;
    widths.insert(widths.end(), {17, 24, 31, 100, 1000});
    for (const auto w : widths) {
        for (std::int64_t nnz = 0; nnz <= 60 * w; nnz += (nnz < 3 * w ? 1 : w / 2 + 1)) {
            SCOPED_TRACE(testing::Message() << "W " << w << ", row_nnz " << nnz);
            const auto s = halo::aes_row_strategy(nnz, w);
            const auto pos = halo::aes_sample_positions(nnz, w);
            ASSERT_EQ(static_cast<std::int64_t>(pos.size()), s.count());
            ASSERT_LE(s.count(), std::max<std::int64_t>(w, 0));
            if (nnz <= w) {
                ASSERT_EQ(s.count(), nnz);
                for (std::int64_t k = 0; k < nnz; ++k) {
                    ASSERT_EQ(pos[k], k) << "exact rows keep CSR order";
                }
                continue;
            }
            std::int64_t divisor = 0;
            for (const auto& line : kTable1) {
                if (line.r_bound == 0 || nnz <= line.r_bound * w) {
                    divisor = line.divisor;
                    break;
                }
            }
            const std::int64_t run = std::max<std::int64_t>(1, w / divisor);
            const std::int64_t samples = std::min(divisor, w);
            ASSERT_EQ(s.run, run);
            ASSERT_EQ(s.samples, samples);
            if ((w & (w - 1)) == 0) {
                ASSERT_EQ(s.count(), std::min(nnz, w)) << "W a power of two";
            }
            for (std::int64_t i = 0; i < samples; ++i) {
                const std::int64_t start = (i * 1429) % (nnz - run + 1);
                for (std::int64_t j = 0; j < run; ++j) {
                    // Algorithm 1 line 11: element j of sample i goes to sh[i + j * sample_cnt].
                    ASSERT_EQ(pos[i + j * samples], start + j)
                        << "sample " << i << ", element " << j;
                }
            }
            for (const auto p : pos) {
                ASSERT_GE(p, 0);
                ASSERT_LT(p, nnz);
            }
        }
    }
}

// Runs may overlap: Eq. 3 does not prevent it. Row of 33 nonzeros at W = 32: N = 8,
// sample_cnt = 4, modulus 26, starts 0, 1429 % 26 = 25, 2858 % 26 = 24, 4287 % 26 = 23: the runs
// [0, 8), [25, 33), [24, 32), [23, 31) cover 18 distinct nonzeros with 32 slots.
TEST(AesRule, OverlappingRunsRepeatNonzeros)
{
    const auto pos = halo::aes_sample_positions(33, 32);
    ASSERT_EQ(pos.size(), 32u);
    const std::vector<std::int64_t> starts = {pos[0], pos[1], pos[2], pos[3]};
    EXPECT_EQ(starts, (std::vector<std::int64_t>{0, 25, 24, 23}));
    const std::set<std::int64_t> distinct(pos.begin(), pos.end());
    EXPECT_EQ(distinct.size(), 18u);

    // The statistics count both.
    const auto a = csr_with_rows({33, 5, 0}, 40);
    const auto stats = halo::aes_sample_stats(a.view(), a.view().all_rows(), 32);
    EXPECT_EQ(stats.rows, 3);
    EXPECT_EQ(stats.sampled_rows, 1);
    EXPECT_EQ(stats.nonzeros, 38);
    EXPECT_EQ(stats.slots, 32 + 5);
    EXPECT_EQ(stats.distinct, 18 + 5);
}

// Where the samples land. Below 1429 * (sample_cnt - 1) the modulus of Eq. 3 wraps and the runs
// spread over the whole row. Beyond it Eq. 3 never wraps: start_i = 1429 * i, so the sample of a
// longer row lies in its first 1429 * (sample_cnt - 1) + N positions (at most 44,299 + N) and the
// rest of the row is never read. That is Eq. 3 as written (current_ind is the sample index of
// Algorithm 1); docs/AES.md notes it.
TEST(AesRule, WhereSamplesLandInMediumAndVeryLongRows)
{
    {
        const auto pos = halo::aes_sample_positions(3000, 128);  // N = 16, 8 samples, modulus 2985
        ASSERT_EQ(pos.size(), 128u);
        const auto [lo, hi] = std::minmax_element(pos.begin(), pos.end());
        EXPECT_EQ(*lo, 0);
        EXPECT_GT(*hi, 2700) << "the runs reach the last tenth of the row";
    }
    constexpr std::int64_t nnz = 100000;
    for (const auto w : kWidths) {
        const auto s = halo::aes_row_strategy(nnz, w);
        const auto pos = halo::aes_sample_positions(nnz, w);
        ASSERT_EQ(static_cast<std::int64_t>(pos.size()), w);
        const auto [lo, hi] = std::minmax_element(pos.begin(), pos.end());
        EXPECT_EQ(*lo, 0) << "W " << w;
        EXPECT_EQ(*hi, 1429 * (s.samples - 1) + s.run - 1) << "W " << w;
        const std::set<std::int64_t> distinct(pos.begin(), pos.end());
        EXPECT_EQ(static_cast<std::int64_t>(distinct.size()), w) << "no overlap without a wrap";
    }
}

TEST(AesOptions, WidthAndScalingAreChecked)
{
    for (const std::int64_t w : {15, 0, -1, 1025, 4096}) {
        try {
            halo::validate(AesOptions{w, AesScaling::sample_sum});
            ADD_FAILURE() << "W " << w << " accepted";
        } catch (const halo::InputError& e) {
            EXPECT_NE(std::string(e.what()).find("W = " + std::to_string(w)), std::string::npos)
                << e.what();
        }
    }
    EXPECT_NO_THROW(halo::validate(AesOptions{16, AesScaling::rescaled}));
    EXPECT_NO_THROW(halo::validate(AesOptions{1024, AesScaling::sample_sum}));
    EXPECT_EQ(halo::parse_aes_scaling("sample_sum"), AesScaling::sample_sum);
    EXPECT_EQ(halo::parse_aes_scaling("rescaled"), AesScaling::rescaled);
    EXPECT_EQ(halo::to_string(AesScaling::rescaled), "rescaled");
    EXPECT_THROW(halo::parse_aes_scaling("unbiased"), halo::InputError);
}

// Rows shorter and longer than every W, an empty row, valued.
halo::Csr mixed_rows(std::uint64_t seed)
{
    return csr_with_rows({0, 1, 15, 16, 17, 33, 64, 200, 513, 1025, 3000, 0, 70000}, 5000, true,
                         seed);
}

// sum over the given positions in double: an independent evaluation of the sampled product.
double sampled_sum(const halo::Csr& a, std::int64_t i, const std::vector<std::int64_t>& pos,
                   const HostMatrix& x, std::int64_t j)
{
    double s = 0.0;
    for (const auto p : pos) {
        const auto k = a.indptr[i] + p;
        s += static_cast<double>(a.values[k]) * x(a.indices[k], j);
    }
    return s;
}

TEST(AesReference, MatchesAnIndependentSampledSum)
{
    const auto a = mixed_rows(7);
    const std::int64_t dim = 5;
    const auto x = random_matrix(a.num_cols, dim, dim + 2, 8);
    for (const auto w : kWidths) {
        for (const auto scaling : {AesScaling::sample_sum, AesScaling::rescaled}) {
            SCOPED_TRACE(testing::Message() << "W " << w << ", " << halo::to_string(scaling));
            HostMatrix y(a.num_rows, dim, dim + 1);
            halo::reference::aes_spmm(a.view(), x.cview(), y.view(), a.view().all_rows(),
                                      {w, scaling});
            for (std::int64_t i = 0; i < a.num_rows; ++i) {
                const auto nnz = a.row_nnz(i);
                const auto pos = halo::aes_sample_positions(nnz, w);
                const double factor = scaling == AesScaling::rescaled && nnz > w
                                          ? static_cast<double>(nnz) / pos.size()
                                          : 1.0;
                for (std::int64_t j = 0; j < dim; ++j) {
                    const double want = factor * sampled_sum(a, i, pos, x, j);
                    // |a| < 1, |x| < 1: a sum of pos.size() products, scaled by factor.
                    const double tol = tolerance<float>(
                        4, factor * std::max<double>(1.0, static_cast<double>(pos.size())));
                    ASSERT_NEAR(y(i, j), want, tol) << "(" << i << ", " << j << ")";
                }
                ASSERT_TRUE(std::isnan(y(i, dim))) << "padding of row " << i << " written";
            }
        }
    }
}

// W at least the longest row: every row exact, the same as the plain reference.
TEST(AesReference, RowsWithinWAreExact)
{
    const auto a = csr_with_rows({0, 3, 16, 40, 1000, 1024, 7}, 300, true, 31);
    const std::int64_t dim = 9;
    const auto x = random_matrix(a.num_cols, dim, dim, 32);
    HostMatrix want(a.num_rows, dim);
    halo::reference::spmm(a.view(), x.cview(), want.view());
    for (const auto scaling : {AesScaling::sample_sum, AesScaling::rescaled}) {
        HostMatrix y(a.num_rows, dim);
        halo::reference::aes_spmm(a.view(), x.cview(), y.view(), a.view().all_rows(),
                                  {1024, scaling});
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            for (std::int64_t j = 0; j < dim; ++j) {
                ASSERT_NEAR(y(i, j), want(i, j),
                            tolerance<float>(4, std::max<double>(1.0, a.row_nnz(i))))
                    << "(" << i << ", " << j << ")";
            }
        }
    }
    // Empty rows are exact zeros.
    HostMatrix y(a.num_rows, dim);
    halo::reference::aes_spmm(a.view(), x.cview(), y.view(), a.view().all_rows(), {16, {}});
    for (std::int64_t j = 0; j < dim; ++j) {
        EXPECT_EQ(y(0, j), 0.0f);
    }
}

// rescaled = sample_sum * row_nnz / sampled, bit for bit (one product by the factor).
TEST(AesReference, RescaledIsTheSampleSumTimesTheFactor)
{
    const auto a = mixed_rows(41);
    const std::int64_t dim = 3;
    const auto x = random_matrix(a.num_cols, dim, dim, 42);
    for (const auto w : {16, 128, 1024}) {
        HostMatrix plain(a.num_rows, dim);
        HostMatrix scaled(a.num_rows, dim);
        halo::reference::aes_spmm(a.view(), x.cview(), plain.view(), a.view().all_rows(),
                                  {w, AesScaling::sample_sum});
        halo::reference::aes_spmm(a.view(), x.cview(), scaled.view(), a.view().all_rows(),
                                  {w, AesScaling::rescaled});
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            const auto nnz = a.row_nnz(i);
            const auto s = halo::aes_row_strategy(nnz, w);
            const float f = nnz > w ? static_cast<float>(nnz) / static_cast<float>(s.count()) : 1;
            for (std::int64_t j = 0; j < dim; ++j) {
                ASSERT_EQ(scaled(i, j), plain(i, j) * f)
                    << "W " << w << " (" << i << ", " << j << ")";
            }
        }
    }
}

TEST(AesReference, RowsOutsideTheRangeAreUntouched)
{
    const auto a = mixed_rows(51);
    const auto x = random_matrix(a.num_cols, 4, 4, 52);
    HostMatrix y(a.num_rows, 4);
    halo::reference::aes_spmm(a.view(), x.cview(), y.view(), {3, 9}, {64, {}});
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        for (std::int64_t j = 0; j < 4; ++j) {
            EXPECT_EQ(std::isnan(y(i, j)), i < 3 || i >= 9) << "(" << i << ", " << j << ")";
        }
    }
}

// The int8 paths read dequantize_int8 values: the same bits as the fp32 path on the dequantized
// matrix; exact int8 SpMM is AES with every row exact.
TEST(AesReference, Int8FeaturesEqualFp32OnTheDequantizedMatrix)
{
    const auto a = mixed_rows(61);
    const std::int64_t dim = 6;
    const auto x = random_matrix(a.num_cols, dim, dim, 62);
    const auto q = halo::quantize_columns(x.cview(), "random features");
    HostMatrix xd(a.num_cols, dim);
    halo::dequantize(q.view(), xd.view());
    for (const auto w : {16, 256}) {
        for (const auto scaling : {AesScaling::sample_sum, AesScaling::rescaled}) {
            HostMatrix from_q(a.num_rows, dim);
            HostMatrix from_f(a.num_rows, dim);
            halo::reference::aes_spmm(a.view(), q.view(), from_q.view(), a.view().all_rows(),
                                      {w, scaling});
            halo::reference::aes_spmm(a.view(), xd.cview(), from_f.view(), a.view().all_rows(),
                                      {w, scaling});
            ASSERT_EQ(from_q.data, from_f.data) << "W " << w;
        }
    }
    HostMatrix exact(a.num_rows, dim);
    halo::reference::spmm_int8(a.view(), q.view(), exact.view(), a.view().all_rows());
    HostMatrix plain(a.num_rows, dim);
    halo::reference::spmm(a.view(), xd.cview(), plain.view());
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        for (std::int64_t j = 0; j < dim; ++j) {
            ASSERT_NEAR(exact(i, j), plain(i, j),
                        tolerance<float>(4, std::max<double>(1.0, a.row_nnz(i))))
                << "(" << i << ", " << j << ")";
        }
    }
}

}  // namespace
