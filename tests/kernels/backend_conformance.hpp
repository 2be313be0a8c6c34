// The conformance suite of halo::Backend (include/halo/kernels_host/backend.hpp): what every
// implementation must do, written once as GoogleTest type-parameterized tests and instantiated per
// backend (reference/test_backend_conformance_cpu.cpp, cuda/test_backend_conformance_cuda.cpp).
// Each operation runs on fresh seeded inputs and is compared with the reference kernel or plain
// loop on the same input (STYLE.md point 3); outputs are poisoned with NaN first, so a row, column
// or padding element that is written when it must not be, or read when beta == 0, shows up.
//
// A backend joins with a Backends type:
//   static std::string unavailable();  // why it cannot run here ("" when it can): tests skip
//   Backends();                        // what its backends need (a device context)
//   std::unique_ptr<Backend> make();   // a backend with its default SpMM kernel
//   std::vector<SpmmVariant> spmm_variants();  // one backend per exact SpMM kernel it offers
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend_fixtures.hpp"
#include "halo/core/error.hpp"
#include "halo/engine/engine.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/dense_ops.hpp"
#include "halo_test.hpp"
#include "scaled_operator.hpp"
#include "spmm_fixtures.hpp"

namespace halo::testing {

/// A backend whose SpMM plans run one kernel, named for the test's messages.
struct SpmmVariant {
    std::string kernel;
    std::unique_ptr<Backend> backend;
};

template <typename Backends>
class BackendConformance : public ::testing::Test {
protected:
    void SetUp() override
    {
        const auto why = Backends::unavailable();
        if (!why.empty()) {
            GTEST_SKIP() << why;
        }
        backends_.emplace();
        backend_ = backends_->make();
    }

    Backend& backend() { return *backend_; }
    std::vector<SpmmVariant> spmm_variants() { return backends_->spmm_variants(); }

private:
    std::optional<Backends> backends_;
    std::unique_ptr<Backend> backend_;
};

TYPED_TEST_SUITE_P(BackendConformance);

TYPED_TEST_P(BackendConformance, CopiesHonourTheLeadingDimension)
{
    auto& backend = this->backend();
    auto device = upload(backend, HostMatrix(37, 5, 8));  // all NaN, padding included
    const auto values = random_matrix(37, 5, 5, 11);
    backend.copy_from_host(values.data.data(), device.view);
    const auto back = download(backend, device);
    expect_padding_nan(back, "copy_from_host");
    for (std::int64_t i = 0; i < 37; ++i) {
        for (std::int64_t j = 0; j < 5; ++j) {
            ASSERT_EQ(back(i, j), values(i, j)) << i << ", " << j;
        }
    }
    HostMatrix contiguous(37, 5);
    backend.copy_to_host(device.view, contiguous.data.data());
    EXPECT_EQ(contiguous.data, values.data);
    // Empty copies are no-ops, whatever the host pointer.
    backend.copy_from_host(nullptr, {device.view.data, 0, 5, 8});
    backend.copy_to_host(DenseView<const float>{device.view.data, 3, 0, 8}, nullptr);
    // A matrix never has a null data pointer; a negative shape is a programming error.
    const auto empty = backend.allocate(0, 7);
    EXPECT_NE(empty.data(), nullptr);
    EXPECT_THROW(backend.allocate(-1, 3), LogicError);
}

TYPED_TEST_P(BackendConformance, RandomFeaturesEqualTheHostGeneratorBitForBit)
{
    auto& backend = this->backend();
    // Ids as a shard holds them: unordered, sparse, up to scale-34 magnitudes; widths that do and
    // do not divide a block; a view narrower than its leading dimension keeps the rest untouched.
    for (const std::int64_t dim : {1, 7, 64, 129}) {
        SCOPED_TRACE("dim " + std::to_string(dim));
        std::vector<global_id> ids;
        for (std::int64_t r = 0; r < 30011; ++r) {
            ids.push_back((r * 7919 + 13) % 40009 + (r % 3 == 0 ? (std::int64_t{1} << 34) : 0));
        }
        const std::uint64_t seed = 0x5eed + static_cast<std::uint64_t>(dim);
        const auto expected = random_node_features(ids, dim, seed);
        const auto rows = static_cast<std::int64_t>(ids.size());
        auto m = upload(backend, HostMatrix(rows, dim, dim + 3));
        backend.fill_random_features(ids.data(), seed, m.view);
        const auto back = download(backend, m);
        expect_padding_nan(back, "fill_random_features");
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t j = 0; j < dim; ++j) {
                const float got = back(r, j);
                ASSERT_EQ(std::memcmp(&got, &expected[r * dim + j], sizeof(float)), 0)
                    << "row " << r << " column " << j << ": " << got << " vs "
                    << expected[r * dim + j];
            }
        }
    }
}

