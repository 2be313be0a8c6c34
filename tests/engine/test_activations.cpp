// 16-bit activations on the CPU backend (EngineOptions::activations; docs/KERNELS.md "16-bit
// activations"). gcn, sage, gin and linear against a reference written here from the definition
// (float loops, every stored matrix rounded with halo::round_feature, fp32 sums, the GEMM weights
// rounded once, the last layer's output fp32), not through the engine's steps; the layer types
// that widen (maxk, agnn, transformer, gat) against their fp32 run on the rounded input, the
// output rounded. Then the errors: an fp16 overflow names the layer, node, column and value, and
// the paths that do not take 16-bit rows refuse. P ranks against one rank: test_activations_mpi.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "engine_test_util.hpp"
#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/operators.hpp"
#include "halo/engine/engine.hpp"
#include "halo/quantize/quantize.hpp"

namespace {

using halo::FeatureType;
using halo::LayerType;
using Rows = std::vector<float>;

// The reference: one part, every row owned, local ids throughout.
struct Reference {
    const halo::Shard& shard;
    FeatureType type;
    std::int64_t n = shard.num_owned;

    void store(Rows& y) const
    {
        for (auto& v : y) {
            v = halo::round_feature(v, type);
        }
    }
    Rows rounded(const std::vector<float>& w) const
    {
        Rows out(w);
        store(out);
        return out;
    }
    // x (n x k) times w (k x m), the inner sum in order in float, plus beta * c.
    Rows gemm(const Rows& x, std::int64_t k, const Rows& w, std::int64_t m, const Rows* c = nullptr,
              float beta = 0.0f) const
    {
        Rows out(static_cast<std::size_t>(n * m));
        for (std::int64_t i = 0; i < n; ++i) {
            for (std::int64_t j = 0; j < m; ++j) {
                float sum = 0.0f;
                for (std::int64_t p = 0; p < k; ++p) {
                    sum += x[i * k + p] * w[p * m + j];
                }
                out[i * m + j] = c == nullptr ? sum : sum + beta * (*c)[i * m + j];
            }
        }
        return out;
    }
    // The operator times x (n x d), each row's nonzeros in storage order.
    Rows spmm(const halo::Csr& a, const Rows& x, std::int64_t d) const
    {
        Rows out(static_cast<std::size_t>(n * d), 0.0f);
        for (std::int64_t i = 0; i < n; ++i) {
            for (auto e = a.indptr[i]; e < a.indptr[i + 1]; ++e) {
                const float v = a.has_values() ? a.values[e] : 1.0f;
                for (std::int64_t t = 0; t < d; ++t) {
                    out[i * d + t] += v * x[a.indices[e] * d + t];
                }
            }
        }
        return out;
    }
    static void bias_act(Rows& y, std::int64_t m, const std::vector<float>& b, bool relu)
    {
        for (std::size_t q = 0; q < y.size(); ++q) {
            float v = y[q] + (b.empty() ? 0.0f : b[q % m]);
            y[q] = relu && v <= 0.0f ? 0.0f : v;
        }
    }
    halo::Csr op(halo::Aggregation kind) const
    {
        return halo::make_aggregation(shard, kind, "none", halo::gcn_degrees(shard));
    }

