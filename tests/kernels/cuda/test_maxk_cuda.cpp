// MaxK on the GPU (include/halo/kernels/cuda/maxk.hpp) against the CPU references on fresh seeded
// inputs.
//
// Top-k: bit-for-bit equal to reference::maxk_topk (columns and value bits) on adversarial rows
// (ties, signed zeros, infinities, NaNs) at widths 1 .. 1024 and k from 1 to the width.
// SSD, every variant: outputs poisoned with NaN and a leading dimension beyond the width, so rows
// outside the range and the padding must stay NaN, and empty rows must come out as zeros. Rows of
// one edge group must equal reference::ssd_edge_groups bit for bit (the kernels perform exactly
// its fmaf sequence); rows of several groups (atomics) must lie within
// tolerance<float>(group_size + groups + 2, sum |a| |s|) of a double-precision product. A row of
// 10^5 nonzeros runs with a pattern matrix and small integer values: exact in any order.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/maxk.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/maxk.hpp"
#include "halo_test.hpp"
#include "spmm_device_fixtures.hpp"
#include "spmm_fixtures.hpp"

namespace {

using halo::Cbsr;
using halo::Csr;
using halo::RowRange;
using halo::cuda::SsdLaunch;
using halo::cuda::SsdOrder;
using halo::cuda::SsdVariant;
using halo::testing::download;
using halo::testing::Gpu;
using halo::testing::HostMatrix;
using halo::testing::kNaN;
using halo::testing::upload;

constexpr float kInf = std::numeric_limits<float>::infinity();

RowRange all_rows(const Csr& a)
{
    return {0, a.num_rows};
}

const std::vector<SsdVariant> kVariants = {SsdVariant::maxk, SsdVariant::decoupled,
                                           SsdVariant::no_slots, SsdVariant::no_atomic_aware,
                                           SsdVariant::no_slots_no_atomic_aware};

std::uint32_t bits(float v)
{
    return std::bit_cast<std::uint32_t>(v);
}

halo::cuda::DeviceCbsr upload_cbsr(halo::cuda::Context& ctx, const Cbsr& s)
{
    auto d = halo::cuda::make_device_cbsr(ctx, s.rows, s.dim, s.k);
    HALO_CUDA_TRY(
        cudaMemcpy(d.values.data(), s.values.data(), d.values.bytes(), cudaMemcpyHostToDevice));
    HALO_CUDA_TRY(
        cudaMemcpy(d.indices.data(), s.indices.data(), d.indices.bytes(), cudaMemcpyHostToDevice));
    return d;
}

Cbsr download_cbsr(halo::cuda::Context& ctx, const halo::cuda::DeviceCbsr& d)
{
    ctx.synchronize();
    Cbsr s(d.rows, d.dim, d.k);
    HALO_CUDA_TRY(
        cudaMemcpy(s.values.data(), d.values.data(), d.values.bytes(), cudaMemcpyDeviceToHost));
    HALO_CUDA_TRY(
        cudaMemcpy(s.indices.data(), d.indices.data(), d.indices.bytes(), cudaMemcpyDeviceToHost));
    return s;
}

// Rows of four kinds in turn: uniform values, small integers (many ties), special values (signed
// zeros, infinities, NaN, +-1) and one value repeated.
HostMatrix adversarial_rows(std::int64_t rows, std::int64_t dim, std::int64_t ld,
                            std::uint64_t seed)
{
    HostMatrix x(rows, dim, ld);
    std::mt19937_64 rng(seed);
    const std::vector<float> specials = {0.0f, -0.0f, kInf, -kInf, kNaN, 1.0f, -1.0f};
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < dim; ++j) {
            switch (i % 4) {
                case 0:
                    x(i, j) = std::uniform_real_distribution<float>(-1, 1)(rng);
                    break;
                case 1:
                    x(i, j) = static_cast<float>(std::uniform_int_distribution<int>(-2, 2)(rng));
                    break;
                case 2:
                    x(i, j) = specials[std::uniform_int_distribution<std::size_t>(
                        0, specials.size() - 1)(rng)];
                    break;
                default:
                    x(i, j) = 3.0f;
            }
        }
    }
    return x;
}

