// 16-bit activations on the CUDA backend (docs/KERNELS.md "16-bit activations"): rounded in fp32
// device memory as the CPU backend rounds them. First the store itself: the device rounding of
// edge values (ties, 65504 / 65520, subnormals, NaN, infinities, -0) and random bit patterns is
// halo::round_feature's, bit for bit, and its range check reports the first element (row-major,
// first store) the CPU backend reports, later, from the device record. Then every layer type with
// bf16 and fp16 against the CPU backend with the same option, run as usual and replayed as a CUDA
// graph: the stored intermediates are 16-bit values and nearly all bit-equal to the CPU's (the
// fp32 sums run in another order, so a rounding may land one 16-bit unit apart), the output within
// a few units of the 16-bit type; the fp16 overflow error names the layer as on the CPU.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine_test_util.hpp"
#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/engine/engine.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo_test.hpp"

namespace {

using halo::FeatureType;
using halo::LayerType;

struct Gpu {
    halo::cuda::Context ctx;
    std::unique_ptr<halo::Backend> backend = halo::cuda::make_cuda_backend(ctx, "auto");
};

std::vector<float> edge_values()
{
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> v{0.0f, -0.0f, 1.0f, -1.0f,
                         // fp16 ties at 1 (to even: down, then up) and bf16's
                         1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                         -(1.0f + 0x1p-11f), 2049.0f, 2051.0f,
                         // fp16's largest, its tie with 2^16 (infinity) and either side
                         65504.0f, 65505.0f, 65519.0f, 65519.996f, 65520.0f, -65520.0f, 65536.0f,
                         // fp16 subnormals: the smallest, its half (a tie to 0), ties between
                         0x1p-24f, 0x1p-25f, 3 * 0x1p-25f, 5 * 0x1p-25f, 0x1p-14f - 0x1p-25f,
                         0x1p-14f, 1e-8f, -1e-8f, 0x1p-26f,
                         // fp32 subnormals and the top of bf16's range
                         std::numeric_limits<float>::denorm_min(), 1e-40f, 3.3895e38f, 3.3961e38f,
                         std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), inf,
                         -inf, std::nanf(""), -std::nanf("")};
    std::mt19937 gen(7);
    std::uniform_int_distribution<std::uint32_t> bits;
    for (int k = 0; k < 20000; ++k) {
        v.push_back(std::bit_cast<float>(bits(gen)));  // every exponent, NaNs included
    }
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    for (int k = 0; k < 20000; ++k) {
        v.push_back(unit(gen) * std::ldexp(1.0f, k % 40 - 24));
    }
    return v;
}

bool same(float a, float b)
{
    // NaN stays NaN; its payload may differ from the host's (feature_type.hpp).
    return std::isnan(a) ? std::isnan(b)
                         : std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

TEST(CudaActivations, DeviceRoundingIsRoundFeatureBitForBit)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    const auto values = edge_values();
    const std::int64_t cols = 37;
    const std::int64_t ld = 40;  // padding the store must leave alone
    const auto rows = static_cast<std::int64_t>((values.size() + cols - 1) / cols);
    std::vector<float> host(static_cast<std::size_t>(rows * ld), 12345.0f);
    for (std::size_t k = 0; k < values.size(); ++k) {
        host[k / cols * ld + k % cols] = values[k];
    }
    for (const auto type : {FeatureType::fp16, FeatureType::bf16}) {
        SCOPED_TRACE(halo::to_string(type));
        auto m = gpu.backend->allocate(rows, ld);
        gpu.backend->copy_from_host(host.data(), m.view());
        const halo::DenseView<float> view{m.data(), rows, cols, ld};
        // Deferred: the call returns nothing, the take the first overflow.
        EXPECT_FALSE(gpu.backend->round_activations(view, type, 5).has_value());
        EXPECT_FALSE(gpu.backend->round_activations(view, type, 9).has_value());
        const auto got = gpu.backend->take_activation_overflow();
        auto want_host = host;
        const auto want = cpu->round_activations({want_host.data(), rows, cols, ld}, type, 5);
        ASSERT_TRUE(want.has_value());
        ASSERT_TRUE(got.has_value());
        EXPECT_EQ(got->row, want->row);
        EXPECT_EQ(got->col, want->col);
        EXPECT_EQ(got->value, want->value);
        EXPECT_EQ(got->store, 5) << "the first store's";
        EXPECT_FALSE(gpu.backend->take_activation_overflow().has_value()) << "taken once";
        std::vector<float> back(host.size());
        gpu.backend->copy_to_host(m.view(), back.data());
        std::int64_t checked = 0;
        for (std::int64_t i = 0; i < rows; ++i) {
            for (std::int64_t j = 0; j < ld; ++j) {
                const auto q = static_cast<std::size_t>(i * ld + j);
                const float expect = j < cols ? halo::round_feature(host[q], type) : host[q];
                ASSERT_TRUE(same(back[q], expect))
                    << "row " << i << " column " << j << ": " << host[q] << " -> " << back[q]
                    << ", round_feature " << expect;
                checked += j < cols ? 1 : 0;
            }
        }
        EXPECT_GE(checked, static_cast<std::int64_t>(values.size()));
        // Rounded values round to themselves, and nothing is out of range any more.
        EXPECT_FALSE(gpu.backend->round_activations(view, type, 3).has_value());
        EXPECT_FALSE(gpu.backend->take_activation_overflow().has_value());
    }
}

