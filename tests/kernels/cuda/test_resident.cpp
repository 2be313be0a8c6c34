// The resident-slice SpMM (include/halo/kernels/cuda/resident.hpp) against the CPU on fresh seeded
// inputs. Two oracles: reference::spmm within tolerance (check_spmm: NaN-poisoned y, rows outside
// the range and the padding must stay NaN), and resident::emulate, the kernel's own order of
// operations on the CPU (fmaf per entry in layout order, the group butterfly, the scalings),
// which the kernel must match bit for bit. Both access paths run (float4 where widths and
// leading dimensions are multiples of 4, scalar elsewhere), fp16/bf16 features, scaled patterns,
// run_add, NaN features, and the operators the plan must refuse.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"
#include "halo/kernels/cuda/resident.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo_test.hpp"
#include "preprocess/resident_layout.hpp"
#include "scaled_operator.hpp"
#include "spmm_device_fixtures.hpp"

namespace {

using halo::Csr;
using halo::RowRange;
using halo::testing::check_spmm;
using halo::testing::check_spmm_add;
using halo::testing::csr_with_rows;
using halo::testing::download;
using halo::testing::Gpu;
using halo::testing::HostMatrix;
using halo::testing::kNaN;
using halo::testing::random_matrix;
using halo::testing::upload;

constexpr std::int64_t kMaxDim = 300;

std::vector<std::vector<RowRange>> full_and_split(std::int64_t n)
{
    return {{{0, n}}, {{0, n / 3}, {n / 3, n}}, {{n / 2, n / 2}, {n - 1, n}}};
}

std::vector<RowRange> flatten(const std::vector<std::vector<RowRange>>& sets)
{
    std::vector<RowRange> out;
    for (const auto& s : sets) {
        out.insert(out.end(), s.begin(), s.end());
    }
    return out;
}

// Bitwise: element for element the emulation's bits (NaN equals NaN), padding untouched.
void expect_same_bits(const HostMatrix& got, const HostMatrix& want, const std::string& what)
{
    for (std::int64_t i = 0; i < got.rows; ++i) {
        for (std::int64_t j = 0; j < got.ld; ++j) {
            const float g = got.data[static_cast<std::size_t>(i * got.ld + j)];
            const float w = want.data[static_cast<std::size_t>(i * want.ld + j)];
            ASSERT_TRUE(halo::testing::same(g, w))
                << what << ": (" << i << ", " << j << ") is " << g << ", the emulation " << w;
        }
    }
}

// Runs `plan` over `ranges` on a NaN-poisoned y and compares with the emulation of the same
// ranges' layouts (built as the plan builds them), bit for bit.
void check_bits(Gpu& gpu, halo::SpmmPlan& plan, const Csr& a, const HostMatrix& x,
                const std::vector<RowRange>& ranges, std::int64_t ldy, const float* row_scale,
                const float* col_scale, const std::string& what)
{
    HostMatrix want(a.num_rows, x.cols, ldy);
    for (const auto& r : ranges) {
        halo::resident::emulate(halo::resident::build_layout(a.view(), r), x.cview(), want.view(),
                                row_scale, col_scale);
    }
    auto dx = upload(*gpu.backend, x);
    auto dy = upload(*gpu.backend, HostMatrix(a.num_rows, x.cols, ldy));
    for (const auto& r : ranges) {
        plan.run(dx.view, dy.view, r);
    }
    expect_same_bits(download(*gpu.backend, dy), want, what);
}

halo::Csr pattern_of(Csr a)
{
    a.values.clear();
    return a;
}

TEST(ResidentSpmm, MatchesTheReferenceOnRandomOperators)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 100;
    for (const bool valued : {false, true}) {
        std::vector<Csr> operators = {
            halo::testing::rmat_csr(10, ++seed, valued),
            halo::testing::erdos_renyi_csr(1 << 10, ++seed, valued),  // most rows empty
            // Rows of 0..70000 nonzeros: one lane, groups of 2..32, and 32 lanes past the limit.
            csr_with_rows({0, 1, 7, 9, 65, 100, 3000, 70000, 0, 2}, 5000, valued, ++seed),
        };
        for (const auto& a : operators) {
            const auto all = full_and_split(a.num_rows);
            const auto plan =
                halo::cuda::make_resident_spmm_plan(gpu.ctx, a, kMaxDim, {}, nullptr, flatten(all));
            SCOPED_TRACE(plan->algorithm());
            for (const std::int64_t width : {1, 3, 4, 5, 8, 33, 128, 256, 300}) {
                for (const auto& ranges : all) {
                    check_spmm(*gpu.backend, *plan, a, width, ranges, ++seed);
                }
            }
        }
    }
}

