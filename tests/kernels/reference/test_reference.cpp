// The CPU reference kernels are the oracle of every GPU test, so they are checked here against
// hand-computed results and against plain double-precision loops written independently.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels_host/dense_ops.hpp"
#include "halo/kernels_host/sddmm.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo_test.hpp"
#include "thread_count.hpp"

namespace {

using halo::testing::tolerance;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Row-major storage with a leading dimension, every element (padding included) set to `fill`.
struct HostMatrix {
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t ld = 0;
    std::vector<float> data;

    HostMatrix(std::int64_t r, std::int64_t c, std::int64_t l = -1, float fill = kNaN)
        : rows(r), cols(c), ld(l < 0 ? c : l), data(static_cast<std::size_t>(r * ld), fill)
    {
    }
    HostMatrix(std::int64_t r, std::int64_t c, std::initializer_list<float> values)
        : HostMatrix(r, c)
    {
        std::copy(values.begin(), values.end(), data.begin());
    }

    float& operator()(std::int64_t i, std::int64_t j) { return data[i * ld + j]; }
    float operator()(std::int64_t i, std::int64_t j) const { return data[i * ld + j]; }
    halo::DenseView<float> view() { return {data.data(), rows, cols, ld}; }
    halo::DenseView<const float> cview() const { return {data.data(), rows, cols, ld}; }
};

// 4 x 3, row 1 empty:
//   [ 2    0  -1 ]
//   [ 0    0   0 ]
//   [ 0  0.5   0 ]
//   [ 1    1   1 ]
halo::Csr small_csr(bool valued)
{
    halo::Csr a;
    a.num_rows = 4;
    a.num_cols = 3;
    a.indptr = {0, 2, 2, 3, 6};
    a.indices = {0, 2, 1, 0, 1, 2};
    if (valued) {
        a.values = {2.0f, -1.0f, 0.5f, 1.0f, 1.0f, 1.0f};
    }
    return a;
}

// Random CSR: each row has 0 .. max_row_nnz distinct sorted columns (about one row in five empty).
halo::Csr random_csr(std::int64_t rows, std::int64_t cols, int max_row_nnz, bool valued,
                     std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    halo::Csr a;
    a.num_rows = rows;
    a.num_cols = cols;
    std::vector<halo::local_id> row;
    for (std::int64_t i = 0; i < rows; ++i) {
        row.clear();
        const int length =
            rng() % 5 == 0 ? 0 : static_cast<int>(rng() % static_cast<unsigned>(max_row_nnz + 1));
        for (int k = 0; k < length; ++k) {
            row.push_back(static_cast<halo::local_id>(rng() % static_cast<std::uint64_t>(cols)));
        }
        std::sort(row.begin(), row.end());
        row.erase(std::unique(row.begin(), row.end()), row.end());
        a.indices.insert(a.indices.end(), row.begin(), row.end());
        a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));
    }
    if (valued) {
        a.values = halo::testing::random_floats(a.indices.size(), seed + 1);
    }
    halo::validate(a, "random_csr");
    return a;
}

HostMatrix random_matrix(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::uint64_t seed)
{
    HostMatrix m(rows, cols, ld);
    const auto values = halo::testing::random_floats(static_cast<std::size_t>(rows * cols), seed);
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < cols; ++j) {
            m(i, j) = values[i * cols + j];
        }
    }
    return m;
}

float value_of(const halo::CsrView& a, halo::offset_t k)
{
    return a.values != nullptr ? a.values[k] : 1.0f;
}

// Checks every element of a row against an expected row.
void expect_row(const HostMatrix& m, std::int64_t i, std::vector<float> expected)
{
    ASSERT_EQ(static_cast<std::int64_t>(expected.size()), m.cols);
    for (std::int64_t j = 0; j < m.cols; ++j) {
        EXPECT_EQ(m(i, j), expected[j]) << "(" << i << ", " << j << ")";
    }
}

void expect_row_nan(const HostMatrix& m, std::int64_t i)
{
    for (std::int64_t j = 0; j < m.cols; ++j) {
        EXPECT_TRUE(std::isnan(m(i, j))) << "(" << i << ", " << j << ") = " << m(i, j);
    }
}

