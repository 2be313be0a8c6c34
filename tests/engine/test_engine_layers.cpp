// The engine's linear, maxk, agnn, transformer and gat layers against a plain double-precision
// oracle written from model.hpp's formulas (dense loops over each row's pattern), on one rank of
// the CPU backend. Every model is [layer under test, linear], so the oracle compares one
// aggregation step and a transform. The multi-rank runs of the same layers are compared bit for
// bit with one rank in test_engine_distributed.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine_test_util.hpp"
#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/core/shard.hpp"
#include "halo/engine/engine.hpp"
#include "halo/kernels_host/dense_ops.hpp"
#include "halo/kernels_host/maxk.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo/quantize/quantize.hpp"

namespace {

using halo::testing::engine_test_graph;
using Rows = std::vector<double>;

struct Oracle {
    const halo::Csr& a;
    std::int64_t n;

    // The pattern of row i, with the diagonal added when `self_loops` (PyG add_self_loops).
    std::vector<std::int64_t> neighbours(std::int64_t i, bool self_loops) const
    {
        std::vector<std::int64_t> cols;
        bool diagonal = false;
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            cols.push_back(a.indices[k]);
            diagonal = diagonal || a.indices[k] == i;
        }
        if (self_loops && !diagonal) {
            cols.push_back(i);
        }
        return cols;
    }

    Rows matmul(const Rows& x, std::int64_t k, const std::vector<float>& w, std::int64_t m,
                const std::vector<float>& bias) const
    {
        Rows out(n * m, 0.0);
        for (std::int64_t i = 0; i < n; ++i) {
            for (std::int64_t j = 0; j < m; ++j) {
                double s = bias.empty() ? 0.0 : bias[j];
                for (std::int64_t p = 0; p < k; ++p) {
                    s += x[i * k + p] * w[p * m + j];
                }
                out[i * m + j] = s;
            }
        }
        return out;
    }

    // out_i = sum_j softmax_j(score(i, j)) v_j over the pattern of i, columns [c0, c0 + d) of v.
    template <typename Score>
    void attend(const Rows& v, std::int64_t width, std::int64_t c0, std::int64_t d,
                bool self_loops, Score&& score, Rows& out) const
    {
        for (std::int64_t i = 0; i < n; ++i) {
            const auto cols = neighbours(i, self_loops);
            if (cols.empty()) {
                continue;  // zeros
            }
            std::vector<double> e;
            for (const auto j : cols) {
                e.push_back(score(i, j));
            }
            const double mx = *std::max_element(e.begin(), e.end());
            double sum = 0.0;
            for (auto& x : e) {
                x = std::exp(x - mx);
                sum += x;
            }
            for (std::size_t t = 0; t < cols.size(); ++t) {
                for (std::int64_t c = 0; c < d; ++c) {
                    out[i * width + c0 + c] += e[t] / sum * v[cols[t] * width + c0 + c];
                }
            }
        }
    }
};

void activate(Rows& y, halo::Activation act)
{
    if (act == halo::Activation::relu) {
        for (auto& v : y) {
            v = std::max(v, 0.0);
        }
    }
}

