// AES-SpMM on the GPU (include/halo/kernels/cuda/aes.hpp) against its CPU reference, and the int8
// row packing (include/halo/comm/quantized_pack.hpp) against its. The kernels sum each row's
// sampled products in slot order with one fused multiply-add each and dequantize with the same
// function as the reference, so every comparison is bit for bit (nvcc keeps IEEE fma and division,
// no fast math). Outputs start as NaN: rows outside the requested range and the padding between
// cols and ld must stay NaN. A failure names the kernel, W, scaling, width, strides, the row with
// its strategy, the column, and the expected and computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "halo/comm/quantized_pack.hpp"
#include "halo/core/error.hpp"
#include "halo/core/graph.hpp"
#include "halo/kernels/cuda/aes.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/aes.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo/quantize/quantize.hpp"
#include "halo_test.hpp"
#include "spmm_device_fixtures.hpp"

namespace {

using halo::AesOptions;
using halo::AesScaling;
using halo::cuda::DeviceBuffer;
using halo::testing::csr_with_rows;
using halo::testing::download;
using halo::testing::Gpu;
using halo::testing::HostMatrix;
using halo::testing::kNaN;
using halo::testing::random_matrix;
using halo::testing::upload;

const std::vector<std::int64_t> kSampleWidths = {16, 32, 64, 128, 256, 512, 1024};
const std::vector<std::int64_t> kDims = {1, 32, 33, 64, 128, 256};
constexpr std::int64_t kMaxDim = 256;

// Rows shorter and longer than every W, at the boundaries of Table 1 for small W (36 W and 54 W
// for W = 16 and 32), empty rows, and one row of 10^5 nonzeros.
halo::Csr mixed_rows(bool valued, std::uint64_t seed)
{
    return csr_with_rows({0,   1,    15,   16,   17,   31,   33,   64, 65, 200,   257,    513, 577,
                          865, 1024, 1025, 1153, 1729, 2049, 3000, 0,  7,  40000, 100000, 3},
                         6000, valued, seed);
}

// An R-MAT graph with GCN normalization: power-law rows, real values.
halo::Csr rmat_rows(std::uint64_t seed)
{
    return halo::testing::rmat_graph(11, 16, seed, halo::Normalization::gcn);
}

std::int64_t x_ld(std::int64_t width, bool vector)
{
    return vector ? width + 4 : width + 3;
}
std::int64_t y_ld(std::int64_t width, bool vector)
{
    return vector ? width + 8 : width + 1;
}

std::string strategy_text(std::int64_t nnz, std::int64_t w)
{
    if (w == 0) {
        return "row_nnz " + std::to_string(nnz) + ", exact";
    }
    const auto s = halo::aes_row_strategy(nnz, w);
    return "row_nnz " + std::to_string(nnz) + ", N " + std::to_string(s.run) + ", sample_cnt " +
           std::to_string(s.samples);
}

// Rows of at most this many slots are never split into pieces (every layout stages at least 128
// slots per group): the kernel sums them as one chain in slot order, like the reference.
constexpr std::int64_t kNeverSplit = 128;

std::int64_t slots_of(std::int64_t nnz, std::int64_t w)
{
    return w == 0 ? nnz : halo::aes_row_strategy(nnz, w).count();
}

// got must equal want on the covered rows and be NaN elsewhere (rows outside the ranges,
// padding): bit for bit for rows of at most kNeverSplit slots; for longer rows, which the kernel
// sums piece by piece, within 32 eps of mag (the sum of |products|), the project's bound for two
// summation orders of random-signed terms (apps/halo_bench.cpp) and far below one product of a
// wrong or missing nonzero.
void expect_same(const HostMatrix& got, const HostMatrix& want, const HostMatrix& mag,
                 const std::vector<char>& covered, const halo::Csr& a, std::int64_t w,
                 const std::string& what)
{
    for (std::int64_t i = 0; i < got.rows; ++i) {
        const bool exact = slots_of(a.row_nnz(i), w) <= kNeverSplit;
        for (std::int64_t j = 0; j < got.ld; ++j) {
            const float g = got(i, j);
            if (j >= got.cols || covered[i] == 0) {
                ASSERT_TRUE(std::isnan(g))
                    << what << ": " << (j >= got.cols ? "padding" : "row outside the range") << " ("
                    << i << ", " << j << ") was written: " << g;
                continue;
            }
            const float e = want(i, j);
            if (exact) {
                ASSERT_TRUE(g == e || (std::isnan(g) && std::isnan(e)))
                    << what << ": row " << i << " (" << strategy_text(a.row_nnz(i), w)
                    << "), column " << j << ": expected " << e << ", got " << g << " (bit for bit)";
            } else {
                ASSERT_NEAR(g, e, halo::testing::tolerance<float>(32, mag(i, j)))
                    << what << ": row " << i << " (" << strategy_text(a.row_nnz(i), w)
                    << ", summed in pieces), column " << j;
            }
        }
    }
}

// a with |values| (a pattern stays a pattern: its ones are their own magnitude).
halo::Csr abs_values(halo::Csr a)
{
    for (auto& v : a.values) {
        v = std::abs(v);
    }
    return a;
}

HostMatrix abs_matrix(HostMatrix m)
{
    for (auto& v : m.data) {
        v = std::abs(v);
    }
    return m;
}

// Int8 features on the host with a leading dimension, and their device copy.
struct Int8Features {
    std::vector<std::int8_t> data;
    std::vector<float> scale;
    std::vector<std::int32_t> zero_point;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t ld = 0;
    DeviceBuffer<std::int8_t> d_data;
    DeviceBuffer<float> d_scale;
    DeviceBuffer<std::int32_t> d_zero;

