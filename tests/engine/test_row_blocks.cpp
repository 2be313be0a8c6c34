// Out-of-core execution on the CPU backend: the row-block driver under tiny memory
// limits equals the in-memory run bit for bit for every layer type it runs, in both of its modes
// (the referenced rows gathered per block; all rows resident); a limit too small for one row is
// an error naming the limit and the smallest that works; other layer types are refused by name.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine_test_util.hpp"
#include "halo/core/error.hpp"
#include "halo/core/operators.hpp"
#include "halo/core/shard.hpp"
#include "halo/engine/engine.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition/shard_builder.hpp"

namespace {

using halo::testing::engine_test_graph;

struct Run {
    std::vector<float> out;
    std::vector<std::vector<float>> layers;
    std::vector<halo::LayerTiming> timings;
    std::string report;
    bool out_of_core = false;
    halo::MemoryReport memory;
};

halo::Shard single_shard(const halo::Csr& graph)
{
    const std::vector<std::int32_t> owner(static_cast<std::size_t>(graph.num_rows), 0);
    return halo::build_shard(graph, owner, 1, 0);
}

Run run(const halo::Shard& shard, const halo::Model& model, halo::Execution execution,
        std::int64_t limit, bool keep_layers = true)
{
    auto backend = halo::make_cpu_backend();
    auto exchanger = halo::make_local_exchanger(shard);
    halo::EngineOptions o;
    o.execution = execution;
    o.device_memory_limit = limit;
    o.keep_layers = keep_layers;
    halo::Engine engine(*backend, *exchanger, shard, model, o);
    const auto x = halo::random_node_features(shard.global_ids, model.input_dim(), 5);
    Run r;
    r.out = engine.run(x);
    r.layers = engine.layer_outputs();
    r.timings = engine.timings();
    r.report = engine.kernel_report();
    r.out_of_core = engine.out_of_core();
    r.memory = engine.memory_report();
    return r;
}

// The smallest limit, read from the error of a limit of 1 byte (which the test also checks).
std::int64_t smallest_limit(const halo::Shard& shard, const halo::Model& model)
{
    try {
        run(shard, model, halo::Execution::row_blocks, 1);
    } catch (const halo::InputError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("device memory limit of 1 B (1 bytes) is too small"), std::string::npos)
            << what;
        const auto key = std::string("--device-memory-limit ");
        const auto pos = what.find(key);
        EXPECT_NE(pos, std::string::npos) << what;
        if (pos != std::string::npos) {
            return std::stoll(what.substr(pos + key.size()));
        }
        return 0;
    }
    ADD_FAILURE() << "a limit of 1 byte ran";
    return 0;
}

std::int64_t differing(const std::vector<float>& a, const std::vector<float>& b)
{
    if (a.size() != b.size()) {
        return -1;
    }
    std::int64_t n = 0;
    for (std::size_t k = 0; k < a.size(); ++k) {
        n += std::memcmp(&a[k], &b[k], sizeof(float)) != 0 ? 1 : 0;
    }
    return n;
}

void expect_equal_runs(const Run& blocks, const Run& memory, const std::string& what)
{
    EXPECT_TRUE(blocks.out_of_core) << what;
    EXPECT_FALSE(memory.out_of_core) << what;
    EXPECT_EQ(differing(blocks.out, memory.out), 0) << what << ": output differs";
    ASSERT_EQ(blocks.layers.size(), memory.layers.size()) << what;
    for (std::size_t l = 0; l < blocks.layers.size(); ++l) {
        EXPECT_EQ(differing(blocks.layers[l], memory.layers[l]), 0)
            << what << ": layer " << l << " differs";
    }
}

