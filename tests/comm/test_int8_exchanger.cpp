// The int8 halo exchanger over the MPI exchanger with the CPU codec, run under mpiexec with 2 and
// 3 ranks.
//
// As in test_mpi_exchanger, every rank builds the same global graph and all shards, then takes its
// own. Owned rows hold row_value(global id, column) (random, of a magnitude that depends on the
// id, so scales differ from row to row), halo rows start as NaN. After an int8 exchange every halo
// row must hold exactly what the reference packing gives for its global id's row (bit for bit),
// lie within half its row's scale of the fp32 exchange's value, and every owned row and padding
// column must be bit-unchanged. Collectives are called unconditionally (EXPECT, not ASSERT, around
// them) so a failing rank never leaves the others waiting.
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "exchange_test_graphs.hpp"
#include "halo/comm/int8_exchanger.hpp"
#include "halo/comm/mpi_exchanger.hpp"
#include "halo/comm/mpi_world.hpp"
#include "halo/core/error.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/shard.hpp"
#include "halo/partition/partition.hpp"
#include "halo/quantize/quantize.hpp"
#include "halo_test.hpp"

namespace {

using halo::Partitioner;
using halo::Shard;
using halo::testing::random_graph;
using halo::testing::shards_for;
using halo::testing::tolerance;

constexpr std::int64_t kMaxWidth = 100;
constexpr std::int64_t kWidths[] = {1, 3, 64, 100};
constexpr float kPadding = -7.5f;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::uint64_t mix(std::uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Random in [-m, m] with m = 10^(id % 7 - 3); every 5th row all positive, so ranges that do not
// contain 0 are covered (the format widens them).
float row_value(halo::global_id id, std::int64_t col, int round)
{
    const auto h =
        mix(static_cast<std::uint64_t>(id) * 1000003ULL + static_cast<std::uint64_t>(col) +
            static_cast<std::uint64_t>(round) * 0x51ed27ULL);
    const double u = static_cast<double>(h >> 11) / 9007199254740992.0;  // [0, 1)
    const double m = std::pow(10.0, static_cast<double>(id % 7) - 3.0);
    return static_cast<float>(id % 5 == 0 ? m * (1.0 + u) : m * (2.0 * u - 1.0));
}

using ValueFn = float (*)(halo::global_id, std::int64_t, int);

struct Features {
    std::vector<float> storage;
    halo::DenseView<float> view;
};

Features make_features(const Shard& shard, std::int64_t cols, std::int64_t ld, int round,
                       ValueFn value)
{
    Features f;
    const auto rows = shard.num_owned + shard.num_halo;
    f.storage.assign(static_cast<std::size_t>(std::max<std::int64_t>(rows * ld, 1)), kPadding);
    f.view = {f.storage.data(), rows, cols, ld};
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t c = 0; c < cols; ++c) {
            f.view(i, c) = i < shard.num_owned ? value(shard.global_ids[i], c, round) : kNaN;
        }
    }
    return f;
}

// The row of global id `id` after the reference packing and unpacking, and its scale.
struct Expected {
    std::vector<float> values;
    float scale = 0.0f;
};

Expected reference_row(halo::global_id id, std::int64_t cols, int round, ValueFn value)
{
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t c = 0; c < cols; ++c) {
        row[static_cast<std::size_t>(c)] = value(id, c, round);
    }
    std::vector<std::uint8_t> record(static_cast<std::size_t>(halo::int8_record_bytes(cols)));
    halo::pack_rows_int8_reference(halo::dense_view<const float>(row.data(), 1, cols), nullptr, 1,
                                   record.data());
    Expected e;
    e.values.resize(row.size());
    halo::unpack_rows_int8_reference(record.data(), halo::dense_view(e.values.data(), 1, cols));
    std::memcpy(&e.scale, record.data() + record.size() - 8, sizeof(float));
    return e;
}

double bound(float x, float scale)
{
    return 0.5 * scale + tolerance<float>(4, std::abs(x) + scale);
}

bool same_bits(float a, float b)
{
    return std::memcmp(&a, &b, sizeof(float)) == 0;
}

