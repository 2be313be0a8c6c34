// The attention kernels on the GPU (include/halo/kernels/cuda/fused3s.hpp) against the fp64 CPU
// reference (halo/kernels_host/attention.hpp) on fresh seeded inputs:
// - Fused3S (fp16 inputs and weights, fp32 softmax and accumulation): relative error at most
//   1e-2 in the Frobenius norm and in every row (||O_i - R_i|| / ||R_i||), for d = 32, 64, 128,
//   256, every ablation switch, random graphs and Cora; rows without neighbours exactly zero;
//   several heads in one launch, and head widths 1 to 256 zero-padded to an instance;
//   inputs scaled by 100 stay finite and inside the convex hull of the neighbours' V rows;
//   row ranges write only their rows (outputs poisoned with NaN, padding columns included).
// - The unfused fp32 baseline: elementwise within 1e-5 of the reference, dot-product and GAT
//   additive scores.
// A failure names the kernel, switches, graph, width, row, column, expected and obtained values.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/fused3s.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/attention.hpp"
#include "halo/kernels_host/fused3s.hpp"
#include "halo_test.hpp"
#include "spmm_device_fixtures.hpp"

namespace {

using halo::Csr;
using halo::testing::DeviceMatrix;
using halo::testing::download;
using halo::testing::Gpu;
using halo::testing::HostMatrix;
using halo::testing::random_matrix;
using halo::testing::upload;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// fp16 inputs (relative rounding 2^-11) and fp16 weights: errors around 1e-3; the bound held to
// is 1e-2.
constexpr double kFusedTolerance = 1e-2;

struct Inputs {
    HostMatrix q{0, 0};
    HostMatrix k{0, 0};
    HostMatrix v{0, 0};
};

Inputs make_inputs(const Csr& a, std::int64_t d, std::int64_t dv, std::uint64_t seed,
                   float amplitude = 1.0f)
{
    // Padded rows: multiples of 4 where the width allows (the unfused SDDMM's float4 path), odd
    // otherwise (its scalar path); the fused fp32 entry point converts any stride.
    const bool vec = d % 4 == 0;
    Inputs in{random_matrix(a.num_rows, d, vec ? d + 4 : d + 3, seed),
              random_matrix(a.num_cols, d, vec ? d + 8 : d + 5, seed + 1),
              random_matrix(a.num_cols, dv, dv + 1, seed + 2)};
    for (auto* m : {&in.q, &in.k, &in.v}) {
        for (auto& x : m->data) {
            x *= amplitude;
        }
    }
    return in;
}

std::vector<double> reference(const Csr& a, const Inputs& in, double scale)
{
    std::vector<double> out(static_cast<std::size_t>(a.num_rows * in.v.cols));
    halo::reference::sparse_attention(a.view(), in.q.cview(), in.k.cview(), in.v.cview(), scale,
                                      halo::dense_view(out.data(), a.num_rows, in.v.cols));
    return out;
}

std::string describe(const std::string& kernel, const Csr& a, std::int64_t d)
{
    return kernel + " on " + std::to_string(a.num_rows) + " x " + std::to_string(a.num_cols) +
           " with " + std::to_string(a.nnz()) + " nonzeros, d = " + std::to_string(d);
}

std::string options_name(const halo::cuda::Fused3sOptions& o)
{
    return std::string("fused3s (reorder ") + (o.reorder_windows ? "on" : "off") + ", remap " +
           (o.remap_registers ? "on" : "off") + ")";
}

// Checks `got` (rows in [rows.begin, rows.end) written, the others and the padding still NaN)
// against `want`: per-row relative error <= tol (absolute for a zero reference row), the same
// in the Frobenius norm, and exact zeros for rows without a nonzero.
void expect_close(const std::string& what, const Csr& a, const HostMatrix& got,
                  const std::vector<double>& want, double tol, halo::RowRange rows)
{
    SCOPED_TRACE(what);
    const auto d = got.cols;
    double err_sq = 0;
    double ref_sq = 0;
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        const bool inside = i >= rows.begin && i < rows.end;
        for (std::int64_t c = d; c < got.ld; ++c) {
            ASSERT_TRUE(std::isnan(got(i, c))) << "padding (" << i << ", " << c << ") written";
        }
        if (!inside) {
            for (std::int64_t c = 0; c < d; ++c) {
                ASSERT_TRUE(std::isnan(got(i, c)))
                    << "row " << i << " outside [" << rows.begin << ", " << rows.end
                    << ") written: " << got(i, c);
            }
            continue;
        }
        double row_err = 0;
        double row_ref = 0;
        std::int64_t worst = 0;
        for (std::int64_t c = 0; c < d; ++c) {
            const float g = got(i, c);
            const double w = want[i * d + c];
            ASSERT_TRUE(std::isfinite(g))
                << "row " << i << " column " << c << ": got " << g << ", expected " << w;
            if (a.row_nnz(i) == 0) {
                ASSERT_EQ(g, 0.0f) << "row " << i << " has no neighbours, column " << c;
            }
            const double e = (g - w) * (g - w);
            if (e > (got(i, worst) - want[i * d + worst]) * (got(i, worst) - want[i * d + worst])) {
                worst = c;
            }
            row_err += e;
            row_ref += w * w;
        }
        err_sq += row_err;
        ref_sq += row_ref;
        const double rel = row_ref > 0 ? std::sqrt(row_err / row_ref) : std::sqrt(row_err);
        ASSERT_LE(rel, tol) << "row " << i << " (" << a.row_nnz(i) << " neighbours): relative "
                            << "error " << rel << "; worst column " << worst << ": got "
                            << got(i, worst) << ", expected " << want[i * d + worst];
    }
    const double fro = ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : std::sqrt(err_sq);
    EXPECT_LE(fro, tol) << "Frobenius relative error";
}