// The first layer of `model` (the one under test) in double precision.
Rows oracle_layer(const halo::Csr& a, const halo::Layer& layer, const std::vector<float>& xf)
{
    const Oracle o{a, a.num_rows};
    const auto n = a.num_rows;
    const auto out_w = layer.out_dim;
    const Rows x(xf.begin(), xf.end());
    Rows y(n * out_w, 0.0);
    switch (layer.type) {
        case halo::LayerType::linear:
            y = o.matmul(x, layer.in_dim, layer.weight, out_w, layer.bias);
            break;
        case halo::LayerType::maxk: {
            // The selection must be the engine's: the top-k of the float pre-activation that the
            // CPU backend computes (reference gemm, then the bias in float). The aggregation of
            // the kept entries is then recomputed here in double.
            std::vector<float> z(n * out_w);
            halo::reference::gemm(halo::dense_view(xf.data(), n, layer.in_dim),
                                  halo::dense_view(layer.weight.data(), layer.in_dim, out_w),
                                  halo::dense_view(z.data(), n, out_w), 1.0f, 0.0f);
            halo::reference::bias_activation(halo::dense_view(z.data(), n, out_w),
                                             layer.bias.data(), halo::Activation::none, {0, n});
            const auto s = halo::reference::maxk_topk(halo::dense_view<const float>(z.data(), n,
                                                                                    out_w),
                                                      layer.k);
            Rows sparse(n * out_w, 0.0);
            for (std::int64_t i = 0; i < n; ++i) {
                for (std::int64_t t = 0; t < layer.k; ++t) {
                    sparse[i * out_w + s.indices[i * layer.k + t]] = s.values[i * layer.k + t];
                }
            }
            std::vector<double> degree(n, 0.0);
            for (std::int64_t i = 0; i < n; ++i) {
                degree[i] = static_cast<double>(o.neighbours(i, true).size());
            }
            for (std::int64_t i = 0; i < n; ++i) {
                for (const auto j : o.neighbours(i, true)) {
                    const double c = 1.0 / std::sqrt(degree[i] * degree[j]);
                    for (std::int64_t t = 0; t < out_w; ++t) {
                        y[i * out_w + t] += c * sparse[j * out_w + t];
                    }
                }
            }
            break;
        }
        case halo::LayerType::agnn: {
            const auto z = layer.weight.empty()
                               ? x
                               : o.matmul(x, layer.in_dim, layer.weight, out_w, layer.bias);
            std::vector<double> norm(n, 0.0);
            for (std::int64_t i = 0; i < n; ++i) {
                for (std::int64_t c = 0; c < out_w; ++c) {
                    norm[i] += z[i * out_w + c] * z[i * out_w + c];
                }
                norm[i] = std::max(std::sqrt(norm[i]), 1e-12);
            }
            o.attend(z, out_w, 0, out_w, true,
                     [&](std::int64_t i, std::int64_t j) {
                         double dot = 0.0;
                         for (std::int64_t c = 0; c < out_w; ++c) {
                             dot += z[i * out_w + c] * z[j * out_w + c];
                         }
                         return layer.beta * dot / (norm[i] * norm[j]);
                     },
                     y);
            break;
        }
        case halo::LayerType::transformer: {
            const auto d = layer.head_dim();
            const auto q = o.matmul(x, layer.in_dim, layer.query_weight, out_w, layer.query_bias);
            const auto k = o.matmul(x, layer.in_dim, layer.key_weight, out_w, layer.key_bias);
            const auto v = o.matmul(x, layer.in_dim, layer.value_weight, out_w, layer.value_bias);
            for (std::int64_t h = 0; h < layer.heads; ++h) {
                o.attend(v, out_w, h * d, d, false,
                         [&](std::int64_t i, std::int64_t j) {
                             double dot = 0.0;
                             for (std::int64_t c = h * d; c < (h + 1) * d; ++c) {
                                 dot += q[i * out_w + c] * k[j * out_w + c];
                             }
                             return dot / std::sqrt(static_cast<double>(d));
                         },
                         y);
            }
            for (std::int64_t i = 0; i < n; ++i) {
                for (std::int64_t c = 0; c < out_w; ++c) {
                    double skip = layer.bias.empty() ? 0.0 : layer.bias[c];
                    for (std::int64_t p = 0; !layer.root_weight.empty() && p < layer.in_dim; ++p) {
                        skip += x[i * layer.in_dim + p] * layer.root_weight[p * out_w + c];
                    }
                    y[i * out_w + c] += skip;
                }
            }
            break;
        }
        case halo::LayerType::gat: {
            const auto d = layer.head_dim();
            const auto z = o.matmul(x, layer.in_dim, layer.weight, out_w, {});
            for (std::int64_t h = 0; h < layer.heads; ++h) {
                auto dot = [&](std::int64_t i, const std::vector<float>& att) {
                    double s = 0.0;
                    for (std::int64_t c = h * d; c < (h + 1) * d; ++c) {
                        s += z[i * out_w + c] * att[c];
                    }
                    return s;
                };
                o.attend(z, out_w, h * d, d, true,
                         [&](std::int64_t i, std::int64_t j) {
                             const double e = dot(i, layer.att_dst) + dot(j, layer.att_src);
                             return e > 0.0 ? e : layer.negative_slope * e;
                         },
                         y);
            }
            for (std::int64_t i = 0; i < n; ++i) {
                for (std::int64_t c = 0; c < out_w; ++c) {
                    y[i * out_w + c] += layer.bias.empty() ? 0.0 : layer.bias[c];
                }
            }
            break;
        }
        default:
            ADD_FAILURE() << "no oracle for " << halo::to_string(layer.type);
    }
    activate(y, layer.activation);
    return y;
}

