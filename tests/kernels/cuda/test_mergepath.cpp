// MergePath-SpMM on the GPU against reference::spmm on the same seeded inputs (STYLE.md point 3).
// y is poisoned with NaN (padding columns included) before each check, and the plan runs twice on
// the same y: a row of the range that is never written stays NaN, a row outside the range or a
// padding column that is written loses its NaN, and a split row that is not zeroed before its
// atomics doubles on the second run. Shapes: R-MAT (skewed), Erdos-Renyi with empty rows, one row
// of 10^6 nonzeros, one row, widths 1 .. 1000, full and split ranges, default and extreme costs,
// and the shared graphs cora and BlogCatalog.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/mergepath.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo_test.hpp"
#include "preprocess/hot_columns.hpp"
#include "spmm_fixtures.hpp"

namespace {

using halo::cuda::MergePathOptions;
using halo::testing::csr_with_rows;
using halo::testing::erdos_renyi_csr;
using halo::testing::kNaN;
using halo::testing::rmat_csr;
using halo::testing::tolerance;

// A device block of rows x ld floats seen as rows x cols.
struct DeviceMatrix {
    halo::cuda::DeviceBuffer<float> buffer;
    halo::DenseView<float> view;

    DeviceMatrix(halo::cuda::Context& ctx, const std::vector<float>& host, std::int64_t rows,
                 std::int64_t cols, std::int64_t ld)
        : buffer(ctx, static_cast<std::size_t>(rows * ld)), view{buffer.data(), rows, cols, ld}
    {
        upload(ctx, host);
    }
    void upload(halo::cuda::Context& ctx, const std::vector<float>& host)
    {
        if (buffer.size() > 0) {
            HALO_CUDA_TRY(cudaMemcpyAsync(buffer.data(), host.data(), buffer.bytes(),
                                          cudaMemcpyHostToDevice, ctx.compute_stream()));
            HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
        }
    }
    std::vector<float> download(halo::cuda::Context& ctx) const
    {
        std::vector<float> host(buffer.size());
        if (buffer.size() > 0) {
            HALO_CUDA_TRY(cudaMemcpyAsync(host.data(), buffer.data(), buffer.bytes(),
                                          cudaMemcpyDeviceToHost, ctx.compute_stream()));
            HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
        }
        return host;
    }
};

// Runs `plan` over `ranges` twice on NaN-poisoned y (width columns, padded leading dimensions)
// and compares with the reference.
void check_spmm(halo::cuda::Context& ctx, halo::SpmmPlan& plan, const halo::Csr& a,
                std::int64_t width, const std::vector<halo::RowRange>& ranges, std::uint64_t seed,
                bool padded = true)
{
    SCOPED_TRACE("width " + std::to_string(width) + ", seed " + std::to_string(seed) + ", " +
                 plan.algorithm());
    // Padded leading dimensions (not multiples of 4) take the scalar lanes; unpadded widths that
    // are multiples of 4 take the float4 lanes.
    const std::int64_t ldx = padded ? width + 5 : width;
    const std::int64_t ldy = padded ? width + 3 : width;
    std::vector<float> xh(static_cast<std::size_t>(a.num_cols * ldx), kNaN);
    auto xv = halo::testing::random_floats(static_cast<std::size_t>(a.num_cols * width), seed);
    // A pattern matrix gets small integer inputs: every partial sum is then an integer below 2^24,
    // exact in float whatever the summation order, so the GPU must match exactly (a lost or
    // doubled segment of a split row cannot hide in rounding).
    const bool exact = !a.has_values();
    if (exact) {
        for (auto& v : xv) {
            v = std::round(4.0f * v);
        }
    }
    for (std::int64_t i = 0; i < a.num_cols; ++i) {
        std::copy_n(xv.begin() + i * width, width, xh.begin() + i * ldx);
    }
    DeviceMatrix x(ctx, xh, a.num_cols, width, ldx);
    const std::vector<float> poison(static_cast<std::size_t>(a.num_rows * ldy), kNaN);
    DeviceMatrix y(ctx, poison, a.num_rows, width, ldy);

    for (int round = 0; round < 2; ++round) {
        for (const auto range : ranges) {
            plan.run(x.view, y.view, range);
        }
    }
    HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
    const auto got = y.download(ctx);

    // Reference in double: the float reference's own sequential rounding grows with the row
    // length and would dominate the comparison on rows of 10^6 nonzeros.
    std::vector<double> want(static_cast<std::size_t>(a.num_rows * width), 0.0);
    std::vector<double> magnitude(want.size(), 0.0);  // sum of |a_ik x_kj|: the scale
    std::vector<char> inside(static_cast<std::size_t>(a.num_rows), 0);
    for (const auto range : ranges) {
        for (auto i = range.begin; i < range.end; ++i) {
            inside[static_cast<std::size_t>(i)] = 1;
            for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
                const double v = a.has_values() ? a.values[k] : 1.0;
                for (std::int64_t c = 0; c < width; ++c) {
                    const double term = v * xv[static_cast<std::size_t>(a.indices[k] * width + c)];
                    want[static_cast<std::size_t>(i * width + c)] += term;
                    magnitude[static_cast<std::size_t>(i * width + c)] += std::abs(term);
                }
            }
        }
    }
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < a.num_rows && bad < 10; ++i) {
        // Valued rows: the GPU sums segments of at most `cost` terms in order and adds the
        // segments' partial sums by atomics in any order; rounding errors of terms of random sign
        // accumulate like a random walk, about sqrt(n) eps * sum|terms|, so k = 4 + 2 sqrt(n)
        // with scale the element's sum of |a_ik x_kj| (against the double reference).
        const double k_tol = 4.0 + 2.0 * std::sqrt(static_cast<double>(a.row_nnz(i)));
        for (std::int64_t c = 0; c < ldy; ++c) {
            const float g = got[static_cast<std::size_t>(i * ldy + c)];
            if (inside[static_cast<std::size_t>(i)] == 0 || c >= width) {
                if (!std::isnan(g)) {
                    ADD_FAILURE() << "row " << i << " column " << c << " written: " << g;
                    ++bad;
                }
                continue;
            }
            const double w = want[static_cast<std::size_t>(i * width + c)];
            const double tol =
                exact ? 0.0
                      : tolerance<float>(k_tol, magnitude[static_cast<std::size_t>(i * width + c)]);
            if (!(std::abs(g - w) <= tol)) {
                ADD_FAILURE() << "row " << i << " (" << a.row_nnz(i) << " nonzeros) column " << c
                              << ": got " << g << ", want " << w << ", tolerance " << tol;
                ++bad;
            }
        }
    }
    ASSERT_EQ(bad, 0);
}