struct DeviceInputs {
    DeviceMatrix q;
    DeviceMatrix k;
    DeviceMatrix v;
};

DeviceInputs upload_inputs(Gpu& gpu, const Inputs& in)
{
    return {upload(*gpu.backend, in.q), upload(*gpu.backend, in.k), upload(*gpu.backend, in.v)};
}

// Runs the fused plan over `rows` on a NaN-poisoned output whose ld exceeds d.
HostMatrix run_fused(Gpu& gpu, halo::cuda::Fused3sPlan& plan, const DeviceInputs& in, float scale,
                     halo::RowRange rows)
{
    const auto d = in.q.view.cols;
    auto out = upload(*gpu.backend, HostMatrix(plan.num_rows(), d, d + 4));
    halo::cuda::fused_attention(plan, in.q.view, in.k.view, in.v.view, scale, out.view, rows);
    gpu.ctx.synchronize();
    return download(*gpu.backend, out);
}

HostMatrix run_unfused(Gpu& gpu, halo::cuda::UnfusedAttentionPlan& plan, const DeviceInputs& in,
                       float scale, halo::RowRange rows)
{
    const auto dv = in.v.view.cols;
    auto out = upload(*gpu.backend, HostMatrix(plan.num_rows(), dv, dv + 3));
    plan.run(in.q.view, in.k.view, in.v.view, scale, out.view, rows);
    gpu.ctx.synchronize();
    return download(*gpu.backend, out);
}

std::vector<halo::cuda::Fused3sOptions> all_options()
{
    return {{true, true}, {true, false}, {false, true}, {false, false}};
}

Csr graph(const std::string& kind, int scale, std::uint64_t seed)
{
    return halo::testing::graph_csr(kind, scale, seed, false);
}

// ---------------------------------------------------------------------------------------------
// Fused3S.

TEST(Fused3sCuda, RandomGraphsEveryWidthAndSwitch)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 100;
    for (const std::string kind : {"rmat", "er"}) {
        const Csr a = graph(kind, kind == "rmat" ? 11 : 12, ++seed);
        auto plan = halo::cuda::make_fused3s_plan(gpu.ctx, a, 256);
        for (const std::int64_t d : {32, 64, 128, 256}) {
            const auto in = make_inputs(a, d, d, ++seed);
            const auto want = reference(a, in, 1.0 / std::sqrt(double(d)));
            const auto dev = upload_inputs(gpu, in);
            for (const auto& options : all_options()) {
                plan->set_options(options);
                const auto got =
                    run_fused(gpu, *plan, dev, 1.0f / std::sqrt(float(d)), {0, a.num_rows});
                expect_close(describe(options_name(options), a, d), a, got, want, kFusedTolerance,
                             {0, a.num_rows});
            }
        }
    }
}