void expect_row_blocks_equal(halo::LayerType type, const std::vector<std::int64_t>& dims,
                             halo::RandomModelOptions options = {})
{
    const auto graph = engine_test_graph("rmat:9");
    const auto shard = single_shard(graph);
    const auto model = halo::random_model(type, dims, 17, options);
    const auto name = halo::to_string(type);
    const auto memory = run(shard, model, halo::Execution::in_memory, 0);

    // The smallest limit: works, one byte less does not; the blocks are small.
    const auto smallest = smallest_limit(shard, model);
    ASSERT_GT(smallest, 0);
    EXPECT_THROW(run(shard, model, halo::Execution::row_blocks, smallest - 1), halo::InputError);
    const auto tiny = run(shard, model, halo::Execution::row_blocks, smallest);
    expect_equal_runs(tiny, memory, name + " at the smallest limit");
    for (const auto& t : tiny.timings) {
        EXPECT_GT(t.row_blocks, 1) << name << ": " << tiny.report;
    }
    EXPECT_LE(tiny.memory.total(), smallest) << name;

    // A few blocks per layer, with all rows of the aggregated matrix resident where it fits.
    const auto roomy_limit =
        2 * (shard.num_owned + shard.num_halo) * model.max_dim() * 4 + 2 * smallest;
    const auto roomy = run(shard, model, halo::Execution::row_blocks, roomy_limit);
    expect_equal_runs(roomy, memory, name + " with a roomy limit");
    EXPECT_LE(roomy.memory.total(), roomy_limit) << name;

    // Blocks of several rows each.
    const auto medium = run(shard, model, halo::Execution::row_blocks, 4 * smallest);
    expect_equal_runs(medium, memory, name + " at four times the smallest limit");
    EXPECT_GT(medium.memory.row_blocks, 1) << name << ": " << medium.report;
    if (type == halo::LayerType::gcn || type == halo::LayerType::sage ||
        type == halo::LayerType::gin) {
        EXPECT_NE(roomy.report.find("all rows resident"), std::string::npos) << roomy.report;
        // Several blocks stream through the resident z (block b + 1 prefetched while b runs).
        EXPECT_GT(roomy.memory.row_blocks, 1) << roomy.report;
        EXPECT_NE(tiny.report.find("gathered"), std::string::npos) << tiny.report;
    }
}

}  // namespace

TEST(RowBlocks, GcnEqualsInMemory)
{
    expect_row_blocks_equal(halo::LayerType::gcn, {16, 32, 8});  // aggregate first, then not
}

// gcn layers that transform first take their z from the previous layer's resident blocks (the
// transform fused into them; z rows down instead of the output) where no layer output is kept:
// still bit for bit, over a chain of fused layers (the fused z alternates between two slots).
TEST(RowBlocks, GcnFusedTransformsEqualInMemory)
{
    const auto graph = engine_test_graph("rmat:9");
    const auto shard = single_shard(graph);
    for (const auto& dims : std::vector<std::vector<std::int64_t>>{{16, 32, 8}, {8, 32, 24, 16, 4}}) {
        const auto model = halo::random_model(halo::LayerType::gcn, dims, 23);
        const auto what = "gcn of " + std::to_string(dims.size() - 1) + " layers";
        const auto memory = run(shard, model, halo::Execution::in_memory, 0, false);
        const auto smallest = smallest_limit(shard, model);
        const auto roomy_limit =
            2 * (shard.num_owned + shard.num_halo) * model.max_dim() * 4 + 2 * smallest;
        const auto fused = run(shard, model, halo::Execution::row_blocks, roomy_limit, false);
        EXPECT_TRUE(fused.out_of_core) << what;
        EXPECT_EQ(differing(fused.out, memory.out), 0) << what << ": output differs";
        EXPECT_LE(fused.memory.total(), roomy_limit) << what;
        for (std::size_t l = 0; l + 2 < dims.size(); ++l) {
            EXPECT_NE(fused.report.find("layer " + std::to_string(l + 1) +
                                        "'s transform fused into its blocks"),
                      std::string::npos)
                << what << ": " << fused.report;
        }
        EXPECT_GT(fused.memory.row_blocks, 1) << fused.report;
        // Limits from the smallest to the roomy one: rows of the next z kept on the backend,
        // none, some or all of them (the others down and up again), always bit for bit.
        bool some_kept = false;
        bool all_kept = false;
        for (int k = 1; k <= 12; ++k) {
            const auto limit = smallest + (roomy_limit - smallest) * k / 12;
            const auto r = run(shard, model, halo::Execution::row_blocks, limit, false);
            EXPECT_EQ(differing(r.out, memory.out), 0) << what << " at a limit of " << limit;
            EXPECT_LE(r.memory.total(), limit) << what;
            const auto at = r.report.find("z rows kept on the backend");
            if (at == std::string::npos) {
                continue;
            }
            const auto line = r.report.substr(0, at);
            const auto last = line.rfind("the last ");
            ASSERT_NE(last, std::string::npos) << r.report;
            long long kept = -1;
            long long of = -1;
            ASSERT_EQ(std::sscanf(line.c_str() + last, "the last %lld of its %lld", &kept, &of), 2)
                << r.report;
            EXPECT_GT(kept, 0) << r.report;
            EXPECT_LE(kept, of) << r.report;
            some_kept = some_kept || kept < of;
            all_kept = all_kept || kept == of;
        }
        EXPECT_TRUE(some_kept) << what << ": no limit kept part of the next z";
        EXPECT_TRUE(all_kept) << what << ": no limit kept all of the next z";
        // Kept layers: nothing fused, the same result (each layer's output is needed).
        const auto kept = run(shard, model, halo::Execution::row_blocks, roomy_limit, true);
        EXPECT_EQ(differing(kept.out, memory.out), 0) << what << " with every layer kept";
        // At the smallest limit the layers gather per block: nothing to fuse, same result.
        const auto tiny = run(shard, model, halo::Execution::row_blocks, smallest, false);
        EXPECT_EQ(differing(tiny.out, memory.out), 0) << what << " at the smallest limit";
        EXPECT_EQ(tiny.report.find("fused"), std::string::npos) << tiny.report;
    }
}