std::vector<std::vector<halo::RowRange>> full_and_split(std::int64_t n)
{
    return {{{0, n}}, {{0, n / 3}, {n / 3, n}}};
}

const std::vector<std::int64_t> kWidths = {1, 3, 31, 32, 33, 100, 256, 1000};

TEST(MergePathSpmm, RmatAllWidthsFullAndSplitRanges)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    std::uint64_t seed = 10;
    for (const bool valued : {false, true}) {
        const auto a = rmat_csr(10, ++seed, valued);
        const auto plan = halo::cuda::make_mergepath_spmm_plan(ctx, a, 1000);
        EXPECT_EQ(plan->algorithm(), "mergepath");
        for (const auto width : kWidths) {
            for (const auto& ranges : full_and_split(a.num_rows)) {
                check_spmm(ctx, *plan, a, width, ranges, ++seed);
            }
        }
    }
}

TEST(MergePathSpmm, AlignedWidthsUseFloat4Lanes)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    std::uint64_t seed = 900;
    for (const bool valued : {false, true}) {
        const auto a = rmat_csr(10, ++seed, valued);
        const auto plan = halo::cuda::make_mergepath_spmm_plan(ctx, a, 256);
        const auto n = a.num_rows;
        for (const std::int64_t width : {4, 8, 32, 100, 128, 256}) {
            check_spmm(ctx, *plan, a, width, {{0, n}}, ++seed, false);
            check_spmm(ctx, *plan, a, width, {{0, n / 3}, {n / 3, n}}, ++seed, false);
        }
    }
    const auto long_row = csr_with_rows({0, 100'000, 0, 5}, 4096, true, 33);
    const auto plan = halo::cuda::make_mergepath_spmm_plan(ctx, long_row, 128);
    check_spmm(ctx, *plan, long_row, 128, {{0, 4}}, ++seed, false);
}

// L2 hints: a quarter of the columns hot (the rest marked cold in the device indices), hinted
// loads at every width (hint_min_x_bytes 0), or from width 200 on (marked indices with plain
// loads below); values, a pattern and every lane width, full and split ranges.
TEST(MergePathSpmm, L2HintsHotAndColdColumns)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    std::uint64_t seed = 1300;
    for (const bool valued : {false, true}) {
        const auto a = rmat_csr(10, ++seed, valued);
        const std::int64_t hint_width = 64;
        for (const std::int64_t min_x : {std::int64_t{0}, a.num_cols * 200 * 4}) {
            MergePathOptions options;
            options.hint_hot_bytes = 4 * hint_width * (a.num_cols / 4);
            options.hint_width = hint_width;
            options.hint_min_x_bytes = min_x;
            const auto plan = halo::cuda::make_mergepath_spmm_plan(ctx, a, 256, options);
            // "mergepath, L2 hints (256 hot columns, P% of reads)": the reads counted on the
            // device give the host reference's hot set (its share of the reads).
            const auto host = halo::mergepath::mark_cold_columns(a.view(), a.num_cols / 4);
            const int share = static_cast<int>(
                100.0 * static_cast<double>(host.hot_reads) / static_cast<double>(a.nnz()) + 0.5);
            EXPECT_EQ(plan->algorithm(), "mergepath, L2 hints (" + std::to_string(a.num_cols / 4) +
                                             " hot columns, " + std::to_string(share) +
                                             "% of reads)");
            for (const std::int64_t width : {1, 3, 32, 100, 128, 256}) {
                for (const auto& ranges : full_and_split(a.num_rows)) {
                    check_spmm(ctx, *plan, a, width, ranges, ++seed);
                }
                check_spmm(ctx, *plan, a, width, {{0, a.num_rows}}, ++seed, false);
            }
        }
    }
    // No hot column at all (every index marked); every column hot, or X below the threshold at
    // every width: nothing marked, the plain plan.
    const auto a = rmat_csr(9, ++seed, true);
    for (const auto& [hot_bytes, min_x] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {1, 0}, {std::int64_t{1} << 30, 0}, {1024, a.num_cols * 129 * 4}}) {
        MergePathOptions options;
        options.hint_hot_bytes = hot_bytes;
        options.hint_min_x_bytes = min_x;
        const auto plan = halo::cuda::make_mergepath_spmm_plan(ctx, a, 128, options);
        EXPECT_EQ(plan->algorithm().find("L2 hints") != std::string::npos, hot_bytes == 1)
            << plan->algorithm();
        check_spmm(ctx, *plan, a, 128, {{0, a.num_rows}}, ++seed, false);
    }
}

