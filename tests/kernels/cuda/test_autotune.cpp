// The autotuned SpMM plan (include/halo/kernels/cuda/autotune.hpp) on the GPU: its results equal
// reference::spmm within tolerance whatever kernel it picks (R-MAT, Erdos-Renyi with empty rows,
// cora; widths 1 .. 256; full and split ranges, on a NaN-poisoned y whose rows outside the range
// and padding must stay NaN, although every candidate ran on it while being timed); its report
// names one choice per (range, width); repeated runs reuse the choice without timing again; a
// candidate that rejects a shape is skipped; a deliberately slow candidate loses.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/core/memory_report.hpp"
#include "halo/kernels/cuda/autotune.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/rowsplit.hpp"
#include "halo/kernels_host/accel_gcn_metadata.hpp"
#include "halo/kernels_host/accel_gcn_partition.hpp"
#include "halo/kernels_host/autotune.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo/kernels_host/spmm_registry.hpp"
#include "halo_test.hpp"
#include "spmm_device_fixtures.hpp"

namespace {

using halo::testing::DeviceMatrix;
using halo::testing::download;
using halo::testing::Gpu;
using halo::testing::graph_csr;
using halo::testing::HostMatrix;
using halo::testing::random_matrix;
using halo::testing::read_gcn_graph;
using halo::testing::row_max_abs;
using halo::testing::tolerance;
using halo::testing::upload;

// The autotuner's candidates: the registry's kernels with the autotune use.
const std::set<std::string> kKernels = [] {
    std::set<std::string> out;
    for (const auto* k : halo::spmm_kernels(halo::spmm_use_autotune)) {
        out.insert(k->name);
    }
    return out;
}();

// Runs the plan over `ranges` in order on a NaN-poisoned y (ld = width + 1, so the padding is
// checked too); after each run, covered rows must equal the reference within tolerance and all
// other rows and the padding must still be NaN. Then checks that the plan's table holds a choice
// for every (range, width) run and that algorithm() names the last one.
void check_spmm(halo::Backend& backend, halo::cuda::AutotunedSpmmPlan& plan, const halo::Csr& a,
                std::int64_t width, const std::vector<halo::RowRange>& ranges, std::uint64_t seed)
{
    SCOPED_TRACE(testing::Message()
                 << a.num_rows << " rows, " << a.nnz() << " nonzeros, "
                 << (a.has_values() ? "valued" : "pattern") << ", width " << width);
    const auto x = random_matrix(a.num_cols, width, width + 3, seed);
    const auto ldy = width + 1;
    HostMatrix want(a.num_rows, width, ldy);
    halo::reference::spmm(a.view(), x.cview(), want.view());
    auto dx = upload(backend, x);
    auto dy = upload(backend, HostMatrix(a.num_rows, width, ldy));
    std::vector<char> covered(static_cast<std::size_t>(a.num_rows), 0);
    for (const auto& range : ranges) {
        SCOPED_TRACE(testing::Message()
                     << "after rows [" << range.begin << ", " << range.end << ")");
        plan.run(dx.view, dy.view, range);
        for (auto i = range.begin; i < range.end; ++i) {
            covered[i] = 1;
        }
        if (!range.empty()) {
            const auto* choice = plan.table().find({range.begin, range.end, width});
            ASSERT_NE(choice, nullptr);
            const auto& name = choice->names[choice->index];
            EXPECT_EQ(kKernels.count(name), 1u) << name;
            EXPECT_EQ(plan.algorithm(), "autotune(" + name + ")");
            EXPECT_TRUE(std::isfinite(choice->median_ms[choice->index]));
        }
        const auto got = download(backend, dy);
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            const float max_a = row_max_abs(a, i);
            // A sum of row_nnz products |a_ik| * |x_kj| <= max_a (x in [-1, 1)) in whatever order
            // the chosen kernel uses (atomics included) and in the reference's order: each sum's
            // error is below row_nnz * eps * that scale, k = 4 covers both with room.
            const float tol =
                tolerance<float>(4, std::max<double>(1.0, a.row_nnz(i)) * std::max(max_a, 1.0f));
            for (std::int64_t j = 0; j < ldy; ++j) {
                if (j >= width) {
                    ASSERT_TRUE(std::isnan(got(i, j)))
                        << "padding (" << i << ", " << j << ") was written";
                } else if (covered[i] == 0) {
                    ASSERT_TRUE(std::isnan(got(i, j)))
                        << "row " << i << " outside the ranges was written: " << got(i, j);
                } else {
                    ASSERT_NEAR(got(i, j), want(i, j), tol) << "(" << i << ", " << j << ")";
                }
            }
        }
    }
}