// The padding between cols and ld must never be written.
void expect_padding_untouched(const HostMatrix& m)
{
    for (std::int64_t i = 0; i < m.rows; ++i) {
        for (std::int64_t j = m.cols; j < m.ld; ++j) {
            EXPECT_TRUE(std::isnan(m.data[i * m.ld + j])) << "padding (" << i << ", " << j << ")";
        }
    }
}

using halo::testing::ThreadCount;

}  // namespace

// ---- spmm -------------------------------------------------------------------------------------

TEST(ReferenceSpmm, WidthOneValuedAndPattern)
{
    const HostMatrix x(3, 1, {1.0f, 2.0f, 3.0f});
    for (const bool valued : {true, false}) {
        const auto a = small_csr(valued);
        HostMatrix y(4, 1);  // NaN: every row, the empty one included, must be overwritten
        halo::reference::spmm(a.view(), x.cview(), y.view());
        if (valued) {
            expect_row(y, 0, {2.0f * 1 - 3});
            expect_row(y, 2, {0.5f * 2});
        } else {
            expect_row(y, 0, {1.0f + 3});
            expect_row(y, 2, {2.0f});
        }
        expect_row(y, 1, {0.0f});
        expect_row(y, 3, {6.0f});
    }
}

TEST(ReferenceSpmm, WidthThreeWithLeadingDimensionsBeyondCols)
{
    HostMatrix x(3, 3, 5);  // padding stays NaN: reading it would poison the result
    const float values[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    for (int k = 0; k < 9; ++k) {
        x(k / 3, k % 3) = values[k];
    }
    for (const bool valued : {true, false}) {
        const auto a = small_csr(valued);
        HostMatrix y(4, 3, 7);
        halo::reference::spmm(a.view(), x.cview(), y.view());
        if (valued) {
            expect_row(y, 0, {2 * 1 - 7, 2 * 2 - 8, 2 * 3 - 9});
            expect_row(y, 2, {2.0f, 2.5f, 3.0f});
        } else {
            expect_row(y, 0, {1 + 7, 2 + 8, 3 + 9});
            expect_row(y, 2, {4, 5, 6});
        }
        expect_row(y, 1, {0, 0, 0});
        expect_row(y, 3, {12, 15, 18});
        expect_padding_untouched(y);
    }
}

TEST(ReferenceSpmm, WidthThirtyThree)
{
    // x(k, j) = k + j / 8: every sum below is exact in float.
    const std::int64_t width = 33;
    HostMatrix x(3, width, 40);
    for (std::int64_t k = 0; k < 3; ++k) {
        for (std::int64_t j = 0; j < width; ++j) {
            x(k, j) = static_cast<float>(k) + static_cast<float>(j) / 8.0f;
        }
    }
    const auto a = small_csr(true);
    HostMatrix y(4, width, 35);
    halo::reference::spmm(a.view(), x.cview(), y.view());
    for (std::int64_t j = 0; j < width; ++j) {
        const float f = static_cast<float>(j) / 8.0f;
        EXPECT_EQ(y(0, j), 2.0f * f - (2.0f + f)) << j;
        EXPECT_EQ(y(1, j), 0.0f) << j;
        EXPECT_EQ(y(2, j), 0.5f * (1.0f + f)) << j;
        EXPECT_EQ(y(3, j), 3.0f + 3.0f * f) << j;
    }
    expect_padding_untouched(y);
}

TEST(ReferenceSpmm, RowRangeLeavesOtherRowsUntouched)
{
    const HostMatrix x(3, 2, {1, 10, 2, 20, 3, 30});
    const auto a = small_csr(true);
    HostMatrix y(4, 2);
    halo::reference::spmm(a.view(), x.cview(), y.view(), {2, 4});
    expect_row_nan(y, 0);
    expect_row_nan(y, 1);
    expect_row(y, 2, {1, 10});
    expect_row(y, 3, {6, 60});

    halo::reference::spmm(a.view(), x.cview(), y.view(), {1, 2});  // only the empty row
    expect_row_nan(y, 0);
    expect_row(y, 1, {0, 0});

    HostMatrix untouched(4, 2);
    halo::reference::spmm(a.view(), x.cview(), untouched.view(), {3, 3});  // empty range
    for (std::int64_t i = 0; i < 4; ++i) {
        expect_row_nan(untouched, i);
    }
}

TEST(ReferenceSpmm, RejectsMismatchedShapesAndRanges)
{
    const auto a = small_csr(true);
    const HostMatrix x(3, 2, 2, 0.0f);
    HostMatrix y(4, 2, 2, 0.0f);
    HostMatrix narrow(4, 1, 1, 0.0f);
    const HostMatrix short_x(2, 2, 2, 0.0f);
    EXPECT_THROW(halo::reference::spmm(a.view(), x.cview(), narrow.view()), halo::LogicError);
    EXPECT_THROW(halo::reference::spmm(a.view(), short_x.cview(), y.view()), halo::LogicError);
    EXPECT_THROW(halo::reference::spmm(a.view(), x.cview(), y.view(), {2, 5}), halo::LogicError);
    EXPECT_THROW(halo::reference::spmm(a.view(), x.cview(), y.view(), {3, 2}), halo::LogicError);
    EXPECT_THROW(halo::reference::spmm(a.view(), x.cview(), y.view(), {-1, 2}), halo::LogicError);
}

TEST(ReferenceSpmm, MatchesDoublePrecisionOnRandomInputs)
{
    std::uint64_t seed = 100;
    for (const std::int64_t width : {1, 3, 16, 33, 70}) {
        for (const bool valued : {true, false}) {
            ++seed;
            const std::int64_t rows = 300;
            const std::int64_t cols = 200;
            const auto a = random_csr(rows, cols, 40, valued, seed);
            const auto av = a.view();
            const auto x = random_matrix(cols, width, width + 3, seed + 7);
            HostMatrix y(rows, width, width + 1);
            const halo::RowRange range{37, 251};
            halo::reference::spmm(av, x.cview(), y.view(), range);
            for (std::int64_t i = 0; i < rows; ++i) {
                if (i < range.begin || i >= range.end) {
                    expect_row_nan(y, i);
                    continue;
                }
                const auto n = a.row_nnz(i);
                for (std::int64_t j = 0; j < width; ++j) {
                    double exact = 0.0;
                    double magnitude = 0.0;
                    for (auto k = av.indptr[i]; k < av.indptr[i + 1]; ++k) {
                        const double term = double{value_of(av, k)} * x(av.indices[k], j);
                        exact += term;
                        magnitude += std::abs(term);
                    }
                    // A float sum of n rounded products errs by at most gamma_n * sum|terms|
                    // (gamma_n = n u / (1 - n u), u = eps / 2): k = n, scale = sum|terms|.
                    // Rounding the double result to float costs u * |exact|, inside the margin.
                    const auto tol = tolerance<float>(
                        static_cast<double>(std::max<std::int64_t>(n, 1)), magnitude);
                    ASSERT_NEAR(y(i, j), exact, tol) << "row " << i << " col " << j << " width "
                                                     << width << " valued " << valued;
                }
            }
            expect_padding_untouched(y);
        }
    }
}

TEST(ReferenceSpmm, OutputDoesNotDependOnTheThreadCount)
{
    const std::int64_t rows = 4000;
    const std::int64_t width = 33;
    const auto a = random_csr(rows, rows, 60, true, 77);
    const auto x = random_matrix(rows, width, width, 78);
    HostMatrix serial(rows, width);
    HostMatrix parallel(rows, width);
    {
        ThreadCount one(1);
        halo::reference::spmm(a.view(), x.cview(), serial.view());
    }
    {
        ThreadCount two(2);
        if (ThreadCount::team_size() != 2) {
            GTEST_SKIP() << "OpenMP gives " << ThreadCount::team_size() << " threads, asked 2";
        }
        halo::reference::spmm(a.view(), x.cview(), parallel.view());
    }
    EXPECT_EQ(
        std::memcmp(serial.data.data(), parallel.data.data(), serial.data.size() * sizeof(float)),
        0);
}

// ---- gemm -------------------------------------------------------------------------------------

TEST(ReferenceGemm, AlphaBetaAndLeadingDimensions)
{
    // [1 2 3; 4 5 6] * [7 8; 9 10; 11 12] = [58 64; 139 154]
    HostMatrix a(2, 3, 4);
    HostMatrix b(3, 2, 5);
    const float av[] = {1, 2, 3, 4, 5, 6};
    const float bv[] = {7, 8, 9, 10, 11, 12};
    for (int k = 0; k < 6; ++k) {
        a(k / 3, k % 3) = av[k];
        b(k / 2, k % 2) = bv[k];
    }
    HostMatrix c(2, 2, 3);
    halo::reference::gemm(a.cview(), b.cview(), c.view());
    expect_row(c, 0, {58, 64});
    expect_row(c, 1, {139, 154});
    expect_padding_untouched(c);

    c(0, 0) = 1;
    c(0, 1) = 2;
    c(1, 0) = 3;
    c(1, 1) = 4;
    halo::reference::gemm(a.cview(), b.cview(), c.view(), 2.0f, 0.5f);
    expect_row(c, 0, {2 * 58 + 0.5f, 2 * 64 + 1.0f});
    expect_row(c, 1, {2 * 139 + 1.5f, 2 * 154 + 2.0f});
    expect_padding_untouched(c);

    halo::reference::gemm(a.cview(), b.cview(), c.view(), 0.0f, 1.0f);  // C unchanged
    expect_row(c, 0, {2 * 58 + 0.5f, 2 * 64 + 1.0f});
}

TEST(ReferenceGemm, BetaZeroDoesNotReadC)
{
    const HostMatrix a(2, 2, {1, 2, 3, 4});
    const HostMatrix b(2, 2, {1, 0, 0, 1});
    HostMatrix c(2, 2);  // NaN
    halo::reference::gemm(a.cview(), b.cview(), c.view(), 3.0f, 0.0f);
    expect_row(c, 0, {3, 6});
    expect_row(c, 1, {9, 12});

    // An empty inner dimension: C = beta * C, here 0 even though C held NaN.
    const HostMatrix a0(2, 0);
    const HostMatrix b0(0, 2);
    HostMatrix c0(2, 2);
    halo::reference::gemm(a0.cview(), b0.cview(), c0.view());
    expect_row(c0, 0, {0, 0});
    expect_row(c0, 1, {0, 0});
}

TEST(ReferenceGemm, RejectsMismatchedShapes)
{
    const HostMatrix a(2, 3, 3, 0.0f);
    const HostMatrix b(2, 2, 2, 0.0f);
    HostMatrix c(2, 2, 2, 0.0f);
    EXPECT_THROW(halo::reference::gemm(a.cview(), b.cview(), c.view()), halo::LogicError);
    const HostMatrix b3(3, 2, 2, 0.0f);
    HostMatrix c3(3, 2, 2, 0.0f);
    EXPECT_THROW(halo::reference::gemm(a.cview(), b3.cview(), c3.view()), halo::LogicError);
}

TEST(ReferenceGemm, MatchesDoublePrecisionOnRandomInputs)
{
    struct Shape {
        std::int64_t m, k, n;
    };
    std::uint64_t seed = 300;
    for (const auto& [m, k, n] :
         {Shape{1, 1, 1}, Shape{17, 64, 33}, Shape{40, 300, 7}, Shape{5, 3, 128}}) {
        for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{-0.75f, 1.5f}}) {
            seed += 3;
            const auto a = random_matrix(m, k, k + 2, seed);
            const auto b = random_matrix(k, n, n, seed + 1);
            auto c = random_matrix(m, n, n + 5, seed + 2);
            const auto c0 = c;
            halo::reference::gemm(a.cview(), b.cview(), c.view(), alpha, beta);
            for (std::int64_t i = 0; i < m; ++i) {
                for (std::int64_t j = 0; j < n; ++j) {
                    double dot = 0.0;
                    double magnitude = 0.0;
                    for (std::int64_t p = 0; p < k; ++p) {
                        dot += double{a(i, p)} * b(p, j);
                        magnitude += std::abs(double{a(i, p)} * b(p, j));
                    }
                    const double exact = alpha * dot + beta * double{c0(i, j)};
                    // The dot product as in spmm (k roundings over sum|terms|), then alpha * sum,
                    // beta * c and their sum round once each: k + 2 roundings of at most
                    // |alpha| sum|a b| + |beta c|.
                    const double scale = std::abs(alpha) * magnitude + std::abs(beta * c0(i, j));
                    ASSERT_NEAR(c(i, j), exact, tolerance<float>(static_cast<double>(k + 2), scale))
                        << "(" << i << ", " << j << ") of " << m << " x " << k << " x " << n;
                }
            }
            expect_padding_untouched(c);
        }
    }
}