void expect_same_cbsr(const Cbsr& want, const Cbsr& got, const std::string& what)
{
    ASSERT_EQ(want.values.size(), got.values.size()) << what;
    for (std::size_t e = 0; e < want.values.size(); ++e) {
        const auto i = static_cast<std::int64_t>(e) / want.k;
        const auto t = static_cast<std::int64_t>(e) % want.k;
        ASSERT_EQ(want.indices[e], got.indices[e])
            << what << ": row " << i << " entry " << t << ": column expected " << want.indices[e]
            << ", got " << got.indices[e];
        ASSERT_EQ(bits(want.values[e]), bits(got.values[e]))
            << what << ": row " << i << " entry " << t << " (column " << want.indices[e]
            << "): value expected " << want.values[e] << ", got " << got.values[e];
    }
}

TEST(MaxkCudaTopk, EqualsReferenceBitForBit)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    for (const std::int64_t dim : {1, 7, 31, 32, 33, 64, 100, 256, 1000, 1024}) {
        // 203 rows: the last block of 8 warps is partly empty; ld > dim.
        const auto x = adversarial_rows(203, dim, dim + 5, 40 + dim);
        auto dx = upload(*gpu.backend, x);
        for (const std::int64_t k : {1, 2, 3, 4, 8, 16, 32, 64, 100, 1000, 1024}) {
            for (const std::int64_t kk : {k, dim}) {
                if (kk > dim) {
                    continue;
                }
                const auto want = halo::reference::maxk_topk(x.cview(), kk);
                const auto got =
                    download_cbsr(gpu.ctx, halo::cuda::maxk_topk(gpu.ctx, dx.view, kk));
                expect_same_cbsr(want, got,
                                 "width " + std::to_string(dim) + ", k " + std::to_string(kk));
            }
        }
    }
}

TEST(MaxkCudaTopk, ManyRowsAndShapeErrors)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto x = halo::testing::random_matrix(100003, 256, 256, 77);
    auto dx = upload(*gpu.backend, x);
    auto out = halo::cuda::make_device_cbsr(gpu.ctx, x.rows, 256, 16);
    halo::cuda::maxk_topk(gpu.ctx, dx.view, out.view());
    expect_same_cbsr(halo::reference::maxk_topk(x.cview(), 16), download_cbsr(gpu.ctx, out),
                     "100003 x 256, k 16");
    auto wrong = halo::cuda::make_device_cbsr(gpu.ctx, x.rows - 1, 256, 16);
    EXPECT_THROW(halo::cuda::maxk_topk(gpu.ctx, dx.view, wrong.view()), halo::LogicError);
    EXPECT_THROW((void)halo::cuda::maxk_topk(gpu.ctx, dx.view, 257), halo::LogicError);
    EXPECT_THROW((void)halo::cuda::maxk_topk(gpu.ctx, dx.view, 0), halo::LogicError);
    // Zero rows launch nothing.
    EXPECT_NO_THROW((void)halo::cuda::maxk_topk(
        gpu.ctx, halo::DenseView<const float>{dx.view.data, 0, 256, 256}, 4));
}

// ---------------------------------------------------------------------------------------------
// SSD.

// The expected output of one (A, S): the group schedule emulated (exact for rows of one group),
// a double-precision product and sum |a| |s| per element (shared rows), groups per row.
struct Expected {
    HostMatrix emulated;
    std::vector<double> exact;
    std::vector<double> scale;
    std::vector<std::int64_t> groups_of_row;
};

Expected expected_ssd(const Csr& a, const halo::EdgeGroups& g, const Cbsr& s)
{
    const auto dim = s.dim;
    Expected e{HostMatrix(a.num_rows, dim), {}, {}, {}};
    halo::reference::ssd_edge_groups(g, a.view(), s.view(), e.emulated.view(), all_rows(a));
    e.exact.assign(static_cast<std::size_t>(a.num_rows * dim), 0.0);
    e.scale.assign(e.exact.size(), 0.0);
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        for (auto p = a.indptr[i]; p < a.indptr[i + 1]; ++p) {
            const double v = a.has_values() ? a.values[p] : 1.0;
            const auto c = a.indices[p];
            for (std::int64_t t = 0; t < s.k; ++t) {
                const auto j = s.indices[c * s.k + t];
                e.exact[i * dim + j] += v * s.values[c * s.k + t];
                e.scale[i * dim + j] += std::fabs(v * s.values[c * s.k + t]);
            }
        }
    }
    e.groups_of_row.assign(static_cast<std::size_t>(a.num_rows), 0);
    for (const auto r : g.row) {
        ++e.groups_of_row[r];
    }
    return e;
}

