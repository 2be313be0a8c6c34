// The Accel-GCN SpMM plan on the GPU against reference::spmm: fresh seeded inputs, y poisoned with
// NaN before every run (rows outside the range and the padding columns between cols and ld must
// stay NaN), R-MAT, Erdos-Renyi with empty rows, a row of 10^6 nonzeros (split across blocks and
// combined with atomics), one row, widths from 1 to 1000, the full range and split ranges through
// the prepared segments and through ranges prepared on first use, valued and pattern matrices,
// small deg_bound (many split rows) and the shared graphs cora and BlogCatalog.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/kernels/cuda/accel_gcn.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo_test.hpp"
#include "spmm_fixtures.hpp"

namespace {

using halo::Csr;
using halo::RowRange;
using halo::cuda::AccelGcnOptions;
using halo::testing::kNaN;
using halo::testing::rmat_graph;
using halo::testing::tolerance;

constexpr std::int64_t kMaxDim = 1000;

// Fewer edges than nodes, not symmetrized: many empty rows; values of both signs.
Csr sparse_er(std::int64_t n, std::int64_t m, std::uint64_t seed)
{
    Csr a = halo::testing::directed_erdos_renyi(n, m, seed);
    a.values = halo::testing::random_floats(a.indices.size(), seed + 1, -1.0f, 1.0f);
    return a;
}

// Row 2 has 10^6 nonzeros (every column; 2^17 under compute-sanitizer, still split over many
// blocks), the others few or none.
Csr long_row(bool valued)
{
    const std::int64_t kLong = halo::testing::sweep<std::int64_t>(1000000, 1 << 17);
    Csr a;
    a.num_rows = 4;
    a.num_cols = kLong;
    a.indices = {3, 17};
    a.indptr = {0, 2, 2};
    for (std::int32_t j = 0; j < kLong; ++j) {
        a.indices.push_back(j);
    }
    a.indptr.push_back(static_cast<std::int64_t>(a.indices.size()));
    a.indices.push_back(5);
    a.indptr.push_back(static_cast<std::int64_t>(a.indices.size()));
    if (valued) {
        a.values = halo::testing::random_floats(a.indices.size(), 77, 0.0f, 1.0f);
    }
    return a;
}

Csr one_row()
{
    Csr a;
    a.num_rows = 1;
    a.num_cols = 40;
    a.indices = {0, 1, 7, 39};
    a.indptr = {0, 4};
    a.values = {0.5f, -2.0f, 1.0f, 3.0f};
    return a;
}

float max_abs(const std::vector<float>& v)
{
    float m = 1.0f;  // a pattern matrix's ones
    for (const float e : v) {
        m = std::max(m, std::abs(e));
    }
    return m;
}

// Runs `plan` on `ranges` of a seeded x (width d, padded ld) and checks every element of y against
// reference::spmm on the union of the ranges, NaN elsewhere. Twice: the second run shows that no
// state (split rows' zeroing, caches) carries over between runs.
void check(halo::cuda::Context& ctx, halo::SpmmPlan& plan, const Csr& a, std::int64_t d,
           const std::vector<RowRange>& ranges, std::uint64_t seed)
{
    SCOPED_TRACE(::testing::Message() << plan.algorithm() << " rows " << a.num_rows << " nnz "
                                      << a.nnz() << " d " << d << " ranges " << ranges.size());
    const std::int64_t ldx = d + 1;
    const std::int64_t ldy = d + 2;
    const auto xs = halo::testing::random_floats(static_cast<std::size_t>(a.num_cols * ldx), seed);
    const cudaStream_t stream = ctx.compute_stream();
    halo::cuda::DeviceBuffer<float> x(ctx, xs.size());
    halo::cuda::DeviceBuffer<float> y(ctx, static_cast<std::size_t>(a.num_rows * ldy));
    HALO_CUDA_TRY(cudaMemcpyAsync(x.data(), xs.data(), x.bytes(), cudaMemcpyHostToDevice, stream));

    std::vector<float> want(y.size(), kNaN);
    const halo::DenseView<const float> xh{xs.data(), a.num_cols, d, ldx};
    std::vector<char> inside(static_cast<std::size_t>(a.num_rows), 0);
    for (const RowRange& r : ranges) {
        halo::reference::spmm(a.view(), xh, {want.data(), a.num_rows, d, ldy}, r);
        std::fill(inside.begin() + r.begin, inside.begin() + r.end, 1);
    }
    const float amax = max_abs(a.values);
    const std::vector<float> poison(y.size(), kNaN);
    for (int repeat = 0; repeat < 2; ++repeat) {
        HALO_CUDA_TRY(
            cudaMemcpyAsync(y.data(), poison.data(), y.bytes(), cudaMemcpyHostToDevice, stream));
        for (const RowRange& r : ranges) {
            plan.run({x.data(), a.num_cols, d, ldx}, {y.data(), a.num_rows, d, ldy}, r);
        }
        std::vector<float> got(y.size());
        HALO_CUDA_TRY(
            cudaMemcpyAsync(got.data(), y.data(), y.bytes(), cudaMemcpyDeviceToHost, stream));
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            // Row i is a dot product of length nnz(i) with |a| <= amax and |x| < 1, summed by the
            // GPU in another order (per-warp partials, shared-memory and global atomics): scale
            // nnz * amax * max|x|, k = 4 for the two orders' rounding.
            const double len = static_cast<double>(std::max<std::int64_t>(1, a.row_nnz(i)));
            const float tol = tolerance<float>(4.0, len * amax);
            for (std::int64_t j = 0; j < ldy; ++j) {
                const float g = got[static_cast<std::size_t>(i * ldy + j)];
                if (inside[static_cast<std::size_t>(i)] == 0 || j >= d) {
                    ASSERT_TRUE(std::isnan(g))
                        << "(" << i << ", " << j << ") outside the ranges was written, repeat "
                        << repeat;
                } else {
                    ASSERT_NEAR(g, want[static_cast<std::size_t>(i * ldy + j)], tol)
                        << "(" << i << ", " << j << "), repeat " << repeat;
                }
            }
        }
    }
}