    halo::QuantizedView host() const
    {
        return {data.data(), rows, cols, ld, scale.data(), zero_point.data()};
    }
    halo::QuantizedView device() const
    {
        return {d_data.data(), rows, cols, ld, d_scale.data(), d_zero.data()};
    }
};

// Copies on the compute stream, which the buffer's stream-ordered allocation belongs to.
template <typename T>
DeviceBuffer<T> to_device(halo::cuda::Context& ctx, const std::vector<T>& host)
{
    DeviceBuffer<T> d(ctx, host.size());
    if (!host.empty()) {
        HALO_CUDA_TRY(cudaMemcpyAsync(d.data(), host.data(), d.bytes(), cudaMemcpyHostToDevice,
                                      ctx.compute_stream()));
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
    }
    return d;
}

template <typename T>
std::vector<T> to_host(halo::cuda::Context& ctx, const DeviceBuffer<T>& d, std::size_t count)
{
    std::vector<T> host(count);
    HALO_CUDA_TRY(cudaMemcpyAsync(host.data(), d.data(), count * sizeof(T), cudaMemcpyDeviceToHost,
                                  ctx.compute_stream()));
    HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
    return host;
}

// Quantizes x per column and lays the int8 values out with leading dimension ld.
Int8Features quantize(halo::cuda::Context& ctx, const HostMatrix& x, std::int64_t ld)
{
    const auto q = halo::quantize_columns(x.cview(), "test features");
    Int8Features f;
    f.rows = q.rows;
    f.cols = q.cols;
    f.ld = ld;
    f.scale = q.scale;
    f.zero_point = q.zero_point;
    // Padding bytes hold extreme values: a kernel that reads them produces a visible error.
    f.data.assign(static_cast<std::size_t>(q.rows * ld), std::int8_t{127});
    for (std::int64_t i = 0; i < q.rows; ++i) {
        std::copy_n(q.data.begin() + i * q.cols, q.cols, f.data.begin() + i * ld);
    }
    f.d_data = to_device(ctx, f.data);
    f.d_scale = to_device(ctx, f.scale);
    f.d_zero = to_device(ctx, f.zero_point);
    return f;
}

enum class Features { fp32, int8 };

struct Plans {
    std::unique_ptr<halo::SpmmPlan> fp32;
    std::unique_ptr<halo::cuda::Int8SpmmPlan> int8;
};

// W == 0: the exact int8 plan (no fp32 plan).
Plans make_plans(Gpu& gpu, const halo::Csr& a, std::int64_t w, AesScaling scaling)
{
    Plans p;
    if (w == 0) {
        p.int8 = halo::cuda::make_int8_spmm_plan(gpu.ctx, a, kMaxDim);
    } else {
        p.fp32 = halo::cuda::make_aes_spmm_plan(gpu.ctx, a, kMaxDim, {w, scaling});
        p.int8 = halo::cuda::make_aes_int8_spmm_plan(gpu.ctx, a, kMaxDim, {w, scaling});
    }
    return p;
}

// Runs one plan over `ranges` in order on a NaN-poisoned y and compares with the reference run
// over the same ranges.
void check_case(Gpu& gpu, const Plans& plans, const halo::Csr& a, std::int64_t w,
                AesScaling scaling, Features features, std::int64_t width, bool vector,
                const std::vector<halo::RowRange>& ranges, std::uint64_t seed)
{
    const std::string kernel =
        features == Features::fp32 ? plans.fp32->algorithm() : plans.int8->algorithm();
    std::ostringstream what;
    what << kernel << ", " << a.num_rows << " rows, " << a.nnz() << " nonzeros"
         << (a.has_values() ? "" : " (pattern)") << ", width " << width
         << (vector ? ", 16-byte strides" : ", odd strides");
    SCOPED_TRACE(what.str());
    const auto x = random_matrix(a.num_cols, width, x_ld(width, vector), seed);
    const auto ldy = y_ld(width, vector);
    HostMatrix want(a.num_rows, width, ldy);
    HostMatrix mag(a.num_rows, width, ldy);
    auto dy = upload(*gpu.backend, HostMatrix(a.num_rows, width, ldy));
    std::vector<char> covered(static_cast<std::size_t>(a.num_rows), 0);
    const AesOptions options{w, scaling};
    const auto abs_a = abs_values(a);
    if (features == Features::fp32) {
        auto dx = upload(*gpu.backend, x);
        const auto abs_x = abs_matrix(x);
        for (const auto& r : ranges) {
            halo::reference::aes_spmm(a.view(), x.cview(), want.view(), r, options);
            halo::reference::aes_spmm(abs_a.view(), abs_x.cview(), mag.view(), r, options);
            plans.fp32->run(dx.view, dy.view, r);
        }
    } else {
        const auto q = quantize(gpu.ctx, x, x_ld(width, vector));
        HostMatrix abs_x(a.num_cols, width);
        halo::dequantize(q.host(), abs_x.view());
        abs_x = abs_matrix(abs_x);
        for (const auto& r : ranges) {
            if (w == 0) {
                halo::reference::spmm_int8(a.view(), q.host(), want.view(), r);
                halo::reference::spmm(abs_a.view(), abs_x.cview(), mag.view(), r);
            } else {
                halo::reference::aes_spmm(a.view(), q.host(), want.view(), r, options);
                halo::reference::aes_spmm(abs_a.view(), abs_x.cview(), mag.view(), r, options);
            }
            plans.int8->run(q.device(), dy.view, r);
        }
    }
    for (const auto& r : ranges) {
        std::fill(covered.begin() + r.begin, covered.begin() + r.end, 1);
    }
    const auto got = download(*gpu.backend, dy);
    expect_same(got, want, mag, covered, a, w, what.str());
}

void all_dims(Gpu& gpu, const Plans& plans, const halo::Csr& a, std::int64_t w, AesScaling scaling,
              Features features, std::uint64_t& seed)
{
    for (const auto width : kDims) {
        for (const bool vector : {false, true}) {
            if (vector && width % 4 != 0) {
                continue;
            }
            check_case(gpu, plans, a, w, scaling, features, width, vector, {{0, a.num_rows}},
                       ++seed);
        }
    }
}

TEST(AesCuda, Fp32EveryWidthEverySampleWidthBothScalings)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = mixed_rows(true, 101);
    std::uint64_t seed = 1000;
    for (const auto w : kSampleWidths) {
        for (const auto scaling : {AesScaling::sample_sum, AesScaling::rescaled}) {
            const auto plans = make_plans(gpu, a, w, scaling);
            all_dims(gpu, plans, a, w, scaling, Features::fp32, seed);
        }
    }
}