TEST(ResidentSpmm, EqualsTheEmulationBitForBit)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 200;
    for (const bool valued : {false, true}) {
        const auto a = halo::testing::rmat_csr(11, ++seed, valued);
        const auto plan = halo::cuda::make_resident_spmm_plan(gpu.ctx, a, kMaxDim);
        for (const std::int64_t width : {4, 7, 64, 256}) {
            for (const bool vectors : {true, false}) {
                const std::int64_t ldx = vectors ? width + 4 : width + 3;
                const std::int64_t ldy = vectors ? width + 8 : width + 1;
                const auto x = random_matrix(a.num_cols, width, ldx, ++seed);
                for (const auto& ranges : full_and_split(a.num_rows)) {
                    check_bits(gpu, *plan, a, x, ranges, ldy, nullptr, nullptr,
                               std::string(valued ? "valued" : "pattern") + " width " +
                                   std::to_string(width) + (vectors ? " float4" : " scalar"));
                }
            }
        }
    }
}

TEST(ResidentSpmm, ScaledPatternsNeverFormTheirValues)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 300;
    const auto a = halo::testing::rmat_csr(10, ++seed, true);  // its values must be ignored
    const auto rows =
        halo::testing::random_floats(static_cast<std::size_t>(a.num_rows), ++seed, 0.1f, 1.0f);
    const auto cols =
        halo::testing::random_floats(static_cast<std::size_t>(a.num_cols), ++seed, 0.1f, 1.0f);
    for (const auto& scaling : {halo::OperatorScaling{rows, cols}, halo::OperatorScaling{rows, {}},
                                halo::OperatorScaling{{}, cols}}) {
        const auto plan = halo::cuda::make_resident_spmm_plan(gpu.ctx, a, kMaxDim, {}, &scaling);
        EXPECT_NE(plan->algorithm().find("pattern with scalings"), std::string::npos);
        EXPECT_EQ(plan->memory().values,
                  static_cast<std::int64_t>((scaling.row.size() + scaling.col.size()) * 4));
        const auto product = halo::testing::scaled_operator(pattern_of(a), scaling);
        for (const std::int64_t width : {1, 8, 130}) {
            for (const auto& ranges : full_and_split(a.num_rows)) {
                check_spmm(*gpu.backend, *plan, product, width, ranges, ++seed);
            }
            const auto x = random_matrix(a.num_cols, width, width + 4, ++seed);
            check_bits(gpu, *plan, pattern_of(a), x, {{0, a.num_rows}}, width + 4,
                       scaling.row.empty() ? nullptr : scaling.row.data(),
                       scaling.col.empty() ? nullptr : scaling.col.data(), "scaled");
        }
    }
}

TEST(ResidentSpmm, AddsInPlace)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 400;
    const auto a = halo::testing::rmat_csr(9, ++seed, true);
    const auto plan = halo::cuda::make_resident_spmm_plan(gpu.ctx, a, kMaxDim);
    for (const std::int64_t width : {3, 16, 256}) {
        for (const auto& ranges : full_and_split(a.num_rows)) {
            check_spmm_add(*gpu.backend, *plan, a, width, ranges, ++seed, true);
        }
    }
}

TEST(ResidentSpmm, HalfFeaturesAreWidenedAsTheSliceLoads)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 500;
    const auto a = halo::testing::rmat_csr(10, ++seed, true);
    const auto plan = halo::cuda::make_resident_spmm_plan(gpu.ctx, a, kMaxDim);
    auto* features = halo::cuda::as_feature_plan(*plan);
    ASSERT_NE(features, nullptr);
    for (const auto type : {halo::FeatureType::fp16, halo::FeatureType::bf16}) {
        for (const std::int64_t width : {5, 64}) {
            const std::int64_t ld = width + 3;
            const auto x = random_matrix(a.num_cols, width, ld, ++seed);
            std::vector<std::uint16_t> bits(x.data.size(), 0);
            HostMatrix widened(a.num_cols, width, ld);
            for (std::int64_t i = 0; i < a.num_cols; ++i) {
                for (std::int64_t j = 0; j < width; ++j) {
                    const auto at = static_cast<std::size_t>(i * ld + j);
                    bits[at] = type == halo::FeatureType::fp16
                                   ? halo::float_to_half_bits(x.data[at])
                                   : halo::float_to_bf16_bits(x.data[at]);
                    widened.data[at] = type == halo::FeatureType::fp16
                                           ? halo::half_bits_to_float(bits[at])
                                           : halo::bf16_bits_to_float(bits[at]);
                }
            }
            HostMatrix want(a.num_rows, width, width + 1);
            halo::resident::emulate(halo::resident::build_layout(a.view(), {0, a.num_rows}),
                                    widened.cview(), want.view());
            halo::cuda::DeviceBuffer<std::uint16_t> dx(gpu.ctx, bits.size());
            ASSERT_EQ(cudaMemcpy(dx.data(), bits.data(), dx.bytes(), cudaMemcpyHostToDevice),
                      cudaSuccess);
            auto dy = upload(*gpu.backend, HostMatrix(a.num_rows, width, width + 1));
            features->run_features({dx.data(), type, a.num_cols, width, ld}, dy.view,
                                   {0, a.num_rows});
            expect_same_bits(download(*gpu.backend, dy), want,
                             type == halo::FeatureType::fp16 ? "fp16" : "bf16");
        }
    }
}

