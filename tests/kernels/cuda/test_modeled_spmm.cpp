// The cost model's SpMM plan (make_modeled_spmm_plan, halo-infer's default `auto` without stored
// autotune choices) on the GPU: on an operator for each rule of
// halo/kernels_host/spmm_cost_model.hpp it runs the kernel the model names at each width
// (algorithm(), report()), equals reference::spmm within tolerance on a NaN-poisoned y over full
// and split ranges, builds MergePath once for both of its costs, and with an OperatorScaling makes
// the values r_i c_j on the device (MergePath, row-split, cuSPARSE; refused where Accel-GCN may be
// picked). The registry's `auto` builds it.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/graph.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/device.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/spmm_cost_model.hpp"
#include "halo/kernels_host/spmm_registry.hpp"
#include "halo_test.hpp"
#include "spmm_device_fixtures.hpp"

namespace {

using halo::Csr;
using halo::ModeledKernel;
using halo::testing::check_spmm;
using halo::testing::Gpu;
using halo::testing::rmat_graph;

const halo::SpmmPlanHints kNoHints;

struct Case {
    std::string label;
    Csr a;
    std::vector<std::int64_t> widths;
};

// One operator per rule (gcn values), with the widths that reach its kernels.
std::vector<Case> cases()
{
    std::vector<Case> out;
    out.push_back({"grid (regular: row-split)", halo::build_csr(halo::testing::grid_edges(70), {}),
                   {7, 64, 256}});
    // A 240 x 240 grid with a hub linked to 300 nodes: 230k nonzeros (not tiny), a longest row of
    // 302 (about 76x the mean): MergePath to 31, the chunked row-split (the hub cut into units)
    // from 32 where the device does not overlap MergePath's zeroing (else MergePath); no width
    // picks Accel-GCN, so the scaled test runs it too.
    auto hub = halo::testing::grid_edges(240);
    for (halo::global_id v = 1; v <= 300; ++v) {
        hub.src.push_back(0);
        hub.dst.push_back(v * 13);
    }
    out.push_back({"grid with a hub (small sparse: rowchunk from 32 without overlap)",
                   halo::build_csr(hub, {}),
                   {16, 31, 32, 256}});
    // R-MAT 12 with edge factor 2: about 15k nonzeros, a skewed degree: tiny.
    out.push_back({"R-MAT 12/2 (tiny: Accel-GCN to 32)",
                   rmat_graph(12, 2, 5, halo::Normalization::gcn),
                   {7, 32, 33, 128}});
    // R-MAT 12 with edge factor 32: mean row about 50, under 2e6 items: cuSPARSE from 192.
    out.push_back({"R-MAT 12/32 (dense mid-size: MergePath, cuSPARSE from 192)",
                   rmat_graph(12, 32, 6, halo::Normalization::gcn), {16, 191, 192, 256}});
    // R-MAT 17 with edge factor 16: about 4M nonzeros: large.
    out.push_back({"R-MAT 17/16 (large: MergePath, cost 200 from 64)",
                   rmat_graph(17, 16, 7, halo::Normalization::gcn), {32, 64, 256}});
    return out;
}

std::string expected_algorithm(const halo::ModeledChoice& c)
{
    switch (c.kernel) {
        case ModeledKernel::cusparse:
            return "model(cusparse-csr-alg2";
        case ModeledKernel::accel_gcn:
            return "model(accel-gcn";
        case ModeledKernel::mergepath:
            return "model(mergepath";
        case ModeledKernel::rowsplit:
            return "model(rowsplit";
        case ModeledKernel::rowchunk:
            return "model(rowchunk";
    }
    return "?";
}

TEST(ModeledSpmm, EachRuleRunsItsKernelAndMatchesTheReference)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 31000;
    for (const auto& c : cases()) {
        SCOPED_TRACE(c.label);
        const auto shape = halo::operator_shape(c.a.view());
        const auto plan = halo::cuda::make_modeled_spmm_plan(gpu.ctx, c.a, {256, kNoHints});
        EXPECT_EQ(plan->algorithm(), "model");
        const auto n = c.a.num_rows;
        const bool overlapped = halo::cuda::zeroing_overlapped(gpu.ctx.device());
        const auto model = [&](std::int64_t d) {
            return halo::spmm_cost_model(shape, d, 0, overlapped);
        };
        for (const auto d : c.widths) {
            const auto choice = model(d);
            check_spmm(*gpu.backend, *plan, c.a, d, {{0, n}}, ++seed);
            EXPECT_EQ(plan->algorithm().rfind(expected_algorithm(choice), 0), 0u)
                << "d = " << d << ": " << plan->algorithm();
            check_spmm(*gpu.backend, *plan, c.a, d, {{0, n / 3}, {n / 3, n}}, ++seed);
        }
        // One report line per width, each the model's description.
        std::istringstream report(plan->report());
        std::string line;
        std::size_t lines = 0;
        while (std::getline(report, line)) {
            ASSERT_LT(lines, c.widths.size()) << plan->report();
            const auto d = c.widths[lines];
            EXPECT_EQ(line, "cost model: " + halo::describe(shape, d, model(d)))
                << plan->report();
            ++lines;
        }
        EXPECT_EQ(lines, c.widths.size()) << plan->report();
        EXPECT_GT(plan->memory().total(), 0);
        EXPECT_EQ(plan->memory().nonzeros, c.a.nnz());
    }
}