// Many blocks, overflows in several of them and in two stores: the first row-major element of
// the first store that met one, as the CPU backend names it; a store without one records nothing.
TEST(CudaActivations, TheFirstOverflowOfTheFirstStoreIsReported)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    const std::int64_t rows = 200000;
    const std::int64_t cols = 24;
    std::vector<float> host(static_cast<std::size_t>(rows * cols));
    std::mt19937 gen(3);
    std::uniform_real_distribution<float> unit(-100.0f, 100.0f);
    for (auto& v : host) {
        v = unit(gen);
    }
    auto m = gpu.backend->allocate(rows, cols);
    gpu.backend->copy_from_host(host.data(), m.view());
    gpu.backend->round_activations(m.view(), FeatureType::fp16, 1);
    EXPECT_FALSE(gpu.backend->take_activation_overflow().has_value());
    for (const auto at : {std::int64_t{190001 * 24 + 3}, std::int64_t{77777 * 24 + 20},
                          std::int64_t{77777 * 24 + 21}, std::int64_t{150000 * 24}}) {
        host[static_cast<std::size_t>(at)] = -7e4f - static_cast<float>(at % 100);
    }
    gpu.backend->copy_from_host(host.data(), m.view());
    for (int store = 2; store < 6; ++store) {
        gpu.backend->round_activations(m.view(), FeatureType::fp16, store);
    }
    const auto got = gpu.backend->take_activation_overflow();
    const auto want = cpu->round_activations({host.data(), rows, cols, cols}, FeatureType::fp16, 2);
    ASSERT_TRUE(got.has_value());
    ASSERT_TRUE(want.has_value());
    EXPECT_EQ(got->row, 77777);
    EXPECT_EQ(got->col, 20);
    EXPECT_EQ(got->row, want->row);
    EXPECT_EQ(got->col, want->col);
    EXPECT_EQ(got->value, want->value);
    EXPECT_EQ(got->store, 2);
    std::vector<float> back(host.size());
    gpu.backend->copy_to_host(m.view(), back.data());
    for (std::size_t q = 0; q < host.size(); ++q) {
        ASSERT_TRUE(same(back[q], host[q])) << q;  // host: rounded by the CPU backend above
    }
}

// --- every layer type against the CPU backend -----------------------------------------------

struct Run {
    std::vector<float> out;
    std::vector<std::vector<float>> layers;
    bool replayed = false;
    std::string report;  // Engine::kernel_report (why a pass was not recorded)
};

const halo::Shard& test_part()
{
    static const auto graph = halo::testing::engine_test_graph("rmat:10");
    static const auto shard = halo::testing::test_shard(graph, 1, 0);
    return shard;
}

halo::Model model_of(LayerType type)
{
    halo::RandomModelOptions ropt;
    ropt.k = 8;
    ropt.heads = 2;
    // 24 -> 40: aggregate first; 40 -> 7 (8 for the attention heads): transform first.
    const std::int64_t last = type == LayerType::gat || type == LayerType::transformer ? 8 : 7;
    return halo::random_model(type, {24, 40, 24, last}, 31, ropt);
}