// The report has exactly one line per (range, width) in the table, each naming a real kernel
// and the three others (times or failures).
void check_report(const halo::cuda::AutotunedSpmmPlan& plan, std::size_t expected_keys)
{
    const auto report = plan.report();
    std::istringstream in(report);
    std::string line;
    std::size_t lines = 0;
    while (std::getline(in, line)) {
        ++lines;
        EXPECT_EQ(line.rfind("rows [", 0), 0u) << line;
        const auto colon = line.find(": ");
        ASSERT_NE(colon, std::string::npos) << line;
        const auto chosen = line.substr(colon + 2, line.find(' ', colon + 2) - colon - 2);
        EXPECT_EQ(kKernels.count(chosen), 1u) << line;
        for (const auto& k : kKernels) {
            EXPECT_NE(line.find(k), std::string::npos) << k << " missing from: " << line;
        }
    }
    EXPECT_EQ(lines, expected_keys) << report;
    EXPECT_EQ(plan.table().size(), expected_keys);
}

TEST(AutotunedSpmm, SyntheticGraphsWidthsAndRanges)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 9000;
    for (const std::string kind : {"rmat", "er"}) {
        for (const bool valued : {false, true}) {
            const auto a = graph_csr(kind, kind == "rmat" ? 11 : 12, ++seed, valued);
            const auto plan = halo::cuda::make_autotuned_spmm_plan(gpu.ctx, a, 256);
            EXPECT_EQ(plan->algorithm(), "autotune");
            const auto n = a.num_rows;
            std::set<halo::AutotuneKey> keys;
            for (const std::int64_t width : {1, 3, 32, 33, 100, 256}) {
                const std::vector<std::vector<halo::RowRange>> range_sets = {
                    {{0, n}},
                    {{0, n / 3}, {n / 3, n}},
                    {{n / 4, n / 2}, {n / 2, n / 2}, {n - 1, n}}};
                for (const auto& ranges : range_sets) {
                    check_spmm(*gpu.backend, *plan, a, width, ranges, ++seed);
                    for (const auto& r : ranges) {
                        if (!r.empty()) {
                            keys.insert({r.begin, r.end, width});
                        }
                    }
                }
            }
            check_report(*plan, keys.size());
        }
    }
}

TEST(AutotunedSpmm, Cora)
{
    HALO_REQUIRE_GPUS(1);
    HALO_REQUIRE_SHARED_FILE(path, "cora.el.gz");
    Gpu gpu;
    const auto a = read_gcn_graph(path);
    const auto plan = halo::cuda::make_autotuned_spmm_plan(gpu.ctx, a, 256);
    const auto n = a.num_rows;
    std::uint64_t seed = 9500;
    for (const std::int64_t width : {1, 32, 100, 256}) {
        check_spmm(*gpu.backend, *plan, a, width, {{0, n}}, ++seed);
        check_spmm(*gpu.backend, *plan, a, width, {{0, n / 3}, {n / 3, n}}, ++seed);
    }
    check_report(*plan, 4 * 3);
}