TEST(Fused3sCuda, DenseWindowsManyIterations)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    // R-MAT with a high edge factor: hub windows with hundreds of blocks (the online softmax
    // rescales across many iterations) beside light ones.
    const Csr a = halo::testing::rmat_graph(9, 48, 7);
    auto plan = halo::cuda::make_fused3s_plan(gpu.ctx, a, 128);
    const auto stats = halo::bsb_stats(plan->bsb());
    EXPECT_GT(stats.max_blocks_per_window, 40) << "the case needs windows of many blocks";
    for (const std::int64_t d : {64, 128}) {
        const auto in = make_inputs(a, d, d, 300 + d);
        const auto want = reference(a, in, 0.5);
        const auto dev = upload_inputs(gpu, in);
        for (const auto& options : all_options()) {
            plan->set_options(options);
            const auto got = run_fused(gpu, *plan, dev, 0.5f, {0, a.num_rows});
            expect_close(describe(options_name(options), a, d), a, got, want, kFusedTolerance,
                         {0, a.num_rows});
        }
    }
}

TEST(Fused3sCuda, Cora)
{
    HALO_REQUIRE_GPUS(1);
    HALO_REQUIRE_SHARED_FILE(path, "cora.el.gz");
    halo::BuildOptions build;
    build.self_loops = halo::SelfLoops::add;
    const Csr a = halo::build_csr(halo::read_edge_list(path), build);
    Gpu gpu;
    auto plan = halo::cuda::make_fused3s_plan(gpu.ctx, a, 256);
    for (const std::int64_t d : {32, 64, 128, 256}) {
        const auto in = make_inputs(a, d, d, 400 + d);
        const auto want = reference(a, in, 1.0 / std::sqrt(double(d)));
        const auto dev = upload_inputs(gpu, in);
        const auto got = run_fused(gpu, *plan, dev, 1.0f / std::sqrt(float(d)), {0, a.num_rows});
        expect_close(describe("fused3s on cora", a, d), a, got, want, kFusedTolerance,
                     {0, a.num_rows});
    }
}

TEST(Fused3sCuda, LargeScoresStayFiniteAndConvex)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = graph("rmat", 10, 500);
    auto plan = halo::cuda::make_fused3s_plan(gpu.ctx, a, 256);
    for (const std::int64_t d : {32, 256}) {
        // Inputs scaled by 100 and scale 1: scores of order 1e5, far beyond exp's range.
        const auto in = make_inputs(a, d, d, 500 + d, 100.0f);
        const auto dev = upload_inputs(gpu, in);
        for (const auto& options : all_options()) {
            SCOPED_TRACE(describe(options_name(options), a, d) + ", inputs x100");
            plan->set_options(options);
            const auto got = run_fused(gpu, *plan, dev, 1.0f, {0, a.num_rows});
            for (std::int64_t i = 0; i < a.num_rows; ++i) {
                for (std::int64_t c = 0; c < d; ++c) {
                    ASSERT_TRUE(std::isfinite(got(i, c))) << "row " << i << " column " << c;
                    // A softmax average lies between the smallest and largest neighbour value
                    // (fp16 rounding of V: 2^-11 relative, and of the weights: a few ulps).
                    float lo = std::numeric_limits<float>::infinity();
                    float hi = -lo;
                    for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
                        lo = std::min(lo, in.v(a.indices[k], c));
                        hi = std::max(hi, in.v(a.indices[k], c));
                    }
                    if (a.row_nnz(i) == 0) {
                        ASSERT_EQ(got(i, c), 0.0f) << "row " << i << " has no neighbours";
                        continue;
                    }
                    const float slack = 2e-3f * std::max(std::abs(lo), std::abs(hi));
                    ASSERT_GE(got(i, c), lo - slack) << "row " << i << " column " << c;
                    ASSERT_LE(got(i, c), hi + slack) << "row " << i << " column " << c;
                }
            }
        }
    }
}

TEST(Fused3sCuda, EmptyRowsGiveZeros)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    // Directed Erdos-Renyi with n / 3 edges: most rows empty, many windows without a block.
    const Csr a = graph("er", 11, 600);
    auto plan = halo::cuda::make_fused3s_plan(gpu.ctx, a, 64);
    const auto in = make_inputs(a, 64, 64, 601);
    const auto want = reference(a, in, 0.125);
    const auto dev = upload_inputs(gpu, in);
    for (const auto& options : all_options()) {
        plan->set_options(options);
        const auto got = run_fused(gpu, *plan, dev, 0.125f, {0, a.num_rows});
        expect_close(describe(options_name(options), a, 64), a, got, want, kFusedTolerance,
                     {0, a.num_rows});
    }
    // A matrix without any nonzero, and one without rows.
    Csr zero;
    zero.num_rows = 37;
    zero.num_cols = 20;
    zero.indptr.assign(38, 0);
    auto zero_plan = halo::cuda::make_fused3s_plan(gpu.ctx, zero, 32);
    const auto zin = make_inputs(zero, 32, 32, 602);
    const auto zdev = upload_inputs(gpu, zin);
    const auto zgot = run_fused(gpu, *zero_plan, zdev, 1.0f, {0, 37});
    expect_close("fused3s without nonzeros", zero, zgot, reference(zero, zin, 1.0), 0, {0, 37});
    Csr none;
    auto none_plan = halo::cuda::make_fused3s_plan(gpu.ctx, none, 32);
    const auto nin = make_inputs(none, 32, 32, 603);
    const auto ndev = upload_inputs(gpu, nin);
    EXPECT_NO_THROW(run_fused(gpu, *none_plan, ndev, 1.0f, {0, 0}));
}