std::vector<float> run_engine(const halo::Csr& graph, const halo::Model& model,
                              const std::vector<float>& x)
{
    const std::vector<std::int32_t> owner(graph.num_rows, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    auto backend = halo::make_cpu_backend();
    auto exchanger = halo::make_local_exchanger(shard);
    halo::EngineOptions options;
    options.keep_layers = true;
    halo::Engine engine(*backend, *exchanger, shard, model, options);
    // One part: local order is ascending global id, so global rows are local rows.
    static_cast<void>(engine.run(x));
    return engine.layer_outputs().front();
}

// [type in -> hidden, linear hidden -> 5]: checks the first layer's output against the oracle.
void expect_layer_matches(const std::string& graph_name, halo::LayerType type, std::int64_t in,
                          std::int64_t hidden, const halo::RandomModelOptions& ropt = {},
                          bool drop_weight = false, bool drop_root = false)
{
    const auto graph = engine_test_graph(graph_name);
    if (graph.num_rows == 0) {
        GTEST_SKIP() << graph_name << " not found under " << halo::testing::shared_data_dir();
    }
    auto model = halo::random_model(type, {in, hidden}, 17, ropt);
    model.layers.front().activation = halo::Activation::relu;
    if (drop_weight) {
        model.layers.front().weight.clear();
        model.layers.front().bias.clear();
    }
    if (drop_root) {  // a transformer without the skip connection (root_weight=False)
        model.layers.front().root_weight.clear();
    }
    auto head = halo::random_model(halo::LayerType::linear, {hidden, 5}, 18);
    model.layers.push_back(head.layers.front());
    halo::validate_model(model, "test model");
    std::vector<halo::global_id> ids(graph.num_rows);
    std::iota(ids.begin(), ids.end(), 0);
    const auto x = halo::random_node_features(ids, in, 5);
    const auto got = run_engine(graph, model, x);
    const auto want = oracle_layer(graph, model.layers.front(), x);
    ASSERT_EQ(got.size(), want.size());
    double scale = 1.0;
    for (const auto v : want) {
        scale = std::max(scale, std::abs(v));
    }
    // Float products and sums over at most (max degree + 1) neighbours and the input width.
    const auto terms = static_cast<double>(halo::max_row_nnz(graph.view()) + 1 + in);
    const auto tol = halo::testing::tolerance<float>(8.0 * terms, scale);
    std::int64_t nonzero = 0;
    for (std::size_t k = 0; k < got.size(); ++k) {
        ASSERT_TRUE(std::isfinite(got[k])) << k;
        ASSERT_NEAR(got[k], want[k], tol)
            << graph_name << " " << halo::to_string(type) << " row " << k / hidden << " column "
            << k % hidden;
        nonzero += got[k] != 0.0f ? 1 : 0;
    }
    EXPECT_GT(nonzero, static_cast<std::int64_t>(got.size() / 10)) << "output almost all zero";
}

}  // namespace

TEST(EngineLayers, LinearMatchesOracle)
{
    expect_layer_matches("rmat:9", halo::LayerType::linear, 12, 20);
}
TEST(EngineLayers, MaxkMatchesOracle)
{
    halo::RandomModelOptions o;
    o.k = 5;
    expect_layer_matches("rmat:9", halo::LayerType::maxk, 12, 24, o);
    o.k = 24;  // k = width: no pruning, the gcn aggregation of x W + b
    expect_layer_matches("rmat:9", halo::LayerType::maxk, 12, 24, o);
}
TEST(EngineLayers, AgnnMatchesOracle)
{
    expect_layer_matches("rmat:9", halo::LayerType::agnn, 12, 16);
    expect_layer_matches("rmat:9", halo::LayerType::agnn, 16, 16, {}, true);  // no weight
}
TEST(EngineLayers, TransformerMatchesOracle)
{
    halo::RandomModelOptions o;
    o.heads = 1;
    expect_layer_matches("rmat:9", halo::LayerType::transformer, 12, 16, o);
    o.heads = 4;
    expect_layer_matches("rmat:9", halo::LayerType::transformer, 12, 16, o);
    expect_layer_matches("rmat:9", halo::LayerType::transformer, 12, 16, o, false, true);
}
TEST(EngineLayers, GatMatchesOracle)
{
    halo::RandomModelOptions o;
    o.heads = 3;
    expect_layer_matches("rmat:9", halo::LayerType::gat, 12, 18, o);
}
TEST(EngineLayers, AttentionLayersOnCora)
{
    halo::RandomModelOptions o;
    o.heads = 2;
    expect_layer_matches("cora", halo::LayerType::gat, 32, 16, o);
    expect_layer_matches("cora", halo::LayerType::transformer, 32, 16, o);
}

