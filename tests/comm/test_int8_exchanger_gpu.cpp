// The int8 halo exchanger on the GPU (CUDA codec: comm/quantized_pack.cu's kernels on the compute
// stream), run under mpiexec with 2 ranks: over MPI with device buffers (ranks may share a GPU)
// and, where every rank has its own GPU, over NCCL. Skips on every rank alike without a GPU.
//
// As in test_int8_exchanger (the CPU codec), owned rows hold row_value(global id, column), halo
// rows start as NaN, and after an exchange every halo row must equal the CPU reference packing of
// its global id's row bit for bit (the kernels round exactly as the reference), owned rows and
// padding must be bit-unchanged. A failure names the transport, width, ld, row, column, expected
// and got. A rank whose exchange throws unexpectedly aborts the job with the message: its peer
// would otherwise wait for it forever.
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "exchange_test_graphs.hpp"
#include "halo/comm/int8_exchanger.hpp"
#include "halo/comm/mpi_exchanger.hpp"
#include "halo/comm/mpi_world.hpp"
#include "halo/comm/nccl_exchanger.hpp"
#include "halo/core/error.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/shard.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/partition/partition.hpp"
#include "halo/quantize/quantize.hpp"
#include "halo_test.hpp"

namespace {

using halo::DenseView;
using halo::Partitioner;
using halo::Shard;
using halo::testing::random_graph;
using halo::testing::shards_for;
using halo::cuda::Context;
using halo::cuda::DeviceBuffer;

constexpr std::int64_t kMaxWidth = 100;
constexpr std::int64_t kWidths[] = {1, 3, 64, 100};
constexpr float kPadding = -7.5f;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

[[noreturn]] void abort_job(const std::string& message)
{
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "rank %d: %s\n", rank, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
}

void cuda_check(cudaError_t status, const char* what)
{
    if (status != cudaSuccess) {
        abort_job(std::string(what) + " failed: " + cudaGetErrorName(status) + ": " +
                  cudaGetErrorString(status));
    }
}

#define TEST_CUDA(call) cuda_check((call), #call)

bool all_ranks(MPI_Comm comm, bool value)
{
    int v = value ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, comm);
    return v == 1;
}

std::uint64_t mix(std::uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Random in [-m, m], m = 10^(id % 7 - 3); all-positive rows every 5th id; constant rows (zero,
// positive, tiny negative) every 11th, so scales differ per row and the zero range is covered.
float row_value(halo::global_id id, std::int64_t col, int round)
{
    if (id % 11 == 0) {
        return id % 3 == 0 ? 0.0f : (id % 3 == 1 ? 3.25f : -1e-30f);
    }
    const auto h =
        mix(static_cast<std::uint64_t>(id) * 1000003ULL + static_cast<std::uint64_t>(col) +
            static_cast<std::uint64_t>(round) * 0x51ed27ULL);
    const double u = static_cast<double>(h >> 11) / 9007199254740992.0;
    const double m = std::pow(10.0, static_cast<double>(id % 7) - 3.0);
    return static_cast<float>(id % 5 == 0 ? m * (1.0 + u) : m * (2.0 * u - 1.0));
}

// The host matrix for `shard` and its copy on the device (same ld).
struct Features {
    std::vector<float> host;
    DeviceBuffer<float> device;
    DenseView<float> view;  // device
    std::int64_t ld = 0;
};

Features make_features(Context& ctx, const Shard& shard, std::int64_t cols, std::int64_t ld,
                       int round)
{
    Features f;
    const auto rows = shard.num_owned + shard.num_halo;
    f.ld = ld;
    f.host.assign(static_cast<std::size_t>(std::max<std::int64_t>(rows * ld, 1)), kPadding);
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t c = 0; c < cols; ++c) {
            f.host[static_cast<std::size_t>(i * ld + c)] =
                i < shard.num_owned ? row_value(shard.global_ids[i], c, round) : kNaN;
        }
    }
    f.device = DeviceBuffer<float>(ctx, f.host.size());
    TEST_CUDA(cudaMemcpyAsync(f.device.data(), f.host.data(), f.device.bytes(),
                              cudaMemcpyHostToDevice, ctx.compute_stream()));
    TEST_CUDA(cudaStreamSynchronize(ctx.compute_stream()));
    f.view = {f.device.data(), rows, cols, ld};
    return f;
}

std::vector<float> download(Context& ctx, const Features& f)
{
    std::vector<float> out(f.host.size());
    TEST_CUDA(cudaMemcpyAsync(out.data(), f.device.data(), f.device.bytes(), cudaMemcpyDeviceToHost,
                              ctx.compute_stream()));
    TEST_CUDA(cudaStreamSynchronize(ctx.compute_stream()));
    return out;
}

bool same_bits(float a, float b)
{
    return std::memcmp(&a, &b, sizeof(float)) == 0;
}