TEST(Fused3sCuda, RowRangesWriteOnlyTheirRowsAndMatchTheFullRun)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = graph("rmat", 10, 700);
    auto plan = halo::cuda::make_fused3s_plan(gpu.ctx, a, 128);
    const std::int64_t n = a.num_rows;
    const auto in = make_inputs(a, 128, 128, 701);
    const auto want = reference(a, in, 0.1);
    const auto dev = upload_inputs(gpu, in);
    for (const auto& options : all_options()) {
        plan->set_options(options);
        const auto full = run_fused(gpu, *plan, dev, 0.1f, {0, n});
        for (const halo::RowRange rows :
             {halo::RowRange{5, 37}, halo::RowRange{0, n / 3}, halo::RowRange{n / 3, n},
              halo::RowRange{n - 1, n}, halo::RowRange{17, 17}}) {
            const auto part = run_fused(gpu, *plan, dev, 0.1f, rows);
            const auto what = describe(options_name(options), a, 128) + ", rows [" +
                              std::to_string(rows.begin) + ", " + std::to_string(rows.end) + ")";
            expect_close(what, a, part, want, kFusedTolerance, rows);
            for (auto i = rows.begin; i < rows.end; ++i) {
                for (std::int64_t c = 0; c < 128; ++c) {
                    ASSERT_EQ(part(i, c), full(i, c))
                        << what << ": row " << i << " column " << c << " differs from the full run";
                }
            }
        }
    }
}

// Columns [first, first + cols) of m as a matrix of their own.
HostMatrix column_block(const HostMatrix& m, std::int64_t first, std::int64_t cols)
{
    HostMatrix out(m.rows, cols);
    for (std::int64_t i = 0; i < m.rows; ++i) {
        for (std::int64_t j = 0; j < cols; ++j) {
            out(i, j) = m(i, first + j);
        }
    }
    return out;
}