// The large operator's two MergePath costs share one plan: one copy of the operator.
TEST(ModeledSpmm, MergePathIsBuiltOnceForBothCosts)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = rmat_graph(17, 16, 7, halo::Normalization::gcn);
    const auto plan = halo::cuda::make_modeled_spmm_plan(gpu.ctx, a, {256, kNoHints});
    const auto mem = plan->memory();
    EXPECT_EQ(mem.indices, 4 * a.nnz()) << "more than one copy of the column indices";
    EXPECT_EQ(mem.values, 4 * a.nnz());
    check_spmm(*gpu.backend, *plan, a, 32, {{0, a.num_rows}}, 31500);
    EXPECT_NE(plan->algorithm().find("cost 200 from d = 64"), std::string::npos)
        << plan->algorithm();
}

// A large operator whose X is past 8x the device's L2 at a width above 128 runs MergePath over
// slices of 128 columns: the reference's results over full and split ranges, run_add y0 plus
// them (within rounding: MergePath's split rows add in any order), whole rows at 128 and where X
// at 192 is below 8x the L2 (the H100's and the H200's).
TEST(ModeledSpmm, ColumnSlicesWhereXIsPastEightTimesTheL2)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    // R-MAT 19 with edge factor 4: 524288 rows, X at d = 256 is 537 MB.
    const auto a = rmat_graph(19, 4, 11, halo::Normalization::gcn);
    const auto shape = halo::operator_shape(a.view());
    const auto l2 = halo::cuda::device_info(gpu.ctx.device()).l2_cache_bytes;
    if (halo::spmm_cost_model(shape, 256, l2).column_slice == 0) {
        GTEST_SKIP() << "this device's L2 (" << l2 << " bytes) holds more than 1/8 of X";
    }
    const auto plan = halo::cuda::make_modeled_spmm_plan(gpu.ctx, a, {256, kNoHints});
    const auto n = a.num_rows;
    std::uint64_t seed = 35000;
    for (const std::int64_t d : {256, 192, 128}) {
        check_spmm(*gpu.backend, *plan, a, d, {{0, n / 3}, {n / 3, n}}, ++seed);
        const bool sliced = halo::spmm_cost_model(shape, d, l2).column_slice > 0;
        EXPECT_EQ(plan->algorithm().find(", column slices of 128)") != std::string::npos, sliced)
            << "d = " << d << ": " << plan->algorithm();
    }
    halo::testing::check_spmm_add(*gpu.backend, *plan, a, 256, {{0, n}}, ++seed, false);
    EXPECT_NE(plan->report().find("over slices of 128 columns"), std::string::npos)
        << plan->report();
}

