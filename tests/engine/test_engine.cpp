#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "engine_test_util.hpp"
#include "halo/core/detail/argmax.hpp"
#include "halo/core/error.hpp"
#include "halo/core/shard.hpp"
#include "halo/engine/engine.hpp"
#include "halo/engine/feature_upload.hpp"
#include "halo/partition/shard_builder.hpp"

namespace {

using halo::testing::dense_forward;
using halo::testing::engine_test_graph;

std::vector<float> run_single(const halo::Csr& graph, const halo::Model& model,
                              const std::vector<float>& x_global)
{
    const std::vector<std::int32_t> owner(graph.num_rows, 0);
    auto shard = halo::build_shard(graph, owner, 1, 0);
    // Single part: local order is ascending global id, so global features are local features.
    EXPECT_EQ(shard.global_ids.front(), 0);
    auto backend = halo::make_cpu_backend();
    auto exchanger = halo::make_local_exchanger(shard);
    halo::Engine engine(*backend, *exchanger, shard, model, {});
    std::vector<float> x(x_global.size());
    const auto d = model.input_dim();
    std::vector<float> out_local = engine.run([&] {
        for (std::int64_t l = 0; l < shard.num_owned; ++l) {
            std::copy_n(x_global.begin() + shard.global_ids[l] * d, d, x.begin() + l * d);
        }
        return x;
    }());
    std::vector<float> out(out_local.size());
    const auto m = model.output_dim();
    for (std::int64_t l = 0; l < shard.num_owned; ++l) {
        std::copy_n(out_local.begin() + l * m, m, out.begin() + shard.global_ids[l] * m);
    }
    return out;
}

void expect_matches_dense(const std::string& graph_name, halo::LayerType type,
                          const std::vector<std::int64_t>& dims)
{
    const auto graph = engine_test_graph(graph_name);
    if (graph.num_rows == 0) {
        GTEST_SKIP() << graph_name << " not found under " << halo::testing::shared_data_dir();
    }
    const auto model = halo::random_model(type, dims, 11);
    std::vector<halo::global_id> ids(graph.num_rows);
    std::iota(ids.begin(), ids.end(), 0);
    const auto x = halo::random_node_features(ids, dims.front(), 5);
    const auto got = run_single(graph, model, x);
    const auto want = dense_forward(graph, model, x);
    ASSERT_EQ(got.size(), want.size());
    double scale = 1.0;
    for (const auto v : want) {
        scale = std::max(scale, std::abs(v));
    }
    // Each output is a chain of sums of at most (max degree + widest layer) float products per
    // layer; float rounding grows with that count and the number of layers, relative to the
    // largest magnitude involved.
    const auto terms = static_cast<double>(halo::max_row_nnz(graph.view()) + model.max_dim());
    const auto tol = halo::testing::tolerance<float>(4.0 * terms * model.layers.size(), scale);
    for (std::size_t k = 0; k < got.size(); ++k) {
        ASSERT_TRUE(std::isfinite(got[k])) << k;
        ASSERT_NEAR(got[k], want[k], tol)
            << graph_name << " " << halo::to_string(type) << " element " << k;
    }
}

}  // namespace

TEST(Engine, GcnAggregateFirstMatchesDense)
{
    expect_matches_dense("rmat:10", halo::LayerType::gcn, {16, 32, 7});
}
TEST(Engine, GcnTransformFirstMatchesDense)
{
    expect_matches_dense("rmat:10", halo::LayerType::gcn, {48, 8, 4});
}
TEST(Engine, SageBothOrdersMatchDense)
{
    expect_matches_dense("rmat:10", halo::LayerType::sage, {16, 32, 6});
}
TEST(Engine, GinBothOrdersMatchDense)
{
    expect_matches_dense("rmat:10", halo::LayerType::gin, {16, 24, 5});
}
TEST(Engine, GcnOnCoraMatchesDense)
{
    expect_matches_dense("cora", halo::LayerType::gcn, {64, 16, 7});
}
TEST(Engine, SageOnCiteseerMatchesDense)
{
    expect_matches_dense("citeseer", halo::LayerType::sage, {32, 16, 6});
}
TEST(Engine, GinOnCoraMatchesDense)
{
    expect_matches_dense("cora", halo::LayerType::gin, {32, 16, 7});
}