TEST(AesCuda, Int8EveryWidthEverySampleWidthBothScalings)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = mixed_rows(true, 201);
    std::uint64_t seed = 2000;
    for (const auto w : kSampleWidths) {
        for (const auto scaling : {AesScaling::sample_sum, AesScaling::rescaled}) {
            const auto plans = make_plans(gpu, a, w, scaling);
            all_dims(gpu, plans, a, w, scaling, Features::int8, seed);
        }
    }
}

TEST(AesCuda, ExactInt8EveryWidth)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 3000;
    for (const bool valued : {true, false}) {
        const auto a = mixed_rows(valued, 301);
        const auto plans = make_plans(gpu, a, 0, AesScaling::sample_sum);
        EXPECT_EQ(plans.int8->algorithm(), "int8-exact");
        all_dims(gpu, plans, a, 0, AesScaling::sample_sum, Features::int8, seed);
    }
}

// The interior/boundary split of the engine, a middle range, an empty one and the last row, on a
// power-law graph: rows outside each range stay NaN.
TEST(AesCuda, RowRangesLeaveOtherRowsUntouched)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = rmat_rows(401);
    const auto n = a.num_rows;
    const std::vector<std::vector<halo::RowRange>> range_sets = {
        {{0, n / 3}, {n / 3, n}}, {{n / 4, n / 2}, {n / 2, n / 2}, {n - 1, n}}};
    std::uint64_t seed = 4000;
    for (const std::int64_t w : {0, 16, 128, 1024}) {
        for (const auto scaling : {AesScaling::sample_sum, AesScaling::rescaled}) {
            if (w == 0 && scaling == AesScaling::rescaled) {
                continue;
            }
            const auto plans = make_plans(gpu, a, w, scaling);
            for (const auto& ranges : range_sets) {
                for (const std::int64_t width : {33, 64}) {
                    for (const auto f : {Features::fp32, Features::int8}) {
                        if (w == 0 && f == Features::fp32) {
                            continue;
                        }
                        check_case(gpu, plans, a, w, scaling, f, width, width % 4 == 0, ranges,
                                   ++seed);
                    }
                }
            }
        }
    }
}

