// halo::InferenceJob on one rank, CPU backend: what it measured per run and per layer
// (JobSummary::runs, which halo-bench --e2e takes its medians from) agrees with the forward time
// it reports, and the phases split the layers' time under --step-timing.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "halo/comm/mpi_world.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/job/infer_options.hpp"
#include "halo/job/inference_job.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo/store/store.hpp"
#include "halo_test.hpp"

namespace {

// A one-part dataset of an R-MAT graph, not normalized (the engine derives each layer's operator),
// as halo-partition --parts 1 writes it.
std::filesystem::path write_dataset(const std::filesystem::path& dir)
{
    const halo::BuildOptions build;
    const auto a = halo::build_csr(halo::generate(halo::parse_graph_spec("rmat:9:8:3")), build);
    const std::vector<std::int32_t> owner(a.num_rows, 0);
    halo::DatasetInfo info;
    info.num_nodes = a.num_rows;
    info.num_nonzeros = a.nnz();
    info.num_parts = 1;
    info.partitioner = "block";
    info.normalization = "none";
    info.self_loops = "keep";
    const auto path = dir / "g.h5";
    halo::DatasetWriter writer(path, info, owner);
    writer.write_part(halo::build_shard(a, owner, 1, 0));
    writer.commit();
    return path;
}

halo::JobSummary run_job(halo::MpiWorld& world, halo::InferOptions o)
{
    halo::validate(o);
    halo::InferenceJob job(world, o, "test_inference_job", std::chrono::steady_clock::now(), 0.0,
                           {});
    job.start();
    return job.run();
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

TEST(InferenceJob, RunsHoldEachRunsPerLayerTimes)
{
    halo::MpiWorld world(nullptr, nullptr, MPI_THREAD_MULTIPLE);
    ASSERT_EQ(world.size(), 1);
    const auto dir = halo::testing::scratch_dir("inference-job");
    halo::InferOptions o;
    o.dataset = write_dataset(dir).string();
    o.random_model = "16,32,8";
    o.layer = "sage";
    o.random_features = true;
    o.backend = "cpu";
    o.repeat = 3;
    o.quiet = true;
    o.out = (dir / "out").string();
    const auto summary = run_job(world, o);
    ASSERT_EQ(summary.runs.size(), 3u);
    std::vector<double> forward;
    for (const auto& run : summary.runs) {
        EXPECT_FALSE(run.replayed);  // no CUDA graph on the CPU backend
        ASSERT_EQ(run.layers.size(), 2u);
        // On one rank the slowest rank's forward time is this rank's: the sum of its layers.
        double sum = 0.0;
        for (const auto& layer : run.layers) {
            EXPECT_GT(layer.total, 0.0);
            sum += layer.total;
        }
        EXPECT_NEAR(run.forward_seconds, sum, 1e-9 * std::max(1.0, sum));
        forward.push_back(run.forward_seconds);
    }
    EXPECT_DOUBLE_EQ(summary.forward_seconds, median(forward));

    // --step-timing: SpMM and dense are measured, within each layer's wall time.
    o.step_timing = true;
    o.out = (dir / "out-steps").string();
    o.repeat = 2;
    const auto steps = run_job(world, o);
    ASSERT_EQ(steps.runs.size(), 2u);
    for (const auto& run : steps.runs) {
        ASSERT_EQ(run.layers.size(), 2u);
        for (const auto& layer : run.layers) {
            EXPECT_GT(layer.spmm, 0.0);
            EXPECT_GT(layer.dense, 0.0);
            EXPECT_LE(layer.spmm + layer.dense, layer.total * (1.0 + 1e-9));
        }
    }
}

// --activations: validated (a type activations are not stored in, paths without 16-bit rows are
// usage errors naming both options), and a bf16 job says so in its summary and manifest.
TEST(InferenceJob, ActivationsAreValidatedAndRecorded)
{
    halo::InferOptions bad;
    bad.dataset = "g.h5";
    bad.out = "out";
    bad.random_model = "16,8";
    auto expect_usage = [](const halo::InferOptions& o, const std::string& part) {
        try {
            halo::validate(o);
            ADD_FAILURE() << "no error for " << part;
        } catch (const halo::UsageError& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    for (const char* type : {"int8", "fp64", "BF16", ""}) {
        bad.activations = type;
        expect_usage(bad, std::string("--activations ") + type + ": not a type");
    }
    bad.activations = "fp16";
    bad.int8_features = true;
    expect_usage(bad, "--activations fp16 with --int8-features");
    bad.int8_features = false;
    bad.exchange = "mpi-int8";
    expect_usage(bad, "--activations fp16 with an int8 exchange");
    bad.exchange.clear();
    bad.out_of_core = true;
    expect_usage(bad, "--activations fp16 with --out-of-core");

    halo::MpiWorld world(nullptr, nullptr, MPI_THREAD_MULTIPLE);
    const auto dir = halo::testing::scratch_dir("inference-job-activations");
    halo::InferOptions o;
    o.dataset = write_dataset(dir).string();
    o.random_model = "16,32,8";
    o.random_features = true;
    o.quiet = true;
    o.activations = "bf16";
    o.out = (dir / "out").string();
    const auto summary = run_job(world, o);
    EXPECT_EQ(summary.activations, "bf16");
    std::ifstream manifest(std::filesystem::path(o.out) / "manifest.json");
    std::stringstream text;
    text << manifest.rdbuf();
    EXPECT_NE(text.str().find("\"activations\": \"bf16\""), std::string::npos) << text.str();
}

}  // namespace
