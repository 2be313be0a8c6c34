// The MPI halo exchanger and check_halo_plan, run under mpiexec with 2, 3 and 4 ranks.
//
// Every rank builds the same global graph, partitions it the same way and builds all shards, so
// that each rank knows every part's plan and can predict the outcome of a collective exactly; it
// then takes its own shard. Owned rows hold value(global id, column), halo rows start as NaN, and
// after an exchange every halo row must hold the value of its global id. Collectives are called
// unconditionally (EXPECT, not ASSERT, between them) so a failing rank never leaves others waiting.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exchange_test_graphs.hpp"
#include "halo/comm/mpi_exchanger.hpp"
#include "halo/comm/mpi_world.hpp"
#include "halo/core/error.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/shard.hpp"
#include "halo/partition/partition.hpp"
#include "halo_test.hpp"

namespace {

using halo::Partitioner;
using halo::Shard;
using halo::testing::random_graph;
using halo::testing::shards_for;

constexpr std::int64_t kMaxDim = 64;
constexpr float kPadding = -7.5f;  // marks the columns between cols and ld, never exchanged


struct Graph {
    std::string name;
    halo::Csr csr;
};

std::vector<Graph> graphs()
{
    std::vector<Graph> result;
    result.push_back({"random", random_graph(500, 1500, 42)});
    result.push_back({"grid", halo::testing::grid_graph(20)});
    return result;
}

// Exact in float for every id, column and round used here (all below 2^24), and distinct.
float value(halo::global_id id, std::int64_t col, int round)
{
    return static_cast<float>(round * 100000 + id * kMaxDim + col + 1);
}

// A feature matrix for `shard` of `cols` columns and leading dimension `ld`.
struct Features {
    std::vector<float> storage;
    halo::DenseView<float> view;
};

Features make_features(const Shard& shard, std::int64_t cols, std::int64_t ld, int round)
{
    Features f;
    const auto rows = shard.num_owned + shard.num_halo;
    f.storage.assign(static_cast<std::size_t>(std::max<std::int64_t>(rows * ld, 1)), kPadding);
    f.view = {f.storage.data(), rows, cols, ld};
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t c = 0; c < cols; ++c) {
            f.view(i, c) = i < shard.num_owned ? value(shard.global_ids[i], c, round)
                                               : std::numeric_limits<float>::quiet_NaN();
        }
    }
    return f;
}

// Every owned row unchanged, every halo row equal to the value of its global id, padding intact.
::testing::AssertionResult holds_exchanged_values(const Shard& shard, const Features& f, int round)
{
    const auto& x = f.view;
    for (std::int64_t i = 0; i < x.rows; ++i) {
        const bool owned = i < shard.num_owned;
        const auto id = owned ? shard.global_ids[i] : shard.halo_global_ids[i - shard.num_owned];
        for (std::int64_t c = 0; c < x.ld; ++c) {
            const float expected = c < x.cols ? value(id, c, round) : kPadding;
            if (!(x(i, c) == expected)) {  // NaN never compares equal
                return ::testing::AssertionFailure()
                       << "part " << shard.part << (owned ? " owned" : " halo") << " row " << i
                       << " (global id " << id << ") column " << c << " of " << x.cols << " (ld "
                       << x.ld << ") holds " << x(i, c) << ", expected " << expected;
            }
        }
    }
    return ::testing::AssertionSuccess();
}

std::int64_t sum_over_ranks(MPI_Comm comm, std::int64_t value)
{
    std::int64_t total = 0;
    MPI_Allreduce(&value, &total, 1, MPI_INT64_T, MPI_SUM, comm);
    return total;
}

// Messages `shard` sends for one exchange of width `cols` when blocks split at `max_bytes`.
std::int64_t expected_messages(const Shard& shard, std::int64_t cols, std::int64_t max_bytes)
{
    const auto per_message = max_bytes / static_cast<std::int64_t>(sizeof(float));
    std::int64_t messages = 0;
    const auto& offsets = shard.plan.send_offsets;
    for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
        messages += ((offsets[b + 1] - offsets[b]) * cols + per_message - 1) / per_message;
    }
    return messages;
}

// check_halo_plan's InputError message on this rank; empty when it passes.
std::string plan_error(MPI_Comm comm, const Shard& shard, const std::string& where)
{
    try {
        halo::check_halo_plan(comm, shard, where);
    } catch (const halo::InputError& e) {
        return e.message();
    }
    return {};
}

}  // namespace