// Pattern matrices (null values) read 1 for each nonzero.
TEST(AesCuda, PatternMatrices)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = mixed_rows(false, 501);
    std::uint64_t seed = 5000;
    for (const std::int64_t w : {16, 100, 1024}) {
        const auto plans = make_plans(gpu, a, w, AesScaling::rescaled);
        for (const std::int64_t width : {1, 64}) {
            for (const auto f : {Features::fp32, Features::int8}) {
                check_case(gpu, plans, a, w, AesScaling::rescaled, f, width, false,
                           {{0, a.num_rows}}, ++seed);
            }
        }
    }
}

// With W at least the longest row every row is exact: the result is the exact SpMM within the
// tolerance of two summation orders.
TEST(AesCuda, WideEnoughSampleWidthIsExactSpmm)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = csr_with_rows({0, 5, 300, 1024, 17, 999}, 2000, true, 601);
    const auto plan = halo::cuda::make_aes_spmm_plan(gpu.ctx, a, kMaxDim, {1024, {}});
    const auto x = random_matrix(a.num_cols, 64, 64, 602);
    HostMatrix want(a.num_rows, 64);
    halo::reference::spmm(a.view(), x.cview(), want.view());
    auto dx = upload(*gpu.backend, x);
    auto dy = upload(*gpu.backend, HostMatrix(a.num_rows, 64));
    plan->run(dx.view, dy.view, {0, a.num_rows});
    const auto got = download(*gpu.backend, dy);
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        const double tol = halo::testing::tolerance<float>(4, std::max<double>(1.0, a.row_nnz(i)));
        for (std::int64_t j = 0; j < 64; ++j) {
            ASSERT_NEAR(got(i, j), want(i, j), tol) << "row " << i << " column " << j;
        }
    }
}

// No atomics (split rows are summed in piece order by a second pass): repeated runs and split
// ranges give the same bits. W = 1024 at width 32 stages 128 slots per group, so the long rows
// are split into pieces; the exact int8 kernel splits every row above 128 nonzeros.
TEST(AesCuda, RepeatedRunsAreBitIdentical)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = rmat_rows(701);
    const auto n = a.num_rows;
    const auto fp32 = halo::cuda::make_aes_spmm_plan(gpu.ctx, a, kMaxDim, {1024, {}});
    const auto int8 = halo::cuda::make_int8_spmm_plan(gpu.ctx, a, kMaxDim);
    for (const std::int64_t width : {32, 128}) {
        const auto x = random_matrix(a.num_cols, width, width, 702);
        const auto q = quantize(gpu.ctx, x, width);
        auto dx = upload(*gpu.backend, x);
        for (const bool exact : {false, true}) {
            auto dy = upload(*gpu.backend, HostMatrix(n, width));
            auto run = [&](halo::RowRange r) {
                if (exact) {
                    int8->run(q.device(), dy.view, r);
                } else {
                    fp32->run(dx.view, dy.view, r);
                }
            };
            run({0, n});
            const auto first = download(*gpu.backend, dy);
            for (int r = 0; r < 3; ++r) {
                run({0, n / 2});
                run({n / 2, n});
                const auto again = download(*gpu.backend, dy);
                ASSERT_EQ(std::memcmp(first.data.data(), again.data.data(), first.data.size() * 4),
                          0)
                    << (exact ? "int8-exact" : "aes W 1024") << ", width " << width << ", run "
                    << r;
            }
        }
    }
}