// Owned rows and padding bit-unchanged (`before` is the matrix before the exchange), every halo
// row the reference's row bit for bit and within half a step of `fp32` (the fp32 exchange's x).
::testing::AssertionResult holds_int8_values(const Shard& shard, const Features& f,
                                             const std::vector<float>& before, const Features& fp32,
                                             int round, ValueFn value)
{
    const auto& x = f.view;
    for (std::int64_t i = 0; i < x.rows; ++i) {
        const bool owned = i < shard.num_owned;
        const auto id = owned ? shard.global_ids[i] : shard.halo_global_ids[i - shard.num_owned];
        const Expected e = owned ? Expected{} : reference_row(id, x.cols, round, value);
        for (std::int64_t c = 0; c < x.ld; ++c) {
            const float got = x(i, c);
            const float old = before[static_cast<std::size_t>(i * x.ld + c)];
            const auto where = [&] {
                return ::testing::AssertionFailure()
                       << "part " << shard.part << (owned ? " owned" : " halo") << " row " << i
                       << " (global id " << id << ") column " << c << " of " << x.cols << " (ld "
                       << x.ld << ") holds " << got;
            };
            if (owned || c >= x.cols) {
                if (!same_bits(got, old)) {
                    return where() << ", expected it unchanged: " << old;
                }
                continue;
            }
            const float want = e.values[static_cast<std::size_t>(c)];
            if (!same_bits(got, want)) {
                return where() << ", the reference packing gives " << want << " (scale " << e.scale
                               << ")";
            }
            const float exact = fp32.view(i, c);
            if (!(std::abs(static_cast<double>(got) - exact) <= bound(exact, e.scale))) {
                return where() << ", the fp32 exchange " << exact << ": more than half the scale "
                               << e.scale << " apart";
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

std::unique_ptr<halo::Int8HaloExchanger> int8_over_mpi(MPI_Comm comm, const Shard& shard,
                                                       std::int64_t max_width, int tag = 7300)
{
    halo::MpiExchangerOptions options;
    options.tag = tag;
    return halo::make_int8_exchanger(
        [&](const Shard& s, std::int64_t width) {
            return halo::make_mpi_exchanger(comm, s, width, options);
        },
        halo::make_cpu_int8_codec(), shard, max_width);
}

// Runs start/finish; returns the InputError message ("" when none), any other error fails.
std::string exchange(halo::HaloExchanger& exchanger, halo::DenseView<float> x)
{
    exchanger.start(x);
    try {
        exchanger.finish();
    } catch (const halo::InputError& e) {
        return e.message();
    }
    return {};
}

}  // namespace

TEST(Int8Exchanger, RecordShardRenumbersTheSentRowsAndPassesThePlanCheck)
{
    halo::MpiWorld world(nullptr, nullptr);
    const auto shards = shards_for(random_graph(500, 1500, 42), Partitioner::random, world.size());
    const Shard& shard = shards[world.rank()];
    const auto sent = halo::int8_sent_rows(shard);
    const Shard r = halo::int8_record_shard(shard);
    ASSERT_EQ(r.num_owned, static_cast<std::int64_t>(sent.size()));
    EXPECT_EQ(r.num_halo, shard.num_halo);
    EXPECT_EQ(r.plan.send_ranks, shard.plan.send_ranks);
    EXPECT_EQ(r.plan.recv_offsets, shard.plan.recv_offsets);
    ASSERT_EQ(r.plan.send_rows.size(), shard.plan.send_rows.size());
    for (std::size_t k = 0; k < sent.size(); ++k) {
        EXPECT_EQ(r.global_ids[k], shard.global_ids[static_cast<std::size_t>(sent[k])]);
        if (k > 0) {
            EXPECT_LT(sent[k - 1], sent[k]);
        }
    }
    for (std::size_t i = 0; i < r.plan.send_rows.size(); ++i) {
        EXPECT_EQ(sent[static_cast<std::size_t>(r.plan.send_rows[i])], shard.plan.send_rows[i]);
    }
    // The record plan sends the same global ids as the feature plan: the peers agree with it.
    EXPECT_NO_THROW(halo::check_halo_plan(world.comm(), r, "record shard"));
}

TEST(Int8Exchanger, HaloRowsAreTheFp32RowsWithinHalfAScale)
{
    halo::MpiWorld world(nullptr, nullptr);
    const int p = world.size();
    for (const auto& [name, graph] :
         {std::pair<std::string, halo::Csr>{"random", random_graph(500, 1500, 42)},
          std::pair<std::string, halo::Csr>{"grid", halo::testing::grid_graph(20)}}) {
        for (auto method : {Partitioner::block, Partitioner::random, Partitioner::metis}) {
            SCOPED_TRACE(name + " " + halo::to_string(method));
            const auto shards = shards_for(graph, method, p);
            const Shard& shard = shards[world.rank()];
            auto int8 = int8_over_mpi(world.comm(), shard, kMaxWidth);
            auto fp32 = halo::make_mpi_exchanger(world.comm(), shard, kMaxWidth);
            std::int64_t bytes_sent = 0;
            std::int64_t fp32_sent = 0;
            int round = 0;
            for (std::int64_t cols : kWidths) {
                for (std::int64_t ld : {cols, cols + 3}) {
                    ++round;
                    auto f = make_features(shard, cols, ld, round, row_value);
                    auto reference = make_features(shard, cols, ld, round, row_value);
                    const auto before = f.storage;
                    EXPECT_EQ(exchange(*int8, f.view), "");
                    fp32->start(reference.view);
                    fp32->finish();
                    EXPECT_TRUE(holds_int8_values(shard, f, before, reference, round, row_value))
                        << "width " << cols << " ld " << ld;
                    bytes_sent += shard.plan.num_send() * halo::int8_record_bytes(cols);
                    fp32_sent += shard.plan.num_send() * cols * 4;
                }
            }
            const auto& stats = int8->stats();
            EXPECT_EQ(stats.exchanges, 8);
            EXPECT_EQ(stats.bytes_sent, bytes_sent) << "the inner exchanger moved the records";
            EXPECT_EQ(int8->fp32_bytes_sent(), fp32_sent);
            EXPECT_EQ(int8->fp32_bytes_sent(), fp32->stats().bytes_sent);
            EXPECT_EQ(int8->fp32_bytes_received(), fp32->stats().bytes_received);
            EXPECT_GE(stats.start_seconds, 0.0);
            const auto total_sent = sum_over_ranks(world.comm(), stats.bytes_sent);
            EXPECT_EQ(total_sent, sum_over_ranks(world.comm(), stats.bytes_received));
            EXPECT_GT(total_sent, 0);
        }
    }
}

TEST(Int8Exchanger, MovesAboutAQuarterOfTheFp32Bytes)
{
    halo::MpiWorld world(nullptr, nullptr);
    const auto shards = shards_for(halo::testing::grid_graph(20), Partitioner::block, world.size());
    const Shard& shard = shards[world.rank()];
    auto int8 = int8_over_mpi(world.comm(), shard, kMaxWidth);
    auto f = make_features(shard, 100, 100, 1, row_value);
    EXPECT_EQ(exchange(*int8, f.view), "");
    // 100 values: 100 bytes + 8 for the scale and zero point, against 400.
    EXPECT_EQ(int8->stats().bytes_sent, shard.plan.num_send() * 108);
    EXPECT_EQ(int8->stats().bytes_received, shard.num_halo * 108);
    EXPECT_EQ(int8->fp32_bytes_sent(), shard.plan.num_send() * 400);
    EXPECT_EQ(int8->fp32_bytes_received(), shard.num_halo * 400);
    EXPECT_GT(shard.plan.num_send(), 0);
    EXPECT_EQ(halo::int8_exchange_width(100), 27);
    EXPECT_EQ(halo::int8_exchange_width(1), 3);
    EXPECT_EQ(halo::int8_exchange_width(64), 18);
}

float constant_value(halo::global_id id, std::int64_t /*col*/, int /*round*/)
{
    // Zero rows (scale 1 by the format), and constant rows of either sign.
    switch (id % 4) {
        case 0:
            return 0.0f;
        case 1:
            return 3.25f;
        case 2:
            return -1e-30f;
        default:
            return 6e37f;
    }
}

TEST(Int8Exchanger, ConstantRowsNeedNoDivisionByZero)
{
    halo::MpiWorld world(nullptr, nullptr);
    const auto shards = shards_for(random_graph(300, 900, 5), Partitioner::random, world.size());
    const Shard& shard = shards[world.rank()];
    auto int8 = int8_over_mpi(world.comm(), shard, kMaxWidth);
    auto fp32 = halo::make_mpi_exchanger(world.comm(), shard, kMaxWidth);
    for (std::int64_t cols : kWidths) {
        auto f = make_features(shard, cols, cols, 0, constant_value);
        auto reference = make_features(shard, cols, cols, 0, constant_value);
        const auto before = f.storage;
        EXPECT_EQ(exchange(*int8, f.view), "") << "width " << cols;
        fp32->start(reference.view);
        fp32->finish();
        EXPECT_TRUE(holds_int8_values(shard, f, before, reference, 0, constant_value))
            << "width " << cols;
        for (std::int64_t h = 0; h < shard.num_halo; ++h) {
            if (shard.halo_global_ids[h] % 4 == 0) {
                for (std::int64_t c = 0; c < cols; ++c) {
                    ASSERT_TRUE(same_bits(f.view(shard.num_owned + h, c), 0.0f))
                        << "a zero row stays exactly zero: halo row " << h << " column " << c;
                }
            }
        }
    }
}

TEST(Int8Exchanger, RowsThatAreNotFiniteAreRejectedAfterTheExchangeCompletes)
{
    halo::MpiWorld world(nullptr, nullptr);
    const int rank = world.rank();
    const auto shards = shards_for(random_graph(500, 1500, 42), Partitioner::random, world.size());
    const Shard& shard = shards[rank];
    auto int8 = int8_over_mpi(world.comm(), shard, kMaxWidth);
    const auto sent = halo::int8_sent_rows(shard);
    ASSERT_GE(sent.size(), 2u);
    for (std::int64_t cols : {1, 64}) {
        auto f = make_features(shard, cols, cols, 0, row_value);
        // Rank 0 poisons its second sent row with a NaN, rank 1 (of 3) its first with an infinity;
        // the last rank stays clean and must complete without an error.
        std::int64_t poisoned = -1;
        if (rank == 0 || (rank == 1 && world.size() == 3)) {
            poisoned = sent[rank == 0 ? 1 : 0];
            f.view(poisoned, cols - 1) = rank == 0 ? kNaN : -std::numeric_limits<float>::infinity();
        }
        const auto message = exchange(*int8, f.view);
        if (poisoned >= 0) {
            const auto id = shard.global_ids[static_cast<std::size_t>(poisoned)];
            EXPECT_NE(message.find("on rank " + std::to_string(rank)), std::string::npos)
                << message;
            EXPECT_NE(message.find("owned row " + std::to_string(poisoned) + " (global id " +
                                   std::to_string(id) + ")"),
                      std::string::npos)
                << message;
            EXPECT_NE(message.find("NaN or an infinity"), std::string::npos) << message;
        } else {
            EXPECT_EQ(message, "");
        }
        // What arrived from a poisoned row is NaN, never a plausible number.
        for (std::int64_t h = 0; h < shard.num_halo; ++h) {
            const auto id = shard.halo_global_ids[h];
            const bool from_poisoned = [&] {
                for (int q = 0; q < 2 && q < world.size() - 1; ++q) {
                    const auto& s = shards[q];
                    const auto row = halo::int8_sent_rows(s)[q == 0 ? 1 : 0];
                    if (s.global_ids[static_cast<std::size_t>(row)] == id) {
                        return true;
                    }
                }
                return false;
            }();
            for (std::int64_t c = 0; c < cols; ++c) {
                const float got = f.view(shard.num_owned + h, c);
                EXPECT_EQ(std::isnan(got), from_poisoned)
                    << "halo row " << h << " (global id " << id << ") column " << c << ": " << got;
            }
        }
    }
    // The exchanger is reusable after the error.
    auto f = make_features(shard, 3, 3, 9, row_value);
    auto reference = make_features(shard, 3, 3, 9, row_value);
    const auto before = f.storage;
    EXPECT_EQ(exchange(*int8, f.view), "");
    auto fp32 = halo::make_mpi_exchanger(world.comm(), shard, kMaxWidth);
    fp32->start(reference.view);
    fp32->finish();
    EXPECT_TRUE(holds_int8_values(shard, f, before, reference, 9, row_value));
}

TEST(Int8Exchanger, RefusesBadArguments)
{
    halo::MpiWorld world(nullptr, nullptr);
    const auto shards = shards_for(halo::testing::grid_graph(10), Partitioner::block, world.size());
    const Shard& shard = shards[world.rank()];
    const auto inner = [&](const Shard& s, std::int64_t width) {
        return halo::make_mpi_exchanger(world.comm(), s, width);
    };
    EXPECT_THROW(halo::make_int8_exchanger(inner, nullptr, shard, 8), halo::LogicError);
    EXPECT_THROW(halo::make_int8_exchanger(inner, halo::make_cpu_int8_codec(), shard, 0),
                 halo::LogicError);
    EXPECT_THROW(halo::make_int8_exchanger({}, halo::make_cpu_int8_codec(), shard, 8),
                 halo::LogicError);
    EXPECT_THROW(
        halo::make_int8_exchanger(
            [](const Shard&, std::int64_t) { return std::unique_ptr<halo::HaloExchanger>(); },
            halo::make_cpu_int8_codec(), shard, 8),
        halo::LogicError);

    auto int8 = int8_over_mpi(world.comm(), shard, 8);
    auto wide = make_features(shard, 9, 9, 0, row_value);
    EXPECT_THROW(int8->start(wide.view), halo::LogicError);
    auto f = make_features(shard, 8, 8, 0, row_value);
    auto short_view = f.view;
    short_view.rows -= 1;
    EXPECT_THROW(int8->start(short_view), halo::LogicError);
    auto empty_view = f.view;
    empty_view.cols = 0;
    EXPECT_THROW(int8->start(empty_view), halo::LogicError);
    EXPECT_THROW(int8->finish(), halo::LogicError);
    int8->start(f.view);
    EXPECT_THROW(int8->start(f.view), halo::LogicError);
    int8->finish();
    EXPECT_EQ(int8->stats().exchanges, 1);
}