// ---- bias_activation, softmax_rows ------------------------------------------------------------

TEST(ReferenceBiasActivation, BiasReluAndRowRange)
{
    const std::initializer_list<float> input = {-1, 2, 3, -4, 0.5f, -0.5f};
    const float bias[] = {1, -1};
    {
        HostMatrix y(3, 2, input);
        halo::reference::bias_activation(y.view(), bias, halo::Activation::none);
        expect_row(y, 0, {0, 1});
        expect_row(y, 1, {4, -5});
        expect_row(y, 2, {1.5f, -1.5f});
    }
    {
        HostMatrix y(3, 2, input);
        halo::reference::bias_activation(y.view(), bias, halo::Activation::relu);
        expect_row(y, 0, {0, 1});
        expect_row(y, 1, {4, 0});
        expect_row(y, 2, {1.5f, 0});
    }
    {
        HostMatrix y(3, 2, input);
        halo::reference::bias_activation(y.view(), nullptr, halo::Activation::relu);
        expect_row(y, 0, {0, 2});
        expect_row(y, 1, {3, 0});
        expect_row(y, 2, {0.5f, 0});
    }
    {
        HostMatrix y(3, 2, input);
        halo::reference::bias_activation(y.view(), bias, halo::Activation::relu, {1, 2});
        expect_row(y, 0, {-1, 2});
        expect_row(y, 1, {4, 0});
        expect_row(y, 2, {0.5f, -0.5f});
        EXPECT_THROW(
            halo::reference::bias_activation(y.view(), bias, halo::Activation::relu, {2, 4}),
            halo::LogicError);
    }
    {
        HostMatrix y(2, 2, 3);  // padding NaN
        y(0, 0) = -2;
        y(0, 1) = 2;
        y(1, 0) = 0;
        y(1, 1) = -3;
        halo::reference::bias_activation(y.view(), nullptr, halo::Activation::relu);
        expect_row(y, 0, {0, 2});
        expect_row(y, 1, {0, 0});
        expect_padding_untouched(y);
    }
}