// run_heads: every head width from 1 to 256 (narrow ones zero-padded to an instance), 1 and 3
// heads, K and V as adjacent column blocks of one matrix (one conversion) or apart, on two row
// ranges of a NaN-poisoned output with padding columns: each head against the fp64 reference of
// its own columns, nothing outside the ranges and the heads' columns written, and the plan's
// max_dim below the padded width (the workspaces grow).
TEST(Fused3sCuda, RunHeadsNarrowWidthsAndHeadsTogether)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = graph("rmat", 9, 720);
    const std::int64_t n = a.num_rows;
    std::uint64_t seed = 721;
    for (const std::int64_t d : {1, 3, 7, 16, 24, 40, 100, 200, 256}) {
        for (const std::int64_t heads : {1, 3}) {
            for (const bool adjacent : {true, false}) {
                const std::int64_t w = heads * d;
                const auto what = describe("run_heads", a, d) + ", " + std::to_string(heads) +
                                  " heads, K and V " + (adjacent ? "adjacent" : "apart");
                SCOPED_TRACE(what);
                auto plan = halo::cuda::make_fused3s_plan(gpu.ctx, a, w);
                const auto q = random_matrix(n, w, w + 3, seed++);
                const auto kv = random_matrix(a.num_cols, 2 * w, 2 * w + 1, seed++);
                const auto dq = upload(*gpu.backend, q);
                const auto dkv = upload(*gpu.backend, kv);
                const auto kv_v = column_block(kv, w, w);
                const auto dv = upload(*gpu.backend, kv_v);
                const halo::DenseView<const float> kview{dkv.view.data, a.num_cols, w, dkv.view.ld};
                const halo::DenseView<const float> vview =
                    adjacent
                        ? halo::DenseView<const float>{dkv.view.data + w, a.num_cols, w,
                                                       dkv.view.ld}
                        : halo::DenseView<const float>{dv.view.data, a.num_cols, w, dv.view.ld};
                auto out = upload(*gpu.backend, HostMatrix(n, w, w + 5));
                const float scale = 1.0f / std::sqrt(static_cast<float>(d));
                const halo::RowRange first{0, n / 2 + 5};
                const halo::RowRange second{first.end, n};
                plan->run_heads(dq.view, kview, vview, heads, scale, out.view, second);
                gpu.ctx.synchronize();
                const auto half = download(*gpu.backend, out);
                plan->run_heads(dq.view, kview, vview, heads, scale, out.view, first);
                gpu.ctx.synchronize();
                const auto got = download(*gpu.backend, out);
                for (std::int64_t i = 0; i < n; ++i) {
                    for (std::int64_t c = w; c < got.ld; ++c) {
                        ASSERT_TRUE(std::isnan(got(i, c)))
                            << "padding (" << i << ", " << c << ") written";
                    }
                    for (std::int64_t c = 0; c < w && i < first.end; ++c) {
                        ASSERT_TRUE(std::isnan(half(i, c)))
                            << "row " << i << " written by the range [" << second.begin << ", "
                            << second.end << ")";
                    }
                }
                for (std::int64_t h = 0; h < heads; ++h) {
                    Inputs in;
                    in.q = column_block(q, h * d, d);
                    in.k = column_block(kv, h * d, d);
                    in.v = column_block(kv, w + h * d, d);
                    const auto want = reference(a, in, scale);
                    const auto head = column_block(got, h * d, d);
                    if (d >= 32) {
                        expect_close(what + ", head " + std::to_string(h), a, head, want,
                                     kFusedTolerance, {0, n});
                        continue;
                    }
                    // A narrow row is a few weighted means that may cancel to near zero, so the
                    // error is bounded by the weights' rounding times the weighted |V| (the same
                    // reference over |V|), element by element.
                    for (auto& x : in.v.data) {
                        x = std::abs(x);
                    }
                    const auto magnitude = reference(a, in, scale);
                    for (std::int64_t i = 0; i < n; ++i) {
                        for (std::int64_t c = 0; c < d; ++c) {
                            const double e = std::abs(head(i, c) - want[i * d + c]);
                            ASSERT_LE(e, kFusedTolerance * magnitude[i * d + c])
                                << "head " << h << " row " << i << " (" << a.row_nnz(i)
                                << " neighbours) column " << c << ": got " << head(i, c)
                                << ", expected " << want[i * d + c];
                        }
                    }
                }
            }
        }
    }
}

TEST(Fused3sCuda, RunHeadsRejectsWidthsWithoutAnInstance)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = graph("rmat", 6, 730);
    auto plan = halo::cuda::make_fused3s_plan(gpu.ctx, a, 600);
    const auto x = upload(*gpu.backend, random_matrix(a.num_rows, 514, 514, 731));
    auto out = upload(*gpu.backend, HostMatrix(a.num_rows, 514));
    const auto cols = [](auto m, std::int64_t c) {
        m.cols = c;
        return m;
    };
    // A head of 257 columns, and 514 columns that do not split into 3 heads.
    EXPECT_THROW(plan->run_heads(cols(x.view, 257), cols(x.view, 257), cols(x.view, 257), 1, 1.0f,
                                 cols(out.view, 257), {0, a.num_rows}),
                 halo::LogicError);
    EXPECT_THROW(plan->run_heads(x.view, x.view, x.view, 3, 1.0f, out.view, {0, a.num_rows}),
                 halo::LogicError);
    EXPECT_THROW(plan->run_heads(x.view, x.view, x.view, 0, 1.0f, out.view, {0, a.num_rows}),
                 halo::LogicError);
}

// The window order changes only which block computes a window, not how: the same bits.
TEST(Fused3sCuda, ReorderingGivesTheSameBits)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = graph("rmat", 11, 800);
    auto plan = halo::cuda::make_fused3s_plan(gpu.ctx, a, 64);
    const auto in = make_inputs(a, 64, 64, 801);
    const auto dev = upload_inputs(gpu, in);
    for (const bool remap : {false, true}) {
        plan->set_options({true, remap});
        const auto reordered = run_fused(gpu, *plan, dev, 0.125f, {0, a.num_rows});
        plan->set_options({false, remap});
        const auto natural = run_fused(gpu, *plan, dev, 0.125f, {0, a.num_rows});
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            for (std::int64_t c = 0; c < 64; ++c) {
                ASSERT_EQ(reordered(i, c), natural(i, c)) << "remap " << remap << " row " << i;
            }
        }
    }
}