TEST(ResidentSpmm, NaNFeaturesReachOnlyTheRowsThatReadThem)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = halo::testing::rmat_csr(9, 600, true);
    const std::int64_t width = 8;
    auto x = random_matrix(a.num_cols, width, width, 601);
    const std::int64_t poisoned = a.indices[0];
    x(poisoned, 2) = kNaN;
    const auto plan = halo::cuda::make_resident_spmm_plan(gpu.ctx, a, width);
    check_bits(gpu, *plan, a, x, {{0, a.num_rows}}, width, nullptr, nullptr, "NaN in x");
    // And the emulation itself: NaN exactly in column 2 of the rows with column `poisoned`.
    HostMatrix y(a.num_rows, width, width);
    halo::resident::emulate(halo::resident::build_layout(a.view(), {0, a.num_rows}), x.cview(),
                            y.view());
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        bool reads = false;
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            reads = reads || a.indices[k] == poisoned;
        }
        for (std::int64_t j = 0; j < width; ++j) {
            EXPECT_EQ(std::isnan(y(i, j)), reads && j == 2) << "(" << i << ", " << j << ")";
        }
    }
}

TEST(ResidentSpmm, RefusesWhatItCannotHold)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    const std::int64_t limit = halo::cuda::resident_max_columns(ctx.device());
    EXPECT_GE(limit, 2048);  // 48 KiB at least on any device with CUDA 13
    auto wide = csr_with_rows({3, 1}, limit + 1);
    try {
        (void)halo::cuda::make_resident_spmm_plan(ctx, wide, 8);
        FAIL() << limit + 1 << " columns accepted";
    } catch (const halo::InputError& e) {
        EXPECT_NE(std::string(e.what()).find(std::to_string(limit + 1) + " columns"),
                  std::string::npos)
            << e.what();
    }
    const auto fits = csr_with_rows({3, 1}, limit);
    EXPECT_NO_THROW((void)halo::cuda::make_resident_spmm_plan(ctx, fits, 8));
    EXPECT_THROW((void)halo::cuda::make_resident_spmm_plan(ctx, fits, 8, {.segment = -1}),
                 halo::InputError);
    EXPECT_THROW((void)halo::cuda::make_resident_spmm_plan(ctx, fits, 0), halo::LogicError);
    auto bad = fits;
    bad.indices[0] = static_cast<halo::local_id>(limit);  // a column outside the operator
    EXPECT_THROW((void)halo::cuda::make_resident_spmm_plan(ctx, bad, 8), halo::InputError);
}

TEST(ResidentSpmm, EmptyOperators)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto none = csr_with_rows({0, 0, 0, 0, 0, 0, 0}, 3);  // 7 x 3 without nonzeros
    const auto plan = halo::cuda::make_resident_spmm_plan(gpu.ctx, none, 8);
    check_spmm(*gpu.backend, *plan, none, 5, {{0, 7}}, 700);
    const Csr empty;
    const auto empty_plan = halo::cuda::make_resident_spmm_plan(gpu.ctx, empty, 8);
    check_spmm(*gpu.backend, *empty_plan, empty, 4, {{0, 0}}, 701);
}

TEST(ResidentSpmm, SharedGraphs)
{
    HALO_REQUIRE_GPUS(1);
    const std::vector<std::string> names = {"cora.el.gz", "BlogCatalog.el.gz",
                                            "facebook-combined.el.gz", "wiki-Vote.el.gz"};
    Gpu gpu;
    std::uint64_t seed = 800;
    int ran = 0;
    for (const auto& name : names) {
        const auto path = halo::testing::shared_data_file(name);
        if (path.empty()) {
            continue;
        }
        ++ran;
        SCOPED_TRACE(name);
        const auto a = halo::testing::read_gcn_graph(path);
        const auto plan = halo::cuda::make_resident_spmm_plan(gpu.ctx, a, 256);
        for (const std::int64_t width : {1, 16, 33, 128, 256}) {
            for (const auto& ranges : full_and_split(a.num_rows)) {
                check_spmm(*gpu.backend, *plan, a, width, ranges, ++seed);
            }
        }
        const auto x = random_matrix(a.num_cols, 128, 132, ++seed);
        check_bits(gpu, *plan, a, x, {{0, a.num_rows}}, 132, nullptr, nullptr, name);
    }
    if (ran == 0) {
        GTEST_SKIP() << "none of the shared graphs found under "
                     << halo::testing::shared_data_dir();
    }
}

}  // namespace