TEST(ReferenceSoftmaxRows, HandValuesSumToOneAndLargeInputsDoNotOverflow)
{
    HostMatrix y(4, 3, 4);
    const float rows[4][3] = {
        {1, 2, 3}, {1000, 1000, 1000}, {1000, 0, -1000}, {-1000, -1000, -999}};
    for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 3; ++j) {
            y(i, j) = rows[i][j];
        }
    }
    halo::reference::softmax_rows(y.view());
    // softmax(1, 2, 3) = e^(k-3) / (e^-2 + e^-1 + 1); float results of exp and one division.
    const double denominator = std::exp(-2.0) + std::exp(-1.0) + 1.0;
    const auto tol = tolerance<float>(8, 1.0);
    EXPECT_NEAR(y(0, 0), std::exp(-2.0) / denominator, tol);
    EXPECT_NEAR(y(0, 1), std::exp(-1.0) / denominator, tol);
    EXPECT_NEAR(y(0, 2), 1.0 / denominator, tol);
    for (int j = 0; j < 3; ++j) {
        EXPECT_NEAR(y(1, j), 1.0 / 3.0, tol);
    }
    EXPECT_EQ(y(2, 0), 1.0f);
    EXPECT_EQ(y(2, 1), 0.0f);  // exp(-1000) underflows to 0, harmlessly
    EXPECT_EQ(y(2, 2), 0.0f);
    EXPECT_NEAR(y(3, 2), 1.0 / (2.0 * std::exp(-1.0) + 1.0), tol);
    for (std::int64_t i = 0; i < y.rows; ++i) {
        double sum = 0.0;
        for (std::int64_t j = 0; j < y.cols; ++j) {
            EXPECT_TRUE(std::isfinite(y(i, j))) << i << ", " << j;
            sum += y(i, j);
        }
        EXPECT_NEAR(sum, 1.0, tol) << "row " << i;
    }
    expect_padding_untouched(y);
}