TEST(RowBlocks, SageEqualsInMemory)
{
    expect_row_blocks_equal(halo::LayerType::sage, {16, 32, 8});
}

TEST(RowBlocks, GinEqualsInMemory)
{
    expect_row_blocks_equal(halo::LayerType::gin, {16, 32, 8});
}

TEST(RowBlocks, GinTransformFirstEqualsInMemory)
{
    expect_row_blocks_equal(halo::LayerType::gin, {40, 8, 4});
}

TEST(RowBlocks, MaxkEqualsInMemory)
{
    halo::RandomModelOptions o;
    o.k = 4;
    expect_row_blocks_equal(halo::LayerType::maxk, {16, 32, 8}, o);
}

TEST(RowBlocks, GatEqualsInMemory)
{
    halo::RandomModelOptions o;
    o.heads = 2;
    expect_row_blocks_equal(halo::LayerType::gat, {24, 16, 6}, o);
}

TEST(RowBlocks, LinearEqualsInMemory)
{
    expect_row_blocks_equal(halo::LayerType::linear, {16, 32, 8});
}

TEST(RowBlocks, AutomaticOnlyAboveTheLimit)
{
    const auto graph = engine_test_graph("rmat:9");
    const auto shard = single_shard(graph);
    const auto model = halo::random_model(halo::LayerType::gcn, {16, 32, 8}, 17);
    const auto memory = run(shard, model, halo::Execution::in_memory, 0);
    const auto fits = run(shard, model, halo::Execution::automatic, std::int64_t{1} << 40);
    EXPECT_FALSE(fits.out_of_core);
    const auto blocks = run(shard, model, halo::Execution::automatic, memory.memory.total() / 4);
    EXPECT_TRUE(blocks.out_of_core);
    EXPECT_EQ(differing(blocks.out, memory.out), 0);
}