// Runs `plan` with `launch` over `ranges` in order on a NaN-poisoned output (ld = dim + 3) and
// checks every element against `want`.
void check_ssd(Gpu& gpu, halo::cuda::DeviceSsdPlan& plan, const Csr& a, const Cbsr& s,
               const Expected& want, const SsdLaunch& launch, const std::vector<RowRange>& ranges)
{
    const auto dim = s.dim;
    SCOPED_TRACE(testing::Message()
                 << plan.describe(launch, dim, s.k) << ", " << a.num_rows << " rows, " << a.nnz()
                 << " nonzeros, " << (a.has_values() ? "valued" : "pattern") << ", width " << dim
                 << ", k " << s.k);
    const auto ds = upload_cbsr(gpu.ctx, s);
    auto dout = upload(*gpu.backend, HostMatrix(a.num_rows, dim, dim + 3));
    std::vector<char> covered(static_cast<std::size_t>(a.num_rows), 0);
    for (const auto& r : ranges) {
        plan.run(ds.cview(), dout.view, r, launch);
        for (auto i = r.begin; i < r.end; ++i) {
            covered[i] = 1;
        }
    }
    const auto got = download(*gpu.backend, dout);
    const auto group_size = plan.groups().group_size;
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        const auto groups = want.groups_of_row[i];
        for (std::int64_t j = 0; j < got.ld; ++j) {
            const float y = got(i, j);
            if (j >= dim) {
                ASSERT_TRUE(std::isnan(y)) << "padding (" << i << ", " << j << ") written: " << y;
            } else if (covered[i] == 0) {
                ASSERT_TRUE(std::isnan(y))
                    << "row " << i << " outside the ranges written at column " << j << ": " << y;
            } else if (groups == 1) {
                ASSERT_EQ(y, want.emulated(i, j))
                    << "row " << i << " (one group, " << a.row_nnz(i) << " nonzeros) column " << j
                    << ": expected exactly the emulated schedule's value";
            } else {
                const double k_terms = static_cast<double>(
                    std::min<std::int64_t>(group_size, a.row_nnz(i)) + groups + 2);
                const float tol = halo::testing::tolerance<float>(k_terms, want.scale[i * dim + j]);
                ASSERT_NEAR(y, want.exact[i * dim + j], tol)
                    << "row " << i << " (" << groups << " groups, " << a.row_nnz(i)
                    << " nonzeros) column " << j;
            }
        }
    }
}

// S: the top-k of seeded uniform values.
Cbsr random_cbsr(std::int64_t rows, std::int64_t dim, std::int64_t k, std::uint64_t seed)
{
    const auto x = halo::testing::random_matrix(rows, dim, dim, seed);
    return halo::reference::maxk_topk(x.cview(), k);
}

TEST(MaxkCudaSsd, AllVariantsWidthsAndKOnRmat)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = halo::testing::rmat_csr(10, 31, true);
    auto plan = halo::cuda::make_ssd_plan(gpu.ctx, a, 1024);
    EXPECT_NO_THROW(halo::validate(plan->groups(), a.view()));
    const std::vector<RowRange> full = {all_rows(a)};
    const std::vector<RowRange> split = {{0, a.num_rows / 3}, {a.num_rows / 3, a.num_rows}};
    for (const std::int64_t dim : {32, 64, 256, 1024}) {
        for (const std::int64_t k : {1, 2, 4, 8, 16, 32, 64}) {
            if (k > dim) {
                continue;
            }
            const auto s = random_cbsr(a.num_cols, dim, k, 1000 * dim + k);
            const auto want = expected_ssd(a, plan->groups(), s);
            for (const auto v : kVariants) {
                check_ssd(gpu, *plan, a, s, want, {v, 12, 2}, k % 2 == 0 ? full : split);
                if (testing::Test::HasFatalFailure()) {
                    return;
                }
            }
        }
    }
}