TEST(AesCuda, PlansNameThemselvesAndRejectBadOperands)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = mixed_rows(true, 801);
    const auto plan = halo::cuda::make_aes_spmm_plan(gpu.ctx, a, 64, {128, AesScaling::rescaled});
    EXPECT_EQ(plan->algorithm(), "aes-w128-rescaled");
    EXPECT_NE(plan->report().find("aes W=128 rescaled"), std::string::npos) << plan->report();
    const auto int8 = halo::cuda::make_aes_int8_spmm_plan(gpu.ctx, a, 64, {16, {}});
    EXPECT_EQ(int8->algorithm(), "aes-int8-w16-sample_sum");
    EXPECT_THROW(halo::cuda::make_aes_spmm_plan(gpu.ctx, a, 64, {8, {}}), halo::InputError);
    EXPECT_THROW(halo::cuda::make_aes_int8_spmm_plan(gpu.ctx, a, 64, {2048, {}}), halo::InputError);

    auto dx = upload(*gpu.backend, HostMatrix(a.num_cols, 65));
    auto dy = upload(*gpu.backend, HostMatrix(a.num_rows, 65));
    EXPECT_THROW(plan->run(dx.view, dy.view, {0, a.num_rows}), halo::LogicError)
        << "width above max_dim";
    auto dx2 = upload(*gpu.backend, HostMatrix(a.num_cols, 8));
    auto dy2 = upload(*gpu.backend, HostMatrix(a.num_rows, 8));
    EXPECT_THROW(plan->run(dx2.view, dy2.view, {0, a.num_rows + 1}), halo::LogicError);

    // Corrupt int8 parameters are rejected at upload, naming the column.
    auto q = halo::quantize_columns(HostMatrix(4, 3, 3, 0.5f).cview(), "q");
    q.zero_point[1] = 300;
    try {
        halo::cuda::upload_quantized(gpu.ctx, q, "features.h5");
        ADD_FAILURE() << "corrupt zero point uploaded";
    } catch (const halo::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("zero point of column 1 is 300"), std::string::npos)
            << e.what();
    }
}

// The uploaded int8 format runs the same as the hand-made layout (ld = cols).
TEST(AesCuda, UploadedQuantizedMatrixRuns)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = rmat_rows(901);
    const auto x = random_matrix(a.num_cols, 32, 32, 902);
    const auto q = halo::quantize_columns(x.cview(), "x");
    const auto dq = halo::cuda::upload_quantized(gpu.ctx, q, "x");
    const auto plan = halo::cuda::make_aes_int8_spmm_plan(gpu.ctx, a, 32, {32, {}});
    HostMatrix want(a.num_rows, 32);
    halo::reference::aes_spmm(a.view(), q.view(), want.view(), {0, a.num_rows}, {32, {}});
    auto dy = upload(*gpu.backend, HostMatrix(a.num_rows, 32));
    plan->run(dq.view(), dy.view, {0, a.num_rows});
    const auto got = download(*gpu.backend, dy);
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        for (std::int64_t j = 0; j < 32; ++j) {
            ASSERT_EQ(got(i, j), want(i, j)) << "uploaded int8, row " << i << ", column " << j;
        }
    }

    // The relative Frobenius error of the sampled result against the exact one, on the device,
    // equals the host's.
    HostMatrix exact(a.num_rows, 32);
    halo::reference::spmm_int8(a.view(), q.view(), exact.view(), {0, a.num_rows});
    auto de = upload(*gpu.backend, exact);
    const auto sums = halo::cuda::frobenius_sums(gpu.ctx, dy.view, de.view);
    double diff = 0.0;
    double ref = 0.0;
    for (std::size_t k = 0; k < exact.data.size(); ++k) {
        const double d = static_cast<double>(got.data[k]) - exact.data[k];
        diff += d * d;
        ref += static_cast<double>(exact.data[k]) * exact.data[k];
    }
    EXPECT_NEAR(sums.diff_sq, diff, 1e-9 * ref);
    EXPECT_NEAR(sums.ref_sq, ref, 1e-9 * ref);
    EXPECT_GT(diff, 0.0) << "W = 32 drops nonzeros of this graph";
}

// ------------------------------------------------------------------------------------------------
// Int8 row packing: the device records equal the CPU reference's byte for byte, and the unpacked
// rows equal the reference's unpacking bit for bit.