// keep: every layer's output (no replay); otherwise three runs, the last two replayed. The
// attention layers (agnn, transformer) run `attention`: the exact kernel computes the fp32 sums
// the CPU backend computes, in another order; Fused3S (the default) multiplies fp16 operands on
// tensor cores, so its fp32 results differ from the CPU's by far more than an order of sums.
Run run(halo::Backend& backend, const halo::Model& model, const std::vector<float>& x,
        FeatureType type, bool keep,
        halo::AttentionKernel attention = halo::AttentionKernel::exact)
{
    const auto& shard = test_part();
    auto exchanger = halo::make_local_exchanger(shard);
    halo::EngineOptions o;
    o.activations = type;
    o.keep_layers = keep;
    o.replay = !keep;
    o.step_timing = false;  // on by default, and a pass with it is never recorded
    o.attention = attention;
    halo::Engine engine(backend, *exchanger, shard, model, o);
    Run r;
    for (int k = 0; k < (keep ? 1 : 3); ++k) {
        const auto out = engine.run(x);
        r.out.assign(out.begin(), out.end());
    }
    r.layers = engine.layer_outputs();
    r.replayed = engine.replayed();
    r.report = engine.kernel_report();
    return r;
}

// One unit of the 16-bit type at 1.
double unit(FeatureType type)
{
    return type == FeatureType::bf16 ? 0x1p-8 : 0x1p-11;
}

// got against the CPU backend's want: within a few units of the 16-bit type at the matrix's
// scale nearly everywhere, and nowhere far (a MaxK selection or an attention weight may move with
// a one-unit difference of its input).
void expect_near(const std::vector<float>& got, const std::vector<float>& want, FeatureType act,
                 const char* what)
{
    ASSERT_EQ(got.size(), want.size()) << what;
    double scale = 1.0;
    for (const float v : want) {
        scale = std::max(scale, double(std::abs(v)));
    }
    const double bound = 4.0 * unit(act) * scale;
    std::int64_t within = 0;
    double worst = 0.0;
    for (std::size_t q = 0; q < got.size(); ++q) {
        ASSERT_TRUE(std::isfinite(got[q])) << what << ", element " << q;
        const double d = std::abs(double(got[q]) - want[q]);
        worst = std::max(worst, d);
        within += d <= bound ? 1 : 0;
    }
    std::printf("  %s: %lld of %zu within %.3g of the CPU's, largest difference %.3g\n", what,
                static_cast<long long>(within), got.size(), bound, worst);
    EXPECT_GE(within, static_cast<std::int64_t>(0.99 * double(got.size()))) << what;
    EXPECT_LE(worst, 64.0 * bound) << what;
}

class LayerTypes : public ::testing::TestWithParam<std::tuple<LayerType, FeatureType>> {};

TEST_P(LayerTypes, MatchTheCpuBackendOfTheSameRoundings)
{
    HALO_REQUIRE_GPUS(1);
    const auto [type, act] = GetParam();
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    const auto model = model_of(type);
    const auto& shard = test_part();
    const auto x = halo::random_node_features(shard.global_ids, 24, 5);
    const auto want = run(*cpu, model, x, act, true);
    const auto kept = run(*gpu.backend, model, x, act, true);
    const auto replayed = run(*gpu.backend, model, x, act, false);
    const auto fp32 = run(*gpu.backend, model, x, FeatureType::fp32, false);
    // The 16-bit stores are recorded in the CUDA graph wherever the fp32 pass is.
    EXPECT_EQ(replayed.replayed, fp32.replayed) << replayed.report << fp32.report;
    if (type == LayerType::gcn) {
        EXPECT_TRUE(replayed.replayed) << "the forward pass was not replayed as a CUDA graph:\n"
                                       << replayed.report;
    }
    ASSERT_EQ(kept.layers.size(), model.layers.size());
    ASSERT_EQ(want.layers.size(), model.layers.size());
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
        SCOPED_TRACE("layer " + std::to_string(l));
        const auto& g = kept.layers[l];
        const auto& c = want.layers[l];
        ASSERT_EQ(g.size(), c.size());
        const bool last = l + 1 == model.layers.size();
        std::int64_t equal = 0;
        for (std::size_t q = 0; q < g.size(); ++q) {
            if (!last) {  // stored: a 16-bit value
                ASSERT_EQ(halo::round_feature(g[q], act), g[q]) << "element " << q;
            }
            equal += g[q] == c[q] ? 1 : 0;
        }
        std::printf("%s %s layer %zu: %lld of %zu values equal the CPU's\n",
                    halo::to_string(type).c_str(), halo::to_string(act).c_str(), l,
                    static_cast<long long>(equal), g.size());
        if (l == 0) {
            // Same input, fp32 sums in another order: a rounding lands one unit apart only
            // where the sum lies next to a rounding point. (Later layers sum those units.)
            EXPECT_GE(equal, static_cast<std::int64_t>(0.95 * double(g.size())));
        }
        expect_near(g, c, act, last ? "output, run" : "stored");
    }
    expect_near(replayed.out, want.out, act, "output, replayed");
    if (type == LayerType::agnn || type == LayerType::transformer) {
        // The default attention kernel (Fused3S) with 16-bit storage: within the same bounds.
        const auto fused =
            run(*gpu.backend, model, x, act, true, halo::AttentionKernel::fused);
        ASSERT_EQ(fused.layers.size(), model.layers.size());
        for (std::size_t l = 0; l < model.layers.size(); ++l) {
            SCOPED_TRACE("fused, layer " + std::to_string(l));
            expect_near(fused.layers[l], want.layers[l], act,
                        l + 1 == model.layers.size() ? "fused output" : "fused stored");
        }
    }
    double from_fp32 = 0.0;
    double scale = 1.0;
    for (std::size_t q = 0; q < want.out.size(); ++q) {
        scale = std::max(scale, double(std::abs(want.out[q])));
        from_fp32 = std::max(from_fp32, std::abs(double(replayed.out[q]) - fp32.out[q]));
    }
    EXPECT_GT(from_fp32, 1e-4 * scale) << "the 16-bit run equals the fp32 one";
}