    // One layer on x (stored, n x in_dim); `last`: the output left fp32.
    Rows layer(const halo::Layer& l, const Rows& x, bool last) const
    {
        const auto in = l.in_dim;
        const auto out_w = l.out_dim;
        const bool relu = l.activation == halo::Activation::relu;
        auto out_store = [&](Rows& y) {
            if (!last) {
                store(y);
            }
        };
        if (l.type == LayerType::linear) {
            auto y = gemm(x, in, rounded(l.weight), out_w);
            out_store(y);
            bias_act(y, out_w, l.bias, relu);
            out_store(y);
            return y;
        }
        if (l.type == LayerType::gcn) {
            const auto a = op(halo::Aggregation::gcn);
            Rows y;
            if (l.aggregate_first()) {
                auto agg = spmm(a, x, in);
                store(agg);
                y = gemm(agg, in, rounded(l.weight), out_w);
            } else {
                auto z = gemm(x, in, rounded(l.weight), out_w);
                store(z);
                y = spmm(a, z, out_w);
            }
            out_store(y);
            bias_act(y, out_w, l.bias, relu);
            out_store(y);
            return y;
        }
        if (l.type == LayerType::sage) {
            const auto a = op(halo::Aggregation::mean);
            Rows y;
            if (l.aggregate_first()) {
                auto agg = spmm(a, x, in);
                store(agg);
                y = gemm(x, in, rounded(l.root_weight), out_w);
                out_store(y);
                y = gemm(agg, in, rounded(l.weight), out_w, &y, 1.0f);
            } else {
                auto z = gemm(x, in, rounded(l.weight), out_w);
                store(z);
                y = gemm(x, in, rounded(l.root_weight), out_w);
                out_store(y);
                auto agg = spmm(a, z, out_w);
                store(agg);
                for (std::size_t q = 0; q < y.size(); ++q) {
                    y[q] = agg[q] + y[q];
                }
            }
            out_store(y);
            bias_act(y, out_w, l.bias, relu);
            out_store(y);
            return y;
        }
        // gin
        const auto a = op(halo::Aggregation::sum);
        const auto hid = l.hidden_dim;
        const float self = 1.0f + l.eps;
        Rows hidden;
        if (l.aggregate_first()) {
            auto sum = spmm(a, x, in);
            store(sum);
            for (std::size_t q = 0; q < sum.size(); ++q) {
                sum[q] = self * x[q] + sum[q];
            }
            store(sum);
            hidden = gemm(sum, in, rounded(l.weight), hid);
        } else {
            auto z = gemm(x, in, rounded(l.weight), hid);
            store(z);
            hidden = spmm(a, z, hid);
            store(hidden);
            for (std::size_t q = 0; q < hidden.size(); ++q) {
                hidden[q] = self * z[q] + hidden[q];
            }
        }
        store(hidden);
        bias_act(hidden, hid, l.bias, true);
        store(hidden);
        auto y = gemm(hidden, hid, rounded(l.weight2), out_w);
        out_store(y);
        bias_act(y, out_w, l.bias2, relu);
        out_store(y);
        return y;
    }