TEST(RowBlocks, RefusesOtherLayerTypesByName)
{
    const auto graph = engine_test_graph("rmat:8");
    const auto shard = single_shard(graph);
    for (const auto type : {halo::LayerType::agnn, halo::LayerType::transformer}) {
        const auto model = halo::random_model(type, {16, 16, 8}, 3);
        try {
            run(shard, model, halo::Execution::row_blocks, std::int64_t{1} << 30);
            ADD_FAILURE() << halo::to_string(type) << " ran out of core";
        } catch (const halo::InputError& e) {
            EXPECT_NE(std::string(e.what()).find("(" + halo::to_string(type) +
                                                 ") cannot run out "
                                                 "of core"),
                      std::string::npos)
                << e.what();
        }
    }
}

TEST(RowBlocks, MemoryReportOfAnInMemoryRun)
{
    const auto graph = engine_test_graph("rmat:8");
    const auto shard = single_shard(graph);
    const auto model = halo::random_model(halo::LayerType::gcn, {16, 32, 8}, 3);
    const auto r = run(shard, model, halo::Execution::in_memory, 0).memory;
    const auto n = shard.num_owned;
    EXPECT_EQ(r.row_pointers, 8 * (n + 1));
    EXPECT_EQ(r.indices, 4 * r.nonzeros);
    EXPECT_EQ(r.values, 4 * r.nonzeros);
    EXPECT_EQ(r.feature_buffers, 2 * 4 * n * 32);  // gcn runs in place in two buffers
    EXPECT_EQ(r.weights, 4 * (16 * 32 + 32 + 32 * 8 + 8));
    EXPECT_GT(r.bytes_per_nonzero(), 8.0);
    const auto text = halo::format_memory_report(r);
    EXPECT_NE(text.find("row_pointers"), std::string::npos) << text;
    EXPECT_NE(halo::memory_report_json(r).find("\"bytes_per_nonzero\": "), std::string::npos);
}

using halo::testing::ScalingRecorder;

// A resident z comes up through Backend::upload_async, each piece matched by one wait_upload,
// also when a copy fails (the driver then takes the queued pieces before it rethrows, so that a
// later run's waits are its own), and the next run still equals the in-memory one.
TEST(RowBlocks, ResidentUploadsAreWaitedForEvenWhenOneFails)
{
    const auto graph = engine_test_graph("rmat:9");
    const auto shard = single_shard(graph);
    const auto model = halo::random_model(halo::LayerType::gcn, {16, 32, 8}, 17);
    const auto memory = run(shard, model, halo::Execution::in_memory, 0);
    ScalingRecorder backend;
    auto exchanger = halo::make_local_exchanger(shard);
    halo::EngineOptions o;
    o.execution = halo::Execution::row_blocks;
    o.device_memory_limit = std::int64_t{1} << 30;  // all of z resident
    halo::Engine engine(backend, *exchanger, shard, model, o);
    const auto x = halo::random_node_features(shard.global_ids, model.input_dim(), 5);
    backend.fail_upload_at = 1;
    EXPECT_THROW(engine.run(x), halo::Error);
    EXPECT_EQ(backend.uploads, 1);
    EXPECT_EQ(backend.waits, backend.uploads);
    backend.fail_upload_at = 0;
    const auto out = engine.run(x);
    EXPECT_EQ(differing(out, memory.out), 0);
    EXPECT_GT(backend.uploads, 1);
    EXPECT_EQ(backend.waits, backend.uploads);
}