std::vector<std::vector<RowRange>> range_sets(std::int64_t n)
{
    return {{{0, n}}, {{0, n / 3}, {n / 3, n}}, {{n / 5, n / 2}}};
}

// Every width on a plan without prepared ranges (split ranges prepared on first use) and one
// whose segments are the split (the ranges run from the shared partition).
void check_graph(const Csr& a, const std::vector<std::int64_t>& widths, std::uint64_t seed,
                 AccelGcnOptions options = {})
{
    halo::cuda::Context ctx;
    const std::int64_t n = a.num_rows;
    const auto plain = halo::cuda::make_accel_gcn_spmm_plan(ctx, a, kMaxDim, options);
    options.ranges = {{0, n / 3}, {n / 3, n}};
    const auto segmented = halo::cuda::make_accel_gcn_spmm_plan(ctx, a, kMaxDim, options);
    for (const std::int64_t d : widths) {
        for (const auto& ranges : range_sets(n)) {
            check(ctx, *plain, a, d, ranges, ++seed);
            check(ctx, *segmented, a, d, ranges, ++seed);
        }
    }
}

// Under compute-sanitizer: one width below a warp, one misaligned past it, one of several column
// tiles with a partial last tile (halo_test.hpp, under_sanitizer).
const std::vector<std::int64_t> kAllWidths = halo::testing::sweep<std::vector<std::int64_t>>(
    {1, 3, 31, 32, 33, 100, 256, 1000}, {3, 33, 1000});

TEST(AccelGcn, RmatPatternAllWidths)
{
    HALO_REQUIRE_GPUS(1);
    check_graph(rmat_graph(halo::testing::sweep(12, 10), 8, 1), kAllWidths, 1000);
}

TEST(AccelGcn, RmatNormalizedSmallDegBound)
{
    HALO_REQUIRE_GPUS(1);
    // deg_bound 8 over 4 warps: most R-MAT hubs are split across blocks.
    check_graph(rmat_graph(halo::testing::sweep(11, 9), 16, 2, halo::Normalization::gcn),
                {1, 33, 100, 1000}, 2000,
                {4, 8, {}});
}

TEST(AccelGcn, ErdosRenyiWithEmptyRows)
{
    HALO_REQUIRE_GPUS(1);
    check_graph(sparse_er(5000, 3000, 3), kAllWidths, 3000);
    check_graph(sparse_er(2000, 20000, 4), {3, 33, 256}, 3500, {32, 64, {}});
}

TEST(AccelGcn, RowOfAMillionNonzeros)
{
    HALO_REQUIRE_GPUS(1);
    check_graph(long_row(true), {1, 3, 33, 100}, 4000);
    check_graph(long_row(false), {32, 256}, 4500, {1, 1, {}});
}

TEST(AccelGcn, OneRowAndEmptyMatrix)
{
    HALO_REQUIRE_GPUS(1);
    check_graph(one_row(), kAllWidths, 5000);
    Csr empty;
    empty.num_rows = 7;
    empty.num_cols = 3;
    empty.indptr.assign(8, 0);
    check_graph(empty, {1, 33}, 5500);
}

TEST(AccelGcn, SharedGraphs)
{
    HALO_REQUIRE_GPUS(1);
    for (const char* name : {"cora.el.gz", "BlogCatalog.el.gz"}) {
        HALO_REQUIRE_SHARED_FILE(path, name);
        const Csr a = halo::testing::read_gcn_graph(path);
        check_graph(a, {1, 32, 33, 256}, 6000);
    }
}

