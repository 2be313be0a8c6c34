// The CUDA backend's matrices stored in 16 bits (Backend::stores_16bit: gemm_features,
// store_features, widen_features, SpmmPlan::run_features) against the CPU backend, the
// definition (kernels/reference/cpu_features.cpp), on seeded inputs: every output poisoned with
// NaN before each run. Stores and widening are compared bit for bit; GEMM and SpMM within the
// fp32 sum-order tolerance (a 16-bit GEMM output one rounding further: one ulp of its type).
// The device's range checks are read through take_activation_overflow(). Skips with a message
// where there is no CUDA device.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "halo/core/feature_type.hpp"
#include "halo/core/feature_view.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo_test.hpp"
#include "spmm_fixtures.hpp"

namespace {

using halo::Backend;
using halo::FeatureType;
using halo::Matrix;
using halo::MutableFeatureView;

constexpr FeatureType kTypes[] = {FeatureType::fp32, FeatureType::fp16, FeatureType::bf16};

// A feature matrix in host memory (the CPU backend's operand) and in device memory (a copy),
// as words of 4 bytes; padding and poison are all-ones bits (NaN in every type).
struct Features {
    FeatureType type = FeatureType::fp32;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t ld = 0;
    std::vector<float> host;  // the words
    Matrix dev;

    MutableFeatureView host_view() { return {host.data(), type, rows, cols, ld}; }
    MutableFeatureView dev_view() const { return {dev.data(), type, rows, cols, ld}; }
};

std::int64_t words_for(FeatureType type, std::int64_t rows, std::int64_t ld)
{
    const auto bytes = rows * ld * static_cast<std::int64_t>(halo::feature_bytes(type));
    return std::max<std::int64_t>((bytes + 3) / 4, 1);
}

float nan_bits()
{
    return std::bit_cast<float>(~std::uint32_t{0});
}

// Stores `values` (rows x cols, row-major) as `type` into f's host words.
void encode(Features& f, const std::vector<float>& values)
{
    for (std::int64_t i = 0; i < f.rows; ++i) {
        const auto n = static_cast<std::size_t>(f.cols);
        const std::span<const float> row{values.data() + i * f.cols, n};
        if (f.type == FeatureType::fp32) {
            std::copy(row.begin(), row.end(), f.host.begin() + i * f.ld);
        } else {
            auto* bits = reinterpret_cast<std::uint16_t*>(f.host.data()) + i * f.ld;
            halo::encode_features(row, f.type, {bits, n});
        }
    }
}

// f's elements widened exactly (rows x cols, row-major) from host words.
std::vector<float> decode(const Features& f, const std::vector<float>& words)
{
    std::vector<float> out(static_cast<std::size_t>(f.rows * f.cols));
    for (std::int64_t i = 0; i < f.rows; ++i) {
        const auto n = static_cast<std::size_t>(f.cols);
        if (f.type == FeatureType::fp32) {
            std::copy_n(words.begin() + i * f.ld, f.cols, out.begin() + i * f.cols);
        } else {
            const auto* bits = reinterpret_cast<const std::uint16_t*>(words.data()) + i * f.ld;
            halo::decode_features({bits, n}, f.type, {out.data() + i * f.cols, n});
        }
    }
    return out;
}

class Device {
public:
    halo::cuda::Context ctx;
    std::unique_ptr<Backend> gpu = halo::cuda::make_cuda_backend(ctx, "auto");
    std::unique_ptr<Backend> cpu = halo::make_cpu_backend();
    std::mt19937_64 rng{20261207};