TEST(ReferenceSoftmaxRows, RandomRowsSumToOne)
{
    auto y = random_matrix(50, 40, 40, 901);
    for (auto& v : y.data) {
        v *= 200.0f;  // differences of hundreds: exp would overflow without the max shift
    }
    halo::reference::softmax_rows(y.view());
    for (std::int64_t i = 0; i < y.rows; ++i) {
        double sum = 0.0;
        for (std::int64_t j = 0; j < y.cols; ++j) {
            ASSERT_GE(y(i, j), 0.0f);
            sum += y(i, j);
        }
        // cols rounded additions of terms <= 1, then one division per term.
        EXPECT_NEAR(sum, 1.0, tolerance<float>(static_cast<double>(y.cols + 1), 1.0)) << i;
    }
}

// ---- sddmm, csr_row_softmax -------------------------------------------------------------------

namespace {

// 3 x 3:  row 0: (0,1)=2, (0,2)=-1;  row 1 empty;  row 2: (2,0)=0.5, (2,2)=3.
halo::Csr attention_csr(bool valued)
{
    halo::Csr a;
    a.num_rows = 3;
    a.num_cols = 3;
    a.indptr = {0, 2, 2, 4};
    a.indices = {1, 2, 0, 2};
    if (valued) {
        a.values = {2.0f, -1.0f, 0.5f, 3.0f};
    }
    return a;
}

}  // namespace