// The fp16 entry point (the kernel alone) on inputs converted by convert_to_half gives the bits of
// the fp32 entry point; a plan made from a stored BSB gives the bits of one built from the CSR.
TEST(Fused3sCuda, HalfEntryPointAndStoredBsb)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = graph("rmat", 10, 900);
    const std::int64_t d = 64;
    auto plan = halo::cuda::make_fused3s_plan(gpu.ctx, a, d);
    auto stored = halo::cuda::make_fused3s_plan(gpu.ctx, halo::build_bsb(a), 0);
    EXPECT_EQ(stored->max_dim(), 0);
    const auto in = make_inputs(a, d, d, 901);
    const auto dev = upload_inputs(gpu, in);
    const auto want = run_fused(gpu, *plan, dev, 0.125f, {0, a.num_rows});

    const auto stream = gpu.ctx.compute_stream();
    halo::cuda::DeviceBuffer<__half> q16(gpu.ctx, static_cast<std::size_t>(a.num_rows * d));
    halo::cuda::DeviceBuffer<__half> k16(gpu.ctx, static_cast<std::size_t>(a.num_cols * d));
    halo::cuda::DeviceBuffer<__half> v16(gpu.ctx, static_cast<std::size_t>(a.num_cols * d));
    const halo::DenseView<__half> qv{q16.data(), a.num_rows, d, d};
    const halo::DenseView<__half> kv{k16.data(), a.num_cols, d, d};
    const halo::DenseView<__half> vv{v16.data(), a.num_cols, d, d};
    halo::cuda::convert_to_half(dev.q.view, qv, stream);
    halo::cuda::convert_to_half(dev.k.view, kv, stream);
    halo::cuda::convert_to_half(dev.v.view, vv, stream);
    auto out = upload(*gpu.backend, HostMatrix(a.num_rows, d, d + 4));
    stored->run(halo::DenseView<const __half>{qv.data, qv.rows, qv.cols, qv.ld},
                halo::DenseView<const __half>{kv.data, kv.rows, kv.cols, kv.ld},
                halo::DenseView<const __half>{vv.data, vv.rows, vv.cols, vv.ld}, 0.125f, out.view,
                {0, a.num_rows});
    gpu.ctx.synchronize();
    const auto got = download(*gpu.backend, out);
    for (std::size_t k = 0; k < got.data.size(); ++k) {
        ASSERT_TRUE(got.data[k] == want.data[k] ||
                    (std::isnan(got.data[k]) && std::isnan(want.data[k])))
            << "element " << k;
    }
    // The fp32 entry point needs a workspace.
    EXPECT_THROW(
        halo::cuda::fused_attention(*stored, dev.q.view, dev.k.view, dev.v.view, 1.0f, out.view),
        halo::LogicError);
}

// fp32 -> fp16 conversion, vectorized (widths and strides multiples of 4) and scalar, against the
// host's round-to-nearest conversion, with the destination padding untouched.
TEST(Fused3sCuda, ConvertToHalfBothPaths)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    for (const auto& [cols, lds, ldd] :
         std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{
             {64, 68, 72}, {33, 35, 40}, {8, 9, 8}}) {
        const std::int64_t rows = 77;
        auto src = random_matrix(rows, cols, lds, 1100 + cols);
        src(3, 1) = 70000.0f;  // beyond fp16: inf
        src(5, 2) = 1e-8f;     // below fp16's smallest subnormal: 0
        const auto dsrc = upload(*gpu.backend, src);
        halo::cuda::DeviceBuffer<__half> dst(gpu.ctx, static_cast<std::size_t>(rows * ldd));
        const std::vector<unsigned short> marker(dst.size(), 0x7e00);  // fp16 NaN
        HALO_CUDA_TRY(cudaMemcpy(dst.data(), marker.data(), dst.bytes(), cudaMemcpyHostToDevice));
        halo::cuda::convert_to_half(dsrc.view, halo::DenseView<__half>{dst.data(), rows, cols, ldd},
                                    gpu.ctx.compute_stream());
        gpu.ctx.synchronize();
        std::vector<unsigned short> got(dst.size());
        HALO_CUDA_TRY(cudaMemcpy(got.data(), dst.data(), dst.bytes(), cudaMemcpyDeviceToHost));
        for (std::int64_t i = 0; i < rows; ++i) {
            for (std::int64_t j = 0; j < ldd; ++j) {
                const unsigned short bits = got[i * ldd + j];
                if (j >= cols) {
                    ASSERT_EQ(bits, 0x7e00) << "padding (" << i << ", " << j << ") written";
                    continue;
                }
                const __half want = __float2half_rn(src(i, j));
                unsigned short want_bits = 0;
                std::memcpy(&want_bits, &want, sizeof want_bits);
                ASSERT_EQ(bits, want_bits) << cols << " columns, ld " << lds << " -> " << ldd
                                           << ": (" << i << ", " << j << ") of " << src(i, j);
            }
        }
    }
}