// Owned rows and padding as before (bits), every halo row the CPU reference's (bits).
::testing::AssertionResult holds_int8_values(const Shard& shard, const Features& f,
                                             const std::vector<float>& got, int round)
{
    const auto cols = f.view.cols;
    const auto ld = f.ld;
    std::vector<float> row(static_cast<std::size_t>(cols));
    std::vector<float> want(static_cast<std::size_t>(cols));
    std::vector<std::uint8_t> record(static_cast<std::size_t>(halo::int8_record_bytes(cols)));
    for (std::int64_t i = 0; i < f.view.rows; ++i) {
        const bool owned = i < shard.num_owned;
        const auto id = owned ? shard.global_ids[i] : shard.halo_global_ids[i - shard.num_owned];
        if (!owned) {
            for (std::int64_t c = 0; c < cols; ++c) {
                row[static_cast<std::size_t>(c)] = row_value(id, c, round);
            }
            halo::pack_rows_int8_reference(halo::dense_view<const float>(row.data(), 1, cols),
                                           nullptr, 1, record.data());
            halo::unpack_rows_int8_reference(record.data(), halo::dense_view(want.data(), 1, cols));
        }
        for (std::int64_t c = 0; c < ld; ++c) {
            const auto at = static_cast<std::size_t>(i * ld + c);
            const float expected =
                owned || c >= cols ? f.host[at] : want[static_cast<std::size_t>(c)];
            if (!same_bits(got[at], expected)) {
                return ::testing::AssertionFailure()
                       << "part " << shard.part << (owned ? " owned" : " halo") << " row " << i
                       << " (global id " << id << ") column " << c << " of " << cols << " (ld "
                       << ld << ") holds " << got[at] << ", expected " << expected
                       << (owned || c >= cols ? " (unchanged)"
                                              : " (CPU reference pack/unpack of the row)");
            }
        }
    }
    return ::testing::AssertionSuccess();
}

// One Context per rank for the suite (device: local rank modulo the devices seen), destroyed
// before main returns (with MPI and the CUDA runtime still up).
struct GpuSetup {
    std::unique_ptr<halo::MpiWorld> world;
    std::unique_ptr<Context> ctx;
    std::unique_ptr<halo::NcclComm> nccl;  // only where every rank has its own GPU
};

std::unique_ptr<GpuSetup> make_setup()
{
    auto r = std::make_unique<GpuSetup>();
    r->world = std::make_unique<halo::MpiWorld>(nullptr, nullptr);
    const int gpus = halo::testing::gpu_count();
    if (!all_ranks(r->world->comm(), gpus >= 1)) {
        return r;
    }
    try {
        halo::cuda::ContextOptions options;
        options.device = r->world->local_rank() % gpus;
        options.local_rank = r->world->local_rank();
        options.local_size = r->world->local_size();
        r->ctx = std::make_unique<Context>(options);
        if (all_ranks(r->world->comm(), gpus >= r->world->local_size())) {
            r->nccl = std::make_unique<halo::NcclComm>(r->world->comm(), *r->ctx);
        }
    } catch (const std::exception& e) {
        abort_job(std::string("test setup failed: ") + e.what());
    }
    return r;
}

std::unique_ptr<GpuSetup> g_setup;

GpuSetup& setup()
{
    return *g_setup;
}

enum class Transport { mpi_device, nccl };

std::string to_string(Transport t)
{
    return t == Transport::nccl ? "NCCL" : "MPI over device buffers";
}

std::vector<Transport> transports()
{
    std::vector<Transport> result{Transport::mpi_device};
    if (setup().nccl) {
        result.push_back(Transport::nccl);
    }
    return result;
}

std::unique_ptr<halo::Int8HaloExchanger> make_int8(Transport t, const Shard& shard)
{
    GpuSetup& s = setup();
    return halo::make_int8_exchanger(
        [&](const Shard& records, std::int64_t width) -> std::unique_ptr<halo::HaloExchanger> {
            if (t == Transport::nccl) {
                return halo::make_nccl_exchanger(*s.ctx, *s.nccl, records, width);
            }
            halo::MpiDeviceExchangerOptions options;
            options.mpi.tag = 7400;
            return halo::make_mpi_device_exchanger(*s.ctx, s.world->comm(), records, width,
                                                   options);
        },
        halo::cuda::make_int8_codec(*s.ctx), shard, kMaxWidth);
}

// start/finish; the InputError message ("" when none); any other error aborts the job.
std::string exchange(halo::HaloExchanger& exchanger, DenseView<float> x)
{
    try {
        exchanger.start(x);
        try {
            exchanger.finish();
        } catch (const halo::InputError& e) {
            return e.message();
        }
    } catch (const std::exception& e) {
        abort_job(std::string("int8 halo exchange failed: ") + e.what());
    }
    return {};
}

class Int8ExchangerGpu : public ::testing::Test {
protected:
    static void SetUpTestSuite() { g_setup = make_setup(); }
    static void TearDownTestSuite() { g_setup.reset(); }
};