TEST(ReferenceSddmm, ValuesScaleTheDotProduct)
{
    HostMatrix q(3, 2, 3);  // padding NaN must not be read
    HostMatrix k(3, 2, 4);
    const float qv[] = {1, 2, 3, 4, 5, 6};
    const float kv[] = {1, 0, 0, 1, 1, 1};
    for (int e = 0; e < 6; ++e) {
        q(e / 2, e % 2) = qv[e];
        k(e / 2, e % 2) = kv[e];
    }
    // Dots: q0.k1 = 2, q0.k2 = 3, q2.k0 = 5, q2.k2 = 11.
    std::vector<float> out(4, kNaN);
    halo::reference::sddmm(attention_csr(true).view(), q.cview(), k.cview(), out.data());
    EXPECT_EQ(out, (std::vector<float>{4, -3, 2.5f, 33}));
    halo::reference::sddmm(attention_csr(false).view(), q.cview(), k.cview(), out.data());
    EXPECT_EQ(out, (std::vector<float>{2, 3, 5, 11}));

    std::vector<float> part(4, kNaN);
    halo::reference::sddmm(attention_csr(true).view(), q.cview(), k.cview(), part.data(), {1, 3});
    EXPECT_TRUE(std::isnan(part[0]) && std::isnan(part[1]));
    EXPECT_EQ(part[2], 2.5f);
    EXPECT_EQ(part[3], 33.0f);

    const HostMatrix wide(3, 3, 3, 0.0f);
    EXPECT_THROW(
        halo::reference::sddmm(attention_csr(true).view(), q.cview(), wide.cview(), out.data()),
        halo::LogicError);
    EXPECT_THROW(halo::reference::sddmm(attention_csr(true).view(), q.cview(), k.cview(),
                                        out.data(), {0, 4}),
                 halo::LogicError);
}