TEST(MaxkCudaSsd, EmptyRowsOddShapesAndPartialRanges)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    // Mostly empty rows; a pattern matrix; widths and k that do not divide 32.
    const Csr a = halo::testing::erdos_renyi_csr(3000, 19, false);
    auto plan = halo::cuda::make_ssd_plan(gpu.ctx, a, 1000);
    for (const auto& [dim, k] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {33, 3}, {100, 5}, {100, 33}, {1000, 7}, {1000, 100}}) {
        const auto s = random_cbsr(a.num_cols, dim, k, 7 * dim + k);
        const auto want = expected_ssd(a, plan->groups(), s);
        for (const auto v : kVariants) {
            check_ssd(gpu, *plan, a, s, want, {v, 12, 4},
                      {{5, 900}, {900, 900}, {2000, a.num_rows}});
        }
    }
}

TEST(MaxkCudaSsd, LongRowIsExactWithIntegers)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    // A row of 10^5 nonzeros (1563 groups of 64) among short, empty and boundary-length rows;
    // pattern matrix and integer values in [-4, 4]: every sum is exact in any order.
    const Csr a = halo::testing::csr_with_rows({3, 0, 100000, 1, 0, 64, 65, 128, 2}, 700);
    for (const std::int64_t k : {2, 16, 64}) {
        auto s = random_cbsr(a.num_cols, 256, k, 55 + k);
        for (std::size_t e = 0; e < s.values.size(); ++e) {
            s.values[e] = static_cast<float>(static_cast<int>(e % 9) - 4);
        }
        for (const std::int32_t size : {1, 64, 1000}) {
            halo::cuda::SsdOptions options;
            options.groups.group_size = size;
            auto plan = halo::cuda::make_ssd_plan(gpu.ctx, a, 256, options);
            const auto want = expected_ssd(a, plan->groups(), s);
            for (std::int64_t i = 0; i < a.num_rows; ++i) {
                for (std::int64_t j = 0; j < 256; ++j) {
                    ASSERT_EQ(want.emulated(i, j), want.exact[i * 256 + j]) << "setup";
                }
            }
            for (const auto v : kVariants) {
                check_ssd(gpu, *plan, a, s, want, {v, 12, 2}, {all_rows(a)});
            }
        }
    }
}

TEST(MaxkCudaSsd, BuffersWarpsAndGroupSizes)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = halo::testing::rmat_csr(9, 5, true);
    for (const std::int32_t size : {1, 7, 64, 1000}) {
        halo::cuda::SsdOptions options;
        options.groups.group_size = size;
        auto plan = halo::cuda::make_ssd_plan(gpu.ctx, a, 1024, options);
        for (const std::int64_t dim : {256, 1024}) {
            for (const std::int64_t k : {2, 8}) {
                const auto s = random_cbsr(a.num_cols, dim, k, 9 * dim + k + size);
                const auto want = expected_ssd(a, plan->groups(), s);
                for (const int buffers : {1, 2, 4, 8, 16}) {
                    for (const int warps : {1, 12, 32}) {
                        check_ssd(gpu, *plan, a, s, want, {SsdVariant::decoupled, warps, buffers},
                                  {all_rows(a)});
                        check_ssd(gpu, *plan, a, s, want,
                                  {SsdVariant::no_atomic_aware, warps, buffers}, {all_rows(a)});
                    }
                }
                check_ssd(gpu, *plan, a, s, want, {SsdVariant::maxk, 32, 1}, {all_rows(a)});
            }
        }
    }
}

