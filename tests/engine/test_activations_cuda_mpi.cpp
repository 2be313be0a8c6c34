// 16-bit activations on the CUDA backend across ranks (docs/KERNELS.md "16-bit activations"):
// every layer type with bf16 and fp16 on 2 and 3 ranks sharing the node's GPUs (the MPI exchange
// over device buffers), against the CPU backend on one rank with the same option. The CUDA
// kernels sum in another order than the CPU, so a stored rounding may land one 16-bit unit
// apart: nearly every output within a few units of the type, none far (test_activations_cuda
// has the one-rank checks, test_activations_mpi the CPU's P ranks against one rank bit for bit).
// Skips on every rank where one rank has no CUDA device.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "distributed_run.hpp"
#include "engine_test_util.hpp"
#include "halo/comm/nccl_exchanger.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/engine/engine.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo_test.hpp"

namespace {

using halo::FeatureType;
using halo::LayerType;
using halo::testing::with_group;
using halo::testing::world_size;

const halo::Csr& graph()
{
    static const auto g = halo::testing::engine_test_graph("rmat:10");
    return g;
}

// Every rank of the world sees a CUDA device.
bool every_rank_has_a_gpu()
{
    int mine = halo::testing::gpu_count() > 0 ? 1 : 0;
    int all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all == 1;
}

class CudaActivationsAcrossRanks
    : public ::testing::TestWithParam<std::tuple<LayerType, FeatureType>> {};

TEST_P(CudaActivationsAcrossRanks, MatchTheCpuBackendOnOneRank)
{
    if (!every_rank_has_a_gpu()) {
        GTEST_SKIP() << "needs a CUDA device on every rank";
    }
    const auto [type, act] = GetParam();
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node);
    halo::cuda::ContextOptions copt;
    MPI_Comm_rank(node, &copt.local_rank);
    MPI_Comm_size(node, &copt.local_size);
    MPI_Comm_free(&node);
    halo::cuda::Context ctx(copt);

    halo::RandomModelOptions ropt;
    ropt.k = 8;
    ropt.heads = 2;
    // 24 -> 40 aggregates first, 40 -> 24 and 24 -> 8 transform first.
    const auto model = halo::random_model(type, {24, 40, 24, 8}, 13, ropt);
    std::vector<float> want;
    if (world_rank == 0) {
        const auto one = halo::testing::test_shard(graph(), 1, 0);
        auto cpu = halo::make_cpu_backend();
        auto exchanger = halo::make_local_exchanger(one);
        halo::EngineOptions o;
        o.activations = act;
        halo::Engine engine(*cpu, *exchanger, one, model, o);
        const auto x = halo::random_node_features(one.global_ids, model.input_dim(), 23);
        want = halo::testing::gather_by_global_id(MPI_COMM_SELF, one, engine.run(x),
                                                  model.output_dim(), graph().num_rows);
    }
    const double unit = act == FeatureType::bf16 ? 0x1p-8 : 0x1p-11;
    int cells = 0;
    for (int parts = 2; parts <= world_size(); ++parts) {
        for (const bool overlap : {true, false}) {
            with_group(parts, [&](MPI_Comm group, bool lead) {
                int rank = 0;
                MPI_Comm_rank(group, &rank);
                const auto shard = halo::testing::test_shard(graph(), parts, rank);
                auto backend = halo::cuda::make_cuda_backend(ctx, "auto");
                auto exchanger =
                    halo::make_mpi_device_exchanger(ctx, group, shard, model.exchange_width());
                halo::EngineOptions o;
                o.activations = act;
                o.overlap = overlap;
                halo::Engine engine(*backend, *exchanger, shard, model, o);
                const auto x = halo::random_node_features(shard.global_ids, model.input_dim(), 23);
                const auto out = engine.run(x);
                const auto got = halo::testing::gather_by_global_id(
                    group, shard, std::vector<float>(out.begin(), out.end()), model.output_dim(),
                    graph().num_rows);
                if (!lead) {
                    return;
                }
                ++cells;
                ASSERT_EQ(got.size(), want.size());
                double scale = 1.0;
                for (const float v : want) {
                    scale = std::max(scale, double(std::abs(v)));
                }
                const double bound = 4.0 * unit * scale;
                std::size_t within = 0;
                double worst = 0.0;
                for (std::size_t q = 0; q < got.size(); ++q) {
                    ASSERT_TRUE(std::isfinite(got[q])) << q;
                    const double d = std::abs(double(got[q]) - want[q]);
                    worst = std::max(worst, d);
                    within += d <= bound ? 1 : 0;
                }
                std::printf(
                    "%s %s, %d ranks, overlap %d: %zu of %zu within %.3g of one CPU "
                    "rank, largest difference %.3g\n",
                    halo::to_string(type).c_str(), halo::to_string(act).c_str(), parts,
                    overlap ? 1 : 0, within, got.size(), bound, worst);
                EXPECT_GE(double(within), 0.99 * double(got.size())) << parts << " ranks";
                EXPECT_LE(worst, 64.0 * bound) << parts << " ranks";
            });
        }
    }
    if (world_rank == 0) {
        EXPECT_EQ(cells, (world_size() - 1) * 2);
    }
}

INSTANTIATE_TEST_SUITE_P(
    AllLayers, CudaActivationsAcrossRanks,
    ::testing::Combine(::testing::Values(LayerType::gcn, LayerType::sage, LayerType::gin,
                                         LayerType::linear, LayerType::maxk, LayerType::agnn,
                                         LayerType::transformer, LayerType::gat),
                       ::testing::Values(FeatureType::bf16, FeatureType::fp16)),
    [](const auto& info) {
        return halo::to_string(std::get<0>(info.param)) + "_" +
               halo::to_string(std::get<1>(info.param));
    });

}  // namespace