// A plan given stored choices builds only the kernels they chose (one operator copy, not six),
// runs them without timing, and builds and times the rest only for a shape it has no choice for.
TEST(AutotunedSpmm, StoredChoicesBuildOnlyTheChosenKernels)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = graph_csr("rmat", 12, 78, true);
    const auto n = a.num_rows;
    // Choices from a first plan that timed everything.
    const auto first = halo::cuda::make_autotuned_spmm_plan(gpu.ctx, a, 64);
    check_spmm(*gpu.backend, *first, a, 16, {{0, n}}, 9650);
    const auto* timed = first->table().find({0, n, 16});
    ASSERT_NE(timed, nullptr);
    halo::cuda::AutotunePlanOptions options;
    halo::AutotuneChoice stored = *timed;
    stored.stored = true;
    options.stored_choices.push_back({{0, n, 16}, stored});
    const auto plan = halo::cuda::make_autotuned_spmm_plan(gpu.ctx, a, 64, options);
    // Without library workspaces: cuSPARSE, when it is the stored choice, sizes its buffer on its
    // first run (which kernel wins the first plan's timing varies from run to run).
    const auto built = [&] { return plan->memory().total() - plan->memory().workspace; };
    const auto one_copy = built();
    EXPECT_GT(one_copy, 0);
    EXPECT_LT(one_copy, first->memory().total()) << "every candidate was built";
    check_spmm(*gpu.backend, *plan, a, 16, {{0, n}}, 9651);
    EXPECT_EQ(plan->tuning_seconds(), 0.0) << "a stored choice was timed again";
    EXPECT_EQ(built(), one_copy) << "a candidate besides the stored choice was built";
    EXPECT_EQ(plan->algorithm(), "autotune(" + timed->names[timed->index] + ")");
    // A width with no stored choice: every candidate is built and timed, and results stay right.
    check_spmm(*gpu.backend, *plan, a, 32, {{0, n}}, 9652);
    EXPECT_GT(plan->tuning_seconds(), 0.0);
    EXPECT_GT(plan->memory().total(), one_copy);
    ASSERT_NE(plan->table().find({0, n, 32}), nullptr);
}

// Later runs of a known (range, width) take the cached choice: the table and its medians stay as
// they were, algorithm() stays the same, results stay right on fresh inputs.
TEST(AutotunedSpmm, RepeatedRunsReuseTheChoice)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = graph_csr("rmat", 12, 77, true);
    const auto plan = halo::cuda::make_autotuned_spmm_plan(gpu.ctx, a, 64);
    const auto n = a.num_rows;
    std::uint64_t seed = 9700;
    for (const std::int64_t width : {16, 64}) {
        check_spmm(*gpu.backend, *plan, a, width, {{0, n / 3}, {n / 3, n}}, ++seed);
        const auto before = plan->report();
        const auto* interior = plan->table().find({0, n / 3, width});
        const auto* boundary = plan->table().find({n / 3, n, width});
        ASSERT_NE(interior, nullptr);
        ASSERT_NE(boundary, nullptr);
        const auto interior_choice = interior->index;
        const auto boundary_choice = boundary->index;
        const auto size = plan->table().size();
        for (int r = 0; r < 4; ++r) {
            check_spmm(*gpu.backend, *plan, a, width, {{0, n / 3}, {n / 3, n}}, ++seed);
            EXPECT_EQ(plan->algorithm(), "autotune(" + boundary->names[boundary_choice] + ")");
            EXPECT_EQ(plan->table().find({0, n / 3, width})->index, interior_choice);
            EXPECT_EQ(plan->table().size(), size);
            EXPECT_EQ(plan->report(), before) << "a cached choice was measured again";
        }
    }
}