    // Seeded values in [-scale, scale) (rounded to `type`); poisoned when `values` is false.
    Features make(FeatureType type, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                  bool values = true, float scale = 1.0f)
    {
        Features f{type, rows, cols, ld, {}, {}};
        const auto words = words_for(type, rows, ld);
        f.host.assign(static_cast<std::size_t>(words), nan_bits());
        f.dev = gpu->allocate(1, words);
        if (values) {
            std::uniform_real_distribution<float> u(-scale, scale);
            std::vector<float> v(static_cast<std::size_t>(rows * cols));
            for (auto& x : v) {
                x = u(rng);
            }
            encode(f, v);
        }
        upload(f);
        return f;
    }
    void upload(Features& f) { gpu->copy_from_host(f.host.data(), f.dev.view()); }
    void poison(Features& f)
    {
        std::fill(f.host.begin(), f.host.end(), nan_bits());
        upload(f);
    }
    // The device copy's elements, widened.
    std::vector<float> download(const Features& f)
    {
        std::vector<float> words(f.host.size());
        gpu->copy_to_host(f.dev.view(), words.data());
        return decode(f, words);
    }
};

// One ulp of `type` relative to a value it stores (2^-mantissa bits); 0 for fp32 (no rounding).
float ulp_fraction(FeatureType type)
{
    switch (type) {
        case FeatureType::fp32:
            return 0.0f;
        case FeatureType::fp16:
            return 1.0f / 1024;
        case FeatureType::bf16:
            return 1.0f / 128;
    }
    return 0.0f;
}

struct GemmCase {
    std::int64_t m, k, n;
    std::int64_t pad;  // ld = cols + pad (16-bit: padded to even where pad is 0)
};

void check_gemm(Device& d, FeatureType type, FeatureType c_type, const GemmCase& g)
{
    SCOPED_TRACE(halo::to_string(type) + " into " + halo::to_string(c_type) + ", " +
                 std::to_string(g.m) + "x" + std::to_string(g.k) + "x" + std::to_string(g.n) +
                 " pad " + std::to_string(g.pad));
    const auto ld = [&](FeatureType t, std::int64_t cols) {
        return g.pad > 0 ? cols + g.pad : halo::feature_ld(t, cols);
    };
    auto a = d.make(type, g.m, g.k, ld(type, g.k));
    auto b = d.make(type, g.k, g.n, ld(type, g.n));
    auto c = d.make(c_type, g.m, g.n, ld(c_type, g.n), false);
    auto ref = d.make(c_type, g.m, g.n, ld(c_type, g.n), false);
    EXPECT_FALSE(d.cpu->gemm_features(a.host_view(), b.host_view(), ref.host_view(), 3));
    EXPECT_FALSE(d.gpu->gemm_features(a.dev_view(), b.dev_view(), c.dev_view(), 3));
    const auto got = d.download(c);
    const auto want = decode(ref, ref.host);
    const auto wa = decode(a, a.host);
    const auto wb = decode(b, b.host);
    for (std::int64_t i = 0; i < g.m; ++i) {
        for (std::int64_t j = 0; j < g.n; ++j) {
            // fp32 sums in any order are off by at most k eps sum |a b| each way; tensor cores
            // may truncate within their additions (twice that), hence 8 k eps. A 16-bit c is
            // one rounding further: one ulp of the larger result (fp16: its subnormal ulp too).
            double mag = 0.0;
            for (std::int64_t l = 0; l < g.k; ++l) {
                mag += std::abs(double{wa[i * g.k + l]} * wb[l * g.n + j]);
            }
            const auto e = static_cast<std::size_t>(i * g.n + j);
            const double larger = std::max(std::abs(double{want[e]}), std::abs(double{got[e]}));
            const double tol = 8.0 * static_cast<double>(g.k) * 0x1p-24 * mag +
                               ulp_fraction(c_type) * larger +
                               (c_type == FeatureType::fp16 ? 0x1p-24 : 0.0) + 1e-30;
            ASSERT_NEAR(got[e], want[e], tol) << "at (" << i << ", " << j << ")";
        }
    }
    EXPECT_FALSE(d.gpu->take_activation_overflow());
}

void expect_overflow(const std::optional<halo::ActivationOverflow>& got,
                     const std::optional<halo::ActivationOverflow>& want)
{
    ASSERT_TRUE(want.has_value());
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->row, want->row);
    EXPECT_EQ(got->col, want->col);
    EXPECT_EQ(got->value, want->value);
    EXPECT_EQ(got->store, want->store);
}

