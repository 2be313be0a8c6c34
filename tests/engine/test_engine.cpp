#include <cmath>
#include <numeric>
#include <vector>

#include "engine_test_util.hpp"
#include "halo/engine.hpp"
#include "halo/error.hpp"
#include "halo/shard.hpp"
#include "halo/shard_builder.hpp"

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

TEST(Engine, RunRandomEqualsARunOnTheHostGeneratorsFeatures)
{
    // The features generated in place (Backend::fill_random_features) are the host generator's,
    // so the outputs are equal bit for bit; and the generator writes only the view's columns.
    const auto graph = engine_test_graph("rmat:8");
    std::vector<std::int32_t> owner(graph.num_rows, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    const auto model = halo::random_model(halo::LayerType::gcn, {9, 6, 3}, 4);
    auto backend = halo::make_cpu_backend();
    auto exchanger = halo::make_local_exchanger(shard);
    halo::Engine engine(*backend, *exchanger, shard, model, {});
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
