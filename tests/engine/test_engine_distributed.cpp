// Distributed inference equals single-rank inference bit for bit (engine.hpp, "Reduction order").
// One 4-rank job: for P in {2, 3, 4} the first P ranks form a communicator, each takes its part of
// a METIS partition (every rank computes the same partition), runs the engine over the MPI
// exchanger, and rank 0 of the group gathers the rows by global id and compares them with the
// P = 1 result, which every rank computes by itself.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "distributed_run.hpp"
#include "engine_test_util.hpp"
#include "halo/comm/mpi_exchanger.hpp"
#include "halo/core/shard.hpp"
#include "halo/engine/engine.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition/shard_builder.hpp"

namespace {

using halo::testing::engine_test_graph;
using halo::testing::with_group;
using halo::testing::world_size;

// Output rows in global id order, computed by the ranks of `comm` with `parts` parts (rank 0 of
// comm returns them; others return empty).
// With `scaled_plans`, the backend is the CPU one making its SpMM plans from each operator's
// pattern and scalings where it can (ScalingRecorder, as the CUDA backend does), and the number of
// such plans the engine asked for is stored there.
std::vector<float> run_distributed(MPI_Comm comm, const halo::Csr& graph, int parts,
                                   const halo::Model& model, std::uint64_t seed,
                                   halo::EngineOptions options = {},
                                   halo::CpuBackendOptions backend_options = {},
                                   std::size_t* scaled_plans = nullptr)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    const auto shard = halo::testing::test_shard(graph, parts, rank);
    halo::testing::ScalingRecorder* recorder = nullptr;
    std::unique_ptr<halo::Backend> backend;
    if (scaled_plans != nullptr) {
        auto r = std::make_unique<halo::testing::ScalingRecorder>();
        r->make_scaled = true;
        recorder = r.get();
        backend = std::move(r);
    } else {
        backend = halo::make_cpu_backend(backend_options);
    }
    std::unique_ptr<halo::HaloExchanger> exchanger;
    if (parts == 1) {
        exchanger = halo::make_local_exchanger(shard);
    } else {
        halo::check_halo_plan(comm, shard, "test");
        exchanger = halo::make_mpi_exchanger(comm, shard, model.exchange_width());
    }
    halo::Engine engine(*backend, *exchanger, shard, model, options);
    if (recorder != nullptr) {
        *scaled_plans = recorder->scaled.size();
    }
    if (options.overlap_mode == halo::OverlapMode::split && shard.num_halo > 0) {
        // The split operators exist: the column blocks hold the operator's nonzeros once more;
        // a sampling (AES) plan is never split.
        auto plain_options = options;
        plain_options.overlap_mode = halo::OverlapMode::interior;
        auto plain_exchanger = halo::make_mpi_exchanger(comm, shard, model.exchange_width());
        const halo::Engine plain(*backend, *plain_exchanger, shard, model, plain_options);
        EXPECT_EQ(engine.memory_report().indices,
                  (backend_options.aes ? 1 : 2) * plain.memory_report().indices);
    }
    const auto x = halo::random_node_features(shard.global_ids, model.input_dim(), seed);
    return halo::testing::gather_by_global_id(comm, shard, engine.run(x), model.output_dim(),
                                              graph.num_rows);
}

void expect_bit_identical(const std::string& graph_name, halo::LayerType type,
                          const std::vector<std::int64_t>& dims)
{
    const auto graph = engine_test_graph(graph_name);
    if (graph.num_rows == 0) {
        GTEST_SKIP() << graph_name << " not found under " << halo::testing::shared_data_dir();
    }
    const auto model = halo::random_model(type, dims, 21);
    const auto single = run_distributed(MPI_COMM_SELF, graph, 1, model, 9);
    for (int parts = 2; parts <= world_size(); ++parts) {
        with_group(parts, [&](MPI_Comm group, bool lead) {
            const auto multi = run_distributed(group, graph, parts, model, 9);
            if (lead) {
                ASSERT_EQ(multi.size(), single.size());
                std::int64_t differ = 0;
                for (std::size_t k = 0; k < single.size(); ++k) {
                    differ += std::memcmp(&multi[k], &single[k], sizeof(float)) != 0 ? 1 : 0;
                }
                EXPECT_EQ(differ, 0)
                    << graph_name << " " << halo::to_string(type) << " P=" << parts << ": "
                    << differ << " of " << single.size() << " values differ from P=1";
            }
        });
    }
}