    Rows forward(const halo::Model& model, Rows x) const
    {
        store(x);
        for (std::size_t l = 0; l < model.layers.size(); ++l) {
            x = layer(model.layers[l], x, l + 1 == model.layers.size());
        }
        return x;
    }
};

struct Run {
    std::vector<float> out;
    std::vector<std::vector<float>> layers;
    std::string storage;  // Engine::activation_storage
};

// store_16bit: EngineOptions' (in 16 bits where the layers can; false: rounded in fp32 memory).
Run run(const halo::Shard& shard, const halo::Model& model, const std::vector<float>& x,
        FeatureType type, bool store_16bit = true)
{
    auto backend = halo::make_cpu_backend();
    auto exchanger = halo::make_local_exchanger(shard);
    halo::EngineOptions o;
    o.activations = type;
    o.keep_layers = true;
    o.store_16bit = store_16bit;
    halo::Engine engine(*backend, *exchanger, shard, model, o);
    Run r;
    r.out = engine.run(x);
    r.layers = engine.layer_outputs();
    r.storage = engine.activation_storage();
    return r;
}

const halo::Shard& test_part()
{
    static const auto graph = halo::testing::engine_test_graph("rmat:9");
    static const auto shard = halo::testing::test_shard(graph, 1, 0);
    return shard;
}

// The bound: rows whose fp32 sums round to the other side of a 16-bit rounding point differ by
// one unit of the 16-bit type there, and a few such units propagate; fp32 order differences
// alone are far below it.
double bound(FeatureType type, double scale)
{
    const double unit = type == FeatureType::bf16 ? 0x1p-8 : 0x1p-11;
    return 4.0 * unit * std::max(scale, 1.0);
}

class SpmmTypes
    : public ::testing::TestWithParam<std::tuple<LayerType, FeatureType>> {};

TEST_P(SpmmTypes, EqualTheReferenceOfTheSameRoundings)
{
    const auto [type, act] = GetParam();
    const auto& shard = test_part();
    // 24 -> 40: aggregate first; 40 -> 7: transform first. Three layers: both orders in
    // the middle of the model, the last one's output fp32.
    for (const auto& dims : {std::vector<std::int64_t>{24, 40, 7}, {40, 24, 40, 7}}) {
        const auto model = halo::random_model(type, dims, 31);
        const auto x = halo::random_node_features(shard.global_ids, dims.front(), 5);
        const auto got = run(shard, model, x, act);
        const auto ref = Reference{shard, act}.forward(model, x);
        const auto fp32 = run(shard, model, x, FeatureType::fp32);
        ASSERT_EQ(got.out.size(), ref.size());
        double scale = 0.0;
        double worst = 0.0;
        double from_fp32 = 0.0;
        std::int64_t equal = 0;
        for (std::size_t q = 0; q < ref.size(); ++q) {
            ASSERT_TRUE(std::isfinite(got.out[q])) << q;
            scale = std::max(scale, double(std::abs(ref[q])));
            worst = std::max(worst, double(std::abs(got.out[q] - ref[q])));
            from_fp32 = std::max(from_fp32, double(std::abs(got.out[q] - fp32.out[q])));
            equal += got.out[q] == ref[q] ? 1 : 0;
        }
        const auto b = bound(act, scale);
        std::printf("%s %s %zu layers: %lld of %zu values equal the reference, largest "
                    "difference %.3g (bound %.3g), from fp32 %.3g\n",
                    halo::to_string(type).c_str(), halo::to_string(act).c_str(),
                    model.layers.size(), static_cast<long long>(equal), ref.size(), worst, b,
                    from_fp32);
        EXPECT_LE(worst, b) << "largest |engine - reference| over " << ref.size();
        // The same operations in the same order: nearly every value is the reference's, bit
        // for bit (the rest where OpenMP or the compiler ordered a sum otherwise).
        EXPECT_GE(equal, static_cast<std::int64_t>(0.99 * double(ref.size())));
        // Not fp32 under another name: the rounding moved the result, by more than the
        // fp32 order differences could.
        EXPECT_GT(from_fp32, 1e-4 * scale) << "16-bit run equals the fp32 one";
        // Every layer before the last stored its output in the 16-bit type.
        for (std::size_t l = 0; l + 1 < got.layers.size(); ++l) {
            for (const float v : got.layers[l]) {
                ASSERT_EQ(halo::round_feature(v, act), v) << "layer " << l;
            }
        }
        // The last one's is fp32: some value is not a 16-bit one.
        const auto& last = got.layers.back();
        EXPECT_TRUE(std::any_of(last.begin(), last.end(),
                                [&](float v) { return halo::round_feature(v, act) != v; }));
    }
}

INSTANTIATE_TEST_SUITE_P(
    Activations, SpmmTypes,
    ::testing::Combine(::testing::Values(LayerType::gcn, LayerType::sage, LayerType::gin,
                                         LayerType::linear),
                       ::testing::Values(FeatureType::bf16, FeatureType::fp16)),
    [](const auto& info) {
        return halo::to_string(std::get<0>(info.param)) + "_" +
               halo::to_string(std::get<1>(info.param));
    });

// Stored in 16 bits (two elements per word, the SpMM gathering 16-bit rows, the GEMMs reading
// them) the CPU backend computes exactly what the rounding in fp32 memory computes: every output
// and every layer's rows bit for bit. gcn, sage, gin and linear store in 16 bits; a model with
// another type is rounded in fp32 memory and says which layer.
class PackedTypes
    : public ::testing::TestWithParam<std::tuple<LayerType, FeatureType>> {};

TEST_P(PackedTypes, StoredInSixteenBitsEqualRoundedInFp32Memory)
{
    const auto [type, act] = GetParam();
    const auto& shard = test_part();
    // Odd widths (a pad element per row), aggregate first and transform first, three layers.
    for (const auto& dims : {std::vector<std::int64_t>{23, 40, 7}, {40, 25, 41, 6}}) {
        const auto model = halo::random_model(type, dims, 37);
        const auto x = halo::random_node_features(shard.global_ids, dims.front(), 9);
        const auto packed = run(shard, model, x, act);
        const auto rounded = run(shard, model, x, act, false);
        EXPECT_EQ(packed.storage, "--activations " + halo::to_string(act) + ": stored in 16 bits");
        EXPECT_NE(rounded.storage.find("rounded in fp32 memory"), std::string::npos)
            << rounded.storage;
        ASSERT_EQ(packed.out.size(), rounded.out.size());
        for (std::size_t q = 0; q < packed.out.size(); ++q) {
            ASSERT_EQ(packed.out[q], rounded.out[q]) << "output value " << q;
        }
        ASSERT_EQ(packed.layers.size(), rounded.layers.size());
        for (std::size_t l = 0; l < packed.layers.size(); ++l) {
            ASSERT_EQ(packed.layers[l], rounded.layers[l]) << "layer " << l;
        }
        // And both are the definition's (the reference of the same roundings).
        const auto ref = Reference{shard, act}.forward(model, x);
        double worst = 0.0, scale = 0.0;
        for (std::size_t q = 0; q < ref.size(); ++q) {
            scale = std::max(scale, double(std::abs(ref[q])));
            worst = std::max(worst, double(std::abs(packed.out[q] - ref[q])));
        }
        EXPECT_LE(worst, bound(act, scale));
    }
}

INSTANTIATE_TEST_SUITE_P(
    Activations, PackedTypes,
    ::testing::Combine(::testing::Values(LayerType::gcn, LayerType::sage, LayerType::gin,
                                         LayerType::linear),
                       ::testing::Values(FeatureType::bf16, FeatureType::fp16)),
    [](const auto& info) {
        return halo::to_string(std::get<0>(info.param)) + "_" +
               halo::to_string(std::get<1>(info.param));
    });

// A layer that widens (maxk here) between layers stored in 16 bits: its input widened from the
// 16-bit rows, its output stored in 16 bits; the model equals its run rounded in fp32 memory.
TEST(Activations, AWideningLayerAmongPackedOnesEqualsTheRoundedRun)
{
    const auto& shard = test_part();
    halo::RandomModelOptions ropt;
    ropt.k = 4;
    auto model = halo::random_model(LayerType::gcn, {16, 16, 12, 5}, 3);
    model.layers[1] = halo::random_model(LayerType::maxk, {16, 12}, 4, ropt).layers[0];
    const auto x = halo::random_node_features(shard.global_ids, 16, 2);
    for (const auto act : {FeatureType::bf16, FeatureType::fp16}) {
        const auto packed = run(shard, model, x, act);
        const auto rounded = run(shard, model, x, act, false);
        EXPECT_EQ(packed.storage, "--activations " + halo::to_string(act) +
                                      ": stored in 16 bits; layer 1 (maxk) widens its input to fp32");
        ASSERT_EQ(packed.out, rounded.out);
        ASSERT_EQ(packed.layers, rounded.layers);
    }
    EXPECT_EQ(run(shard, model, x, FeatureType::fp32).storage, "");
}

// maxk, agnn, transformer, gat widen: the layer is its fp32 self on the stored (rounded) input,
// its output stored as the activations are (fp32 in the last layer).
class WideningTypes
    : public ::testing::TestWithParam<std::tuple<LayerType, FeatureType>> {};

TEST_P(WideningTypes, AreTheirFp32LayerBetweenRoundedStores)
{
    const auto [type, act] = GetParam();
    const auto& shard = test_part();
    halo::RandomModelOptions ropt;
    ropt.k = 8;
    ropt.heads = 2;
    const auto model = halo::random_model(type, {16, 32, 8}, 41, ropt);
    const auto x = halo::random_node_features(shard.global_ids, 16, 9);
    const auto got = run(shard, model, x, act);
    // Stored in 16 bits on the CPU backend: each layer widens its 16-bit input.
    EXPECT_EQ(got.storage, "--activations " + halo::to_string(act) + ": stored in 16 bits; layer 0 (" +
                               halo::to_string(type) + ") widens its input to fp32");
    // Layer by layer in fp32, from the rounded input, each output rounded but the last.
    auto h = x;
    round_features(h, act);
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
        halo::Model one;
        one.layers = {model.layers[l]};
        h = run(shard, one, h, FeatureType::fp32).out;
        if (l + 1 < model.layers.size()) {
            round_features(h, act);
        }
        ASSERT_EQ(got.layers[l].size(), h.size());
        EXPECT_EQ(std::memcmp(got.layers[l].data(), h.data(), h.size() * sizeof(float)), 0)
            << "layer " << l;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Activations, WideningTypes,
    ::testing::Combine(::testing::Values(LayerType::maxk, LayerType::agnn, LayerType::transformer,
                                         LayerType::gat),
                       ::testing::Values(FeatureType::bf16, FeatureType::fp16)),
    [](const auto& info) {
        return halo::to_string(std::get<0>(info.param)) + "_" +
               halo::to_string(std::get<1>(info.param));
    });

TEST(Activations, Fp16OverflowNamesTheLayerNodeColumnAndValue)
{
    const auto& shard = test_part();
    auto model = halo::random_model(LayerType::gcn, {16, 32, 8}, 3);
    for (auto& w : model.layers[0].weight) {
        w *= 1e5f;
    }
    const auto x = halo::random_node_features(shard.global_ids, 16, 9);
    try {
        run(shard, model, x, FeatureType::fp16);
        ADD_FAILURE() << "no error";
    } catch (const halo::InputError& e) {
        const std::string what = e.what();
        for (const char* part : {"--activations fp16", "layer 0 (gcn, 16 -> 32)", "at node",
                                 "column", "65504", "bf16"}) {
            EXPECT_NE(what.find(part), std::string::npos) << part << " in: " << what;
        }
    }
    // bf16 has fp32's range: the same model runs.
    const auto out = run(shard, model, x, FeatureType::bf16).out;
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return std::isfinite(v); }));
    // An input beyond fp16's range is named as the input.
    auto big = x;
    big[5] = 1e6f;
    try {
        run(shard, halo::random_model(LayerType::gcn, {16, 8}, 3), big, FeatureType::fp16);
        ADD_FAILURE() << "no error";
    } catch (const halo::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("the input of layer 0"), std::string::npos)
            << e.what();
    }
}

