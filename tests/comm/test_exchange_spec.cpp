// make_exchanger on host matrices (the CPU backend's), under mpiexec with 2 ranks: the spec's
// parsing, the transport it names, and that the exchanger it makes moves every halo row (exactly
// as fp32 rows; within half a row's scale as int8 records). Collectives are called
// unconditionally (EXPECT around them) so a failing rank never leaves the other waiting.
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "exchange_test_graphs.hpp"
#include "halo/comm/exchange_spec.hpp"
#include "halo/comm/mpi_world.hpp"
#include "halo/core/shard.hpp"
#include "halo/partition/partition.hpp"
#include "halo_test.hpp"

namespace {

using halo::ExchangeSpec;

TEST(ExchangeSpec, ParsesTransportAndInt8)
{
    const auto check = [](const char* text, const char* transport, bool int8) {
        const auto spec = halo::parse_exchange_spec(text);
        EXPECT_EQ(spec.transport, transport) << text;
        EXPECT_EQ(spec.int8_rows, int8) << text;
        EXPECT_FALSE(spec.fixed_device) << text;
    };
    check("", "", false);
    check("mpi", "mpi", false);
    check("nccl", "nccl", false);
    check("int8", "", true);
    check("mpi-int8", "mpi", true);
    check("nccl-int8", "nccl", true);
    EXPECT_EQ(halo::requested_transport(halo::parse_exchange_spec("int8"), true), "nccl");
    EXPECT_EQ(halo::requested_transport(halo::parse_exchange_spec("int8"), false), "mpi");
    EXPECT_EQ(halo::requested_transport(halo::parse_exchange_spec("mpi"), true), "mpi");
}

float row_value(halo::global_id id, std::int64_t col)
{
    return static_cast<float>(std::sin(0.37 * static_cast<double>(id) + 1.3 * col)) *
           static_cast<float>(1 + id % 5);
}

// Exchanges an n_total x width matrix whose owned rows hold row_value(global id, column) and
// returns the largest error of a halo row relative to its row's largest magnitude.
double exchange_error(halo::HaloExchanger& exchanger, const halo::Shard& shard, std::int64_t width)
{
    const auto rows = shard.num_owned + shard.num_halo;
    std::vector<float> x(static_cast<std::size_t>(rows * width),
                         std::numeric_limits<float>::quiet_NaN());
    for (std::int64_t i = 0; i < shard.num_owned; ++i) {
        for (std::int64_t c = 0; c < width; ++c) {
            x[i * width + c] = row_value(shard.global_ids[i], c);
        }
    }
    exchanger.start({x.data(), rows, width, width});
    exchanger.finish();
    double worst = 0.0;
    for (std::int64_t h = 0; h < shard.num_halo; ++h) {
        const auto id = shard.halo_global_ids[h];
        double scale = 0.0;
        for (std::int64_t c = 0; c < width; ++c) {
            scale = std::max(scale, std::abs(static_cast<double>(row_value(id, c))));
        }
        for (std::int64_t c = 0; c < width; ++c) {
            const double got = x[(shard.num_owned + h) * width + c];
            const double err = std::isnan(got) ? std::numeric_limits<double>::infinity()
                                               : std::abs(got - row_value(id, c)) / scale;
            worst = std::max(worst, err);
        }
    }
    return worst;
}

TEST(MakeExchanger, HostMatricesOverMpi)
{
    halo::MpiWorld world(nullptr, nullptr);
    ASSERT_EQ(world.size(), 2) << "run under mpiexec -n 2";
    const auto graph = halo::testing::random_graph(300, 1500, 11);
    const auto shards = halo::testing::shards_for(graph, halo::Partitioner::block, 2);
    const auto& shard = shards[static_cast<std::size_t>(world.rank())];
    ASSERT_GT(shard.num_halo, 0);
    constexpr std::int64_t width = 24;

    auto fp32 = halo::make_exchanger(halo::parse_exchange_spec(""), world, shard, width, nullptr);
    EXPECT_EQ(fp32->transport(), "mpi");
    EXPECT_EQ(fp32->name(), "mpi");
    EXPECT_TRUE(fp32->note().empty());
    // Pieces are NCCL's: the spec's default (2) does not apply to MPI, which moves one.
    EXPECT_EQ(halo::parse_exchange_spec("").pieces, 2);
    EXPECT_EQ(fp32->pieces(), 1);
    EXPECT_EQ(exchange_error(fp32->exchanger(), shard, width), 0.0);

    auto int8 =
        halo::make_exchanger(halo::parse_exchange_spec("int8"), world, shard, width, nullptr);
    EXPECT_EQ(int8->name(), "mpi-int8");
    // Rounding to nearest: at most half a step of 255 over the row's range (twice its magnitude).
    EXPECT_LE(exchange_error(int8->exchanger(), shard, width), 1.0 / 255.0 + 1e-6);
    EXPECT_GT(int8->exchanger().stats().bytes_sent, 0);
    EXPECT_LT(int8->exchanger().stats().bytes_sent, fp32->exchanger().stats().bytes_sent / 2);
}

}  // namespace