TEST(Engine, GcnOperatorEqualsTheBuilderNormalization)
{
    halo::EdgeList e;
    e.num_nodes = 5;
    e.src = {0, 1, 2, 3, 3};
    e.dst = {1, 2, 0, 4, 3};
    halo::BuildOptions raw;
    const auto graph = halo::build_csr(e, raw);
    halo::BuildOptions gcn = raw;
    gcn.self_loops = halo::SelfLoops::add;
    gcn.normalization = halo::Normalization::gcn;
    const auto expected = halo::build_csr(e, gcn);
    const std::vector<std::int32_t> owner(5, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    const auto degree = halo::gcn_degrees(shard);
    const auto op = halo::make_aggregation(shard, halo::Aggregation::gcn, "none", degree);
    ASSERT_EQ(op.nnz(), expected.nnz());
    for (std::int64_t k = 0; k < op.nnz(); ++k) {
        EXPECT_EQ(shard.global_ids[op.indices[k]], expected.indices[k]);
        EXPECT_NEAR(op.values[k], expected.values[k], halo::testing::tolerance<float>(4, 1.0));
    }
}

TEST(Engine, DatasetNormalizedForAnotherOperatorIsRejected)
{
    const auto graph = engine_test_graph("rmat:6");
    const std::vector<std::int32_t> owner(graph.num_rows, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    try {
        halo::make_aggregation(shard, halo::Aggregation::mean, "gcn", {});
        FAIL() << "expected halo::InputError";
    } catch (const halo::InputError& e) {
        EXPECT_NE(e.message().find("gcn-normalized, but a layer needs the mean operator"),
                  std::string::npos)
            << e.message();
    }
    // Stored as the layer needs it: used as is.
    const auto same = halo::make_aggregation(shard, halo::Aggregation::mean, "mean", {});
    EXPECT_EQ(same.indices, shard.csr.indices);
}

TEST(Engine, RandomFeaturesDependOnGlobalIdAndSeedOnly)
{
    const auto a = halo::random_node_features({5, 9, 2}, 4, 7);
    const auto b = halo::random_node_features({2, 5}, 4, 7);
    for (int j = 0; j < 4; ++j) {
        EXPECT_EQ(a[0 * 4 + j], b[1 * 4 + j]);  // node 5
        EXPECT_EQ(a[2 * 4 + j], b[0 * 4 + j]);  // node 2
    }
    EXPECT_NE(halo::random_node_features({5}, 4, 8), halo::random_node_features({5}, 4, 7));
    for (const auto v : a) {
        EXPECT_GE(v, -1.0f);
        EXPECT_LT(v, 1.0f);
    }
}

// R-MAT 8 as one part, a 9-6-3 model of `type`, the CPU backend, a local exchanger and seeded
// 9-wide features of the part's rows.
struct OnePart {
    explicit OnePart(halo::LayerType type)
        : graph(engine_test_graph("rmat:8")),
          shard(halo::build_shard(graph, std::vector<std::int32_t>(graph.num_rows, 0), 1, 0)),
          model(halo::random_model(type, {9, 6, 3}, 4)),
          exchanger(halo::make_local_exchanger(shard)),
          n(shard.num_owned),
          x(halo::random_node_features(shard.global_ids, 9, 21))
    {
    }
    halo::Csr graph;
    halo::Shard shard;
    halo::Model model;
    std::unique_ptr<halo::Backend> backend = halo::make_cpu_backend();
    std::unique_ptr<halo::HaloExchanger> exchanger;
    std::int64_t n = 0;
    std::vector<float> x;
};

TEST(Engine, RunRandomEqualsARunOnTheHostGeneratorsFeatures)
{
    // The features generated in place (Backend::fill_random_features) are the host generator's,
    // so the outputs are equal bit for bit; and the generator writes only the view's columns.
    OnePart c(halo::LayerType::gcn);
    const auto& shard = c.shard;
    auto& backend = c.backend;
    halo::Engine engine(*backend, *c.exchanger, shard, c.model, {});
    for (const std::uint64_t seed : {1u, 77u}) {
        const auto host = halo::random_node_features(shard.global_ids, 9, seed);
        const auto want = engine.run(host);
        const auto got = engine.run_random(seed);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t k = 0; k < got.size(); ++k) {
            ASSERT_EQ(got[k], want[k]) << "seed " << seed << " element " << k;
        }
    }
    const std::vector<halo::global_id> ids{3, 1, 4};
    std::vector<float> m(3 * 5, -9.0f);
    backend->fill_random_features(ids.data(), 2, {m.data(), 3, 4, 5});
    const auto want = halo::random_node_features(ids, 4, 2);
    for (int r = 0; r < 3; ++r) {
        for (int j = 0; j < 4; ++j) {
            EXPECT_EQ(m[r * 5 + j], want[r * 4 + j]);
        }
        EXPECT_EQ(m[r * 5 + 4], -9.0f) << "column outside the view written in row " << r;
    }
}

TEST(Engine, AfterLayerSeesEachLayerAndForwardFromResumesBitForBit)
{
    // halo-infer --checkpoint / --resume: the rows after_layer hands over are the layer's output
    // (keep_layers' copy), and a run from layer l on layer l - 1's rows equals the whole run.
    for (const auto type : {halo::LayerType::gcn, halo::LayerType::sage, halo::LayerType::gat}) {
        OnePart c(type);
        std::vector<std::vector<float>> seen(c.model.layers.size());
        halo::EngineOptions options;
        options.keep_layers = true;
        options.after_layer = [&seen](std::size_t l, std::span<const float> rows) {
            seen.at(l).assign(rows.begin(), rows.end());
        };
        halo::Engine engine(*c.backend, *c.exchanger, c.shard, c.model, options);
        const auto whole = engine.run(c.x);
        const auto kept = engine.layer_outputs();
        ASSERT_EQ(kept.size(), seen.size());
        for (std::size_t l = 0; l < seen.size(); ++l) {
            EXPECT_EQ(seen[l], kept[l]) << "layer " << l;
        }
        for (std::size_t first = 1; first <= c.model.layers.size(); ++first) {
            for (auto& s : seen) {
                s.clear();
            }
            const auto out = engine.forward_from(first, kept[first - 1]);
            const std::vector<float> resumed(out.begin(), out.end());
            EXPECT_EQ(resumed, whole) << halo::to_string(type) << " from layer " << first;
            for (std::size_t l = 0; l < seen.size(); ++l) {
                EXPECT_EQ(seen[l].empty(), l < first) << "after_layer of layer " << l;
            }
        }
        EXPECT_THROW(engine.forward_from(1, c.x), halo::LogicError);  // wrong width
    }
}

// Feature rows handed over in groups, as read_shard does (ShardReadOptions::features); with
// `reverse`, the last group first.
void hand_over(halo::FeatureUpload& upload, const std::vector<float>& x, std::int64_t rows,
               std::int64_t cols, std::int64_t group, bool reverse = false)
{
    const std::int64_t groups = (rows + group - 1) / group;
    for (std::int64_t k = 0; k < groups; ++k) {
        const auto r0 = (reverse ? groups - 1 - k : k) * group;
        halo::FeatureRowsRead g;
        g.first_row = r0;
        g.count = std::min(group, rows - r0);
        g.total_rows = rows;
        g.cols = cols;
        g.rows = x.data() + r0 * cols;
        upload(g);
    }
}

TEST(Engine, FeaturesUploadedDuringTheReadGiveTheSameResult)
{
    OnePart c(halo::LayerType::sage);
    const auto n = c.n;
    const auto& x = c.x;
    auto& backend = c.backend;
    for (const bool out_of_core : {false, true}) {
        SCOPED_TRACE(out_of_core ? "out of core" : "in memory");
        halo::EngineOptions options;
        if (out_of_core) {
            options.execution = halo::Execution::row_blocks;
            options.device_memory_limit = 1 << 20;
        }
        halo::Engine engine(*backend, *c.exchanger, c.shard, c.model, options);
        ASSERT_EQ(engine.out_of_core(), out_of_core);
        const auto want = engine.run(x);
        halo::FeatureUpload upload(*backend, std::int64_t{1} << 30);
        hand_over(upload, x, n, 9, 7, true);  // in reverse order: each group lands at its rows
        EXPECT_TRUE(upload.declined().empty()) << upload.declined();
        EXPECT_EQ(upload.bytes(), n * 9 * 4);
        auto matrix = upload.take(n, 9);
        ASSERT_TRUE(matrix.has_value());
        EXPECT_TRUE(upload.declined().empty()) << "taking is no decline";
        EXPECT_THROW(upload.take(n, 9), halo::LogicError) << "taken twice";
        const auto got = engine.forward(*matrix);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t k = 0; k < got.size(); ++k) {
            ASSERT_EQ(got[k], want[k]) << "element " << k;
        }
        const halo::Matrix wrong = backend->allocate(n, 8);
        EXPECT_THROW(engine.forward(wrong), halo::LogicError);
    }
}