TEST(EngineLayers, ModelChecksNewLayerFields)
{
    auto model = halo::random_model(halo::LayerType::gat, {8, 12}, 1, {16, 3});
    model.layers[0].heads = 5;  // does not divide 12
    EXPECT_THROW(halo::validate_model(model, "m"), halo::InputError);
    model = halo::random_model(halo::LayerType::maxk, {8, 12}, 1);
    model.layers[0].k = 13;
    EXPECT_THROW(halo::validate_model(model, "m"), halo::InputError);
    model = halo::random_model(halo::LayerType::transformer, {8, 12}, 1);
    model.layers[0].key_weight.pop_back();
    EXPECT_THROW(halo::validate_model(model, "m"), halo::InputError);
    model = halo::random_model(halo::LayerType::agnn, {8, 12}, 1);
    model.layers[0].weight.clear();  // no weight needs in == out
    EXPECT_THROW(halo::validate_model(model, "m"), halo::InputError);
    model = halo::random_model(halo::LayerType::agnn, {8, 12}, 1);
    model.layers[0].beta = std::nanf("");
    EXPECT_THROW(halo::validate_model(model, "m"), halo::InputError);
    EXPECT_EQ(halo::random_model(halo::LayerType::transformer, {8, 12, 6}, 1).exchange_width(),
              24);
}