// c = alpha a b + beta c on padded operands (lda, ldb, ldc above the widths) against the
// reference; with beta == 0, C holds NaN, which must not reach the result.
inline void check_gemm(Backend& backend, std::int64_t m, std::int64_t k, std::int64_t n,
                       float alpha, float beta, std::uint64_t seed)
{
    SCOPED_TRACE(::testing::Message() << "gemm m=" << m << " k=" << k << " n=" << n
                                      << " alpha=" << alpha << " beta=" << beta);
    const auto a = random_matrix(m, k, k + 3, seed);
    const auto b = random_matrix(k, n, n + 1, seed + 1);
    auto c = beta == 0.0f ? HostMatrix(m, n, n + 2) : random_matrix(m, n, n + 2, seed + 2);
    auto da = upload(backend, a);
    auto db = upload(backend, b);
    auto dc = upload(backend, c);
    backend.gemm(da.view, db.view, dc.view, alpha, beta);
    const auto got = download(backend, dc);
    reference::gemm(a.cview(), b.cview(), c.view(), alpha, beta);
    expect_padding_nan(got, "gemm C");
    // Each element is a dot product of length k plus beta * c: rounding is bounded by a few eps
    // times k * max|a| * max|b| * |alpha| + |beta| * max|c|, for either evaluation order.
    const double scale = static_cast<double>(k) * a.max_abs() * b.max_abs() * std::abs(alpha) +
                         (beta == 0.0f ? 0.0 : std::abs(beta) * 1.0) + 1e-30;
    const float tol = tolerance<float>(4, scale);
    for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
            ASSERT_TRUE(std::isfinite(got(i, j))) << "(" << i << ", " << j << ")";
            ASSERT_NEAR(got(i, j), c(i, j), tol) << "(" << i << ", " << j << ")";
        }
    }
}

TYPED_TEST_P(BackendConformance, GemmMatchesTheReference)
{
    auto& backend = this->backend();
    std::uint64_t seed = 100;
    for (const std::int64_t m : {1, 3, 33, 129}) {
        for (const std::int64_t k : {1, 3, 33, 129}) {
            for (const std::int64_t n : {1, 3, 33, 129}) {
                check_gemm(backend, m, k, n, 1.0f, 0.0f, seed += 3);
            }
        }
    }
    check_gemm(backend, 1000, 256, 64, 1.0f, 0.0f, 7);
    check_gemm(backend, 77, 31, 45, 1.0f, 1.0f, 8);  // sage: accumulate into C
    check_gemm(backend, 64, 17, 9, -0.5f, 2.5f, 9);
    check_gemm(backend, 5, 129, 300, 2.0f, 0.0f, 10);
}

TYPED_TEST_P(BackendConformance, GemmWithEmptyInnerDimensionScalesC)
{
    auto& backend = this->backend();
    auto a_store = backend.allocate(1, 1);
    const DenseView<const float> a{a_store.data(), 6, 0, 0};
    const DenseView<const float> b{a_store.data(), 0, 4, 4};
    auto poisoned = upload(backend, HostMatrix(6, 4, 5));
    backend.gemm(a, b, poisoned.view, 1.0f, 0.0f);
    auto zeros = download(backend, poisoned);
    expect_padding_nan(zeros, "k = 0");
    for (std::int64_t i = 0; i < 6; ++i) {
        for (std::int64_t j = 0; j < 4; ++j) {
            EXPECT_EQ(zeros(i, j), 0.0f);
        }
    }
    const auto c = random_matrix(6, 4, 5, 3);
    auto dc = upload(backend, c);
    backend.gemm(a, b, dc.view, 1.0f, 2.0f);
    const auto scaled = download(backend, dc);
    for (std::int64_t i = 0; i < 6; ++i) {
        for (std::int64_t j = 0; j < 4; ++j) {
            EXPECT_EQ(scaled(i, j), 2.0f * c(i, j));
        }
    }
    EXPECT_THROW(
        backend.gemm(a, DenseView<const float>{a_store.data(), 1, 4, 4}, dc.view, 1.0f, 0.0f),
        LogicError);
}