TEST(ReferenceSddmm, MatchesDoublePrecisionOnRandomInputs)
{
    std::uint64_t seed = 500;
    for (const std::int64_t dim : {1, 8, 33, 64}) {
        for (const bool valued : {true, false}) {
            ++seed;
            const auto a = random_csr(120, 90, 30, valued, seed);
            const auto av = a.view();
            const auto q = random_matrix(120, dim, dim + 1, seed + 11);
            const auto k = random_matrix(90, dim, dim, seed + 12);
            std::vector<float> out(static_cast<std::size_t>(a.nnz()), kNaN);
            const halo::RowRange range{10, 100};
            halo::reference::sddmm(av, q.cview(), k.cview(), out.data(), range);
            for (std::int64_t i = 0; i < a.num_rows; ++i) {
                for (auto nz = av.indptr[i]; nz < av.indptr[i + 1]; ++nz) {
                    if (i < range.begin || i >= range.end) {
                        ASSERT_TRUE(std::isnan(out[nz])) << "row " << i << " outside the range";
                        continue;
                    }
                    double dot = 0.0;
                    double magnitude = 0.0;
                    for (std::int64_t d = 0; d < dim; ++d) {
                        const double term = double{q(i, d)} * k(av.indices[nz], d);
                        dot += term;
                        magnitude += std::abs(term);
                    }
                    const double v = value_of(av, nz);
                    // The dot product (dim roundings over sum|q k|) and one more for the scaling.
                    ASSERT_NEAR(
                        out[nz], v * dot,
                        tolerance<float>(static_cast<double>(dim + 1), std::abs(v) * magnitude))
                        << "nonzero " << nz << " of row " << i << ", dim " << dim;
                }
            }
        }
    }
}

TEST(ReferenceCsrRowSoftmax, EmptyRowsAndLargeScores)
{
    // Rows: {1000, 1000}, {}, {1, 2, 3}, {1000, -1000}, {}.
    halo::Csr a;
    a.num_rows = 5;
    a.num_cols = 3;
    a.indptr = {0, 2, 2, 5, 7, 7};
    a.indices = {0, 2, 0, 1, 2, 1, 2};
    std::vector<float> scores = {1000, 1000, 1, 2, 3, 1000, -1000};
    halo::reference::csr_row_softmax(a.view(), scores.data());
    const double denominator = std::exp(-2.0) + std::exp(-1.0) + 1.0;
    const auto tol = tolerance<float>(8, 1.0);  // one exp, a 3-term sum and a division
    EXPECT_EQ(scores[0], 0.5f);
    EXPECT_EQ(scores[1], 0.5f);
    EXPECT_NEAR(scores[2], std::exp(-2.0) / denominator, tol);
    EXPECT_NEAR(scores[3], std::exp(-1.0) / denominator, tol);
    EXPECT_NEAR(scores[4], 1.0 / denominator, tol);
    EXPECT_EQ(scores[5], 1.0f);
    EXPECT_EQ(scores[6], 0.0f);

    // A matrix whose rows are all empty has nothing to normalize and must not touch memory.
    halo::Csr empty;
    empty.num_rows = 3;
    empty.num_cols = 3;
    empty.indptr = {0, 0, 0, 0};
    halo::reference::csr_row_softmax(empty.view(), nullptr);
}

TEST(ReferenceCsrRowSoftmax, RandomRowsSumToOne)
{
    const auto a = random_csr(200, 150, 50, false, 700);
    auto scores =
        halo::testing::random_floats(static_cast<std::size_t>(a.nnz()), 701, -300.0f, 300.0f);
    halo::reference::csr_row_softmax(a.view(), scores.data());
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        double sum = 0.0;
        for (auto nz = a.indptr[i]; nz < a.indptr[i + 1]; ++nz) {
            ASSERT_TRUE(std::isfinite(scores[nz]) && scores[nz] >= 0.0f) << nz;
            sum += scores[nz];
        }
        if (a.row_nnz(i) > 0) {
            // row_nnz rounded additions of terms <= 1, then one division per term.
            EXPECT_NEAR(sum, 1.0, tolerance<float>(static_cast<double>(a.row_nnz(i) + 1), 1.0))
                << "row " << i;
        }
    }
}