// What the tuning tried and did not keep goes back (issue 48: on R-MAT 22 the candidates' copies
// and a rowchunk workspace sized for 2^20 columns held 26 GiB for the whole run): after the
// shapes are chosen, release_unkept frees every candidate that no shape chose; the chosen ones
// still run, cached, with the same results; a new shape builds the freed candidates again and
// times them; the rowchunk candidate's workspace is sized by the widths run, not max_dim.
TEST(AutotunedSpmm, ReleaseUnkeptFreesTheCandidatesNoShapeChose)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = graph_csr("rmat", 14, 79, true);
    const std::int64_t max_dim = std::int64_t{1} << 20;  // what the CUDA backend asks for
    const auto plan = halo::cuda::make_autotuned_spmm_plan(gpu.ctx, a, max_dim);
    const auto n = a.num_rows;
    std::uint64_t seed = 9900;
    check_spmm(*gpu.backend, *plan, a, 32, {{0, n / 2}, {n / 2, n}}, ++seed);
    const auto all = plan->memory();
    // No candidate holds scratch for widths it never ran: a rowchunk workspace of units x 2^20
    // floats would be gigabytes here.
    EXPECT_LT(all.workspace, std::int64_t{256} << 20) << halo::format_memory_report(all);
    std::set<std::size_t> chosen;
    for (const auto& [key, choice] : plan->table().entries()) {
        chosen.insert(choice.index);
    }
    const auto freed = plan->release_unkept();
    EXPECT_EQ(freed, plan->candidate_names().size() - chosen.size());
    const auto kept = plan->memory();
    EXPECT_LT(kept.total(), all.total());
    EXPECT_LE(kept.indices, static_cast<std::int64_t>(chosen.size() + 1) * 8 * a.nnz())
        << halo::format_memory_report(kept);
    EXPECT_EQ(plan->release_unkept(), 0u) << "released twice";
    const auto report = plan->report();
    check_spmm(*gpu.backend, *plan, a, 32, {{0, n / 2}, {n / 2, n}}, ++seed);
    EXPECT_EQ(plan->report(), report) << "a kept choice was measured again";
    // A new width: the freed candidates are built again and timed.
    check_spmm(*gpu.backend, *plan, a, 8, {{0, n}}, ++seed);
    EXPECT_EQ(plan->table().size(), 3u);
    EXPECT_GE(plan->memory().total(), kept.total());
}

// A plan wrapper for the selection on the device: `rejects_above` makes it throw like a kernel
// rejecting a shape; `repeats` runs the inner plan that many times (a slow but correct kernel).
class WrappedPlan final : public halo::SpmmPlan {
public:
    WrappedPlan(std::unique_ptr<halo::SpmmPlan> inner, std::int64_t rejects_above, int repeats)
        : inner_(std::move(inner)), rejects_above_(rejects_above), repeats_(repeats)
    {
    }
    void run(halo::DenseView<const float> x, halo::DenseView<float> y, halo::RowRange rows) override
    {
        HALO_EXPECTS(x.cols <= rejects_above_, "width ", x.cols, " rejected");
        ++runs;
        for (int r = 0; r < repeats_; ++r) {
            inner_->run(x, y, rows);
        }
    }
    std::string algorithm() const override { return "wrapped"; }
    int runs = 0;

private:
    std::unique_ptr<halo::SpmmPlan> inner_;
    std::int64_t rejects_above_;
    int repeats_;
};

TEST(AutotunedSpmm, SlowCandidatesLoseAndRejectingOnesAreSkipped)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = graph_csr("rmat", 13, 5, true);
    const auto n = a.num_rows;
    std::vector<halo::cuda::AutotunedSpmmPlan::Candidate> candidates;
    // 0: 50 times the work of 1, first in order (it would win ties); 2: rejects widths above 8.
    auto slow = std::make_unique<WrappedPlan>(halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 64),
                                              1000, 50);
    auto fast =
        std::make_unique<WrappedPlan>(halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 64), 1000, 1);
    auto picky =
        std::make_unique<WrappedPlan>(halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 64), 8, 1);
    auto* fast_raw = fast.get();
    candidates.push_back({"slow", std::move(slow), nullptr});
    candidates.push_back({"fast", std::move(fast), nullptr});
    candidates.push_back({"picky", std::move(picky), nullptr});
    halo::cuda::AutotunedSpmmPlan plan(gpu.ctx, a.num_rows, a.num_cols, std::move(candidates),
                                       {"other: not built"});
    const auto x = random_matrix(a.num_cols, 32, 32, 11);
    auto dx = upload(*gpu.backend, x);
    auto dy = upload(*gpu.backend, HostMatrix(n, 32, 32));
    plan.run(dx.view, dy.view, {0, n});
    EXPECT_EQ(plan.algorithm(), "autotune(fast)");
    // A warm-up, three trials (each a timed run, then, below 0.25 ms, a batch of 2 to 64 runs)
    // and the chosen run.
    const int tuned = fast_raw->runs;
    EXPECT_GE(tuned, 1 + 3 + 1);
    EXPECT_LE(tuned, 1 + 3 * (1 + 64) + 1);
    const auto* c = plan.table().find({0, n, 32});
    ASSERT_NE(c, nullptr);
    EXPECT_GT(c->median_ms[0], c->median_ms[1]);
    EXPECT_NE(c->failures[2].find("width 32 rejected"), std::string::npos) << c->failures[2];
    const auto report = plan.report();
    EXPECT_NE(report.find("picky failed: "), std::string::npos) << report;
    EXPECT_NE(report.find("unavailable: other: not built"), std::string::npos) << report;
    plan.run(dx.view, dy.view, {0, n});
    EXPECT_EQ(fast_raw->runs, tuned + 1) << "a cached choice runs once, untimed";
    // Misuse is a precondition failure, not a candidate failure.
    EXPECT_THROW(plan.run(dx.view, dy.view, {0, n + 1}), halo::LogicError);
}