TEST(MaxkCudaSsd, DescribeReportsSlotsAndFittedWarps)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = halo::testing::rmat_csr(6, 1, true);
    auto plan = halo::cuda::make_ssd_plan(gpu.ctx, a, 1024);
    constexpr auto rows = SsdOrder::rows;
    EXPECT_EQ(plan->describe({SsdVariant::decoupled, 12, 2}, 256, 8), "decoupled-w12-s2-g64-lf");
    EXPECT_EQ(plan->describe({SsdVariant::decoupled, 12, 8, rows}, 256, 8), "decoupled-w12-s4-g64");
    EXPECT_EQ(plan->describe({SsdVariant::decoupled, 12, 2, rows}, 256, 64),
              "decoupled-w12-s1-g64");
    EXPECT_EQ(plan->describe({SsdVariant::no_slots, 12, 8, rows}, 256, 2), "no_slots-w12-s1-g64");
    EXPECT_EQ(plan->describe({SsdVariant::maxk, 12, 8, rows}, 256, 2), "maxk-w12-s1-g64");
    EXPECT_EQ(plan->describe({SsdVariant::maxk, 12, 8}, 256, 2), "maxk-w12-s1-g64-lf");
    EXPECT_EQ(plan->algorithm(), "ssd-decoupled-w12-b4-g64-lf");  // the default launch
    // 16 buffers of 4 KiB per warp: fewer warps than asked fit a block.
    int optin = 0;
    HALO_CUDA_TRY(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, gpu.ctx.device()));
    EXPECT_EQ(plan->describe({SsdVariant::decoupled, 12, 16, rows}, 1024, 2),
              "decoupled-w" + std::to_string(std::min(12, optin / (16 * 4096))) + "-s16-g64");
    EXPECT_THROW((void)plan->describe({SsdVariant::decoupled, 0, 2}, 256, 2), halo::InputError);
    EXPECT_THROW((void)plan->describe({SsdVariant::decoupled, 12, 33}, 256, 2), halo::InputError);
}

// Both orders, every variant, on ranges the plan ordered (longest first read through the order)
// and on others (by row whatever the launch says); a range outside the rows is refused.
TEST(MaxkCudaSsd, OrderedRangesAndRowOrder)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = halo::testing::rmat_csr(10, 17, true);
    const auto third = a.num_rows / 3;
    halo::cuda::SsdOptions options;
    options.ordered_ranges = {{0, third}, {third, a.num_rows}, {third, third}};
    auto plan = halo::cuda::make_ssd_plan(gpu.ctx, a, 256, options);
    const std::vector<RowRange> ordered = {{0, third}, {third, a.num_rows}};
    const std::vector<RowRange> unordered = {{0, 2 * third}, {2 * third, a.num_rows}};
    for (const std::int64_t k : {4, 16, 32, 64}) {
        const auto s = random_cbsr(a.num_cols, 256, k, 77 + k);
        const auto want = expected_ssd(a, plan->groups(), s);
        for (const auto v : kVariants) {
            for (const auto order : {SsdOrder::rows, SsdOrder::longest_first}) {
                for (const auto& ranges : {ordered, unordered, {all_rows(a)}}) {
                    check_ssd(gpu, *plan, a, s, want, {v, 12, 4, order}, ranges);
                    if (testing::Test::HasFatalFailure()) {
                        return;
                    }
                }
            }
        }
    }
    options.ordered_ranges = {{0, a.num_rows + 1}};
    EXPECT_THROW((void)halo::cuda::make_ssd_plan(gpu.ctx, a, 256, options), halo::InputError);
    options.ordered_ranges = {{5, 4}};
    EXPECT_THROW((void)halo::cuda::make_ssd_plan(gpu.ctx, a, 256, options), halo::InputError);
    EXPECT_EQ(halo::cuda::parse_ssd_order("rows"), SsdOrder::rows);
    EXPECT_EQ(halo::cuda::to_string(SsdOrder::longest_first), "longest_first");
    EXPECT_THROW((void)halo::cuda::parse_ssd_order("random"), halo::InputError);
}