TEST(CudaFeatures, BackendStores16Bit)
{
    HALO_REQUIRE_GPUS(1);
    Device d;
    EXPECT_TRUE(d.gpu->stores_16bit());
}

TEST(CudaFeatures, GemmMatchesTheCpuBackend)
{
    HALO_REQUIRE_GPUS(1);
    Device d;
    const GemmCase cases[] = {{37, 19, 33, 0}, {64, 32, 48, 0}, {37, 19, 33, 3}, {37, 19, 33, 2},
                              {64, 96, 48, 2}, {5, 0, 7, 0},    {5, 0, 7, 3}};
    for (const auto type : kTypes) {
        for (const auto& g : cases) {
            check_gemm(d, type, type, g);
            if (type != FeatureType::fp32) {
                check_gemm(d, type, FeatureType::fp32, g);
            }
        }
    }
}

// 300 * 300 = 90000 is past fp16's range: the device reports the element with the value inf.
TEST(CudaFeatures, Fp16GemmOverflowIsRecorded)
{
    HALO_REQUIRE_GPUS(1);
    Device d;
    auto a = d.make(FeatureType::fp16, 3, 1, 2, false);
    auto b = d.make(FeatureType::fp16, 1, 2, 2, false);
    encode(a, {1.0f, 300.0f, 2.0f});
    encode(b, {1.0f, 300.0f});
    d.upload(a);
    d.upload(b);
    auto c = d.make(FeatureType::fp16, 3, 2, 2, false);
    auto ref = d.make(FeatureType::fp16, 3, 2, 2, false);
    const auto want = d.cpu->gemm_features(a.host_view(), b.host_view(), ref.host_view(), 11);
    EXPECT_FALSE(d.gpu->gemm_features(a.dev_view(), b.dev_view(), c.dev_view(), 11));
    const auto got = d.gpu->take_activation_overflow();
    ASSERT_TRUE(want && got);
    EXPECT_EQ(got->row, 1);
    EXPECT_EQ(got->col, 1);
    EXPECT_EQ(got->row, want->row);
    EXPECT_EQ(got->col, want->col);
    EXPECT_EQ(got->value, std::numeric_limits<float>::infinity());
    EXPECT_EQ(got->store, 11);
    EXPECT_EQ(d.download(c), decode(ref, ref.host));
}

TEST(CudaFeatures, StoreMatchesTheCpuBackendBitForBit)
{
    HALO_REQUIRE_GPUS(1);
    Device d;
    for (const auto type : kTypes) {
        for (const std::int64_t cols : {1, 33, 64, 301}) {
            for (const std::int64_t pad : {0, 1, 3}) {
                for (const bool with_bias : {false, true}) {
                    for (const auto act : {halo::Activation::none, halo::Activation::relu}) {
                        SCOPED_TRACE(halo::to_string(type) + ", width " + std::to_string(cols) +
                                     " pad " + std::to_string(pad) + (with_bias ? ", bias" : "") +
                                     (act == halo::Activation::relu ? ", relu" : ""));
                        const std::int64_t rows = 45;
                        // src in fp32 with ld cols + 1; scaled so that roundings matter.
                        auto src = d.make(FeatureType::fp32, rows, cols, cols + 1, true, 8.0f);
                        auto bias = d.make(FeatureType::fp32, 1, cols, cols);
                        const std::int64_t ld =
                            pad == 0 ? halo::feature_ld(type, cols) : cols + pad;
                        auto dst = d.make(type, rows, cols, ld, false);
                        auto ref = d.make(type, rows, cols, ld, false);
                        const halo::DenseView<const float> hs{src.host.data(), rows, cols,
                                                              cols + 1};
                        const halo::DenseView<const float> ds{src.dev.data(), rows, cols, cols + 1};
                        EXPECT_FALSE(d.cpu->store_features(
                            hs, with_bias ? bias.host.data() : nullptr, act, ref.host_view(), 1));
                        EXPECT_FALSE(d.gpu->store_features(
                            ds, with_bias ? bias.dev.data() : nullptr, act, dst.dev_view(), 1));
                        const auto got = d.download(dst);
                        const auto want = decode(ref, ref.host);
                        ASSERT_EQ(got.size(), want.size());
                        for (std::size_t e = 0; e < got.size(); ++e) {
                            ASSERT_EQ(std::bit_cast<std::uint32_t>(got[e]),
                                      std::bit_cast<std::uint32_t>(want[e]))
                                << "element " << e << ": " << got[e] << " vs " << want[e];
                        }
                        EXPECT_FALSE(d.gpu->take_activation_overflow());
                    }
                }
            }
        }
    }
}

