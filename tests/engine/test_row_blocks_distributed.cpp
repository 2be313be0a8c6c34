// Out-of-core execution across ranks: P = 1, 2, 3 ranks over the MPI exchanger, every
// rank running its part over row blocks under the smallest memory limit that runs it (and under
// one that keeps z resident), the exchange overlapping the interior blocks, equal bit for bit to
// the in-memory single-rank run, for every layer type the row-block driver runs.
#include <mpi.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "engine_test_util.hpp"
#include "halo/comm/mpi_exchanger.hpp"
#include "halo/core/error.hpp"
#include "halo/core/shard.hpp"
#include "halo/engine/engine.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition/shard_builder.hpp"

namespace {

using halo::testing::engine_test_graph;

// The smallest limit of this part: the number the error of a 1-byte limit names.
std::int64_t smallest_limit(halo::Backend& backend, halo::HaloExchanger& exchanger,
                            const halo::Shard& shard, const halo::Model& model)
{
    halo::EngineOptions o;
    o.execution = halo::Execution::row_blocks;
    o.device_memory_limit = 1;
    try {
        halo::Engine engine(backend, exchanger, shard, model, o);
    } catch (const halo::InputError& e) {
        const std::string what = e.what();
        const auto key = std::string("--device-memory-limit ");
        const auto pos = what.find(key);
        if (pos != std::string::npos) {
            return std::stoll(what.substr(pos + key.size()));
        }
    }
    return 0;
}

// Output rows in global id order from the ranks of `comm` (rank 0 returns them). Row blocks run
// at the part's smallest limit (z's referenced rows gathered per block) or, `roomy`, with room
// for all of z resident beside a few blocks.
std::vector<float> run_distributed(MPI_Comm comm, const halo::Csr& graph, int parts,
                                   const halo::Model& model, halo::Execution execution,
                                   bool roomy = false)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    const auto shard = halo::testing::test_shard(graph, parts, rank);
    auto backend = halo::make_cpu_backend();
    std::unique_ptr<halo::HaloExchanger> exchanger;
    if (parts == 1) {
        exchanger = halo::make_local_exchanger(shard);
    } else {
        halo::check_halo_plan(comm, shard, "test");
        exchanger = halo::make_mpi_exchanger(comm, shard, model.exchange_width());
    }
    halo::EngineOptions o;
    o.execution = execution;
    if (execution == halo::Execution::row_blocks) {
        // Every rank builds the engine the same number of times (the gcn degrees are exchanged
        // in the constructor, collectively).
        o.device_memory_limit = smallest_limit(*backend, *exchanger, shard, model);
        EXPECT_GT(o.device_memory_limit, 0);
        if (roomy) {
            o.device_memory_limit = 2 * (shard.num_owned + shard.num_halo) * model.max_dim() * 4 +
                                    2 * o.device_memory_limit;
        }
    }
    halo::Engine engine(*backend, *exchanger, shard, model, o);
    EXPECT_EQ(engine.out_of_core(), execution == halo::Execution::row_blocks);
    const auto x = halo::random_node_features(shard.global_ids, model.input_dim(), 9);
    const auto out = engine.run(x);
    const auto m = static_cast<int>(model.output_dim());
    const int rows = static_cast<int>(shard.num_owned);
    std::vector<int> counts(parts);
    MPI_Gather(&rows, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm);
    std::vector<int> displs(parts, 0);
    std::partial_sum(counts.begin(), counts.end() - 1, displs.begin() + 1);
    std::vector<halo::global_id> ids(graph.num_rows);
    MPI_Gatherv(shard.global_ids.data(), rows, MPI_INT64_T, ids.data(), counts.data(),
                displs.data(), MPI_INT64_T, 0, comm);
    std::vector<int> value_counts(parts);
    std::vector<int> value_displs(parts);
    for (int p = 0; p < parts; ++p) {
        value_counts[p] = counts[p] * m;
        value_displs[p] = displs[p] * m;
    }
    std::vector<float> rows_out(graph.num_rows * m);
    MPI_Gatherv(out.data(), rows * m, MPI_FLOAT, rows_out.data(), value_counts.data(),
                value_displs.data(), MPI_FLOAT, 0, comm);
    if (rank != 0) {
        return {};
    }
    std::vector<float> ordered(rows_out.size());
    for (std::int64_t r = 0; r < graph.num_rows; ++r) {
        std::memcpy(&ordered[ids[r] * m], &rows_out[r * m], m * sizeof(float));
    }
    return ordered;
}

