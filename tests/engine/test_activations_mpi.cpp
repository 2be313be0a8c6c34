// 16-bit activations across ranks on the CPU backend (docs/KERNELS.md "16-bit activations"):
// every layer type with bf16 and fp16 activations on 1, 2 and 3 ranks (METIS parts, the MPI
// exchange), the interior overlap and none, and the CPU backend's plans made from each operator's
// pattern and scalings as the CUDA backend makes them: P ranks equal one rank bit for bit, as
// in fp32 (engine.hpp, "Reduction order"): every stored element is rounded on the rank that owns
// it, and the halo rows arrive already rounded. The one-rank result itself is checked against a
// reference of the same roundings in test_activations.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "distributed_run.hpp"
#include "engine_test_util.hpp"
#include "halo/comm/mpi_exchanger.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/engine/engine.hpp"

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

// The output rows in global id order at the lead rank of `comm` (others: empty).
// `mode`: the overlap's (interior rows, or split columns: the 16-bit halo block through a buffer
// of its own); `exchanged`, where given, gets this rank's exchanged bytes (sent + received);
// `store_16bit`: EngineOptions' (false: rounded in fp32 memory).
std::vector<float> run(MPI_Comm comm, const halo::Shard& shard, int parts,
                       const halo::Model& model, FeatureType act, bool overlap, bool scaled,
                       halo::OverlapMode mode = halo::OverlapMode::interior,
                       std::int64_t* exchanged = nullptr, bool store_16bit = true)
{
    // Scaled plans: the CPU backend's plans over the values the CUDA backend makes (r_i c_j).
    std::unique_ptr<halo::Backend> backend;
    if (scaled) {
        auto r = std::make_unique<halo::testing::ScalingRecorder>();
        r->make_scaled = true;
        backend = std::move(r);
    } else {
        backend = halo::make_cpu_backend();
    }
    std::unique_ptr<halo::HaloExchanger> exchanger;
    if (parts == 1) {
        exchanger = halo::make_local_exchanger(shard);
    } else {
        exchanger = halo::make_mpi_exchanger(comm, shard, model.exchange_width());
    }
    halo::EngineOptions o;
    o.activations = act;
    o.overlap = overlap;
    o.overlap_mode = mode;
    o.store_16bit = store_16bit;
    halo::Engine engine(*backend, *exchanger, shard, model, o);
    const auto x = halo::random_node_features(shard.global_ids, model.input_dim(), 23);
    const auto out = engine.run(x);
    if (exchanged != nullptr) {
        *exchanged = 0;
        for (const auto& t : engine.timings()) {
            *exchanged += t.exchanged_bytes;
        }
    }
    return halo::testing::gather_by_global_id(comm, shard, out, model.output_dim(),
                                              graph().num_rows);
}

class ActivationsAcrossRanks
    : public ::testing::TestWithParam<std::tuple<LayerType, FeatureType>> {};