TEST(EngineLayers, TransformerNeedsTheRawAdjacency)
{
    const auto graph = engine_test_graph("rmat:8");
    const std::vector<std::int32_t> owner(graph.num_rows, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    auto backend = halo::make_cpu_backend();
    auto exchanger = halo::make_local_exchanger(shard);
    halo::EngineOptions options;
    options.dataset_normalization = "gcn";
    const auto model = halo::random_model(halo::LayerType::transformer, {8, 8}, 1);
    EXPECT_THROW(halo::Engine(*backend, *exchanger, shard, model, options), halo::InputError);
}

// run(QuantizedView): the first layer aggregates the int8 rows (dequantized in the gather), the
// rest reads them dequantized; the result equals run() on the dequantized features up to the
// rounding of the sums. Layer types that do not aggregate first read the dequantized rows only.
TEST(EngineLayers, Int8FeaturesEqualDequantizedFeatures)
{
    const auto graph = engine_test_graph("rmat:9");
    const std::vector<std::int32_t> owner(graph.num_rows, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    std::vector<halo::global_id> ids(graph.num_rows);
    std::iota(ids.begin(), ids.end(), 0);
    const std::int64_t in = 13;  // not a multiple of 4: rows are padded to whole words
    const auto x = halo::random_node_features(ids, in, 5);
    const auto q = halo::quantize_columns(halo::dense_view(x.data(), graph.num_rows, in), "x");
    std::vector<float> xq(x.size());
    halo::dequantize(q.view(), halo::dense_view(xq.data(), graph.num_rows, in));
    for (const auto type : {halo::LayerType::gcn, halo::LayerType::sage, halo::LayerType::gin,
                            halo::LayerType::agnn}) {
        const auto model = halo::random_model(type, {in, 16, 5}, 3);
        auto backend = halo::make_cpu_backend();
        auto exchanger = halo::make_local_exchanger(shard);
        halo::Engine engine(*backend, *exchanger, shard, model, {});
        const auto want = engine.run(xq);
        const auto got = engine.run(q.view());
        const auto again = engine.run(xq);  // the int8 input does not stick to later runs
        ASSERT_EQ(got.size(), want.size());
        double scale = 1.0;
        for (const auto v : want) {
            scale = std::max(scale, static_cast<double>(std::abs(v)));
        }
        const auto tol = halo::testing::tolerance<float>(
            8.0 * static_cast<double>(halo::max_row_nnz(graph.view()) + in), scale);
        for (std::size_t k = 0; k < got.size(); ++k) {
            ASSERT_NEAR(got[k], want[k], tol) << halo::to_string(type) << " element " << k;
            ASSERT_EQ(again[k], want[k]) << halo::to_string(type) << " element " << k;
        }
    }
}

// EngineOptions::replay on a backend that cannot record: every run computes as usual and the
// kernel report says why nothing was recorded.
TEST(EngineLayers, ReplayFallsBackWhereTheBackendCannotRecord)
{
    const auto graph = engine_test_graph("rmat:8");
    const std::vector<std::int32_t> owner(graph.num_rows, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    std::vector<halo::global_id> ids(graph.num_rows);
    std::iota(ids.begin(), ids.end(), 0);
    const auto x = halo::random_node_features(ids, 8, 5);
    const auto model = halo::random_model(halo::LayerType::gcn, {8, 8, 4}, 3);
    auto backend = halo::make_cpu_backend();
    auto exchanger = halo::make_local_exchanger(shard);
    halo::EngineOptions options;
    options.replay = true;
    options.step_timing = false;
    halo::Engine engine(*backend, *exchanger, shard, model, options);
    const auto first = engine.run(x);
    const auto second = engine.run(x);
    EXPECT_EQ(first, second);
    EXPECT_GT(engine.forward_seconds(), 0.0);
    EXPECT_NE(engine.kernel_report().find("cannot record"), std::string::npos)
        << engine.kernel_report();
}

// Engine::set_sparse_input: the first layer's transforms of the input as an SpMM of its nonzeros
// give the dense GEMM's result bit for bit on the CPU backend, for every layer type; random
// inputs (forward_random) keep the dense product, so they still equal a fresh engine's; an
// approximate (AES) backend refuses it and says why.
TEST(EngineLayers, SparseInputEqualsTheDenseProduct)
{
    const auto graph = engine_test_graph("rmat:9");
    const std::vector<std::int32_t> owner(graph.num_rows, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    const auto n = graph.num_rows;
    const std::int64_t in = 37;
    // About 10% nonzeros, bag-of-words style (counts 1 to 3), some rows empty.
    std::vector<float> x(static_cast<std::size_t>(n * in), 0.0f);
    std::uint64_t state = 12345;
    for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t j = 0; j < in; ++j) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            if (i % 7 != 3 && (state >> 33) % 10 == 0) {
                x[i * in + j] = static_cast<float>(1 + (state >> 40) % 3);
            }
        }
    }
    const auto csr = halo::sparse_rows(x.data(), n, in, 1.0);
    ASSERT_TRUE(csr.has_value());
    for (const auto type : {halo::LayerType::gcn, halo::LayerType::sage, halo::LayerType::gin,
                            halo::LayerType::agnn, halo::LayerType::transformer,
                            halo::LayerType::gat, halo::LayerType::maxk, halo::LayerType::linear}) {
        // A narrowing first layer (transform first) and a widening one (aggregate first, where
        // the product reads the aggregated rows, not the input).
        for (const std::int64_t hidden : {16, 64}) {
            SCOPED_TRACE(std::string(halo::to_string(type)) + " " + std::to_string(in) + " -> " +
                         std::to_string(hidden));
            const auto model = halo::random_model(type, {in, hidden, 5}, 3);
            auto backend = halo::make_cpu_backend();
            auto exchanger = halo::make_local_exchanger(shard);
            halo::Engine engine(*backend, *exchanger, shard, model, {});
            const auto dense = engine.run(x);
            const auto dense_random = engine.run_random(9);
            ASSERT_TRUE(engine.set_sparse_input(*csr));
            EXPECT_NE(engine.kernel_report().find("first-layer transforms as SpMM"),
                      std::string::npos)
                << engine.kernel_report();
            const auto sparse = engine.run(x);
            ASSERT_EQ(sparse.size(), dense.size());
            for (std::size_t k = 0; k < dense.size(); ++k) {
                ASSERT_EQ(sparse[k], dense[k]) << "element " << k;
            }
            EXPECT_EQ(engine.run_random(9), dense_random);
        }
    }

    // Approximate SpMM plans (AES) are not used for the input.
    halo::CpuBackendOptions aes;
    aes.aes = halo::AesOptions{};
    auto backend = halo::make_cpu_backend(aes);
    auto exchanger = halo::make_local_exchanger(shard);
    const auto model = halo::random_model(halo::LayerType::linear, {in, 5}, 3);
    halo::Engine engine(*backend, *exchanger, shard, model, {});
    EXPECT_FALSE(engine.set_sparse_input(*csr));
    EXPECT_NE(engine.sparse_input_note().find("not exact"), std::string::npos)
        << engine.sparse_input_note();
    // A matrix of the wrong shape is refused.
    EXPECT_THROW(engine.set_sparse_input(halo::slice_rows(*csr, {0, n - 1})), halo::LogicError);
}