// A fused layer sends the next layer's z rows instead of its output, so no host matrix holds its
// output: a 3-layer gcn (two fused layers) asks allocate_host for its input, the two fused z
// matrices and the last output only (page-locked memory on the CUDA backend: 17 GB less at
// R-MAT 26 for the 2-layer gcn 64-64-32); with every layer's output kept, for each output.
TEST(RowBlocks, FusedLayersHoldNoHostOutput)
{
    const auto graph = engine_test_graph("rmat:9");
    const auto shard = single_shard(graph);
    const auto n = shard.num_owned + shard.num_halo;
    const auto model = halo::random_model(halo::LayerType::gcn, {16, 32, 24, 8}, 19);
    const auto memory = run(shard, model, halo::Execution::in_memory, 0, false);
    for (const bool keep : {false, true}) {
        ScalingRecorder backend;
        auto exchanger = halo::make_local_exchanger(shard);
        halo::EngineOptions o;
        o.execution = halo::Execution::row_blocks;
        o.device_memory_limit = std::int64_t{1} << 30;  // all of z resident, transforms fused
        o.keep_layers = keep;
        halo::Engine engine(backend, *exchanger, shard, model, o);
        const auto out =
            engine.run(halo::random_node_features(shard.global_ids, model.input_dim(), 5));
        EXPECT_EQ(differing(out, memory.out), 0) << "keep " << keep;
        ASSERT_NE(engine.kernel_report().find("layer 2's transform fused"), std::string::npos)
            << engine.kernel_report();
        // Input 16 wide; z of layers 1 and 2 (24 and 8 wide, transform first); the output (8).
        // Kept: the outputs of layers 0 (32), 1 (24, the input's matrix grown) and 2 (8, in
        // layer 0's), no fused z.
        const std::int64_t floats = n * (keep ? 16 + 32 + 24 : 16 + 24 + 8 + 8);
        EXPECT_EQ(backend.host_allocated, floats) << "keep " << keep;
    }
}

// The scalings of the gcn and mean operators of an unweighted graph factor their values
// (a[i, j] = row[i] col[j] within a few ulps); sum has none (a pattern already); without
// EngineOptions::operator_stream = pattern nothing is scaled. The run still equals the in-memory
// one (the CPU default streams the values).
TEST(RowBlocks, OperatorScalingsFactorTheValues)
{
    const auto graph = engine_test_graph("rmat:9");
    const auto shard = single_shard(graph);
    ASSERT_FALSE(shard.csr.has_values());
    for (const auto type : {halo::LayerType::gcn, halo::LayerType::sage, halo::LayerType::gin}) {
        SCOPED_TRACE(halo::to_string(type));
        const auto model = halo::random_model(type, {16, 32, 8}, 17);
        const auto memory = run(shard, model, halo::Execution::in_memory, 0);
        for (const auto mode : {halo::OperatorStream::pattern, halo::OperatorStream::values,
                                halo::OperatorStream::automatic}) {
            // automatic takes the pattern here: one part (gcn's z scaled once per layer, which
            // the CPU backend declines: it reads x as given), or a row scaling alone (mean).
            const bool scaled = mode != halo::OperatorStream::values;
            ScalingRecorder backend;
            auto exchanger = halo::make_local_exchanger(shard);
            halo::EngineOptions o;
            o.execution = halo::Execution::row_blocks;
            o.device_memory_limit = std::int64_t{1} << 30;  // all of z resident
            o.operator_stream = mode;
            halo::Engine engine(backend, *exchanger, shard, model, o);
            const auto out =
                engine.run(halo::random_node_features(shard.global_ids, model.input_dim(), 5));
            EXPECT_EQ(differing(out, memory.out), 0);
            ASSERT_EQ(backend.recorded.size(), 1u);  // one operator, shared by both layers
            const auto& [a, scaling] = backend.recorded.front();
            // The engine asks for z scaled by the column scaling where gcn streams its pattern.
            EXPECT_EQ(backend.recorded_scaled_input.front(),
                      scaled && type == halo::LayerType::gcn);
            if (!scaled || type == halo::LayerType::gin) {
                EXPECT_FALSE(scaling.has_value());
                continue;
            }
            ASSERT_TRUE(scaling.has_value());
            ASSERT_EQ(static_cast<std::int64_t>(scaling->row.size()), a->num_rows);
            if (type == halo::LayerType::gcn) {
                ASSERT_EQ(static_cast<std::int64_t>(scaling->col.size()), a->num_cols);
            } else {
                EXPECT_TRUE(scaling->col.empty());  // mean: rows only
            }
            for (std::int64_t i = 0; i < a->num_rows; ++i) {
                for (auto k = a->indptr[i]; k < a->indptr[i + 1]; ++k) {
                    const float c = scaling->col.empty() ? 1.0f : scaling->col[a->indices[k]];
                    const float want = a->values[k];
                    ASSERT_NEAR(scaling->row[i] * c, want, 4e-7f * std::abs(want))
                        << "row " << i << " entry " << k;
                }
            }
        }
    }
}