TYPED_TEST_P(BackendConformance, AxpbyMatchesThePlainLoop)
{
    auto& backend = this->backend();
    std::uint64_t seed = 300;
    // Widths that are multiples of 4 get leading dimensions that are too (a device's vector
    // path), one wider than a 256-thread block's 4-column units (1028).
    for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {1, 1}, {3, 33}, {129, 31}, {1000, 7}, {70, 64}, {5, 1028}}) {
        for (const auto& [alpha, beta] : std::vector<std::pair<float, float>>{
                 {1.0f, 0.0f}, {1.5f, -0.5f}, {1.0f, 1.0f}, {0.0f, 2.0f}}) {
            SCOPED_TRACE(::testing::Message()
                         << rows << " x " << cols << " alpha " << alpha << " beta " << beta);
            const bool four = cols % 4 == 0;
            const auto x = random_matrix(rows, cols, four ? cols + 4 : cols + 2, ++seed);
            auto y = beta == 0.0f ? HostMatrix(rows, cols, four ? cols + 8 : cols + 1)
                                  : random_matrix(rows, cols, four ? cols + 8 : cols + 1, ++seed);
            auto dx = upload(backend, x);
            auto dy = upload(backend, y);
            backend.axpby(alpha, dx.view, beta, dy.view);
            const auto got = download(backend, dy);
            expect_padding_nan(got, "axpby y");
            // One product and one sum; a device may fuse them (one rounding fewer).
            const float tol = tolerance<float>(2, std::abs(alpha) + std::abs(beta));
            for (std::int64_t i = 0; i < rows; ++i) {
                for (std::int64_t j = 0; j < cols; ++j) {
                    const float want =
                        beta == 0.0f ? alpha * x(i, j) : alpha * x(i, j) + beta * y(i, j);
                    ASSERT_TRUE(std::isfinite(got(i, j))) << i << ", " << j;
                    ASSERT_NEAR(got(i, j), want, tol) << i << ", " << j;
                }
            }
        }
    }
    auto a = backend.allocate(2, 3);
    auto b = backend.allocate(3, 2);
    EXPECT_THROW(backend.axpby(1.0f, a.view(), 1.0f, b.view()), LogicError);
}

TYPED_TEST_P(BackendConformance, BiasActivationMatchesTheReferenceOnItsRowsOnly)
{
    auto& backend = this->backend();
    std::uint64_t seed = 500;
    for (const std::int64_t cols : {1, 3, 33, 129, 64, 1028}) {
        for (const bool with_bias : {false, true}) {
            for (const auto act : {Activation::none, Activation::relu}) {
                for (const auto range :
                     {RowRange{0, 40}, RowRange{7, 23}, RowRange{39, 40}, RowRange{12, 12}}) {
                    SCOPED_TRACE(::testing::Message() << "cols " << cols << " bias " << with_bias
                                                      << " act " << to_string(act) << " rows ["
                                                      << range.begin << ", " << range.end << ")");
                    auto y = random_matrix(40, cols, cols % 4 == 0 ? cols + 4 : cols + 1, ++seed);
                    y(10, 0) = kNaN;  // relu maps NaN to 0 on both sides; none keeps it
                    const auto bias = random_matrix(1, cols, cols, ++seed);
                    auto dy = upload(backend, y);
                    auto dbias = upload(backend, bias);
                    backend.bias_activation(dy.view, with_bias ? dbias.view.data : nullptr, act,
                                            range);
                    const auto got = download(backend, dy);
                    reference::bias_activation(y.view(), with_bias ? bias.data.data() : nullptr,
                                               act, range);
                    expect_padding_nan(got, "bias_activation");
                    // A single rounded addition and a comparison: bit-identical to the reference.
                    for (std::int64_t i = 0; i < 40; ++i) {
                        for (std::int64_t j = 0; j < cols; ++j) {
                            ASSERT_TRUE(same(got(i, j), y(i, j)))
                                << "(" << i << ", " << j << "): " << got(i, j) << " vs " << y(i, j);
                        }
                    }
                }
            }
        }
    }
    auto m = backend.allocate(4, 2);
    EXPECT_THROW(backend.bias_activation(m.view(), nullptr, Activation::relu, {2, 5}), LogicError);
}