// OverlapMode::split (the CUDA backend's default) adds each boundary row's halo columns after
// its local ones: the same terms in another order, so P ranks agree with one within rounding,
// with and without step timing (the two paths of the exchange), and on every rank count.
void expect_split_close(const std::string& graph_name, halo::LayerType type,
                        const std::vector<std::int64_t>& dims, double split_share = 1.0)
{
    const auto graph = engine_test_graph(graph_name);
    if (graph.num_rows == 0) {
        GTEST_SKIP() << graph_name << " not found under " << halo::testing::shared_data_dir();
    }
    const auto model = halo::random_model(type, dims, 23);
    const auto single = run_distributed(MPI_COMM_SELF, graph, 1, model, 5);
    for (const bool step_timing : {false, true}) {
        for (int parts = 2; parts <= world_size(); ++parts) {
            with_group(parts, [&](MPI_Comm group, bool lead) {
                halo::EngineOptions options;
                options.overlap_mode = halo::OverlapMode::split;
                options.split_share = split_share;
                options.step_timing = step_timing;
                const auto multi = run_distributed(group, graph, parts, model, 5, options);
                if (lead) {
                    ASSERT_EQ(multi.size(), single.size());
                    double worst = 0.0;
                    double scale = 0.0;
                    for (std::size_t k = 0; k < single.size(); ++k) {
                        ASSERT_TRUE(std::isfinite(multi[k])) << "value " << k;
                        worst = std::max(worst, double(std::abs(multi[k] - single[k])));
                        scale = std::max(scale, double(std::abs(single[k])));
                    }
                    EXPECT_GT(scale, 0.0);
                    EXPECT_LE(worst, 1e-5 * std::max(scale, 1.0))
                        << graph_name << " " << halo::to_string(type) << " P=" << parts
                        << " step timing " << step_timing << " split share " << split_share;
                }
            });
        }
    }
}

}  // namespace

TEST(EngineDistributed, SplitOverlapGcnOnRmatMatchesOneRank)
{
    expect_split_close("rmat:12", halo::LayerType::gcn, {16, 32, 8});
}
TEST(EngineDistributed, SplitOverlapSageOnCoraMatchesOneRank)
{
    expect_split_close("cora", halo::LayerType::sage, {32, 16, 7});
}
TEST(EngineDistributed, SplitOverlapGinOnRmatMatchesOneRank)
{
    expect_split_close("rmat:12", halo::LayerType::gin, {16, 32, 8});
}

// A partial split (EngineOptions::split_share): the first boundary rows split, the others whole
// after the exchange; still within rounding of one rank.
TEST(EngineDistributed, PartialSplitOverlapMatchesOneRank)
{
    for (const double share : {0.25, 0.6}) {
        expect_split_close("rmat:12", halo::LayerType::gcn, {16, 32, 8}, share);
        expect_split_close("rmat:12", halo::LayerType::sage, {16, 32, 8}, share);
    }
}

// A split share of 0 splits only the interior rows (whose columns are all local) and runs every
// boundary row whole after the exchange: the interior mode's arithmetic, bit for bit (the full
// split, the default share of 1, rounds otherwise).
TEST(EngineDistributed, SplitShareZeroIsTheInteriorMode)
{
    const auto graph = engine_test_graph("rmat:12");
    const auto model = halo::random_model(halo::LayerType::gcn, {16, 32, 8}, 37);
    for (int parts = 2; parts <= world_size(); ++parts) {
        with_group(parts, [&](MPI_Comm group, bool lead) {
            halo::EngineOptions interior;
            interior.overlap_mode = halo::OverlapMode::interior;
            halo::EngineOptions none;
            none.overlap_mode = halo::OverlapMode::split;
            none.split_share = 0.0;
            halo::EngineOptions all;
            all.overlap_mode = halo::OverlapMode::split;
            const auto a = run_distributed(group, graph, parts, model, 7, interior);
            const auto b = run_distributed(group, graph, parts, model, 7, none);
            const auto c = run_distributed(group, graph, parts, model, 7, all);
            if (lead) {
                ASSERT_EQ(a.size(), b.size());
                EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
                    << "P=" << parts << ": split share 0 differs from the interior mode";
                EXPECT_NE(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)), 0)
                    << "P=" << parts << ": the full split rounds like the interior mode?";
            }
        });
    }
}