TEST(AutotunedSpmm, EveryCandidateRejectingIsAnInputError)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = graph_csr("rmat", 8, 5, false);
    std::vector<halo::cuda::AutotunedSpmmPlan::Candidate> candidates;
    candidates.push_back(
        {"a",
         std::make_unique<WrappedPlan>(halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 64), 4, 1),
         nullptr});
    candidates.push_back(
        {"b",
         std::make_unique<WrappedPlan>(halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 64), 4, 1),
         nullptr});
    halo::cuda::AutotunedSpmmPlan plan(gpu.ctx, a.num_rows, a.num_cols, std::move(candidates));
    const auto x = random_matrix(a.num_cols, 16, 16, 12);
    auto dx = upload(*gpu.backend, x);
    auto dy = upload(*gpu.backend, HostMatrix(a.num_rows, 16, 16));
    EXPECT_THROW(plan.run(dx.view, dy.view, {0, a.num_rows}), halo::InputError);
    EXPECT_EQ(plan.table().size(), 0u);
}

TEST(AutotunedSpmm, CudaBackendRunsItWhenAsked)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    const auto backend = halo::cuda::make_cuda_backend(ctx, "autotune");
    const auto a = graph_csr("rmat", 9, 7, true);
    const auto plan = backend->make_spmm_plan(a);
    EXPECT_EQ(plan->algorithm(), "autotune");
    auto* tuned = dynamic_cast<halo::cuda::AutotunedSpmmPlan*>(plan.get());
    ASSERT_NE(tuned, nullptr);
    check_spmm(*backend, *tuned, a, 48, {{0, a.num_rows / 2}, {a.num_rows / 2, a.num_rows}}, 8);
    check_report(*tuned, 2);
    EXPECT_EQ(plan->algorithm().rfind("autotune(", 0), 0u);
}

}  // namespace

namespace {

// Kernel metadata through the CUDA backend (SpmmPlanHints), as halo-infer passes it: a first plan
// times its shapes and offers them for the dataset; a second plan given them (and the offline
// Accel-GCN partition) runs without timing, says so in its report, offers nothing new, and
// computes the same right results. Metadata of another operator is skipped with a note.
TEST(AutotunedSpmm, StoredChoicesAndPartitionThroughTheBackend)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    const auto backend = halo::cuda::make_cuda_backend(ctx, "autotune");
    const auto a = graph_csr("rmat", 11, 21, true);
    const auto n = a.num_rows;
    const std::vector<halo::RowRange> ranges{{0, n / 3}, {n / 3, n}};
    halo::SpmmPlanHints hints;
    hints.op = "gcn";
    hints.ranges = ranges;
    const auto first = backend->make_spmm_plan(a, hints);
    auto* tuned = dynamic_cast<halo::cuda::AutotunedSpmmPlan*>(first.get());
    ASSERT_NE(tuned, nullptr);
    check_spmm(*backend, *tuned, a, 64, ranges, 31);
    const auto offered = first->tuning_metadata();
    ASSERT_EQ(offered.size(), 1u);
    EXPECT_EQ(offered[0].kernel, "autotune");
    EXPECT_EQ(offered[0].op, "gcn");
    EXPECT_EQ(offered[0].int64_arrays.at("begin").size(), 2u);