TEST_P(ActivationsAcrossRanks, EqualOneRankBitForBit)
{
    const auto [type, act] = GetParam();
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    halo::RandomModelOptions ropt;
    ropt.k = 8;
    ropt.heads = 2;
    const bool spmm = type == LayerType::gcn || type == LayerType::sage || type == LayerType::gin;
    std::int64_t cells = 0;
    // 24 -> 40 aggregates first, 40 -> 24 and 24 -> 8 transform first.
    const auto model = halo::random_model(type, {24, 40, 24, 8}, 13, ropt);
    std::vector<float> single[2];
    std::vector<float> fp32;
    if (world_rank == 0) {
        const auto one = halo::testing::test_shard(graph(), 1, 0);
        for (const bool scaled : {false, true}) {
            single[scaled] = run(MPI_COMM_SELF, one, 1, model, act, true, scaled && spmm);
        }
        fp32 = run(MPI_COMM_SELF, one, 1, model, FeatureType::fp32, true, false);
        // The 16-bit run is not the fp32 one.
        ASSERT_EQ(fp32.size(), single[0].size());
        EXPECT_NE(std::memcmp(fp32.data(), single[0].data(), fp32.size() * sizeof(float)), 0);
    }
    for (int parts = 2; parts <= world_size(); ++parts) {
        halo::Shard shard;
        with_group(parts, [&](MPI_Comm group, bool) {
            int rank = 0;
            MPI_Comm_rank(group, &rank);
            shard = halo::testing::test_shard(graph(), parts, rank);
        });
        // Overlap by interior rows, by split columns (SpMM types), or none.
        for (const int overlap : {1, 2, 0}) {
            if (overlap == 2 && !spmm) {
                continue;
            }
            const auto mode =
                overlap == 2 ? halo::OverlapMode::split : halo::OverlapMode::interior;
            for (const bool scaled : {false, true}) {
                if (scaled && !spmm) {
                    continue;
                }
                with_group(parts, [&](MPI_Comm group, bool lead) {
                    const auto multi =
                        run(group, shard, parts, model, act, overlap != 0, scaled, mode);
                    // Split columns sum a boundary row's local and halo columns apart, so they
                    // are not one rank's sums: there the same ranks rounded in fp32 memory.
                    const auto want =
                        overlap == 2 ? run(group, shard, parts, model, act, true, scaled, mode,
                                           nullptr, false)
                                     : single[scaled];
                    if (!lead) {
                        return;
                    }
                    ++cells;
                    ASSERT_EQ(multi.size(), want.size());
                    std::int64_t differ = 0;
                    for (std::size_t q = 0; q < multi.size(); ++q) {
                        differ += std::memcmp(&multi[q], &want[q], sizeof(float)) != 0;
                    }
                    EXPECT_EQ(differ, 0) << parts << " ranks, overlap " << overlap
                                         << (scaled ? ", scaled plans" : "") << ": " << differ
                                         << " of " << multi.size() << " values differ";
                });
            }
        }
    }
    if (world_rank == 0) {
        EXPECT_EQ(cells, (world_size() - 1) * (spmm ? 3 * 2 : 2));
    }
}

// Stored in 16 bits, the exchange moves the words of the 16-bit rows: a gcn model of even
// widths exchanges exactly half the bytes of its fp32 run (odd widths: a pad element per row).
TEST(ActivationsAcrossRanks, ExchangeHalfTheBytes)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    const auto model = halo::random_model(LayerType::gcn, {24, 40, 24, 8}, 13);
    halo::Shard shard;
    with_group(2, [&](MPI_Comm group, bool) {
        int rank = 0;
        MPI_Comm_rank(group, &rank);
        shard = halo::testing::test_shard(graph(), 2, rank);
    });
    with_group(2, [&](MPI_Comm group, bool) {
        std::int64_t fp32 = 0;
        std::int64_t bf16 = 0;
        run(group, shard, 2, model, FeatureType::fp32, true, false, halo::OverlapMode::interior,
            &fp32);
        run(group, shard, 2, model, FeatureType::bf16, true, false, halo::OverlapMode::interior,
            &bf16);
        EXPECT_GT(fp32, 0);
        EXPECT_EQ(2 * bf16, fp32) << "bytes exchanged stored in 16 bits, against fp32";
    });
}

INSTANTIATE_TEST_SUITE_P(
    AllLayers, ActivationsAcrossRanks,
    ::testing::Combine(::testing::Values(LayerType::gcn, LayerType::sage, LayerType::gin,
                                         LayerType::linear, LayerType::maxk, LayerType::agnn,
                                         LayerType::transformer, LayerType::gat),
                       ::testing::Values(FeatureType::bf16, FeatureType::fp16)),
    [](const auto& info) {
        return halo::to_string(std::get<0>(info.param)) + "_" +
               halo::to_string(std::get<1>(info.param));
    });

}  // namespace