TEST(QuantizedPackCuda, RecordsMatchTheReferenceExactly)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 9000;
    for (const std::int64_t cols : {1, 3, 4, 32, 33, 128, 256, 1000}) {
        SCOPED_TRACE(testing::Message() << cols << " columns");
        constexpr std::int64_t rows = 3000;
        auto x = random_matrix(rows, cols, cols + 3, ++seed);
        // Shapes of rows: positive only, constant, zeros, huge, tiny, one NaN, one infinity.
        for (std::int64_t j = 0; j < cols; ++j) {
            x(1, j) = std::abs(x(1, j)) + 2.0f;
            x(2, j) = -0.3f;
            x(3, j) = 0.0f;
            x(4, j) *= 1e30f;
            x(5, j) *= 1e-30f;
        }
        x(6, cols / 2) = kNaN;
        x(7, 0) = -std::numeric_limits<float>::infinity();
        std::vector<std::int32_t> send;
        for (std::int32_t r = 0; r < rows; r += 3) {
            send.push_back((r * 7919) % rows);
        }
        send.insert(send.end(), {1, 2, 3, 4, 5, 6, 7, 7});
        const auto count = static_cast<std::int64_t>(send.size());
        const auto record = halo::int8_record_bytes(cols);
        std::vector<std::uint8_t> want(static_cast<std::size_t>(count * record), 0xCD);
        halo::pack_rows_int8_reference(x.cview(), send.data(), count, want.data());

        auto dx = upload(*gpu.backend, x);
        const auto d_send = to_device(gpu.ctx, send);
        DeviceBuffer<std::uint8_t> d_packed(gpu.ctx, want.size());
        HALO_CUDA_TRY(
            cudaMemsetAsync(d_packed.data(), 0xCD, d_packed.bytes(), gpu.ctx.compute_stream()));
        halo::cuda::pack_rows_int8(gpu.ctx.compute_stream(), dx.view, d_send.data(), count,
                                   d_packed.data());
        const auto got = to_host(gpu.ctx, d_packed, want.size());
        for (std::int64_t r = 0; r < count; ++r) {
            for (std::int64_t b = 0; b < record; ++b) {
                const auto k = r * record + b;
                ASSERT_EQ(got[k], want[k])
                    << "record " << r << " (row " << send[r] << "), byte " << b
                    << (b < cols         ? " (value)"
                        : b < record - 8 ? " (padding)"
                                         : " (parameters)");
            }
        }

        // Unpack into a strided, NaN-poisoned matrix with a spare row at the end.
        HostMatrix unpacked_want(count + 1, cols, cols + 2);
        halo::unpack_rows_int8_reference(want.data(),
                                         {unpacked_want.data.data(), count, cols, cols + 2});
        auto dy = upload(*gpu.backend, HostMatrix(count + 1, cols, cols + 2));
        halo::cuda::unpack_rows_int8(gpu.ctx.compute_stream(), d_packed.data(),
                                     {dy.view.data, count, cols, dy.view.ld});
        const auto unpacked = download(*gpu.backend, dy);
        for (std::int64_t r = 0; r <= count; ++r) {
            for (std::int64_t j = 0; j < cols + 2; ++j) {
                const float g = unpacked(r, j);
                const float e = unpacked_want(r, j);
                ASSERT_TRUE(g == e || (std::isnan(g) && std::isnan(e)))
                    << "unpacked record " << r << " column " << j << ": expected " << e << ", got "
                    << g;
            }
        }
    }
}

TEST(QuantizedPackCuda, NullRowListAndBadBuffers)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto x = random_matrix(100, 20, 20, 77);
    const auto record = halo::int8_record_bytes(20);
    std::vector<std::uint8_t> want(static_cast<std::size_t>(100 * record));
    halo::pack_rows_int8_reference(x.cview(), nullptr, 100, want.data());
    auto dx = upload(*gpu.backend, x);
    DeviceBuffer<std::uint8_t> d(gpu.ctx, want.size() + 4);
    halo::cuda::pack_rows_int8(gpu.ctx.compute_stream(), dx.view, nullptr, 100, d.data());
    EXPECT_EQ(to_host(gpu.ctx, d, want.size()), want);
    EXPECT_THROW(
        halo::cuda::pack_rows_int8(gpu.ctx.compute_stream(), dx.view, nullptr, 100, d.data() + 1),
        halo::LogicError);
    EXPECT_THROW(halo::cuda::unpack_rows_int8(gpu.ctx.compute_stream(), d.data() + 2, dx.view),
                 halo::LogicError);
}

}  // namespace