// The CUDA backend's default on the CPU: each operator's plans (the whole one and, with the split
// overlap, its local and halo column blocks) made from its pattern and scalings; P ranks agree
// with one rank of the plain CPU backend within rounding.
TEST(EngineDistributed, SplitOverlapWithScaledPlansMatchesOneRank)
{
    const auto graph = engine_test_graph("rmat:12");
    for (const auto type : {halo::LayerType::gcn, halo::LayerType::sage}) {
        const auto model = halo::random_model(type, {16, 32, 8}, 31);
        const auto single = run_distributed(MPI_COMM_SELF, graph, 1, model, 5);
        for (int parts = 2; parts <= world_size(); ++parts) {
            with_group(parts, [&](MPI_Comm group, bool lead) {
                halo::EngineOptions options;
                options.overlap_mode = halo::OverlapMode::split;
                std::size_t scaled = 0;
                const auto multi =
                    run_distributed(group, graph, parts, model, 5, options, {}, &scaled);
                EXPECT_EQ(scaled, 3u) << halo::to_string(type) << " P=" << parts;
                if (lead) {
                    ASSERT_EQ(multi.size(), single.size());
                    double worst = 0.0;
                    double scale = 0.0;
                    for (std::size_t k = 0; k < single.size(); ++k) {
                        worst = std::max(worst, double(std::abs(multi[k] - single[k])));
                        scale = std::max(scale, double(std::abs(single[k])));
                    }
                    EXPECT_GT(scale, 0.0);
                    EXPECT_LE(worst, 1e-5 * std::max(scale, 1.0))
                        << halo::to_string(type) << " P=" << parts;
                }
            });
        }
    }
}

// The halo columns' sums of a split operator are added to the output rows in place by plans that
// can (SpmmPlan::run_add, the CPU and CUDA defaults), through a buffer of their own and a second
// pass by others: the same bits either way, and no buffer where they add in place.
TEST(EngineDistributed, SplitOverlapAddsInPlaceAsThroughABuffer)
{
    const auto graph = engine_test_graph("rmat:12");
    for (const auto type : {halo::LayerType::gcn, halo::LayerType::sage}) {
        const auto model = halo::random_model(type, {16, 32, 8}, 41);
        with_group(world_size(), [&](MPI_Comm group, bool) {
            int rank = 0;
            MPI_Comm_rank(group, &rank);
            const auto shard = halo::testing::test_shard(graph, world_size(), rank);
            ASSERT_GT(shard.num_halo, 0);
            const auto x = halo::random_node_features(shard.global_ids, model.input_dim(), 43);
            halo::EngineOptions options;
            options.overlap_mode = halo::OverlapMode::split;
            std::vector<float> out[2];
            halo::MemoryReport memory[2];
            for (const bool in_place : {true, false}) {
                halo::testing::ScalingRecorder backend;
                backend.make_scaled = true;
                backend.add_in_place = in_place;
                auto exchanger = halo::make_mpi_exchanger(group, shard, model.exchange_width());
                halo::Engine engine(backend, *exchanger, shard, model, options);
                out[in_place ? 1 : 0] = engine.run(x);
                memory[in_place ? 1 : 0] = engine.memory_report();
            }
            ASSERT_EQ(out[0].size(), out[1].size());
            EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)), 0)
                << halo::to_string(type) << " rank " << rank
                << ": adding in place differs from adding a buffer";
            // One n_owned x max_dim buffer of halo sums (one operator) less.
            EXPECT_EQ(memory[0].feature_buffers - memory[1].feature_buffers,
                      4 * shard.num_owned * model.max_dim())
                << halo::to_string(type) << " rank " << rank;
        });
    }
}

// The MPI exchanger, counting its barriers.
class BarrierCounter final : public halo::HaloExchanger {
public:
    explicit BarrierCounter(std::unique_ptr<halo::HaloExchanger> inner) : inner_(std::move(inner))
    {
    }
    void start(halo::DenseView<float> x) override { inner_->start(x); }
    void finish() override { inner_->finish(); }
    const halo::ExchangeStats& stats() const override { return inner_->stats(); }
    void barrier() override
    {
        ++barriers;
        inner_->barrier();
    }
    int barriers = 0;

private:
    std::unique_ptr<halo::HaloExchanger> inner_;
};