TEST(MpiExchanger, FillsEveryHaloRowForEveryGraphAndPartitioner)
{
    halo::MpiWorld world(nullptr, nullptr);
    const int p = world.size();
    for (const auto& g : graphs()) {
        for (auto method : {Partitioner::block, Partitioner::random, Partitioner::metis}) {
            SCOPED_TRACE(g.name + " " + halo::to_string(method));
            const auto shards = shards_for(g.csr, method, p);
            const Shard& shard = shards[world.rank()];
            EXPECT_EQ(plan_error(world.comm(), shard, g.name), "");
            auto exchanger = halo::make_mpi_exchanger(world.comm(), shard, kMaxDim);
            std::int64_t bytes_sent = 0;
            std::int64_t bytes_received = 0;
            std::int64_t messages = 0;
            for (std::int64_t cols : {1, 7, 64}) {
                auto f = make_features(shard, cols, cols, 0);
                exchanger->start(f.view);
                exchanger->finish();
                EXPECT_TRUE(holds_exchanged_values(shard, f, 0)) << "width " << cols;
                bytes_sent += shard.plan.num_send() * cols * 4;
                bytes_received += shard.num_halo * cols * 4;
                messages += expected_messages(shard, cols, std::int64_t{1} << 30);
            }
            const auto& stats = exchanger->stats();
            EXPECT_EQ(stats.exchanges, 3);
            EXPECT_EQ(stats.bytes_sent, bytes_sent);
            EXPECT_EQ(stats.bytes_received, bytes_received);
            EXPECT_EQ(stats.messages_sent, messages);
            EXPECT_GE(stats.start_seconds, 0.0);
            EXPECT_GE(stats.finish_seconds, 0.0);
            // What all ranks send is what all ranks receive, and the exchange moved something.
            const auto total_sent = sum_over_ranks(world.comm(), stats.bytes_sent);
            EXPECT_EQ(total_sent, sum_over_ranks(world.comm(), stats.bytes_received));
            EXPECT_GT(total_sent, 0);
        }
    }
}

TEST(MpiExchanger, SplitsBlocksLargerThanMaxMessageBytes)
{
    halo::MpiWorld world(nullptr, nullptr);
    const auto all = graphs();
    for (const auto& [g, method] :
         {std::pair{&all[0], Partitioner::metis}, std::pair{&all[1], Partitioner::block}}) {
        const auto shards = shards_for(g->csr, method, world.size());
        const Shard& shard = shards[world.rank()];
        // 64 bytes: 16 floats, less than one row of width 64; 30 bytes: 7 floats, not a power of
        // two, so pieces end in the middle of rows of every width.
        for (std::int64_t max_bytes : {64, 30}) {
            halo::MpiExchangerOptions options;
            options.max_message_bytes = max_bytes;
            auto exchanger = halo::make_mpi_exchanger(world.comm(), shard, kMaxDim, options);
            std::int64_t messages = 0;
            for (std::int64_t cols : {1, 7, 64}) {
                SCOPED_TRACE(g->name + " max_message_bytes " + std::to_string(max_bytes) +
                             " width " + std::to_string(cols));
                auto f = make_features(shard, cols, cols, 1);
                exchanger->start(f.view);
                exchanger->finish();
                EXPECT_TRUE(holds_exchanged_values(shard, f, 1));
                messages += expected_messages(shard, cols, max_bytes);
            }
            EXPECT_EQ(exchanger->stats().messages_sent, messages);
            // The split really happened: more messages than blocks.
            EXPECT_GT(sum_over_ranks(world.comm(), messages),
                      sum_over_ranks(world.comm(),
                                     3 * static_cast<std::int64_t>(shard.plan.send_ranks.size())));
        }
    }
}

TEST(MpiExchanger, StridedRowsAreStagedAndPaddingIsUntouched)
{
    halo::MpiWorld world(nullptr, nullptr);
    const auto all = graphs();
    const auto shards = shards_for(all[0].csr, Partitioner::random, world.size());
    const Shard& shard = shards[world.rank()];
    halo::MpiExchangerOptions options;
    options.max_message_bytes = 64;  // staged receives are split too
    auto exchanger = halo::make_mpi_exchanger(world.comm(), shard, kMaxDim, options);
    for (std::int64_t cols : {1, 7, 64}) {
        for (std::int64_t ld : {cols + 3, cols + 1}) {
            auto f = make_features(shard, cols, ld, 2);
            exchanger->start(f.view);
            exchanger->finish();
            EXPECT_TRUE(holds_exchanged_values(shard, f, 2)) << "width " << cols << " ld " << ld;
        }
    }
    EXPECT_EQ(exchanger->stats().exchanges, 6);
}