TEST(MergePathSpmm, ErdosRenyiWithEmptyRows)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    std::uint64_t seed = 100;
    for (const bool valued : {false, true}) {
        const auto a = erdos_renyi_csr(std::int64_t{1} << 11, ++seed, valued);
        const auto plan = halo::cuda::make_mergepath_spmm_plan(ctx, a, 1000);
        for (const auto width : kWidths) {
            for (const auto& ranges : full_and_split(a.num_rows)) {
                check_spmm(ctx, *plan, a, width, ranges, ++seed);
            }
        }
    }
}

TEST(MergePathSpmm, ExtremeCostsOnSkewedGraph)
{
    // cost 1: every nonzero its own segment (every long row split, maximal atomics); cost 7 with
    // no parallelism floor; a cost beyond the graph: one segment, no split row at all.
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    std::uint64_t seed = 200;
    const auto a = rmat_csr(9, 77, true);
    for (const std::int64_t cost : {1, 7, 1 << 30}) {
        MergePathOptions o;
        o.cost = cost;
        o.min_segments = 0;
        const auto plan = halo::cuda::make_mergepath_spmm_plan(ctx, a, 256, o);
        EXPECT_EQ(plan->algorithm(), "mergepath-cost" + std::to_string(cost));
        for (const std::int64_t width : {1, 3, 32, 33, 256}) {
            for (const auto& ranges : full_and_split(a.num_rows)) {
                check_spmm(ctx, *plan, a, width, ranges, ++seed);
            }
        }
    }
}

TEST(MergePathSpmm, OneRowOfAMillionNonzeros)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    std::uint64_t seed = 300;
    // Rows: the long one between empty rows and a short one, so the long row's neighbours too
    // must stay exact while every segment but a few adds into the long row with atomics.
    const auto a = csr_with_rows({0, 1'000'000, 0, 5}, 4096, true, 31);
    const auto plan = halo::cuda::make_mergepath_spmm_plan(ctx, a, 100);
    for (const std::int64_t width : {1, 32, 33, 100}) {
        check_spmm(ctx, *plan, a, width, {{0, 4}}, ++seed);
        check_spmm(ctx, *plan, a, width, {{1, 2}, {3, 4}}, ++seed);
    }
    const auto single = csr_with_rows({1'000'000}, 4096, false, 0);
    const auto single_plan = halo::cuda::make_mergepath_spmm_plan(ctx, single, 33);
    for (const std::int64_t width : {1, 33}) {
        check_spmm(ctx, *single_plan, single, width, {{0, 1}}, ++seed);
    }
}