INSTANTIATE_TEST_SUITE_P(
    CudaActivations, LayerTypes,
    ::testing::Combine(::testing::Values(LayerType::gcn, LayerType::sage, LayerType::gin,
                                         LayerType::linear, LayerType::maxk, LayerType::agnn,
                                         LayerType::transformer, LayerType::gat),
                       ::testing::Values(FeatureType::bf16, FeatureType::fp16)),
    [](const auto& info) {
        return halo::to_string(std::get<0>(info.param)) + "_" +
               halo::to_string(std::get<1>(info.param));
    });

// The range check runs on the device and is raised after the layer (or the replay), with the
// CPU backend's words: the layer, the node, the column and the value.
TEST(CudaActivations, Fp16OverflowNamesWhatTheCpuBackendNames)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    const auto& shard = test_part();
    auto model = halo::random_model(LayerType::gcn, {16, 32, 8}, 3);
    for (auto& w : model.layers[0].weight) {
        w *= 1e5f;
    }
    const auto x = halo::random_node_features(shard.global_ids, 16, 9);
    const auto message = [&](halo::Backend& backend, bool replay) {
        auto exchanger = halo::make_local_exchanger(shard);
        halo::EngineOptions o;
        o.activations = FeatureType::fp16;
        o.replay = replay;
        o.step_timing = false;
        halo::Engine engine(backend, *exchanger, shard, model, o);
        for (int k = 0; k < 3; ++k) {
            try {
                engine.run(x);
                ADD_FAILURE() << "no error, run " << k;
            } catch (const halo::InputError& e) {
                if (k == 2) {
                    return std::string(e.what());
                }
            }
        }
        return std::string();
    };
    // The value is the fp32 sum before the store, summed in another order on the device: its
    // last digits may differ, the rest of the message may not.
    const auto without_value = [](std::string m) {
        const auto a = m.find(" holds ");
        const auto b = m.find(" at node ");
        if (a != std::string::npos && b != std::string::npos && b > a) {
            m.erase(a, b - a);
        }
        return m;
    };
    const auto want = without_value(message(*cpu, false));
    EXPECT_NE(want.find("layer 0 (gcn, 16 -> 32)"), std::string::npos) << want;
    for (const char* part : {"--activations fp16", "at node", ", column ", "65504", "bf16"}) {
        EXPECT_NE(want.find(part), std::string::npos) << part << " in: " << want;
    }
    EXPECT_EQ(without_value(message(*gpu.backend, false)), want);
    EXPECT_EQ(without_value(message(*gpu.backend, true)), want) << "recorded and replayed";
    // bf16 has fp32's range: the same model runs on the device.
    const auto out = run(*gpu.backend, model, x, FeatureType::bf16, false).out;
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return std::isfinite(v); }));
}

}  // namespace
