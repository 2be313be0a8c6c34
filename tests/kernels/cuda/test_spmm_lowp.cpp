// fp16/bf16 features with fp32 accumulation for Accel-GCN (combined warps and
// not), MergePath, row-split, the cost model's plan (`auto`) and (apart) the autotuner on the GPU:
// the features are rounded on the device (halo::cuda::convert_features, checked bit for bit against
// the host rounding), the kernels read them through FeatureSpmmPlan::run_features, and the result
// is compared with a double reference computed on the rounded features (spmm_exact_check.hpp), so
// only the fp32 summation order differs. Widths 1 .. 1000, 16-byte-aligned rows (8-half vector
// loads) and misaligned ones, the full range, the interior/boundary split and a middle range, empty
// rows, a row of 10^6 nonzeros, y poisoned with NaN before each run.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/kernels/cuda/accel_gcn.hpp"
#include "halo/kernels/cuda/autotune.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"
#include "halo/kernels/cuda/mergepath.hpp"
#include "halo/kernels/cuda/rowsplit.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/spmm_registry.hpp"
#include "halo_test.hpp"
#include "spmm_exact_check.hpp"
#include "spmm_fixtures.hpp"

namespace {

using halo::Csr;
using halo::FeatureType;
using halo::RowRange;
using halo::cuda::Context;

constexpr std::int64_t kMaxDim = 1000;

struct Plans {
    std::vector<std::string> names;
    std::vector<std::unique_ptr<halo::SpmmPlan>> plans;
};

Plans make_plans(Context& ctx, const Csr& a)
{
    const std::int64_t n = a.num_rows;
    Plans p;
    halo::cuda::AccelGcnOptions combined;
    combined.ranges = {{0, n / 3}, {n / 3, n}};
    halo::cuda::AccelGcnOptions plain = combined;
    plain.combined_warps = false;
    p.names = {"accel_gcn", "accel_gcn_nocombine", "mergepath", "rowsplit", "mergepath_c400_t128",
               "rowchunk",  "mergepath_l2_hints"};
    p.plans.push_back(halo::cuda::make_accel_gcn_spmm_plan(ctx, a, kMaxDim, combined));
    p.plans.push_back(halo::cuda::make_accel_gcn_spmm_plan(ctx, a, kMaxDim, plain));
    p.plans.push_back(halo::cuda::make_mergepath_spmm_plan(ctx, a, kMaxDim));
    p.plans.push_back(halo::cuda::make_rowsplit_spmm_plan(ctx, a, kMaxDim));
    // MergePath over slices of 128 columns (widths above 128 run in several slices, each
    // reading X at an offset into its rows).
    static const halo::SpmmPlanHints none;
    const auto* tiled = halo::find_spmm_kernel("mergepath_c400_t128", halo::spmm_use_bench);
    p.plans.push_back(tiled->make(ctx, a, halo::SpmmPlanRequest{kMaxDim, none}));
    // Rows longer than 16 nonzeros cut into units (most of a power-law graph's hubs).
    p.plans.push_back(halo::cuda::make_rowchunk_spmm_plan(ctx, a, kMaxDim, {.length = 16}));
    // L2 hints with half the columns marked cold: fp16/bf16 read the marked indices with plain
    // loads, fp32 with the hinted ones.
    halo::cuda::MergePathOptions hints;
    hints.hint_hot_bytes = 4 * 128 * (a.num_cols / 2);
    p.plans.push_back(halo::cuda::make_mergepath_spmm_plan(ctx, a, kMaxDim, hints));
    // halo-infer's default, the cost model's plan (the kernel it picks for each width and X
    // type), asked for every X type. The autotuner, which times every candidate per key, has
    // its own smaller test below (AutotunerChoosesPerElementType).
    const auto* modeled = halo::find_spmm_kernel("auto", halo::spmm_use_infer);
    halo::SpmmPlanRequest request{kMaxDim, none};
    request.x_types = halo::spmm_x_all;
    p.names.push_back("auto");
    p.plans.push_back(modeled->make(ctx, a, request));
    return p;
}

std::uint16_t bits_of(float v, FeatureType type)
{
    return type == FeatureType::fp16 ? halo::float_to_half_bits(v) : halo::float_to_bf16_bits(v);
}

// Every kernel, feature type and width on `a`, with x rows aligned for 16-byte loads (ld a
// multiple of 8) and misaligned (ld = d + 1).
void check_lowp(Context& ctx, const std::string& label, const Csr& a,
                const std::vector<std::int64_t>& widths, std::uint64_t seed)
{
    const std::int64_t n = a.num_rows;
    const std::vector<std::vector<RowRange>> range_sets = {
        {{0, n}}, {{0, n / 3}, {n / 3, n}}, {{n / 5, n / 2}}};
    Plans plans = make_plans(ctx, a);
    const cudaStream_t stream = ctx.compute_stream();
    std::vector<std::int64_t> all_rows(static_cast<std::size_t>(n));
    std::iota(all_rows.begin(), all_rows.end(), std::int64_t{0});
    for (const FeatureType type : {FeatureType::fp16, FeatureType::bf16, FeatureType::fp32}) {
        for (const std::int64_t d : widths) {
            // fp32 features through run_features: the same kernels as run(), one layout.
            const std::vector<std::int64_t> lds =
                type == FeatureType::fp32 ? std::vector<std::int64_t>{d}
                                          : std::vector<std::int64_t>{(d + 7) / 8 * 8, d + 1};
            std::vector<float> x(static_cast<std::size_t>(a.num_cols * d));
            halo::testing::signed_features(x.data(), a.num_cols, d, d, seed + d);
            std::vector<float> rounded = x;
            halo::round_features(rounded, type);
            const auto exact = halo::testing::exact_rows(a, rounded.data(), d, d, all_rows);
            const std::int64_t ldy = d % 4 == 0 ? d + 4 : d + 1;
            halo::cuda::DeviceBuffer<float> x32(ctx, std::max<std::size_t>(1, x.size()));
            halo::cuda::DeviceBuffer<float> yd(
                ctx, static_cast<std::size_t>(std::max<std::int64_t>(1, n * ldy)));
            if (!x.empty()) {
                HALO_CUDA_TRY(cudaMemcpyAsync(x32.data(), x.data(), x.size() * sizeof(float),
                                              cudaMemcpyHostToDevice, stream));
            }
            for (const std::int64_t ldx : lds) {
                halo::cuda::FeatureView xv{x32.data(), FeatureType::fp32, a.num_cols, d, d};
                halo::cuda::DeviceBuffer<std::uint16_t> xh;
                if (type != FeatureType::fp32) {
                    const auto count = static_cast<std::size_t>(a.num_cols * ldx);
                    xh = halo::cuda::DeviceBuffer<std::uint16_t>(ctx,
                                                                 std::max<std::size_t>(1, count));
                    halo::cuda::convert_features(stream, {x32.data(), a.num_cols, d, d}, type,
                                                 xh.data(), ldx);
                    // The device rounding is the host's, bit for bit (padding not compared).
                    std::vector<std::uint16_t> bits(count);
                    if (count > 0) {
                        HALO_CUDA_TRY(cudaMemcpyAsync(bits.data(), xh.data(),
                                                      count * sizeof(std::uint16_t),
                                                      cudaMemcpyDeviceToHost, stream));
                    }
                    HALO_CUDA_TRY(cudaStreamSynchronize(stream));
                    for (std::int64_t i = 0; i < a.num_cols; ++i) {
                        for (std::int64_t j = 0; j < d; ++j) {
                            const float v = x[static_cast<std::size_t>(i * d + j)];
                            ASSERT_EQ(bits[static_cast<std::size_t>(i * ldx + j)], bits_of(v, type))
                                << halo::to_string(type) << " conversion of " << v << " at (" << i
                                << ", " << j << ")";
                        }
                    }
                    xv = {xh.data(), type, a.num_cols, d, ldx};
                }
                std::vector<float> got(static_cast<std::size_t>(n * ldy));
                for (std::size_t k = 0; k < plans.plans.size(); ++k) {
                    halo::cuda::FeatureSpmmPlan* plan =
                        halo::cuda::as_feature_plan(*plans.plans[k]);
                    ASSERT_NE(plan, nullptr) << plans.names[k] << " has no low-precision entry";
                    for (const auto& ranges : range_sets) {
                        std::vector<char> inside(static_cast<std::size_t>(n), 0);
                        std::ostringstream what;
                        what << plans.names[k] << " on " << label << ", " << halo::to_string(type)
                             << ", d " << d << ", ldx " << ldx << ", ranges";
                        for (const RowRange& r : ranges) {
                            what << " [" << r.begin << ", " << r.end << ")";
                            std::fill(inside.begin() + r.begin, inside.begin() + r.end, 1);
                        }
                        HALO_CUDA_TRY(cudaMemsetAsync(yd.data(), 0xFF, yd.bytes(), stream));
                        for (const RowRange& r : ranges) {
                            plan->run_features(xv, {yd.data(), n, d, ldy}, r);
                        }
                        if (!got.empty()) {
                            HALO_CUDA_TRY(cudaMemcpyAsync(got.data(), yd.data(),
                                                          got.size() * sizeof(float),
                                                          cudaMemcpyDeviceToHost, stream));
                        }
                        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
                        EXPECT_TRUE(halo::testing::rows_match(exact, got, ldy, inside))
                            << what.str();
                    }
                }
            }
        }
    }
}

// Under compute-sanitizer (halo_test.hpp, under_sanitizer): a width below the 16-byte vector, one
// misaligned past a warp and one of several column tiles; smaller graphs.
const std::vector<std::int64_t> kWidths = halo::testing::sweep<std::vector<std::int64_t>>(
    {1, 3, 8, 31, 33, 64, 100, 256, 1000}, {3, 33, 1000});

TEST(SpmmLowp, RmatGcnNormalized)
{
    HALO_REQUIRE_GPUS(1);
    Context ctx;
    check_lowp(ctx, "R-MAT (gcn)",
               halo::testing::rmat_graph(halo::testing::sweep(12, 10), 8, 3,
                                         halo::Normalization::gcn),
               kWidths, 100);
}

TEST(SpmmLowp, ErdosRenyiWithEmptyRowsPattern)
{
    HALO_REQUIRE_GPUS(1);
    Context ctx;
    check_lowp(ctx, "Erdos-Renyi 6000 rows (pattern)",
               halo::testing::erdos_renyi_csr(6000, 5, false), kWidths, 200);
}

TEST(SpmmLowp, RowOfAMillionNonzeros)
{
    HALO_REQUIRE_GPUS(1);
    Context ctx;
    const std::int64_t kLong = halo::testing::sweep<std::int64_t>(1000000, 1 << 17);
    Csr a = halo::testing::csr_with_rows({2, kLong, 0, 3}, kLong);
    std::iota(a.indices.begin() + 2, a.indices.begin() + 2 + kLong, 0);
    check_lowp(ctx, "row of " + std::to_string(kLong) + " nonzeros", a,
               halo::testing::sweep<std::vector<std::int64_t>>({1, 8, 33, 256}, {8, 33}), 300);
}

// The registry's x_types: every kernel that says it reads fp16 / bf16 X builds FeatureSpmmPlans
// (the cost model and the autotuner rely on it), and cuSPARSE, which does not, builds none.
TEST(SpmmLowp, RegistryElementTypesMatchThePlans)
{
    HALO_REQUIRE_GPUS(1);
    Context ctx;
    const Csr a = halo::testing::rmat_graph(10, 8, 9, halo::Normalization::gcn);
    const halo::SpmmPlanHints none;
    int lowp = 0;
    for (const auto& k : halo::spmm_kernels()) {
        if (k.make == nullptr || !k.exact) {
            continue;
        }
        halo::SpmmPlanRequest request{64, none};
        request.x_types = k.x_types;
        const auto plan = k.make(ctx, a, request);
        ASSERT_NE(plan, nullptr) << k.name;
        const bool features = halo::cuda::as_feature_plan(*plan) != nullptr;
        EXPECT_EQ(features, k.reads(FeatureType::bf16)) << k.name;
        EXPECT_EQ(k.reads(FeatureType::fp16), k.reads(FeatureType::bf16)) << k.name;
        lowp += k.reads(FeatureType::bf16) ? 1 : 0;
    }
    EXPECT_GE(lowp, 4);
    EXPECT_FALSE(
        halo::find_spmm_kernel("cusparse", halo::spmm_use_bench)->reads(FeatureType::fp16));
}

// The autotuned plan with 16-bit X: a choice per (range, width, X type), cuSPARSE a failed
// candidate for fp16 / bf16, the result the reference of the rounded features; one small graph.
TEST(SpmmLowp, AutotunerChoosesPerElementType)
{
    HALO_REQUIRE_GPUS(1);
    Context ctx;
    const Csr a = halo::testing::rmat_graph(10, 8, 11, halo::Normalization::gcn);
    const std::int64_t n = a.num_rows;
    const std::int64_t d = 32;
    const auto plan = halo::cuda::make_autotuned_spmm_plan(ctx, a, d);
    const cudaStream_t stream = ctx.compute_stream();
    std::vector<float> x(static_cast<std::size_t>(a.num_cols * d));
    halo::testing::signed_features(x.data(), a.num_cols, d, d, 77);
    halo::cuda::DeviceBuffer<float> x32(ctx, x.size());
    halo::cuda::DeviceBuffer<std::uint16_t> xh(ctx, x.size());
    halo::cuda::DeviceBuffer<float> yd(ctx, static_cast<std::size_t>(n * d));
    HALO_CUDA_TRY(cudaMemcpyAsync(x32.data(), x.data(), x.size() * sizeof(float),
                                  cudaMemcpyHostToDevice, stream));
    std::vector<std::int64_t> all_rows(static_cast<std::size_t>(n));
    std::iota(all_rows.begin(), all_rows.end(), std::int64_t{0});
    const std::vector<char> inside(static_cast<std::size_t>(n), 1);
    for (const FeatureType type : {FeatureType::fp32, FeatureType::bf16, FeatureType::fp16}) {
        std::vector<float> rounded = x;
        halo::round_features(rounded, type);
        const auto exact = halo::testing::exact_rows(a, rounded.data(), d, d, all_rows);
        halo::cuda::FeatureView xv{x32.data(), FeatureType::fp32, a.num_cols, d, d};
        if (type != FeatureType::fp32) {
            halo::cuda::convert_features(stream, {x32.data(), a.num_cols, d, d}, type, xh.data(),
                                         d);
            xv = {xh.data(), type, a.num_cols, d, d};
        }
        HALO_CUDA_TRY(cudaMemsetAsync(yd.data(), 0xFF, yd.bytes(), stream));
        plan->run_features(xv, {yd.data(), n, d, d}, {0, n});
        std::vector<float> got(static_cast<std::size_t>(n * d));
        HALO_CUDA_TRY(cudaMemcpyAsync(got.data(), yd.data(), got.size() * sizeof(float),
                                      cudaMemcpyDeviceToHost, stream));
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
        EXPECT_TRUE(halo::testing::rows_match(exact, got, d, inside)) << halo::to_string(type);
        const auto* choice = plan->table().find({0, n, d, type});
        ASSERT_NE(choice, nullptr) << halo::to_string(type);
        const bool cusparse_failed = !choice->failures[0].empty();
        EXPECT_EQ(choice->names[0], "cusparse");
        EXPECT_EQ(cusparse_failed, type != FeatureType::fp32) << choice->failures[0];
    }
    EXPECT_EQ(plan->table().size(), 3u);
    EXPECT_NE(plan->report().find("d=32 bf16: "), std::string::npos) << plan->report();
}

TEST(SpmmLowp, ConversionRoundsEdgeValuesLikeTheHost)
{
    HALO_REQUIRE_GPUS(1);
    Context ctx;
    // Ties, overflow to infinity, subnormals, signed zero: device and host agree bit for bit.
    const std::vector<float> values = {
        0.0f,          -0.0f,       1.0f,        65504.0f, 65519.0f,        65520.0f,
        -1e10f,        1e-8f,       -3e-7f,      5.96e-8f, 2.98e-8f,        1.00048828125f,
        1.0009765625f, 1.00390625f, 1.01171875f, 3.4e38f,  -1.17549435e-38f};
    const auto n = static_cast<std::int64_t>(values.size());
    halo::cuda::DeviceBuffer<float> src(ctx, values.size());
    halo::cuda::DeviceBuffer<std::uint16_t> dst(ctx, values.size());
    const cudaStream_t stream = ctx.compute_stream();
    HALO_CUDA_TRY(
        cudaMemcpyAsync(src.data(), values.data(), src.bytes(), cudaMemcpyHostToDevice, stream));
    for (const FeatureType type : {FeatureType::fp16, FeatureType::bf16}) {
        halo::cuda::convert_features(stream, {src.data(), n, 1, 1}, type, dst.data(), 1);
        std::vector<std::uint16_t> bits(values.size());
        HALO_CUDA_TRY(
            cudaMemcpyAsync(bits.data(), dst.data(), dst.bytes(), cudaMemcpyDeviceToHost, stream));
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
        for (std::size_t i = 0; i < values.size(); ++i) {
            EXPECT_EQ(bits[i], bits_of(values[i], type))
                << halo::to_string(type) << " of " << values[i];
        }
    }
    EXPECT_THROW(halo::cuda::convert_features(stream, {src.data(), n, 2, 1}, FeatureType::fp16,
                                              dst.data(), 2),
                 halo::LogicError);
}

TEST(SpmmLowp, CusparseHasNoLowPrecisionEntry)
{
    HALO_REQUIRE_GPUS(1);
    Context ctx;
    const Csr a = halo::testing::erdos_renyi_csr(100, 5, true);
    const auto plan = halo::cuda::make_cusparse_spmm_plan(ctx, a, 8);
    EXPECT_EQ(halo::cuda::as_feature_plan(*plan), nullptr);
}

}  // namespace