TEST(MpiExchanger, RepeatedExchangesReuseOneExchanger)
{
    halo::MpiWorld world(nullptr, nullptr);
    const auto all = graphs();
    const auto shards = shards_for(all[1].csr, Partitioner::metis, world.size());
    const Shard& shard = shards[world.rank()];
    auto exchanger = halo::make_mpi_exchanger(world.comm(), shard, kMaxDim);
    // New values every round, so a stale halo from an earlier round is caught; widths and strides
    // alternate so that direct and staged receives follow one another on the same buffers.
    const std::int64_t widths[] = {64, 7, 64, 1, 7, 64, 3, 64};
    std::int64_t bytes = 0;
    for (int round = 0; round < 8; ++round) {
        const auto cols = widths[round];
        const auto ld = round % 3 == 2 ? cols + 2 : cols;
        auto f = make_features(shard, cols, ld, round);
        exchanger->start(f.view);
        exchanger->finish();
        EXPECT_TRUE(holds_exchanged_values(shard, f, round)) << "round " << round;
        bytes += shard.num_halo * cols * static_cast<std::int64_t>(sizeof(float));
    }
    EXPECT_EQ(exchanger->stats().exchanges, 8);
    EXPECT_EQ(exchanger->stats().bytes_received, bytes);
}

TEST(MpiExchanger, BarrierReturnsOnceTheLastRankArrives)
{
    halo::MpiWorld world(nullptr, nullptr);
    const auto all = graphs();
    const auto shards = shards_for(all[1].csr, Partitioner::metis, world.size());
    const Shard& shard = shards[world.rank()];
    auto exchanger = halo::make_mpi_exchanger(world.comm(), shard, kMaxDim);
    // The last rank arrives 200 ms late: every other rank waits that long in barrier() (the arrival
    // skew --step-timing reports), and the exchanges before and after are untouched by it.
    const bool late = world.rank() == world.size() - 1;
    for (int round = 0; round < 2; ++round) {
        ASSERT_EQ(MPI_Barrier(world.comm()), MPI_SUCCESS);  // all start the round together
        if (late) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        const auto t0 = std::chrono::steady_clock::now();
        exchanger->barrier();
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!late) {
            EXPECT_GE(waited, 0.15) << "rank " << world.rank() << " round " << round;
        }
        auto f = make_features(shard, 7, 7, round);
        exchanger->start(f.view);
        exchanger->finish();
        EXPECT_TRUE(holds_exchanged_values(shard, f, round)) << "round " << round;
    }
}

TEST(MpiExchanger, OverlappingExchangesOnOneCommunicatorKeepApartByTag)
{
    halo::MpiWorld world(nullptr, nullptr);
    const auto all = graphs();
    const auto shards = shards_for(all[0].csr, Partitioner::metis, world.size());
    const Shard& shard = shards[world.rank()];
    halo::MpiExchangerOptions first;
    first.max_message_bytes = 64;
    halo::MpiExchangerOptions second = first;
    second.tag = first.tag + 1;
    auto a = halo::make_mpi_exchanger(world.comm(), shard, kMaxDim, first);
    auto b = halo::make_mpi_exchanger(world.comm(), shard, kMaxDim, second);
    auto fa = make_features(shard, 7, 7, 4);
    auto fb = make_features(shard, 5, 9, 5);
    // Both in flight at once, started in a different order on odd and even ranks (one tag would
    // then match a's pieces with b's receives) and completed in the opposite order.
    if (world.rank() % 2 == 0) {
        a->start(fa.view);
        b->start(fb.view);
    } else {
        b->start(fb.view);
        a->start(fa.view);
    }
    b->finish();
    a->finish();
    EXPECT_TRUE(holds_exchanged_values(shard, fa, 4));
    EXPECT_TRUE(holds_exchanged_values(shard, fb, 5));
}