// With scalings the values are made on the device: the result is that of the operator whose
// values are row[i] * col[j]; the pattern's own values are ignored.
TEST(ModeledSpmm, ScaledPlansMakeTheValuesOnTheDevice)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 32000;
    for (auto& c : cases()) {
        SCOPED_TRACE(c.label);
        Csr pattern = c.a;
        pattern.values.clear();
        halo::OperatorScaling scaling;
        scaling.row = halo::testing::random_floats(static_cast<std::size_t>(c.a.num_rows), ++seed,
                                                   0.1f, 1.0f);
        scaling.col = halo::testing::random_floats(static_cast<std::size_t>(c.a.num_cols), ++seed,
                                                   0.1f, 1.0f);
        // Every shape has a scaled plan: where the model would pick Accel-GCN (no form with
        // both scalings unless pattern operators), it picks among the kernels that take one.
        Csr scaled = pattern;
        scaled.values.resize(static_cast<std::size_t>(pattern.nnz()));
        for (std::int64_t i = 0; i < pattern.num_rows; ++i) {
            for (auto k = pattern.indptr[i]; k < pattern.indptr[i + 1]; ++k) {
                scaled.values[k] = scaling.row[i] * scaling.col[pattern.indices[k]];
            }
        }
        const auto plan =
            halo::cuda::make_modeled_spmm_plan(gpu.ctx, pattern, {256, kNoHints}, &scaling);
        for (const auto d : c.widths) {
            check_spmm(*gpu.backend, *plan, scaled, d, {{0, c.a.num_rows}}, ++seed);
            const auto algorithm = plan->algorithm();
            EXPECT_TRUE(algorithm.find("values made on the device") != std::string::npos ||
                        algorithm.find("pattern with scalings") != std::string::npos)
                << algorithm;
        }
        // Wrong scaling lengths are refused before anything runs.
        halo::OperatorScaling short_rows = scaling;
        short_rows.row.pop_back();
        EXPECT_THROW(halo::cuda::make_modeled_spmm_plan(gpu.ctx, pattern, {256, kNoHints},
                                                        &short_rows),
                     halo::LogicError);
    }
}

// `--spmm mergepath` and `--spmm rowsplit` take the pattern and the scalings too (the registry's
// make_scaled): the result is that of the operator with values row[i] * col[j]; `--spmm
// accel_gcn` only with pattern operators.
TEST(ModeledSpmm, ExplicitMergePathAndRowSplitMakeTheValuesOnTheDevice)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 34000;
    const auto a = rmat_graph(14, 16, 9, halo::Normalization::gcn);
    Csr pattern = a;
    pattern.values.clear();
    halo::OperatorScaling scaling;
    scaling.row =
        halo::testing::random_floats(static_cast<std::size_t>(a.num_rows), ++seed, 0.1f, 1.0f);
    scaling.col =
        halo::testing::random_floats(static_cast<std::size_t>(a.num_cols), ++seed, 0.1f, 1.0f);
    Csr scaled = pattern;
    scaled.values.resize(static_cast<std::size_t>(pattern.nnz()));
    for (std::int64_t i = 0; i < pattern.num_rows; ++i) {
        for (auto k = pattern.indptr[i]; k < pattern.indptr[i + 1]; ++k) {
            scaled.values[k] = scaling.row[i] * scaling.col[pattern.indices[k]];
        }
    }
    for (const char* name : {"mergepath", "rowsplit"}) {
        SCOPED_TRACE(name);
        const auto* entry = halo::find_spmm_kernel(name, halo::spmm_use_infer);
        ASSERT_NE(entry, nullptr);
        ASSERT_NE(entry->make_scaled, nullptr);
        const auto plan = entry->make_scaled(gpu.ctx, pattern, {128, kNoHints}, scaling);
        ASSERT_NE(plan, nullptr);
        EXPECT_EQ(plan->memory().values, 4 * a.nnz());
        for (const std::int64_t d : {7, 64, 128}) {
            check_spmm(*gpu.backend, *plan, scaled, d, {{0, a.num_rows}}, ++seed);
        }
    }
    // Accel-GCN orders the nonzeros on the host: its registry entry takes a column scaling only
    // as pattern operators (then it keeps the pattern and both scalings); asked otherwise, its
    // factory reports the caller's bug.
    const auto* accel = halo::find_spmm_kernel("accel_gcn", halo::spmm_use_infer);
    ASSERT_NE(accel->make_scaled, nullptr);
    EXPECT_FALSE(accel->takes(halo::spmm_form_scaled));
    EXPECT_TRUE(accel->takes(halo::spmm_form_scaled_pattern));
    EXPECT_TRUE(accel->takes(halo::spmm_form_row_scaled));
    EXPECT_THROW(accel->make_scaled(gpu.ctx, pattern, {128, kNoHints}, scaling), halo::LogicError);
    halo::SpmmPlanRequest lean{128, kNoHints};
    lean.pattern_operators = true;
    const auto plan = accel->make_scaled(gpu.ctx, pattern, lean, scaling);
    ASSERT_NE(plan, nullptr);
    EXPECT_EQ(plan->memory().values, 4 * (a.num_rows + a.num_cols));
    check_spmm(*gpu.backend, *plan, scaled, 64, {{0, a.num_rows}}, ++seed);
}