// fp16 stores: an element that overflows in the second rounding (after the bias) comes before
// one that overflows in the first, row-major; the first rounding's is reported (the CPU's
// rule), then a later call's overflow does not replace it until it is taken.
TEST(CudaFeatures, Fp16StoreOverflowIsRecorded)
{
    HALO_REQUIRE_GPUS(1);
    Device d;
    const std::int64_t rows = 6;
    const std::int64_t cols = 9;
    auto src = d.make(FeatureType::fp32, rows, cols, cols, true, 100.0f);
    auto bias = d.make(FeatureType::fp32, 1, cols, cols, false);
    encode(bias, std::vector<float>(static_cast<std::size_t>(cols), 1000.0f));
    d.upload(bias);
    auto dst = d.make(FeatureType::fp16, rows, cols, 10, false);
    auto ref = d.make(FeatureType::fp16, rows, cols, 10, false);
    const auto run = [&](float second, float first, std::int32_t store) {
        src.host[0 * cols + 1] = second;  // 65000 stores finite; + 1000 does not
        src.host[4 * cols + 5] = first;
        d.upload(src);
        const halo::DenseView<const float> hs{src.host.data(), rows, cols, cols};
        const halo::DenseView<const float> ds{src.dev.data(), rows, cols, cols};
        const auto want = d.cpu->store_features(hs, bias.host.data(), halo::Activation::relu,
                                                ref.host_view(), store);
        EXPECT_FALSE(d.gpu->store_features(ds, bias.dev.data(), halo::Activation::relu,
                                           dst.dev_view(), store));
        const auto got = d.download(dst);
        const auto expected = decode(ref, ref.host);
        for (std::size_t e = 0; e < got.size(); ++e) {
            EXPECT_EQ(std::bit_cast<std::uint32_t>(got[e]),
                      std::bit_cast<std::uint32_t>(expected[e]))
                << "element " << e;
        }
        return want;
    };
    const auto first = run(65000.0f, 70000.0f, 7);
    EXPECT_EQ(first->row, 4);
    EXPECT_EQ(first->col, 5);
    expect_overflow(d.gpu->take_activation_overflow(), first);
    EXPECT_FALSE(d.gpu->take_activation_overflow());
    const auto second = run(65000.0f, 1.0f, 8);  // the second rounding's alone
    EXPECT_EQ(second->row, 0);
    EXPECT_EQ(second->col, 1);
    run(1.0f, 70000.0f, 9);  // recorded after the one not yet taken: dropped
    expect_overflow(d.gpu->take_activation_overflow(), second);
    EXPECT_FALSE(d.gpu->take_activation_overflow());
}