TEST(Fused3sCuda, RejectsBadOperandsAndFormats)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = graph("rmat", 8, 1000);
    auto plan = halo::cuda::make_fused3s_plan(gpu.ctx, a, 512);
    const auto in = make_inputs(a, 300, 300, 1001);
    const auto dev = upload_inputs(gpu, in);
    auto out = upload(*gpu.backend, HostMatrix(a.num_rows, 300, 300));
    EXPECT_THROW(
        halo::cuda::fused_attention(*plan, dev.q.view, dev.k.view, dev.v.view, 1.0f, out.view),
        halo::LogicError)
        << "d = 300 is above every instance";
    // The fp16 entry point takes the instances' widths only (no padding there).
    halo::cuda::DeviceBuffer<__half> h48(gpu.ctx, static_cast<std::size_t>(a.num_cols * 48));
    const halo::DenseView<const __half> w48{h48.data(), a.num_cols, 48, 48};
    auto out48 = upload(*gpu.backend, HostMatrix(a.num_rows, 48, 48));
    EXPECT_THROW(plan->run(w48, w48, w48, 1.0f, out48.view, {0, a.num_rows}), halo::LogicError)
        << "d = 48 is not instantiated";
    auto bsb = halo::build_bsb(a);
    bsb.block_columns[0] = static_cast<std::int32_t>(a.num_cols);
    EXPECT_THROW(halo::cuda::make_fused3s_plan(gpu.ctx, bsb, 64), halo::InputError);
    // Misaligned fp16 rows: ld not a multiple of 8.
    halo::cuda::DeviceBuffer<__half> h(gpu.ctx, static_cast<std::size_t>(a.num_cols * 36));
    const halo::DenseView<const __half> odd{h.data(), a.num_cols, 32, 36};
    auto out32 = upload(*gpu.backend, HostMatrix(a.num_rows, 32, 32));
    EXPECT_THROW(plan->run(odd, odd, odd, 1.0f, out32.view, {0, a.num_rows}), halo::LogicError);
}

// ---------------------------------------------------------------------------------------------
// The unfused baseline.

// Elementwise bound for the fp32 baseline: scores of d products of values below amplitude^2,
// scaled; weights of a softmax over the row; a weighted sum of |v| <= amplitude. The fp32
// rounding of each step is a few eps of its magnitude, far below 1e-5 of max|V|.
void expect_unfused_close(const std::string& what, const Csr& a, const HostMatrix& got,
                          const std::vector<double>& want, halo::RowRange rows)
{
    SCOPED_TRACE(what);
    double max_v = 0;
    for (const double w : want) {
        max_v = std::max(max_v, std::abs(w));
    }
    const double tol = 1e-5 * std::max(1.0, max_v);
    double err_sq = 0;
    double ref_sq = 0;
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        const bool inside = i >= rows.begin && i < rows.end;
        for (std::int64_t c = 0; c < got.ld; ++c) {
            if (!inside || c >= got.cols) {
                ASSERT_TRUE(std::isnan(got(i, c))) << "(" << i << ", " << c << ") written";
                continue;
            }
            const double w = want[i * got.cols + c];
            ASSERT_NEAR(got(i, c), w, tol)
                << "row " << i << " (" << a.row_nnz(i) << " neighbours) column " << c;
            err_sq += (got(i, c) - w) * (got(i, c) - w);
            ref_sq += w * w;
        }
    }
    EXPECT_LE(std::sqrt(err_sq / std::max(ref_sq, 1e-300)), 1e-5) << "Frobenius relative error";
}