// torch.nn.functional.normalize: y = x / max(||x||_2, 1e-12) per row; an all-zero row stays zero.
TYPED_TEST_P(BackendConformance, NormalizeRowsMatchesThePlainLoop)
{
    auto& backend = this->backend();
    for (const std::int64_t cols : {1, 31, 32, 129}) {
        SCOPED_TRACE("cols " + std::to_string(cols));
        auto x = random_matrix(50, cols, cols + 2, 700 + static_cast<std::uint64_t>(cols));
        for (std::int64_t j = 0; j < cols; ++j) {
            x(3, j) = 0.0f;
        }
        auto dx = upload(backend, x);
        auto dy = upload(backend, HostMatrix(50, cols, cols + 1));
        backend.normalize_rows(dx.view, dy.view);
        const auto got = download(backend, dy);
        expect_padding_nan(got, "normalize_rows y");
        for (std::int64_t i = 0; i < 50; ++i) {
            double sq = 0.0;
            for (std::int64_t j = 0; j < cols; ++j) {
                sq += static_cast<double>(x(i, j)) * x(i, j);
            }
            const float norm = std::max(static_cast<float>(std::sqrt(sq)), 1e-12f);
            for (std::int64_t j = 0; j < cols; ++j) {
                // |y| <= 1; the sum of squares in double in any order, then one rounding to
                // float for the norm and one for the quotient.
                ASSERT_NEAR(got(i, j), x(i, j) / norm, tolerance<float>(2, 1.0))
                    << "(" << i << ", " << j << ")";
            }
        }
    }
}

// Every exact SpMM kernel of the backend: R-MAT and Erdos-Renyi operators with values and as
// patterns, widths around a warp and wider, over the whole matrix, interior then boundary rows
// (as the engine runs them around the exchange, here with the ranges given as hints), and a
// middle range, an empty one and the single last row.
TYPED_TEST_P(BackendConformance, SpmmOfEveryExactKernelMatchesTheReferenceOnItsRowsOnly)
{
    for (auto& [kernel, backend] : this->spmm_variants()) {
        SCOPED_TRACE("SpMM kernel " + kernel);
        std::uint64_t seed = 1000;
        for (const std::string kind : {"rmat", "er"}) {
            for (const bool valued : {false, true}) {
                const auto a = graph_csr(kind, kind == "rmat" ? 10 : 11, ++seed, valued);
                const auto n = a.num_rows;
                const auto s = n / 3;
                SpmmPlanHints hints;
                hints.ranges = {{0, s}, {s, n}};
                const auto plan = backend->make_spmm_plan(a);
                const auto split = backend->make_spmm_plan(a, hints);
                for (const std::int64_t width : {1, 3, 31, 32, 33, 100, 256}) {
                    check_spmm(*backend, *plan, a, width, {{0, n}}, ++seed);
                    check_spmm(*backend, *split, a, width, hints.ranges, ++seed);
                    check_spmm(*backend, *plan, a, width,
                               {{n / 4, n / 2}, {n / 2, n / 2}, {n - 1, n}}, ++seed);
                }
            }
        }
    }
}