#define REQUIRE_GPU_ON_EVERY_RANK()                        \
    HALO_REQUIRE_GPUS(1);                                  \
    if (!setup().ctx) {                                    \
        GTEST_SKIP() << "another rank has no CUDA device"; \
    }

}  // namespace

TEST_F(Int8ExchangerGpu, HaloRowsEqualTheCpuReferenceAndOwnedRowsAreUntouched)
{
    REQUIRE_GPU_ON_EVERY_RANK();
    GpuSetup& s = setup();
    const auto shards =
        shards_for(random_graph(600, 2400, 11), Partitioner::random, s.world->size());
    const Shard& shard = shards[s.world->rank()];
    for (auto t : transports()) {
        SCOPED_TRACE(to_string(t));
        auto int8 = make_int8(t, shard);
        std::int64_t bytes = 0;
        std::int64_t fp32 = 0;
        int round = 0;
        for (std::int64_t cols : kWidths) {
            for (std::int64_t ld : {cols, cols + 3}) {
                ++round;
                auto f = make_features(*s.ctx, shard, cols, ld, round);
                EXPECT_EQ(exchange(*int8, f.view), "");
                EXPECT_TRUE(holds_int8_values(shard, f, download(*s.ctx, f), round))
                    << "pack_rows_int8/unpack_rows_int8 through " << to_string(t) << ", width "
                    << cols << " ld " << ld;
                bytes += shard.plan.num_send() * halo::int8_record_bytes(cols);
                fp32 += shard.plan.num_send() * cols * 4;
            }
        }
        EXPECT_EQ(int8->stats().exchanges, 8);
        EXPECT_EQ(int8->stats().bytes_sent, bytes);
        EXPECT_EQ(int8->fp32_bytes_sent(), fp32);
    }
}

TEST_F(Int8ExchangerGpu, RowsThatAreNotFiniteAreRejectedAfterTheExchangeCompletes)
{
    REQUIRE_GPU_ON_EVERY_RANK();
    GpuSetup& s = setup();
    const int rank = s.world->rank();
    const auto shards =
        shards_for(random_graph(600, 2400, 11), Partitioner::random, s.world->size());
    const Shard& shard = shards[rank];
    const auto bad_row = halo::int8_sent_rows(shards[0]).at(1);  // rank 0's, a NaN
    const auto bad_id = shards[0].global_ids[static_cast<std::size_t>(bad_row)];
    for (auto t : transports()) {
        SCOPED_TRACE(to_string(t));
        auto int8 = make_int8(t, shard);
        auto f = make_features(*s.ctx, shard, 64, 64, 0);
        if (rank == 0) {
            const float nan = kNaN;
            TEST_CUDA(cudaMemcpyAsync(f.view.row(bad_row) + 5, &nan, sizeof(float),
                                      cudaMemcpyHostToDevice, s.ctx->compute_stream()));
            TEST_CUDA(cudaStreamSynchronize(s.ctx->compute_stream()));
        }
        const auto message = exchange(*int8, f.view);
        if (rank == 0) {
            EXPECT_NE(message.find("on rank 0: owned row " + std::to_string(bad_row) +
                                   " (global id " + std::to_string(bad_id) + ")"),
                      std::string::npos)
                << message;
        } else {
            EXPECT_EQ(message, "");
            const auto got = download(*s.ctx, f);
            for (std::int64_t h = 0; h < shard.num_halo; ++h) {
                const bool from_bad = shard.halo_global_ids[h] == bad_id;
                for (std::int64_t c = 0; c < 64; ++c) {
                    const float v = got[static_cast<std::size_t>((shard.num_owned + h) * 64 + c)];
                    EXPECT_EQ(std::isnan(v), from_bad)
                        << "halo row " << h << " (global id " << shard.halo_global_ids[h]
                        << ") column " << c << ": " << v;
                }
            }
        }
        // Reusable after the error.
        auto clean = make_features(*s.ctx, shard, 3, 3, 5);
        EXPECT_EQ(exchange(*int8, clean.view), "");
        EXPECT_TRUE(holds_int8_values(shard, clean, download(*s.ctx, clean), 5));
    }
}

TEST_F(Int8ExchangerGpu, RefusesAHostMatrixBeforeAnythingIsSent)
{
    REQUIRE_GPU_ON_EVERY_RANK();
    GpuSetup& s = setup();
    const auto shards =
        shards_for(halo::testing::grid_graph(10), Partitioner::block, s.world->size());
    const Shard& shard = shards[s.world->rank()];
    auto int8 = make_int8(Transport::mpi_device, shard);
    std::vector<float> host(static_cast<std::size_t>((shard.num_owned + shard.num_halo) * 4));
    EXPECT_THROW(int8->start(halo::dense_view(host.data(), shard.num_owned + shard.num_halo, 4)),
                 halo::LogicError);
    auto f = make_features(*s.ctx, shard, 4, 4, 1);
    EXPECT_EQ(exchange(*int8, f.view), "");
    EXPECT_TRUE(holds_int8_values(shard, f, download(*s.ctx, f), 1));
}