TEST(CudaFeatures, WidenIsExact)
{
    HALO_REQUIRE_GPUS(1);
    Device d;
    for (const auto type : kTypes) {
        for (const std::int64_t cols : {1, 33, 64}) {
            SCOPED_TRACE(halo::to_string(type) + ", width " + std::to_string(cols));
            auto src = d.make(type, 23, cols, cols + 3, true, 1000.0f);
            auto dst = d.make(FeatureType::fp32, 23, cols, cols + 2, false);
            d.gpu->widen_features(src.dev_view(), {dst.dev.data(), 23, cols, cols + 2});
            const auto got = d.download(dst);
            const auto want = decode(src, src.host);
            for (std::size_t e = 0; e < got.size(); ++e) {
                ASSERT_EQ(std::bit_cast<std::uint32_t>(got[e]),
                          std::bit_cast<std::uint32_t>(want[e]))
                    << "element " << e;
            }
        }
    }
}

// The plans read what the engine stores where their kernels can: halo-infer's default (`auto`,
// the cost model) when the hints ask for it, the autotuner; cuSPARSE never (fp32 alone).
TEST(CudaFeatures, PlansReadTheActivationType)
{
    HALO_REQUIRE_GPUS(1);
    Device d;
    const auto a = halo::testing::rmat_csr(10, 5, true);
    auto cusparse = halo::cuda::make_cuda_backend(d.ctx, "cusparse");
    auto autotuned = halo::cuda::make_cuda_backend(d.ctx, "autotune");
    for (const auto type : {FeatureType::bf16, FeatureType::fp16}) {
        SCOPED_TRACE(halo::to_string(type));
        halo::SpmmPlanHints hints;
        hints.activations = type;
        const auto plan = d.gpu->make_spmm_plan(a, hints);
        EXPECT_TRUE(plan->reads_features(type));
        EXPECT_TRUE(plan->reads_features(FeatureType::fp32));
        const auto baseline = cusparse->make_spmm_plan(a, hints);
        EXPECT_FALSE(baseline->reads_features(type));
        EXPECT_TRUE(baseline->reads_features(FeatureType::fp32));
        // The autotuner's candidates but cuSPARSE read 16-bit X.
        EXPECT_TRUE(autotuned->make_spmm_plan(a, hints)->reads_features(type));
        const auto cpu_plan = d.cpu->make_spmm_plan(a, hints);
        for (const std::int64_t width : {1, 7, 32, 33}) {
            SCOPED_TRACE("width " + std::to_string(width));
            auto x = d.make(type, a.num_cols, width, halo::feature_ld(type, width));
            auto y = d.make(FeatureType::fp32, a.num_rows, width, width, false);
            auto ref = d.make(FeatureType::fp32, a.num_rows, width, width, false);
            cpu_plan->run_features(x.host_view(), {ref.host.data(), a.num_rows, width, width},
                                   {0, a.num_rows});
            plan->run_features(x.dev_view(), {y.dev.data(), a.num_rows, width, width},
                               {0, a.num_rows});
            const auto got = d.download(y);
            const auto wx = decode(x, x.host);
            for (std::int64_t i = 0; i < a.num_rows; ++i) {
                const auto nnz = a.row_nnz(i);
                for (std::int64_t j = 0; j < width; ++j) {
                    double mag = 0.0;
                    for (auto p = a.indptr[i]; p < a.indptr[i + 1]; ++p) {
                        mag += std::abs(double{a.values[p]} * wx[a.indices[p] * width + j]);
                    }
                    const auto e = static_cast<std::size_t>(i * width + j);
                    ASSERT_NEAR(got[e], ref.host[e], 2.0 * nnz * 0x1p-24 * mag + 1e-30)
                        << "at (" << i << ", " << j << ")";
                }
            }
        }
    }
    // Asked for fp32 alone, the cost model's plan builds no 16-bit kernels and says so.
    EXPECT_FALSE(
        d.gpu->make_spmm_plan(a, halo::SpmmPlanHints{})->reads_features(FeatureType::bf16));
}

}  // namespace