TEST(AccelGcn, AblationWithoutDegreeSortOrCombinedWarps)
{
    HALO_REQUIRE_GPUS(1);
    // The Accel-GCN switches (docs/KERNELS.md) compute the same result: unsorted rows in runs of equal degree,
    // and warps that loop over their own column slices (the paper's Fig. 4(a)).
    for (const bool sort : {true, false}) {
        for (const bool combined : {true, false}) {
            if (sort && combined) {
                continue;  // the default, tested above
            }
            AccelGcnOptions o;
            o.degree_sort = sort;
            o.combined_warps = combined;
            SCOPED_TRACE(::testing::Message()
                         << "degree_sort " << sort << " combined " << combined);
            check_graph(rmat_graph(halo::testing::sweep(11, 9), 8, 21), kAllWidths, 7000, o);
            check_graph(sparse_er(3000, 2000, 22), {1, 33, 256}, 7500, o);
            AccelGcnOptions small = o;
            small.warps_per_block = 4;
            small.deg_bound = 8;
            check_graph(long_row(true), {3, 100}, 7700, small);
        }
    }
    halo::cuda::Context ctx;
    AccelGcnOptions o;
    o.degree_sort = false;
    o.combined_warps = false;
    EXPECT_EQ(halo::cuda::make_accel_gcn_spmm_plan(ctx, one_row(), 8, o)->algorithm(),
              "accel-gcn-w12-b96-nosort-nocombine");
}

TEST(AccelGcn, StoredPartitionIsUsedAndChecked)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    const Csr a = rmat_graph(11, 8, 23, halo::Normalization::gcn);
    const std::int64_t n = a.num_rows;
    const std::vector<RowRange> ranges = {{0, n / 3}, {n / 3, n}};
    for (const bool sort : {true, false}) {
        const halo::AccelGcnPartitionOptions popt{12, 96, sort};
        auto full = std::make_shared<halo::AccelGcnPartition>(halo::build_accel_gcn_partition(
            a.view(), halo::accel_gcn_segments(n, ranges), popt));
        // As a dataset stores it: without the derived nonzeros.
        auto lean = std::make_shared<halo::AccelGcnPartition>(*full);
        lean->indices.clear();
        lean->values.clear();
        for (const auto& stored : {full, lean}) {
            AccelGcnOptions o;
            o.degree_sort = sort;
            o.ranges = ranges;
            o.partition = stored;
            const auto plan = halo::cuda::make_accel_gcn_spmm_plan(ctx, a, kMaxDim, o);
            std::uint64_t seed = 8000;
            for (const std::int64_t d : {1, 33, 256}) {
                for (const auto& set : range_sets(n)) {
                    check(ctx, *plan, a, d, set, ++seed);
                }
            }
        }
        // A partition of another matrix, other options, or ranges it was not cut for.
        AccelGcnOptions o;
        o.degree_sort = sort;
        o.partition = full;
        const Csr other = rmat_graph(10, 8, 23, halo::Normalization::gcn);
        EXPECT_THROW((void)halo::cuda::make_accel_gcn_spmm_plan(ctx, other, kMaxDim, o),
                     halo::InputError);
        Csr moved = a;
        std::rotate(moved.indices.begin(), moved.indices.begin() + 1, moved.indices.end());
        EXPECT_THROW((void)halo::cuda::make_accel_gcn_spmm_plan(ctx, moved, kMaxDim, o),
                     halo::InputError);
        AccelGcnOptions wrong = o;
        wrong.degree_sort = !sort;
        EXPECT_THROW((void)halo::cuda::make_accel_gcn_spmm_plan(ctx, a, kMaxDim, wrong),
                     halo::InputError);
        AccelGcnOptions odd = o;
        odd.ranges = {{1, n}};
        EXPECT_THROW((void)halo::cuda::make_accel_gcn_spmm_plan(ctx, a, kMaxDim, odd),
                     halo::InputError);
    }
    HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
}

TEST(AccelGcn, RejectsWiderThanMaxDimAndBadOptions)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    const Csr a = one_row();
    const auto plan = halo::cuda::make_accel_gcn_spmm_plan(ctx, a, 8);
    EXPECT_EQ(plan->algorithm(), "accel-gcn-w12-b96");
    halo::cuda::DeviceBuffer<float> x(ctx, 40 * 9);
    halo::cuda::DeviceBuffer<float> y(ctx, 9);
    EXPECT_THROW(plan->run({x.data(), 40, 9, 9}, {y.data(), 1, 9, 9}, {0, 1}), halo::LogicError);
    EXPECT_THROW(plan->run({x.data(), 40, 8, 8}, {y.data(), 1, 8, 8}, {0, 2}), halo::LogicError);
    EXPECT_THROW((void)halo::cuda::make_accel_gcn_spmm_plan(ctx, a, 8, {5, 12, {}}),
                 halo::InputError);
    AccelGcnOptions outside;
    outside.ranges = {{0, 2}};
    EXPECT_THROW((void)halo::cuda::make_accel_gcn_spmm_plan(ctx, a, 8, outside), halo::LogicError);
    HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
}

}  // namespace