TEST(Engine, ADeferredDownloadGivesTheSameRowsBatchByBatch)
{
    OnePart c(halo::LayerType::gcn);
    const auto n = c.n;
    const auto& x = c.x;
    auto& backend = c.backend;
    auto& exchanger = c.exchanger;
    const auto& shard = c.shard;
    const auto& model = c.model;
    {
        halo::Engine engine(*backend, *exchanger, shard, model, {});
        std::vector<float> got(n * 3, -7.0f);
        EXPECT_THROW(engine.download_rows(0, 1, got.data()), halo::LogicError)
            << "nothing deferred";
        const auto want = engine.run(x);
        engine.defer_download();
        EXPECT_TRUE(engine.forward(x).empty());
        EXPECT_EQ(engine.download_seconds(), 0.0);
        // Batches out of order, of several sizes.
        for (const std::int64_t first : {std::int64_t{50}, std::int64_t{0}, std::int64_t{13}}) {
            const auto count = first == 50 ? n - 50 : (first == 0 ? 13 : 37);
            engine.download_rows(first, count, got.data() + first * 3);
        }
        for (std::size_t k = 0; k < got.size(); ++k) {
            ASSERT_EQ(got[k], want[k]) << "element " << k;
        }
        std::vector<std::int32_t> best(n, -1);
        engine.deferred_predictions(best.data());
        for (std::int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(best[i], halo::detail::argmax_row(want.data() + i * 3, 3)) << "row " << i;
        }
        EXPECT_THROW(engine.download_rows(n - 1, 2, got.data()), halo::LogicError);
        // The next run downloads again, and the deferred output is gone.
        EXPECT_EQ(engine.forward(x).size(), want.size());
        EXPECT_THROW(engine.download_rows(0, 1, got.data()), halo::LogicError);
    }
    {
        // Out of core the output is in host memory: the run returns it whatever was asked.
        halo::EngineOptions options;
        options.execution = halo::Execution::row_blocks;
        options.device_memory_limit = 1 << 20;
        halo::Engine engine(*backend, *exchanger, shard, model, options);
        const auto want = engine.run(x);
        engine.defer_download();
        const auto got = engine.forward(x);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
    }
}