// In memory, a backend that makes scaled plans (the CUDA backend's cuSPARSE plans) is handed each
// scaled operator's pattern without values (gcn: with the self-loops make_aggregation adds, in
// the same places; mean: the stored adjacency itself, not a copy) and scalings whose products are
// the values the host would build; gin's sum operator and EngineOptions::device_operator_values =
// false go through make_spmm_plan as before. The run agrees with the CPU backend's to rounding.
TEST(RowBlocks, InMemoryScaledPlansTakeThePatternAndItsScalings)
{
    const auto graph = engine_test_graph("rmat:9");
    const auto shard = single_shard(graph);
    ASSERT_FALSE(shard.csr.has_values());
    for (const auto type : {halo::LayerType::gcn, halo::LayerType::sage, halo::LayerType::gin}) {
        const auto model = halo::random_model(type, {16, 32, 8}, 19);
        const auto memory = run(shard, model, halo::Execution::in_memory, 0);
        for (const bool device_values : {true, false}) {
            SCOPED_TRACE(std::string(halo::to_string(type)) +
                         (device_values ? ", values from scalings" : ", host values"));
            ScalingRecorder backend;
            backend.make_scaled = true;
            auto exchanger = halo::make_local_exchanger(shard);
            halo::EngineOptions o;
            o.execution = halo::Execution::in_memory;
            o.device_operator_values = device_values;
            halo::Engine engine(backend, *exchanger, shard, model, o);
            const auto out =
                engine.run(halo::random_node_features(shard.global_ids, model.input_dim(), 5));
            if (!device_values || type == halo::LayerType::gin) {
                EXPECT_TRUE(backend.scaled.empty());
                EXPECT_EQ(differing(out, memory.out), 0);
                continue;
            }
            ASSERT_EQ(backend.scaled.size(), 1u);  // one operator, shared by both layers
            const auto& [pattern, scaling] = backend.scaled.front();
            const auto kind =
                type == halo::LayerType::gcn ? halo::Aggregation::gcn : halo::Aggregation::mean;
            const auto want = halo::make_aggregation(shard, kind, "none", halo::gcn_degrees(shard));
            EXPECT_FALSE(pattern->has_values());
            EXPECT_EQ(pattern->indptr, want.indptr);
            EXPECT_EQ(pattern->indices, want.indices);
            if (kind == halo::Aggregation::mean) {
                EXPECT_EQ(pattern, &shard.csr);
            }
            for (std::int64_t i = 0; i < want.num_rows; ++i) {
                for (auto k = want.indptr[i]; k < want.indptr[i + 1]; ++k) {
                    const float c = scaling.col.empty() ? 1.0f : scaling.col[want.indices[k]];
                    ASSERT_NEAR(scaling.row[i] * c, want.values[k], 4e-7f * want.values[k])
                        << "row " << i << " entry " << k;
                }
            }
            float scale = 1.0f;
            for (const auto v : memory.out) {
                scale = std::max(scale, std::abs(v));
            }
            for (std::size_t k = 0; k < out.size(); ++k) {
                ASSERT_NEAR(out[k], memory.out[k], 1e-5f * scale) << "element " << k;
            }
        }
    }
}

TEST(RowBlocks, ParsesByteSizes)
{
    EXPECT_EQ(halo::parse_byte_size("24GiB"), std::int64_t{24} << 30);
    EXPECT_EQ(halo::parse_byte_size("1.5 GB"), 1500000000);
    EXPECT_EQ(halo::parse_byte_size("4096"), 4096);
    EXPECT_EQ(halo::parse_byte_size("2m"), 2 << 20);
    EXPECT_THROW(halo::parse_byte_size("GiB"), halo::InputError);
    EXPECT_THROW(halo::parse_byte_size("12 parsecs"), halo::InputError);
    EXPECT_THROW(halo::parse_byte_size("-1"), halo::InputError);
}