void expect_blocks_equal_one_rank(halo::LayerType type, const std::vector<std::int64_t>& dims,
                                  halo::RandomModelOptions options = {})
{
    const auto graph = engine_test_graph("rmat:9");
    const auto model = halo::random_model(type, dims, 21, options);
    const auto reference =
        run_distributed(MPI_COMM_SELF, graph, 1, model, halo::Execution::in_memory);
    int world_rank = 0;
    int world_size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    for (int parts = 1; parts <= world_size; ++parts) {
        MPI_Comm group = MPI_COMM_NULL;
        MPI_Comm_split(MPI_COMM_WORLD, world_rank < parts ? 0 : MPI_UNDEFINED, world_rank, &group);
        if (group != MPI_COMM_NULL) {
            for (const bool roomy : {false, true}) {
                const auto blocks =
                    run_distributed(group, graph, parts, model, halo::Execution::row_blocks, roomy);
                if (world_rank == 0) {
                    ASSERT_EQ(blocks.size(), reference.size());
                    std::int64_t differ = 0;
                    for (std::size_t k = 0; k < reference.size(); ++k) {
                        differ +=
                            std::memcmp(&blocks[k], &reference[k], sizeof(float)) != 0 ? 1 : 0;
                    }
                    EXPECT_EQ(differ, 0)
                        << halo::to_string(type) << " P=" << parts << (roomy ? " roomy" : "")
                        << ": " << differ << " of " << reference.size()
                        << " values differ from the in-memory P=1 run";
                }
            }
            MPI_Comm_free(&group);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

}  // namespace

TEST(RowBlocksDistributed, Gcn)
{
    expect_blocks_equal_one_rank(halo::LayerType::gcn, {16, 32, 8});
}

TEST(RowBlocksDistributed, Sage)
{
    expect_blocks_equal_one_rank(halo::LayerType::sage, {16, 32, 8});
}

TEST(RowBlocksDistributed, Gin)
{
    expect_blocks_equal_one_rank(halo::LayerType::gin, {40, 8, 4});
}

TEST(RowBlocksDistributed, Maxk)
{
    halo::RandomModelOptions o;
    o.k = 4;
    expect_blocks_equal_one_rank(halo::LayerType::maxk, {16, 32, 8}, o);
}

TEST(RowBlocksDistributed, Gat)
{
    halo::RandomModelOptions o;
    o.heads = 2;
    expect_blocks_equal_one_rank(halo::LayerType::gat, {24, 16, 6}, o);
}

TEST(RowBlocksDistributed, Linear)
{
    expect_blocks_equal_one_rank(halo::LayerType::linear, {16, 32, 8});
}

namespace {

// The MPI exchanger, saying that it keeps `bytes` of staging beside the pool (as NCCL with
// registered buffers does for matrices it did not allocate).
class StagingExchanger final : public halo::HaloExchanger {
public:
    StagingExchanger(halo::HaloExchanger& inner, std::int64_t bytes) : inner_(inner), bytes_(bytes)
    {
    }
    void start(halo::DenseView<float> x) override { inner_.start(x); }
    void finish() override { inner_.finish(); }
    const halo::ExchangeStats& stats() const override { return inner_.stats(); }
    void barrier() override { inner_.barrier(); }
    std::int64_t staging_bytes() const override { return bytes_; }

private:
    halo::HaloExchanger& inner_;
    std::int64_t bytes_;
};

}  // namespace

TEST(RowBlocksDistributed, TheExchangersStagingComesOffTheLimit)
{
    int world_rank = 0;
    int world_size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (world_size < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    MPI_Comm group = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank < 2 ? 0 : MPI_UNDEFINED, world_rank, &group);
    if (group != MPI_COMM_NULL) {
        const auto graph = engine_test_graph("rmat:9");
        const auto model = halo::random_model(halo::LayerType::gcn, {16, 32, 8}, 21);
        const auto shard = halo::testing::test_shard(graph, 2, world_rank);
        auto backend = halo::make_cpu_backend();
        auto mpi = halo::make_mpi_exchanger(group, shard, model.exchange_width());
        constexpr std::int64_t staging = 123457;
        StagingExchanger staged(*mpi, staging);
        const auto plain = smallest_limit(*backend, *mpi, shard, model);
        const auto with = smallest_limit(*backend, staged, shard, model);
        EXPECT_GT(plain, 0);
        EXPECT_EQ(with, plain + staging);
        // The message names the staging buffer and how to free it.
        halo::EngineOptions o;
        o.execution = halo::Execution::row_blocks;
        o.device_memory_limit = with - 1;
        try {
            halo::Engine engine(*backend, staged, shard, model, o);
            ADD_FAILURE() << "a limit one byte short was taken";
        } catch (const halo::InputError& e) {
            EXPECT_NE(std::string(e.what()).find("staging buffer"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("--nccl-register off"), std::string::npos);
        }
        // At that limit both run, to the same bits.
        const auto x = halo::random_node_features(shard.global_ids, model.input_dim(), 9);
        o.device_memory_limit = plain;
        halo::Engine a(*backend, *mpi, shard, model, o);
        const auto out_a = a.run(x);
        const std::vector<float> first(out_a.begin(), out_a.end());
        o.device_memory_limit = with;
        halo::Engine b(*backend, staged, shard, model, o);
        const auto out_b = b.run(x);
        ASSERT_EQ(first.size(), out_b.size());
        EXPECT_EQ(std::memcmp(first.data(), out_b.data(), first.size() * sizeof(float)), 0);
        MPI_Comm_free(&group);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}