TEST(Engine, FeatureUploadDeclinesWhatItCannotHold)
{
    auto backend = halo::make_cpu_backend();
    const std::vector<float> x(10 * 4, 1.5f);
    {
        halo::FeatureUpload upload(*backend, 10 * 4 * 4 - 1);
        hand_over(upload, x, 10, 4, 3);
        EXPECT_NE(upload.declined().find("exceed"), std::string::npos) << upload.declined();
        EXPECT_FALSE(upload.take(10, 4).has_value());
        EXPECT_EQ(upload.bytes(), 0);
    }
    {
        halo::FeatureUpload upload(*backend, 1 << 20);
        const std::vector<std::int8_t> q(40, 3);
        halo::FeatureRowsRead g;
        g.count = 10;
        g.total_rows = 10;
        g.cols = 4;
        g.int8 = true;
        g.rows = q.data();
        upload(g);
        EXPECT_NE(upload.declined().find("int8"), std::string::npos) << upload.declined();
        EXPECT_FALSE(upload.take(10, 4).has_value());
    }
    {
        halo::FeatureUpload upload(*backend, 1 << 20);
        EXPECT_FALSE(upload.take(10, 4).has_value());
        EXPECT_NE(upload.declined().find("no feature rows"), std::string::npos);
    }
    {
        // Memory the backend cannot give: declined, not an error of the read.
        halo::testing::ScalingRecorder full;
        full.fail_allocations = true;
        halo::FeatureUpload upload(full, 1 << 20);
        EXPECT_NO_THROW(hand_over(upload, x, 10, 4, 3));
        EXPECT_NE(upload.declined().find("could not allocate them: out of device memory"),
                  std::string::npos)
            << upload.declined();
        EXPECT_FALSE(upload.take(10, 4).has_value());
        EXPECT_EQ(upload.bytes(), 0);
    }
    {
        halo::FeatureUpload upload(*backend, 1 << 20);
        hand_over(upload, x, 6, 4, 4);  // a 6-row matrix where the part has 10
        EXPECT_FALSE(upload.take(10, 4).has_value());
        EXPECT_NE(upload.declined().find("expected 10 x 4"), std::string::npos)
            << upload.declined();
    }
    {
        halo::FeatureUpload upload(*backend, 1 << 20);
        halo::FeatureRowsRead g;
        g.first_row = 8;
        g.count = 3;
        g.total_rows = 10;
        g.cols = 4;
        g.rows = x.data();
        EXPECT_THROW(upload(g), halo::LogicError) << "rows past the matrix";
    }
}