// SpmmPlan::run_add of every exact kernel's plans that add in place, plain and (where the backend
// makes them) scaled: y0 + A x on the rows asked for, the other rows untouched, over the whole
// matrix, interior then boundary rows, a middle range, an empty one and the last row. Plans whose
// sums are fixed (the reference loop, row-split and its chunked variant) add exactly what run()
// writes.
TYPED_TEST_P(BackendConformance, SpmmAddAddsTheProductToItsRowsOnly)
{
    for (auto& [kernel, backend] : this->spmm_variants()) {
        SCOPED_TRACE("SpMM kernel " + kernel);
        const bool bitwise = kernel == "reference" || kernel == "rowsplit" || kernel == "rowchunk";
        std::uint64_t seed = 5000;
        for (const std::string kind : {"rmat", "er"}) {
            for (const bool valued : {false, true}) {
                const auto a = graph_csr(kind, kind == "rmat" ? 10 : 11, ++seed, valued);
                const auto n = a.num_rows;
                SpmmPlanHints hints;
                hints.ranges = {{0, n / 3}, {n / 3, n}};
                OperatorScaling scaling{
                    random_floats(static_cast<std::size_t>(n), ++seed),
                    random_floats(static_cast<std::size_t>(a.num_cols), ++seed)};
                const auto scaled = scaled_operator(a, scaling);  // what a scaled plan computes
                std::vector<std::pair<std::unique_ptr<SpmmPlan>, const Csr*>> plans;
                plans.emplace_back(backend->make_spmm_plan(a, hints), &a);
                if (auto p = backend->make_scaled_spmm_plan(a, hints, scaling)) {
                    plans.emplace_back(std::move(p), &scaled);
                }
                for (auto& [plan, product] : plans) {
                    if (!plan->adds_in_place()) {
                        EXPECT_THROW(plan->run_add({}, {}, {0, 0}), LogicError) << kernel;
                        continue;
                    }
                    SCOPED_TRACE(plan->algorithm());
                    for (const std::int64_t width : {1, 3, 32, 33, 100, 256}) {
                        check_spmm_add(*backend, *plan, *product, width, {{0, n}}, ++seed, bitwise);
                        check_spmm_add(*backend, *plan, *product, width, hints.ranges, ++seed,
                                       bitwise);
                        check_spmm_add(*backend, *plan, *product, width,
                                       {{n / 4, n / 2}, {n / 2, n / 2}, {n - 1, n}}, ++seed,
                                       bitwise);
                    }
                }
            }
        }
    }
}

TYPED_TEST_P(BackendConformance, SpmmEmptyRowsAndRangesWithoutNonzeros)
{
    // 50 x 40; rows 10 .. 29 empty; the others hold a few seeded columns.
    Csr a;
    a.num_rows = 50;
    a.num_cols = 40;
    for (std::int64_t i = 0; i < 50; ++i) {
        if (i < 10 || i >= 30) {
            for (local_id c = static_cast<local_id>(i % 7); c < 40; c += 9) {
                a.indices.push_back(c);
            }
        }
        a.indptr.push_back(static_cast<offset_t>(a.indices.size()));
    }
    // A matrix without any nonzero, and one without rows.
    Csr zero;
    zero.num_rows = 8;
    zero.num_cols = 8;
    zero.indptr.assign(9, 0);
    const Csr none;
    for (auto& [kernel, backend] : this->spmm_variants()) {
        SCOPED_TRACE("SpMM kernel " + kernel);
        std::uint64_t state = 12345;
        a.values.clear();
        for (const bool valued : {false, true}) {
            if (valued) {
                a.values = random_floats(a.indices.size(), ++state);
            }
            const auto plan = backend->make_spmm_plan(a);
            for (const std::int64_t width : {1, 33}) {
                check_spmm(*backend, *plan, a, width, {{12, 20}}, ++state);  // no nonzero
                check_spmm(*backend, *plan, a, width, {{10, 30}, {0, 10}, {30, 50}}, ++state);
                check_spmm(*backend, *plan, a, width, {{5, 35}, {0, 5}, {35, 50}}, ++state);
            }
        }
        const auto zero_plan = backend->make_spmm_plan(zero);
        check_spmm(*backend, *zero_plan, zero, 5, {{0, 8}}, 9);
        const auto none_plan = backend->make_spmm_plan(none);
        check_spmm(*backend, *none_plan, none, 5, {{0, 0}}, 10);
    }
}

REGISTER_TYPED_TEST_SUITE_P(BackendConformance, CopiesHonourTheLeadingDimension,
                            RandomFeaturesEqualTheHostGeneratorBitForBit, GemmMatchesTheReference,
                            GemmWithEmptyInnerDimensionScalesC, AxpbyMatchesThePlainLoop,
                            BiasActivationMatchesTheReferenceOnItsRowsOnly,
                            NormalizeRowsMatchesThePlainLoop,
                            SpmmOfEveryExactKernelMatchesTheReferenceOnItsRowsOnly,
                            SpmmAddAddsTheProductToItsRowsOnly,
                            SpmmEmptyRowsAndRangesWithoutNonzeros);

}  // namespace halo::testing