    const auto segments = halo::accel_gcn_segments(n, ranges);
    const auto partition = halo::build_accel_gcn_partition(a.view(), segments, {});
    hints.stored = {offered[0], halo::accel_gcn_to_metadata(partition, a.view(), "gcn")};
    hints.stored[0].origin = "test autotune";
    hints.stored[1].origin = "test accel_gcn";
    const auto second = backend->make_spmm_plan(a, hints);
    auto* reused = dynamic_cast<halo::cuda::AutotunedSpmmPlan*>(second.get());
    ASSERT_NE(reused, nullptr);
    EXPECT_EQ(reused->table().size(), 2u) << "stored choices are preloaded";
    check_spmm(*backend, *reused, a, 64, ranges, 32);
    const auto report = second->report();
    EXPECT_NE(report.find("[stored]"), std::string::npos) << report;
    EXPECT_NE(report.find("loaded from test autotune"), std::string::npos) << report;
    EXPECT_NE(report.find("block partition loaded from test accel_gcn"), std::string::npos)
        << report;
    EXPECT_TRUE(second->tuning_metadata().empty()) << "nothing new was timed";
    for (const auto& key : {halo::AutotuneKey{0, n / 3, 64}, halo::AutotuneKey{n / 3, n, 64}}) {
        EXPECT_EQ(reused->table().find(key)->index, tuned->table().find(key)->index);
    }

    // Metadata of another operator: skipped with a note, timed again.
    const auto other = graph_csr("rmat", 11, 22, true);
    const auto third = backend->make_spmm_plan(other, hints);
    EXPECT_NE(third->report().find("built for another operator"), std::string::npos)
        << third->report();
    auto* retimed = dynamic_cast<halo::cuda::AutotunedSpmmPlan*>(third.get());
    ASSERT_NE(retimed, nullptr);
    EXPECT_EQ(retimed->table().size(), 0u);
}

// --spmm accel_gcn with a stored partition: loaded, and right.
TEST(AutotunedSpmm, AccelGcnBackendUsesTheStoredPartition)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    const auto backend = halo::cuda::make_cuda_backend(ctx, "accel_gcn");
    const auto a = graph_csr("er", 12, 23, true);
    const auto n = a.num_rows;
    const std::vector<halo::RowRange> ranges{{0, n / 2}, {n / 2, n}};
    halo::SpmmPlanHints hints;
    hints.op = "adjacency";
    hints.ranges = ranges;
    const auto partition =
        halo::build_accel_gcn_partition(a.view(), halo::accel_gcn_segments(n, ranges), {});
    hints.stored = {halo::accel_gcn_to_metadata(partition, a.view(), "adjacency")};
    hints.stored[0].origin = "test accel_gcn";
    const auto plan = backend->make_spmm_plan(a, hints);
    EXPECT_NE(plan->report().find("block partition loaded from test accel_gcn"), std::string::npos)
        << plan->report();
    const auto x = random_matrix(a.num_cols, 40, 40, 5);
    HostMatrix want(n, 40, 40);
    halo::reference::spmm(a.view(), x.cview(), want.view());
    auto dx = upload(*backend, x);
    auto dy = upload(*backend, HostMatrix(n, 40, 40));
    for (const auto& r : ranges) {
        plan->run(dx.view, dy.view, r);
    }
    const auto got = download(*backend, dy);
    for (std::int64_t i = 0; i < n; ++i) {
        const float tol = tolerance<float>(
            4, std::max<double>(1.0, a.row_nnz(i)) * std::max(row_max_abs(a, i), 1.0f));
        for (std::int64_t j = 0; j < 40; ++j) {
            ASSERT_NEAR(got(i, j), want(i, j), tol) << "(" << i << ", " << j << ")";
        }
    }
}

}  // namespace