TEST(Engine, RejectsFeaturesOfTheWrongShapeAndLocalRunsOfSplitDatasets)
{
    const auto graph = engine_test_graph("rmat:6");
    const std::vector<std::int32_t> owner(graph.num_rows, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    auto backend = halo::make_cpu_backend();
    auto exchanger = halo::make_local_exchanger(shard);
    halo::Engine engine(*backend, *exchanger, shard,
                        halo::random_model(halo::LayerType::gcn, {8, 4}, 1), {});
    EXPECT_THROW(engine.run(std::vector<float>(3)), halo::LogicError);

    std::vector<std::int32_t> two(graph.num_rows, 0);
    for (std::size_t v = 0; v < two.size(); v += 2) {
        two[v] = 1;
    }
    const auto part = halo::build_shard(graph, two, 2, 0);
    EXPECT_THROW(halo::make_local_exchanger(part), halo::InputError);
}

TEST(Model, ParseDimsAndRandomModelShapes)
{
    EXPECT_EQ(halo::parse_dims("128,128,64"), (std::vector<std::int64_t>{128, 128, 64}));
    for (const char* bad : {"", "128,", ",5", "12a", "0,4", "-3,4"}) {
        EXPECT_THROW(halo::parse_dims(bad), halo::InputError) << bad;
    }
    const auto m = halo::random_model(halo::LayerType::sage, {10, 20, 3}, 1);
    ASSERT_EQ(m.layers.size(), 2u);
    EXPECT_EQ(m.layers[0].root_weight.size(), 200u);
    EXPECT_EQ(m.layers[0].activation, halo::Activation::relu);
    EXPECT_EQ(m.layers[1].activation, halo::Activation::none);
    EXPECT_EQ(m.max_dim(), 20);
    EXPECT_EQ(halo::random_model(halo::LayerType::gin, {10, 20, 3}, 1).layers[1].hidden_dim, 3);
    EXPECT_THROW(halo::random_model(halo::LayerType::gcn, {10}, 1), halo::InputError);
}