// EngineOptions::exchange_barrier: one barrier before each exchange of a run, the same bits.
TEST(EngineDistributed, ExchangeBarrierWaitsBeforeEachExchangeAndChangesNoBits)
{
    const auto graph = engine_test_graph("rmat:12");
    for (const auto mode : {halo::OverlapMode::split, halo::OverlapMode::interior}) {
        const auto model = halo::random_model(halo::LayerType::sage, {16, 32, 8}, 47);
        with_group(world_size(), [&](MPI_Comm group, bool) {
            int rank = 0;
            MPI_Comm_rank(group, &rank);
            const auto shard = halo::testing::test_shard(graph, world_size(), rank);
            const auto x = halo::random_node_features(shard.global_ids, model.input_dim(), 49);
            auto backend = halo::make_cpu_backend();
            std::vector<float> out[2];
            int barriers[2] = {0, 0};
            std::int64_t exchanges[2] = {0, 0};
            for (const bool barrier : {false, true}) {
                halo::EngineOptions options;
                options.step_timing = false;
                options.overlap_mode = mode;
                options.exchange_barrier = barrier;
                BarrierCounter exchanger(
                    halo::make_mpi_exchanger(group, shard, model.exchange_width()));
                halo::Engine engine(*backend, exchanger, shard, model, options);
                const auto before = exchanger.stats().exchanges;
                out[barrier ? 1 : 0] = engine.run(x);
                barriers[barrier ? 1 : 0] = exchanger.barriers;
                exchanges[barrier ? 1 : 0] = exchanger.stats().exchanges - before;
            }
            ASSERT_EQ(out[0].size(), out[1].size());
            EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)), 0)
                << "rank " << rank << ": the barrier changed the result";
            EXPECT_EQ(barriers[0], 0);
            EXPECT_EQ(exchanges[1], static_cast<std::int64_t>(model.layers.size()));
            EXPECT_EQ(barriers[1], exchanges[1]) << "one barrier per exchange of the run";
        });
    }
}

// AES samples up to W nonzeros of each whole row: split into blocks it would sample up to W of
// each, another approximation. Its plans stay whole, so split and interior give the same bits.
TEST(EngineDistributed, SplitOverlapLeavesAesWhole)
{
    const auto graph = engine_test_graph("rmat:12");
    const auto model = halo::random_model(halo::LayerType::gcn, {16, 32, 8}, 29);
    with_group(2, [&](MPI_Comm group, bool lead) {
        halo::CpuBackendOptions aes;
        aes.aes = halo::AesOptions{16, halo::AesScaling::sample_sum};
        halo::EngineOptions split;
        split.overlap_mode = halo::OverlapMode::split;
        halo::EngineOptions interior;
        interior.overlap_mode = halo::OverlapMode::interior;
        const auto a = run_distributed(group, graph, 2, model, 3, split, aes);
        const auto b = run_distributed(group, graph, 2, model, 3, interior, aes);
        if (lead) {
            ASSERT_EQ(a.size(), b.size());
            EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
        }
    });
}

TEST(EngineDistributed, GcnOnCoraEqualsOneRank)
{
    expect_bit_identical("cora", halo::LayerType::gcn, {32, 16, 7});
}
TEST(EngineDistributed, SageOnCoraEqualsOneRank)
{
    expect_bit_identical("cora", halo::LayerType::sage, {32, 16, 7});
}
TEST(EngineDistributed, GinOnCoraEqualsOneRank)
{
    expect_bit_identical("cora", halo::LayerType::gin, {32, 16, 7});
}
TEST(EngineDistributed, GcnOnCiteseerEqualsOneRank)
{
    expect_bit_identical("citeseer", halo::LayerType::gcn, {24, 48, 6});
}
TEST(EngineDistributed, SageOnCiteseerEqualsOneRank)
{
    expect_bit_identical("citeseer", halo::LayerType::sage, {24, 48, 6});
}
TEST(EngineDistributed, GinOnCiteseerEqualsOneRank)
{
    expect_bit_identical("citeseer", halo::LayerType::gin, {24, 48, 6});
}
TEST(EngineDistributed, GcnOnRmatEqualsOneRank)
{
    expect_bit_identical("rmat:12", halo::LayerType::gcn, {16, 32, 8});
}
TEST(EngineDistributed, SageOnRmatEqualsOneRank)
{
    expect_bit_identical("rmat:12", halo::LayerType::sage, {16, 32, 8});
}
TEST(EngineDistributed, GinOnRmatEqualsOneRank)
{
    expect_bit_identical("rmat:12", halo::LayerType::gin, {16, 32, 8});
}

// The layer types of the MaxK and attention issues: CBSR records (maxk), z rows (agnn, gat) and
// K|V rows (transformer) cross the exchange; every rank count must give the one-rank bits.
TEST(EngineDistributed, MaxkOnRmatEqualsOneRank)
{
    expect_bit_identical("rmat:12", halo::LayerType::maxk, {16, 32, 8});
}
TEST(EngineDistributed, AgnnOnCoraEqualsOneRank)
{
    expect_bit_identical("cora", halo::LayerType::agnn, {32, 16, 7});
}
TEST(EngineDistributed, TransformerOnRmatEqualsOneRank)
{
    expect_bit_identical("rmat:12", halo::LayerType::transformer, {16, 32, 8});
}
TEST(EngineDistributed, GatOnCiteseerEqualsOneRank)
{
    expect_bit_identical("citeseer", halo::LayerType::gat, {24, 16, 6});
}