TEST(MergePathSpmm, OneRowAndEmptyRanges)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    std::uint64_t seed = 400;
    const auto one = csr_with_rows({3}, 5, true, 41);
    const auto plan = halo::cuda::make_mergepath_spmm_plan(ctx, one, 1000);
    for (const auto width : kWidths) {
        check_spmm(ctx, *plan, one, width, {{0, 1}}, ++seed);
    }
    // An empty range writes nothing; an empty row is written as zeros.
    check_spmm(ctx, *plan, one, 8, {{0, 0}, {1, 1}}, ++seed);
    const auto empty_row = csr_with_rows({0}, 5, false, 0);
    const auto empty_plan = halo::cuda::make_mergepath_spmm_plan(ctx, empty_row, 4);
    check_spmm(ctx, *empty_plan, empty_row, 4, {{0, 1}}, ++seed);
    const halo::Csr none;
    const auto none_plan = halo::cuda::make_mergepath_spmm_plan(ctx, none, 4);
    check_spmm(ctx, *none_plan, none, 4, {{0, 0}}, ++seed);
}

TEST(MergePathSpmm, SharedGraphs)
{
    HALO_REQUIRE_GPUS(1);
    std::uint64_t seed = 500;
    for (const std::string name : {"cora.el.gz", "BlogCatalog.el.gz"}) {
        if (halo::testing::shared_data_file(name).empty()) {
            GTEST_SKIP() << "shared data file " << name << " not found under "
                         << halo::testing::shared_data_dir();
        }
    }
    halo::cuda::Context ctx;
    for (const std::string name : {"cora.el.gz", "BlogCatalog.el.gz"}) {
        SCOPED_TRACE(name);
        auto a = halo::testing::read_symmetric_graph(halo::testing::shared_data_file(name));
        halo::normalize(a, halo::Normalization::gcn);
        const auto plan = halo::cuda::make_mergepath_spmm_plan(ctx, a, 256);
        for (const std::int64_t width : {1, 16, 33, 128, 256}) {
            for (const auto& ranges : full_and_split(a.num_rows)) {
                check_spmm(ctx, *plan, a, width, ranges, ++seed);
            }
        }
    }
}

TEST(MergePathSpmm, RejectsBadArguments)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    const auto a = rmat_csr(6, 3, false);
    EXPECT_THROW((void)halo::cuda::make_mergepath_spmm_plan(ctx, a, 0), halo::InputError);
    MergePathOptions bad_cost;
    bad_cost.cost = -1;
    EXPECT_THROW((void)halo::cuda::make_mergepath_spmm_plan(ctx, a, 8, bad_cost), halo::InputError);
    MergePathOptions bad_floor;
    bad_floor.min_segments = -1;
    EXPECT_THROW((void)halo::cuda::make_mergepath_spmm_plan(ctx, a, 8, bad_floor),
                 halo::InputError);
    auto broken = a;
    broken.indices[0] = static_cast<halo::local_id>(a.num_cols);
    EXPECT_THROW((void)halo::cuda::make_mergepath_spmm_plan(ctx, broken, 8), halo::InputError);

    const auto plan = halo::cuda::make_mergepath_spmm_plan(ctx, a, 8);
    const std::vector<float> zeros(static_cast<std::size_t>(a.num_rows * 16), 0.0f);
    DeviceMatrix x(ctx, zeros, a.num_rows, 16, 16);
    DeviceMatrix y(ctx, zeros, a.num_rows, 16, 16);
    EXPECT_THROW(plan->run(x.view, y.view, {0, a.num_rows}), halo::LogicError);  // width > 8
    const halo::DenseView<float> x8{x.view.data, a.num_rows, 8, 16};
    const halo::DenseView<float> y8{y.view.data, a.num_rows, 8, 16};
    EXPECT_THROW(plan->run(x8, y8, {0, a.num_rows + 1}), halo::LogicError);
    EXPECT_THROW(plan->run(x8, y8, {3, 2}), halo::LogicError);
    HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
}

}  // namespace