TEST(MaxkCudaSsd, PrecomputedGroupsAndOperandErrors)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = halo::testing::rmat_csr(8, 2, false);
    auto groups = halo::build_edge_groups(a.view(), {16});
    auto plan = halo::cuda::make_ssd_plan(gpu.ctx, a, 64, groups);
    EXPECT_EQ(plan->groups().group_size, 16);
    const auto s = random_cbsr(a.num_cols, 64, 4, 3);
    check_ssd(gpu, *plan, a, s, expected_ssd(a, plan->groups(), s), {SsdVariant::decoupled, 8, 2},
              {all_rows(a)});

    auto bad = groups;
    bad.update_mode[0] = 1 - bad.update_mode[0];
    EXPECT_THROW((void)halo::cuda::make_ssd_plan(gpu.ctx, a, 64, bad), halo::InputError);
    EXPECT_THROW((void)halo::cuda::make_ssd_plan(gpu.ctx, a, 2048), halo::LogicError);
    halo::cuda::SsdOptions zero;
    zero.groups.group_size = 0;
    EXPECT_THROW((void)halo::cuda::make_ssd_plan(gpu.ctx, a, 64, zero), halo::InputError);

    const auto ds = upload_cbsr(gpu.ctx, s);
    auto out = upload(*gpu.backend, HostMatrix(a.num_rows, 64));
    const auto narrow = upload_cbsr(gpu.ctx, random_cbsr(a.num_cols - 1, 64, 4, 3));
    EXPECT_THROW(plan->run(narrow.cview(), out.view, all_rows(a)), halo::LogicError);
    EXPECT_THROW(plan->run(ds.cview(), out.view, {0, a.num_rows + 1}), halo::LogicError);
    const auto wide = upload_cbsr(gpu.ctx, random_cbsr(a.num_cols, 128, 4, 3));
    auto out128 = upload(*gpu.backend, HostMatrix(a.num_rows, 128));
    EXPECT_THROW(plan->run(wide.cview(), out128.view, all_rows(a)), halo::LogicError);
    EXPECT_THROW(plan->run(ds.cview(), out.view, all_rows(a), {SsdVariant::maxk, 33, 1}),
                 halo::InputError);
}

TEST(MaxkCudaPipeline, TopkThenSsdMatchesCpuAndPropagatesNan)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = halo::testing::rmat_csr(10, 8, true);
    auto x = halo::testing::random_matrix(a.num_cols, 256, 256, 21);
    // The first column that some row reads.
    std::int64_t first_row = 0;
    while (a.row_nnz(first_row) == 0) {
        ++first_row;
    }
    const std::int64_t poisoned = a.indices[a.indptr[first_row]];
    x(poisoned, 17) = kNaN;  // kept by the NaN rule, then aggregated by its neighbours
    auto dx = upload(*gpu.backend, x);
    auto plan = halo::cuda::make_ssd_plan(gpu.ctx, a, 256);
    for (const std::int64_t k : {4, 16}) {
        const auto s = halo::reference::maxk_topk(x.cview(), k);
        const auto ds = halo::cuda::maxk_topk(gpu.ctx, dx.view, k);
        expect_same_cbsr(s, download_cbsr(gpu.ctx, ds), "top-k of the layer input");
        HostMatrix want(a.num_rows, 256);
        halo::reference::ssd(a.view(), s.view(), want.view(), all_rows(a));
        for (const auto v : kVariants) {
            SCOPED_TRACE(halo::cuda::to_string(v));
            auto dout = upload(*gpu.backend, HostMatrix(a.num_rows, 256));
            plan->run(ds.cview(), dout.view, all_rows(a), {v, 12, 2});
            const auto got = download(*gpu.backend, dout);
            std::int64_t nan_rows = 0;
            for (std::int64_t i = 0; i < a.num_rows; ++i) {
                bool reads_poison = false;
                for (auto p = a.indptr[i]; p < a.indptr[i + 1]; ++p) {
                    reads_poison = reads_poison || a.indices[p] == poisoned;
                }
                nan_rows += reads_poison ? 1 : 0;
                for (std::int64_t j = 0; j < 256; ++j) {
                    if (std::isnan(want(i, j))) {
                        ASSERT_TRUE(reads_poison && j == 17) << "(" << i << ", " << j << ")";
                        ASSERT_TRUE(std::isnan(got(i, j)))
                            << "NaN lost at (" << i << ", " << j << ")";
                    } else {
                        ASSERT_NEAR(got(i, j), want(i, j),
                                    halo::testing::tolerance<float>(
                                        4.0 * a.row_nnz(i) + 4, std::max<double>(1, a.row_nnz(i))))
                            << "(" << i << ", " << j << ")";
                    }
                }
            }
            EXPECT_GT(nan_rows, 0);
        }
    }
}

}  // namespace