TEST(UnfusedAttentionCuda, DotProductScores)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 2000;
    for (const std::string kind : {"rmat", "er"}) {
        const Csr a = graph(kind, kind == "rmat" ? 11 : 12, ++seed);
        auto plan = halo::cuda::make_unfused_attention_plan(gpu.ctx, a);
        EXPECT_EQ(plan->nnz(), a.nnz());
        const std::int64_t n = a.num_rows;
        // (d, dv): the widths of Fused3S, odd ones (scalar loads), V wider than Q and K.
        for (const auto& [d, dv] : std::vector<std::pair<std::int64_t, std::int64_t>>{
                 {32, 32}, {64, 64}, {128, 128}, {256, 256}, {7, 5}, {33, 70}}) {
            const auto in = make_inputs(a, d, dv, ++seed);
            const double scale = 1.0 / std::sqrt(double(d));
            const auto want = reference(a, in, scale);
            const auto dev = upload_inputs(gpu, in);
            for (const halo::RowRange rows : {halo::RowRange{0, n}, halo::RowRange{n / 3, n}}) {
                const auto got = run_unfused(gpu, *plan, dev, static_cast<float>(scale), rows);
                expect_unfused_close(describe("unfused", a, d) + ", dv = " + std::to_string(dv) +
                                         ", rows from " + std::to_string(rows.begin),
                                     a, got, want, rows);
            }
        }
    }
}

TEST(UnfusedAttentionCuda, LargeScoresStayFinite)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = graph("rmat", 10, 2100);
    auto plan = halo::cuda::make_unfused_attention_plan(gpu.ctx, a);
    const auto in = make_inputs(a, 64, 64, 2101, 100.0f);
    const auto dev = upload_inputs(gpu, in);
    const auto got = run_unfused(gpu, *plan, dev, 1.0f, {0, a.num_rows});
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        for (std::int64_t c = 0; c < 64; ++c) {
            ASSERT_TRUE(std::isfinite(got(i, c))) << "row " << i << " column " << c;
        }
    }
}

TEST(UnfusedAttentionCuda, AdditiveScores)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = graph("rmat", 11, 2200);
    auto plan = halo::cuda::make_unfused_attention_plan(gpu.ctx, a);
    const auto el = halo::testing::random_floats(static_cast<std::size_t>(a.num_rows), 2201, -3, 3);
    const auto er = halo::testing::random_floats(static_cast<std::size_t>(a.num_cols), 2202, -3, 3);
    const auto v = random_matrix(a.num_cols, 48, 48, 2203);
    std::vector<double> want(static_cast<std::size_t>(a.num_rows * 48));
    halo::reference::additive_attention(a.view(), el.data(), er.data(), 0.2, v.cview(),
                                        halo::dense_view(want.data(), a.num_rows, 48));
    halo::cuda::DeviceBuffer<float> del(gpu.ctx, el.size());
    halo::cuda::DeviceBuffer<float> der(gpu.ctx, er.size());
    HALO_CUDA_TRY(cudaMemcpy(del.data(), el.data(), del.bytes(), cudaMemcpyHostToDevice));
    HALO_CUDA_TRY(cudaMemcpy(der.data(), er.data(), der.bytes(), cudaMemcpyHostToDevice));
    const auto dv = upload(*gpu.backend, v);
    auto out = upload(*gpu.backend, HostMatrix(a.num_rows, 48, 50));
    plan->run_additive(del.data(), der.data(), 0.2f, dv.view, out.view, {0, a.num_rows});
    gpu.ctx.synchronize();
    const auto got = download(*gpu.backend, out);
    expect_unfused_close(describe("unfused additive (GAT)", a, 48), a, got, want, {0, a.num_rows});
}

TEST(UnfusedAttentionCuda, EmptyRowsAndRanges)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = graph("er", 11, 2300);
    auto plan = halo::cuda::make_unfused_attention_plan(gpu.ctx, a);
    const auto in = make_inputs(a, 32, 32, 2301);
    const auto want = reference(a, in, 0.5);
    const auto dev = upload_inputs(gpu, in);
    for (const halo::RowRange rows :
         {halo::RowRange{0, a.num_rows}, halo::RowRange{3, 40}, halo::RowRange{100, 100}}) {
        const auto got = run_unfused(gpu, *plan, dev, 0.5f, rows);
        expect_unfused_close(
            describe("unfused", a, 32) + ", rows from " + std::to_string(rows.begin), a, got, want,
            rows);
        for (auto i = rows.begin; i < rows.end; ++i) {
            if (a.row_nnz(i) == 0) {
                for (std::int64_t c = 0; c < 32; ++c) {
                    ASSERT_EQ(got(i, c), 0.0f) << "row " << i << " has no neighbours";
                }
            }
        }
    }
}

}  // namespace