TEST(MpiExchanger, RejectsMisuseWithoutDisturbingTheExchange)
{
    halo::MpiWorld world(nullptr, nullptr);
    const auto all = graphs();
    const auto shards = shards_for(all[0].csr, Partitioner::block, world.size());
    const Shard& shard = shards[world.rank()];
    auto exchanger = halo::make_mpi_exchanger(world.comm(), shard, 8);

    EXPECT_THROW(exchanger->finish(), halo::LogicError);
    auto wide = make_features(shard, 9, 9, 0);
    EXPECT_THROW(exchanger->start(wide.view), halo::LogicError);
    auto f = make_features(shard, 8, 8, 3);
    auto short_view = f.view;
    short_view.rows -= 1;
    EXPECT_THROW(exchanger->start(short_view), halo::LogicError);

    // A second start() while one is in flight is refused; the first still completes.
    exchanger->start(f.view);
    EXPECT_THROW(exchanger->start(f.view), halo::LogicError);
    exchanger->finish();
    EXPECT_TRUE(holds_exchanged_values(shard, f, 3));

    // Width 0 exchanges nothing.
    auto empty = make_features(shard, 0, 0, 0);
    exchanger->start(empty.view);
    exchanger->finish();
    EXPECT_EQ(exchanger->stats().exchanges, 2);
    EXPECT_EQ(exchanger->stats().bytes_sent, shard.plan.num_send() * 8 * 4);

    // The exchanger belongs to the rank of its part.
    const Shard& other = shards[(world.rank() + 1) % world.size()];
    EXPECT_THROW(halo::make_mpi_exchanger(world.comm(), other, 8), halo::LogicError);
    EXPECT_THROW(halo::make_mpi_exchanger(world.comm(), shard, 0), halo::LogicError);
    halo::MpiExchangerOptions tiny;
    tiny.max_message_bytes = 3;
    EXPECT_THROW(halo::make_mpi_exchanger(world.comm(), shard, 8, tiny), halo::LogicError);
}

TEST(MpiExchanger, FinishReportsABlockShorterThanThePlanExpects)
{
    // Without check_halo_plan, a sender that drops a row completes the receive short; the
    // receiver must notice rather than leave a NaN in its halo.
    halo::MpiWorld world(nullptr, nullptr);
    const auto all = graphs();
    auto shards = shards_for(all[1].csr, Partitioner::block, world.size());
    const int sender = 1;
    const auto receiver = shards[sender].plan.send_ranks.front();
    auto& plan = shards[sender].plan;
    plan.send_rows.erase(plan.send_rows.begin() + plan.send_offsets[1] - 1);
    for (std::size_t b = 1; b < plan.send_offsets.size(); ++b) {
        plan.send_offsets[b] -= 1;
    }
    const Shard& shard = shards[world.rank()];
    auto exchanger = halo::make_mpi_exchanger(world.comm(), shard, 4);
    auto f = make_features(shard, 4, 4, 0);
    exchanger->start(f.view);
    if (world.rank() == receiver) {
        try {
            exchanger->finish();
            ADD_FAILURE() << "finish() accepted a short block";
        } catch (const halo::MpiError& e) {
            EXPECT_NE(std::string(e.what()).find("from part 1 where the plan expects"),
                      std::string::npos)
                << e.what();
        }
    } else {
        EXPECT_NO_THROW(exchanger->finish());
    }
    MPI_Barrier(world.comm());
}

TEST(CheckHaloPlan, EveryRankThrowsWhenARankDropsASendRow)
{
    halo::MpiWorld world(nullptr, nullptr);
    const auto all = graphs();
    for (auto method : {Partitioner::metis, Partitioner::random}) {
        auto shards = shards_for(all[0].csr, method, world.size());
        const int culprit = 1;
        auto& plan = shards[culprit].plan;
        const auto peer = plan.send_ranks.front();
        const auto rows = plan.send_offsets[1];
        plan.send_rows.erase(plan.send_rows.begin() + rows - 1);
        for (std::size_t b = 1; b < plan.send_offsets.size(); ++b) {
            plan.send_offsets[b] -= 1;
        }
        const auto expected = "data.h5: part 1 sends " + std::to_string(rows - 1) +
                              " rows to part " + std::to_string(peer) + ", but part " +
                              std::to_string(peer) + " expects " + std::to_string(rows) +
                              " from part 1";
        EXPECT_EQ(plan_error(world.comm(), shards[world.rank()], "data.h5"), expected)
            << halo::to_string(method);
    }
}