// A backend that checks the range later (the CUDA backend's device record; here the CPU
// backend's result kept by ScalingRecorder until the engine takes it): the engine takes it after
// each layer, and the error names what the immediate check names; the output is the same.
TEST(Activations, DeferredRangeChecksRaiseTheSameError)
{
    const auto& shard = test_part();
    const auto run_on = [&](halo::Backend& backend, const halo::Model& model,
                            const std::vector<float>& x) {
        auto exchanger = halo::make_local_exchanger(shard);
        halo::EngineOptions o;
        o.activations = FeatureType::fp16;
        halo::Engine engine(backend, *exchanger, shard, model, o);
        const auto out = engine.run(x);
        return std::vector<float>(out.begin(), out.end());
    };
    const auto message = [&](halo::Backend& backend, const halo::Model& model,
                             const std::vector<float>& x) {
        try {
            run_on(backend, model, x);
        } catch (const halo::InputError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const auto x = halo::random_node_features(shard.global_ids, 16, 9);
    const auto big = [&] {
        auto b = x;
        b[5] = 1e6f;
        return b;
    }();
    // 32 -> 24 transforms first: the root term is a stored matrix of layer 1.
    auto model = halo::random_model(LayerType::sage, {16, 32, 24, 8}, 3);
    auto loud = model;
    for (auto& w : loud.layers[1].root_weight) {
        w *= 1e5f;
    }
    auto cpu = halo::make_cpu_backend();
    for (const auto& [m, in] : {std::pair{&loud, &x}, std::pair{&model, &big}}) {
        halo::testing::ScalingRecorder deferred;
        deferred.deferred_checks = true;
        const auto want = message(*cpu, *m, *in);
        EXPECT_NE(want, "no error");
        EXPECT_EQ(message(deferred, *m, *in), want);
        EXPECT_GT(deferred.deferred_stores, 0);
        EXPECT_FALSE(deferred.deferred_overflow.has_value()) << "taken by the engine";
    }
    EXPECT_NE(message(*cpu, loud, x).find("layer 1 (sage, 32 -> 24)"), std::string::npos);
    EXPECT_NE(message(*cpu, model, big).find("the input of layer 0"), std::string::npos);
    // Without an overflow: the same output, one take per layer.
    halo::testing::ScalingRecorder deferred;
    deferred.deferred_checks = true;
    const auto want = run_on(*cpu, model, x);
    const auto got = run_on(deferred, model, x);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
    EXPECT_EQ(deferred.overflow_checks, 3);
}

// EngineOptions::replay records the second run, on the assumption that the first allocated
// everything (plans, the 16-bit weight copies). A first run that threw (an fp16 overflow in
// layer 0, checked after the layer as the CUDA backend checks it) allocated nothing for the
// layers after it: the engine must not record then, or those allocations happen inside the
// recording (on an H100 they became part of the CUDA graph, whose second launch failed with
// cudaErrorInvalidValue). ScalingRecorder counts allocations while recording and fails them.
TEST(Activations, RecordsOnlyAfterARunThatCompleted)
{
    const auto& shard = test_part();
    const auto x = halo::random_node_features(shard.global_ids, 16, 9);
    const auto options = [] {
        halo::EngineOptions o;
        o.activations = FeatureType::fp16;
        o.replay = true;
        o.step_timing = false;  // a pass with step timing is never recorded
        return o;
    };
    const auto recorder = [] {
        auto b = std::make_unique<halo::testing::ScalingRecorder>();
        b->deferred_checks = true;
        b->packed = true;
        b->records = true;
        return b;
    };
    auto loud = halo::random_model(LayerType::gcn, {16, 32, 24, 8}, 3);
    for (auto& w : loud.layers[0].weight) {
        w *= 1e5f;
    }
    {
        auto backend = recorder();
        auto exchanger = halo::make_local_exchanger(shard);
        halo::Engine engine(*backend, *exchanger, shard, loud, options());
        EXPECT_NE(engine.activation_storage().find("stored in 16 bits"), std::string::npos)
            << engine.activation_storage();
        for (int k = 0; k < 3; ++k) {
            try {
                engine.run(x);
                ADD_FAILURE() << "no error, run " << k;
            } catch (const halo::InputError& e) {
                EXPECT_NE(std::string(e.what()).find("layer 0 (gcn, 16 -> 32)"),
                          std::string::npos)
                    << "run " << k << ": " << e.what();
            }
        }
        EXPECT_EQ(backend->allocations_while_recording, 0);
        EXPECT_EQ(backend->recordings, 0) << "no run completed: nothing to record after";
        EXPECT_EQ(backend->replays, 0);
    }
    // A model that runs: the first run as usual, the second recorded and replayed, the third
    // replayed. The first two give the CPU backend's output (the recording ran the work); the
    // test backend's replay runs nothing, so the third's buffers are not the product.
    const auto model = halo::random_model(LayerType::gcn, {16, 32, 24, 8}, 3);
    const auto want = run(shard, model, x, FeatureType::fp16).out;
    auto backend = recorder();
    auto exchanger = halo::make_local_exchanger(shard);
    halo::Engine engine(*backend, *exchanger, shard, model, options());
    for (int k = 0; k < 3; ++k) {
        const auto out = engine.run(x);
        ASSERT_EQ(out.size(), want.size());
        if (k < 2) {
            EXPECT_EQ(std::memcmp(out.data(), want.data(), want.size() * sizeof(float)), 0)
                << "run " << k;
        }
        EXPECT_EQ(engine.replayed(), k > 0) << "run " << k << "\n" << engine.kernel_report();
    }
    EXPECT_EQ(backend->allocations_while_recording, 0);
    EXPECT_EQ(backend->recordings, 1);
    EXPECT_EQ(backend->replays, 2);
}

TEST(Activations, PathsWithoutSixteenBitRowsRefuse)
{
    const auto& shard = test_part();
    const auto model = halo::random_model(LayerType::gcn, {16, 32, 8}, 3);
    halo::EngineOptions o;
    o.activations = FeatureType::bf16;
    auto exchanger = halo::make_local_exchanger(shard);
    auto expect_refusal = [](auto&& fn, const std::vector<std::string>& parts) {
        try {
            fn();
            ADD_FAILURE() << "no error";
        } catch (const halo::InputError& e) {
            const std::string what = e.what();
            for (const auto& part : parts) {
                EXPECT_NE(what.find(part), std::string::npos) << part << " in: " << what;
            }
        }
    };
    // A backend that does not store them.
    halo::testing::ScalingRecorder fp32_only;
    fp32_only.fp32_only = true;
    expect_refusal([&] { halo::Engine(fp32_only, *exchanger, shard, model, o); },
                   {"--activations bf16", "does not store 16-bit activations"});
    // Out of core.
    auto backend = halo::make_cpu_backend();
    auto blocks = o;
    blocks.execution = halo::Execution::row_blocks;
    blocks.device_memory_limit = std::int64_t{1} << 30;
    expect_refusal([&] { halo::Engine(*backend, *exchanger, shard, model, blocks); },
                   {"--activations bf16", "out of core"});
    // int8 input.
    halo::Engine engine(*backend, *exchanger, shard, model, o);
    const auto x = halo::random_node_features(shard.global_ids, 16, 9);
    const auto q = halo::quantize_columns(
        halo::DenseView<const float>{x.data(), shard.num_owned, 16, 16}, "features");
    expect_refusal([&] { engine.run(q.view()); }, {"--activations bf16", "int8 features"});
}

}  // namespace