// The registry's `auto` without stored choices is the cost model, scaled where it can be.
TEST(ModeledSpmm, AutoWithoutStoredChoicesIsTheModel)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto* entry = halo::find_spmm_kernel("auto", halo::spmm_use_infer);
    ASSERT_NE(entry, nullptr);
    ASSERT_NE(entry->make, nullptr);
    ASSERT_NE(entry->make_scaled, nullptr);
    const auto a = rmat_graph(17, 16, 7, halo::Normalization::gcn);
    const auto plan = entry->make(gpu.ctx, a, {128, kNoHints});
    check_spmm(*gpu.backend, *plan, a, 64, {{0, a.num_rows}}, 33000);
    EXPECT_EQ(plan->algorithm().rfind("model(mergepath", 0), 0u) << plan->algorithm();

    Csr pattern = a;
    pattern.values.clear();
    halo::OperatorScaling ones;  // empty scalings: every value 1
    const auto scaled = entry->make_scaled(gpu.ctx, pattern, {128, kNoHints}, ones);
    ASSERT_NE(scaled, nullptr);
    check_spmm(*gpu.backend, *scaled, pattern, 64, {{0, a.num_rows}}, 33001);

    // Where the model would pick Accel-GCN for the values (a tiny sparse operator at a narrow
    // width), a gcn operator's pattern and scalings still get a plan: the model picks among the
    // kernels that take that form (issue 48: the split overlap's blocks have such shapes).
    const auto tiny = rmat_graph(12, 2, 5, halo::Normalization::gcn);
    const auto tiny_shape = halo::operator_shape(tiny.view());
    ASSERT_EQ(halo::spmm_cost_model(tiny_shape, 16).kernel, halo::ModeledKernel::accel_gcn);
    Csr tiny_pattern = tiny;
    tiny_pattern.values.clear();
    halo::OperatorScaling gcn;
    gcn.row = halo::testing::random_floats(static_cast<std::size_t>(tiny.num_rows), 33002, 0.1f,
                                           1.0f);
    gcn.col = halo::testing::random_floats(static_cast<std::size_t>(tiny.num_cols), 33003, 0.1f,
                                           1.0f);
    Csr tiny_scaled = tiny_pattern;
    tiny_scaled.values.resize(static_cast<std::size_t>(tiny.nnz()));
    for (std::int64_t i = 0; i < tiny.num_rows; ++i) {
        for (auto k = tiny.indptr[i]; k < tiny.indptr[i + 1]; ++k) {
            tiny_scaled.values[k] = gcn.row[i] * gcn.col[tiny.indices[k]];
        }
    }
    const auto tiny_plan = entry->make_scaled(gpu.ctx, tiny_pattern, {64, kNoHints}, gcn);
    ASSERT_NE(tiny_plan, nullptr);
    for (const std::int64_t d : {1, 8, 16, 32, 64}) {
        check_spmm(*gpu.backend, *tiny_plan, tiny_scaled, d, {{0, tiny.num_rows}}, 33004 + d);
        EXPECT_EQ(tiny_plan->algorithm().find("accel"), std::string::npos)
            << d << ": " << tiny_plan->algorithm();
    }
}

}  // namespace