TEST(CheckHaloPlan, EveryRankThrowsWhenARankClaimsAWrongPeer)
{
    halo::MpiWorld world(nullptr, nullptr);
    const int p = world.size();
    const auto all = graphs();
    // Block parts of a grid are bands of rows: part 0 talks to part 1 only.
    const auto good = shards_for(all[1].csr, Partitioner::block, p);
    const auto rows = good[0].plan.send_offsets[1];
    ASSERT_EQ(good[0].plan.send_ranks, std::vector<std::int32_t>{1});

    if (p >= 3) {
        auto shards = good;
        shards[0].plan.send_ranks[0] = 2;
        const auto expected = "grid.h5: part 1 expects " + std::to_string(rows) +
                              " rows from part 0, but part 0 sends none to part 1 (and 1 more "
                              "problem in the halo plans)";
        EXPECT_EQ(plan_error(world.comm(), shards[world.rank()], "grid.h5"), expected);
    }

    // A part that lists itself as a peer fails its own check, and every rank hears of it.
    auto shards = good;
    shards[1].plan.recv_ranks[0] = 1;
    EXPECT_EQ(plan_error(world.comm(), shards[world.rank()], "grid.h5"),
              "grid.h5: part 1: recv_ranks[0] names the part itself");

    // A broken plan on part 2 and a short block from part 1 to part 0 at once: the broken plan
    // is reported, though rank 0 is lower, since it may well explain the rest.
    if (p >= 3) {
        shards = good;
        shards[2].plan.recv_ranks[0] = 2;
        auto& plan = shards[1].plan;
        ASSERT_EQ(plan.send_ranks.front(), 0);
        plan.send_rows.erase(plan.send_rows.begin() + plan.send_offsets[1] - 1);
        for (std::size_t b = 1; b < plan.send_offsets.size(); ++b) {
            plan.send_offsets[b] -= 1;
        }
        EXPECT_EQ(plan_error(world.comm(), shards[world.rank()], "grid.h5"),
                  "grid.h5: part 2: recv_ranks[0] names the part itself (and 1 more problem in "
                  "the halo plans)");
    }

    // A send that part 2 does not expect (part 0 sends nothing to part 2 in a band layout).
    if (p >= 3) {
        shards = good;
        auto& plan = shards[0].plan;
        plan.send_ranks.push_back(2);
        plan.send_offsets.push_back(plan.send_offsets.back() + 1);
        plan.send_rows.push_back(0);
        EXPECT_EQ(plan_error(world.comm(), shards[world.rank()], "grid.h5"),
                  "grid.h5: part 0 sends 1 rows to part 2, but part 2 expects none from part 0");
    }
}

TEST(CheckHaloPlan, EveryRankThrowsWhenTheIdsSentDifferFromTheIdsExpected)
{
    halo::MpiWorld world(nullptr, nullptr);
    const auto all = graphs();
    auto shards = shards_for(all[0].csr, Partitioner::metis, world.size());
    // Same count, rows in another order: only the hash of the ids can tell.
    auto& plan = shards[1].plan;
    std::size_t b = 0;
    while (b < plan.send_ranks.size() && plan.send_offsets[b + 1] - plan.send_offsets[b] < 2) {
        ++b;
    }
    ASSERT_LT(b, plan.send_ranks.size()) << "part 1 has no block of two rows to swap";
    std::swap(plan.send_rows[plan.send_offsets[b]], plan.send_rows[plan.send_offsets[b] + 1]);
    const auto peer = std::to_string(plan.send_ranks[b]);
    const auto rows = std::to_string(plan.send_offsets[b + 1] - plan.send_offsets[b]);
    const auto expected = "data.h5: part 1 sends " + rows + " rows to part " + peer +
                          ", but their global ids differ from the ones part " + peer +
                          " expects from part 1 (FNV-1a 0x";
    const auto message = plan_error(world.comm(), shards[world.rank()], "data.h5");
    EXPECT_EQ(message.substr(0, expected.size()), expected);
    // Every rank reports the same hashes, not just the same words.
    std::uint64_t hash = std::hash<std::string>{}(message);
    std::uint64_t lo = hash;
    std::uint64_t hi = hash;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, world.comm());
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, world.comm());
    EXPECT_EQ(lo, hi);
}

TEST(CheckHaloPlan, EveryRankThrowsOnAWrongPartOrPartCount)
{
    halo::MpiWorld world(nullptr, nullptr);
    const int p = world.size();
    const auto all = graphs();
    const auto more = std::to_string(p - 1) + " more problem" + (p > 2 ? "s" : "");

    // Every rank holds its neighbour's part: each fails alone, rank 0's message is the one shown.
    const auto shards = shards_for(all[1].csr, Partitioner::metis, p);
    EXPECT_EQ(
        plan_error(world.comm(), shards[(world.rank() + 1) % p], "x.h5"),
        "x.h5: rank 0 was given part 1 (every rank must hold the part of its own rank) (and " +
            more + " in the halo plans)");

    // A dataset written for one part more than the job has ranks.
    const auto extra = shards_for(all[1].csr, Partitioner::metis, p + 1);
    EXPECT_EQ(plan_error(world.comm(), extra[world.rank()], "x.h5"),
              "x.h5: the plan is for " + std::to_string(p + 1) +
                  " parts but the communicator has " + std::to_string(p) + " ranks (and " + more +
                  " in the halo plans)");

    // The communicator is still in step: a good plan passes afterwards.
    EXPECT_EQ(plan_error(world.comm(), shards[world.rank()], "x.h5"), "");
}
