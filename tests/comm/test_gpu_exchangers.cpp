// The device halo exchangers, run under mpiexec on GPUs. One source, two programs:
//   test_mpi_device_exchanger_{2,3}  MPI over device buffers (host-staged, and CUDA-aware where
//                                    the MPI library is); ranks may share a GPU (label gpu)
//   test_nccl_exchanger              NCCL, one GPU per rank (HALO_TEST_NCCL; label gpu-mpi)
// Both skip, on every rank at once, where the GPUs they need are missing.
//
// As in test_mpi_exchanger, every rank builds the same global graph and all shards, then takes its
// own. Owned rows of a device matrix hold value(global id, column, round), halo rows start as NaN,
// and after an exchange every row copied back must hold its global id's value; padding columns of
// a strided matrix must keep theirs. A rank whose exchange throws aborts the job with the message:
// its peers would otherwise wait for it forever (in MPI, or in NCCL on the device). Collectives are
// called unconditionally (EXPECT, not ASSERT, around them) for the same reason.
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "halo/comm/exchange_spec.hpp"
#include "halo/comm/mpi_exchanger.hpp"
#include "halo/comm/mpi_world.hpp"
#include "halo/comm/nccl_exchanger.hpp"
#include "halo/core/error.hpp"
#include "halo/core/exchanger.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/shard.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo_test.hpp"

#ifndef HALO_TEST_NCCL
#define HALO_TEST_NCCL 0
#endif

namespace {

using halo::DenseView;
using halo::Partitioner;
using halo::Shard;
using halo::cuda::Context;
using halo::cuda::DeviceBuffer;
using halo::cuda::PinnedBuffer;

constexpr bool kNccl = HALO_TEST_NCCL != 0;
constexpr std::int64_t kMaxDim = 129;
constexpr std::int64_t kWidths[] = {1, 7, 64, 129};  // 64: the pack kernel's float4 path
constexpr float kPadding = -7.5f;  // the columns between cols and ld, never exchanged
constexpr std::int64_t kDefaultMessageBytes = std::int64_t{1} << 30;

// ---------------------------------------------------------------------------------------------
// Failing without hanging.

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

void exchange(halo::HaloExchanger& exchanger, DenseView<float> x)
{
    try {
        exchanger.start(x);
        exchanger.finish();
    } catch (const std::exception& e) {
        abort_job(std::string("halo exchange failed: ") + e.what());
    }
}

bool all_ranks(MPI_Comm comm, bool value)
{
    int v = value ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, comm);
    return v == 1;
}

std::int64_t sum_over_ranks(MPI_Comm comm, std::int64_t value)
{
    std::int64_t total = 0;
    MPI_Allreduce(&value, &total, 1, MPI_INT64_T, MPI_SUM, comm);
    return total;
}

// ---------------------------------------------------------------------------------------------
// Graphs, shards and values.

// Skewed degrees (R-MAT, Graph500 parameters): a few hubs that every part needs.
halo::Csr rmat_graph()
{
    halo::RmatOptions options;
    options.scale = 10;
    options.edge_factor = 8;
    options.seed = 3;
    return halo::build_csr(halo::generate_rmat(options), {});
}

// Uniform random edges: random and block partitions get many peers.
halo::Csr random_graph()
{
    halo::EdgeList e;
    e.num_nodes = 600;
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<std::int64_t> node(0, e.num_nodes - 1);
    for (int k = 0; k < 2400; ++k) {
        e.src.push_back(node(rng));
        e.dst.push_back(node(rng));
    }
    return halo::build_csr(e, {});
}

// A 24 x 24 grid: METIS and block partitions give few peers and long boundaries.
halo::Csr grid_graph()
{
    return halo::testing::grid_graph(24);
}

struct Graph {
    std::string name;
    halo::Csr csr;
};

std::vector<Graph> graphs()
{
    std::vector<Graph> result;
    result.push_back({"rmat", rmat_graph()});
    result.push_back({"random", random_graph()});
    result.push_back({"grid", grid_graph()});
    return result;
}

std::vector<Shard> shards_for(const halo::Csr& graph, Partitioner method, int num_parts)
{
    halo::PartitionOptions options;
    options.method = method;
    options.num_parts = num_parts;
    options.seed = 7;
    return halo::build_shards(graph, halo::partition_graph(graph.view(), options), num_parts);
}

// Exact in float and distinct for ids below 2048, columns below 256 and rounds up to 8 (all
// values stay below 2^24).
float value(halo::global_id id, std::int64_t col, int round)
{
    return static_cast<float>((round * 2048 + id) * 256 + col + 1);
}

// What the matrix must hold after an exchange, laid out as on the device (rows x ld); `before`
// gives the halo rows NaN instead, as the matrix is handed to start().
std::vector<float> image(const Shard& shard, std::int64_t cols, std::int64_t ld, int round,
                         bool before)
{
    const auto rows = shard.num_owned + shard.num_halo;
    std::vector<float> out(static_cast<std::size_t>(rows * ld), kPadding);
    for (std::int64_t i = 0; i < rows; ++i) {
        const bool owned = i < shard.num_owned;
        const auto id = owned ? shard.global_ids[i] : shard.halo_global_ids[i - shard.num_owned];
        for (std::int64_t c = 0; c < cols; ++c) {
            out[i * ld + c] =
                owned || !before ? value(id, c, round) : std::numeric_limits<float>::quiet_NaN();
        }
    }
    return out;
}

::testing::AssertionResult holds_exchanged_values(const Shard& shard, const float* got,
                                                  std::int64_t cols, std::int64_t ld, int round)
{
    const auto expected = image(shard, cols, ld, round, false);
    for (std::size_t k = 0; k < expected.size(); ++k) {
        if (!(got[k] == expected[k])) {  // NaN never compares equal
            const auto i = static_cast<std::int64_t>(k) / ld;
            const auto c = static_cast<std::int64_t>(k) % ld;
            const bool owned = i < shard.num_owned;
            return ::testing::AssertionFailure()
                   << "part " << shard.part << (owned ? " owned" : " halo") << " row " << i
                   << " (global id "
                   << (owned ? shard.global_ids[i] : shard.halo_global_ids[i - shard.num_owned])
                   << ") column " << c << " of " << cols << " (ld " << ld << ") holds " << got[k]
                   << ", expected " << expected[k];
        }
    }
    return ::testing::AssertionSuccess();
}

std::int64_t nonempty_blocks(const std::vector<std::int64_t>& offsets)
{
    std::int64_t blocks = 0;
    for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
        blocks += offsets[b + 1] > offsets[b] ? 1 : 0;
    }
    return blocks;
}

// Messages one exchange of width `cols` sends: one per peer with NCCL (one per piece of a peer's
// block in pieces: min(rows, pieces)), blocks split at `max_bytes` with MPI.
std::int64_t expected_messages(bool nccl, const Shard& shard, std::int64_t cols,
                               std::int64_t max_bytes, int pieces = 1)
{
    const auto& offsets = shard.plan.send_offsets;
    if (cols == 0) {
        return 0;
    }
    if (nccl && pieces == 1) {
        return nonempty_blocks(offsets);
    }
    if (nccl) {
        std::int64_t messages = 0;
        for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
            messages += std::min<std::int64_t>(offsets[b + 1] - offsets[b], pieces);
        }
        return messages;
    }
    const auto per_message = max_bytes / static_cast<std::int64_t>(sizeof(float));
    std::int64_t messages = 0;
    for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
        messages += ((offsets[b + 1] - offsets[b]) * cols + per_message - 1) / per_message;
    }
    return messages;
}

std::string plan_error(MPI_Comm comm, const Shard& shard, const std::string& where)
{
    try {
        halo::check_halo_plan(comm, shard, where);
    } catch (const halo::InputError& e) {
        return e.message();
    }
    return {};
}

// ---------------------------------------------------------------------------------------------
// The GPU side: one MPI world, Context and (for NCCL) communicator per test suite.

enum class Kind {
    nccl,
    nccl_registered,  // NCCL user buffer registration (NcclExchangerOptions::register_buffers)
    nccl_pieces,      // registered, and each exchange in 3 pieces (NcclExchangerOptions::pieces)
    mpi_staged,
    mpi_cuda_aware,
};

bool is_nccl(Kind kind)
{
    return kind == Kind::nccl || kind == Kind::nccl_registered || kind == Kind::nccl_pieces;
}

bool is_registered(Kind kind)
{
    return kind == Kind::nccl_registered || kind == Kind::nccl_pieces;
}

int pieces(Kind kind)
{
    return kind == Kind::nccl_pieces ? 3 : 1;
}

std::string to_string(Kind kind)
{
    switch (kind) {
        case Kind::nccl:
            return "Nccl";
        case Kind::nccl_registered:
            return "NcclRegistered";
        case Kind::nccl_pieces:
            return "NcclPieces";
        case Kind::mpi_staged:
            return "MpiStaged";
        case Kind::mpi_cuda_aware:
            return "MpiCudaAware";
    }
    return "?";
}

// gtest names the parameter of a failing test with this.
void PrintTo(Kind kind, std::ostream* os)
{
    *os << to_string(kind);
}

struct GpuSetup {
    std::unique_ptr<halo::MpiWorld> world;
    std::unique_ptr<Context> ctx;
    std::unique_ptr<halo::NcclComm> nccl;
    int gpus = 0;
    std::string skip;   // why every rank skips
    std::string error;  // why this rank's suite fails
};

std::unique_ptr<GpuSetup> make_setup()
{
    auto s = std::make_unique<GpuSetup>();
    s->world = std::make_unique<halo::MpiWorld>(nullptr, nullptr);
    const MPI_Comm comm = s->world->comm();
    s->gpus = halo::testing::gpu_count();
    // NCCL refuses two ranks on one GPU; the MPI transport shares them.
    const int needed = kNccl ? s->world->local_size() : 1;
    if (!all_ranks(comm, s->gpus >= needed)) {
        s->skip =
            kNccl
                ? "NCCL needs one CUDA device per rank: " + std::to_string(s->world->local_size()) +
                      " ranks on a node where this rank sees " + std::to_string(s->gpus)
                : "needs a CUDA device on every rank; this rank sees " + std::to_string(s->gpus);
        return s;
    }
    try {
        halo::cuda::ContextOptions options;
        options.device = s->world->local_rank() % s->gpus;
        options.local_rank = s->world->local_rank();
        options.local_size = s->world->local_size();
        s->ctx = std::make_unique<Context>(options);
    } catch (const std::exception& e) {
        s->error = std::string("Context: ") + e.what();
    }
    if (!all_ranks(comm, s->error.empty())) {
        if (s->error.empty()) {
            s->error = "another rank could not create its Context";
        }
        return s;
    }
    if (kNccl) {
        try {
            s->nccl = std::make_unique<halo::NcclComm>(comm, *s->ctx);
        } catch (const std::exception& e) {
            s->error = std::string("NcclComm: ") + e.what();
        }
        if (!all_ranks(comm, s->error.empty()) && s->error.empty()) {
            s->error = "another rank could not create its NcclComm";
        }
    }
    return s;
}

// Why the CUDA-aware MPI exchanger is refused on this rank; empty when it is built. Local: the
// constructor makes no collective call.
std::string cuda_aware_refusal(Context& ctx, MPI_Comm comm, const Shard& shard)
{
    halo::MpiDeviceExchangerOptions options;
    options.cuda_aware = true;
    try {
        static_cast<void>(halo::make_mpi_device_exchanger(ctx, comm, shard, 1, options));
    } catch (const halo::LogicError& e) {
        return e.message();
    }
    return {};
}

// A device matrix from the Context's pool; all copies go through the compute stream, as the
// exchangers' callers' kernels would.
// A device matrix of a shard's rows: from the Context's pool, or from an exchanger's allocate()
// where `from` is given and has memory of its own (NCCL's registered buffers).
class DeviceMatrix {
public:
    DeviceMatrix(Context& ctx, const Shard& shard, std::int64_t cols, std::int64_t ld,
                 halo::HaloExchanger* from = nullptr)
        : ctx_(&ctx), floats_(static_cast<std::size_t>((shard.num_owned + shard.num_halo) * ld))
    {
        if (from != nullptr) {
            storage_ = from->allocate(static_cast<std::int64_t>(floats_));
        }
        if (!storage_) {
            auto* block = new DeviceBuffer<float>(ctx, floats_);
            storage_ = std::shared_ptr<float>(block->data(), [block](float*) { delete block; });
        }
        view_ = {storage_.get(), shard.num_owned + shard.num_halo, cols, ld};
    }

    DenseView<float> view() const { return view_; }
    /// The memory itself, which may outlive this matrix.
    std::shared_ptr<float> storage() const { return storage_; }

    void upload(const std::vector<float>& host) const
    {
        TEST_CUDA(cudaMemcpyAsync(view_.data, host.data(), host.size() * sizeof(float),
                                  cudaMemcpyHostToDevice, ctx_->compute_stream()));
        TEST_CUDA(cudaStreamSynchronize(ctx_->compute_stream()));
    }

    std::vector<float> download() const
    {
        std::vector<float> host(floats_);
        TEST_CUDA(cudaMemcpyAsync(host.data(), view_.data, floats_ * sizeof(float),
                                  cudaMemcpyDeviceToHost, ctx_->compute_stream()));
        TEST_CUDA(cudaStreamSynchronize(ctx_->compute_stream()));
        return host;
    }

private:
    Context* ctx_;
    std::size_t floats_;
    std::shared_ptr<float> storage_;
    DenseView<float> view_{};
};

// Holds a stream for `ms` milliseconds: work issued after it waits, so a missing event between
// the compute and comm streams shows as stale or NaN rows instead of passing by luck.
void delay(cudaStream_t stream, int ms)
{
    TEST_CUDA(cudaLaunchHostFunc(
        stream,
        [](void* data) {
            const auto ms = static_cast<int>(reinterpret_cast<std::intptr_t>(data));
            std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        },
        reinterpret_cast<void*>(static_cast<std::intptr_t>(ms))));
}

// The MPI main prints rank 0's results only; a failure on another rank would fail the job
// without a word. This prints those to stderr, tagged with the rank.
class OtherRankFailures : public ::testing::EmptyTestEventListener {
public:
    explicit OtherRankFailures(int rank) : rank_(rank) {}

    // The test's name is kept here: asking the UnitTest for it while it reports a result would
    // take the lock it already holds.
    void OnTestStart(const ::testing::TestInfo& test) override
    {
        test_ = std::string(test.test_suite_name()) + "." + test.name();
    }

    void OnTestPartResult(const ::testing::TestPartResult& result) override
    {
        if (result.failed()) {
            std::fprintf(stderr, "rank %d: %s: %s:%d: Failure\n%s\n", rank_, test_.c_str(),
                         result.file_name() != nullptr ? result.file_name() : "?",
                         result.line_number(), result.message());
            std::fflush(stderr);
        }
    }

private:
    int rank_;
    std::string test_ = "(between tests)";
};

class GpuTestBase {
protected:
    static std::unique_ptr<GpuSetup> setup_;

    static void create()
    {
        try {
            setup_ = make_setup();
        } catch (const std::exception& e) {
            abort_job(std::string("test setup failed: ") + e.what());
        }
        static bool listening = false;
        if (!listening && setup_->world->rank() != 0) {
            ::testing::UnitTest::GetInstance()->listeners().Append(
                new OtherRankFailures(setup_->world->rank()));
        }
        listening = true;
    }
    static void destroy() { setup_.reset(); }

    static MPI_Comm comm() { return setup_->world->comm(); }
    static int rank() { return setup_->world->rank(); }
    static int size() { return setup_->world->size(); }
    static Context& ctx() { return *setup_->ctx; }

    static std::unique_ptr<halo::HaloExchanger> make(
        Kind kind, const Shard& shard, std::int64_t max_dim = kMaxDim,
        std::int64_t max_message_bytes = kDefaultMessageBytes, int tag = 7200)
    {
        if (is_nccl(kind)) {
            const halo::NcclExchangerOptions options{.register_buffers = is_registered(kind),
                                                     .pieces = pieces(kind)};
            return halo::make_nccl_exchanger(ctx(), *setup_->nccl, shard, max_dim, options);
        }
        halo::MpiDeviceExchangerOptions options;
        options.mpi.max_message_bytes = max_message_bytes;
        options.mpi.tag = tag;
        options.cuda_aware = kind == Kind::mpi_cuda_aware;
        return halo::make_mpi_device_exchanger(ctx(), comm(), shard, max_dim, options);
    }
};

std::unique_ptr<GpuSetup> GpuTestBase::setup_;

// Skips the test (every rank alike) where the suite's GPUs are missing; fails it where setting
// them up failed.
#define REQUIRE_SUITE()               \
    if (!setup_->skip.empty()) {      \
        GTEST_SKIP() << setup_->skip; \
    }                                 \
    if (!setup_->error.empty()) {     \
        FAIL() << setup_->error;      \
    }

class GpuExchanger : public ::testing::TestWithParam<Kind>, protected GpuTestBase {
protected:
    static void SetUpTestSuite() { create(); }
    static void TearDownTestSuite() { destroy(); }

    // Why every rank skips the parameter's kind (collective): the CUDA-aware kind needs an MPI
    // that takes device pointers.
    std::string unusable(const Shard& shard) const
    {
        if (GetParam() != Kind::mpi_cuda_aware) {
            return {};
        }
        const auto refusal = cuda_aware_refusal(ctx(), comm(), shard);
        if (all_ranks(comm(), refusal.empty())) {
            return {};
        }
        return "this MPI library is not CUDA-aware, the path is not exercised here (" + refusal +
               ")";
    }
};

#define REQUIRE_USABLE(shard)                                     \
    REQUIRE_SUITE();                                              \
    if (const auto why_not = unusable(shard); !why_not.empty()) { \
        GTEST_SKIP() << why_not;                                  \
    }

// ---------------------------------------------------------------------------------------------
// Every exchanger kind.

TEST_P(GpuExchanger, FillsEveryHaloRowForEveryGraphPartitionerAndWidth)
{
    const auto kind = GetParam();
    for (const auto& g : graphs()) {
        for (auto method : {Partitioner::metis, Partitioner::block, Partitioner::random}) {
            SCOPED_TRACE(g.name + " " + halo::to_string(method));
            const auto shards = shards_for(g.csr, method, size());
            const Shard& shard = shards[rank()];
            EXPECT_EQ(plan_error(comm(), shard, g.name), "");
            REQUIRE_USABLE(shard);
            auto exchanger = make(kind, shard);
            // Only registered NCCL has memory of its own to hand out.
            EXPECT_EQ(exchanger->allocate(16) != nullptr, is_registered(kind));
            std::int64_t bytes_sent = 0;
            std::int64_t bytes_received = 0;
            std::int64_t messages = 0;
            bool own = true;
            for (auto cols : kWidths) {
                // The exchanger's memory and the pool's in turn (registered NCCL receives the
                // latter through its staging buffer).
                DeviceMatrix x(ctx(), shard, cols, cols, own ? exchanger.get() : nullptr);
                own = !own;
                x.upload(image(shard, cols, cols, 0, true));
                exchange(*exchanger, x.view());
                EXPECT_TRUE(holds_exchanged_values(shard, x.download().data(), cols, cols, 0))
                    << "width " << cols;
                bytes_sent += shard.plan.num_send() * cols * 4;
                bytes_received += shard.num_halo * cols * 4;
                messages += expected_messages(is_nccl(kind), shard, cols, kDefaultMessageBytes,
                                              pieces(kind));
            }
            const auto& stats = exchanger->stats();
            EXPECT_EQ(stats.exchanges, 4);
            EXPECT_EQ(stats.bytes_sent, bytes_sent);
            EXPECT_EQ(stats.bytes_received, bytes_received);
            EXPECT_EQ(stats.messages_sent, messages);
            EXPECT_GE(stats.start_seconds, 0.0);
            EXPECT_GE(stats.finish_seconds, 0.0);
            // Registered: at least its send buffer and the matrices it handed out.
            if (is_registered(kind)) {
                EXPECT_GE(stats.registered_bytes,
                          (shard.plan.num_send() + shard.num_owned + shard.num_halo) * 4);
            } else {
                EXPECT_EQ(stats.registered_bytes, 0);
            }
            // What all ranks send is what all ranks receive, and the exchange moved something.
            const auto total_sent = sum_over_ranks(comm(), stats.bytes_sent);
            EXPECT_EQ(total_sent, sum_over_ranks(comm(), stats.bytes_received));
            EXPECT_GT(total_sent, 0);
        }
    }
}

TEST_P(GpuExchanger, RepeatedExchangesFollowTheComputeStream)
{
    // One exchanger and one matrix over eight rounds of new values and widths. Owned rows are
    // written, and halo rows poisoned, on the compute stream right before start(), and read on
    // it right after finish(); the host waits only at the end of a round. Even rounds hold the
    // compute stream before the write (start() must order the packing after it), odd rounds
    // hold the comm stream before start() and between start() and finish() (the reader must
    // wait for the received rows).
    const auto kind = GetParam();
    const auto all = graphs();
    const auto shards = shards_for(all[0].csr, Partitioner::metis, size());
    const Shard& shard = shards[rank()];
    REQUIRE_USABLE(shard);
    auto exchanger = make(kind, shard);
    const auto rows = shard.num_owned + shard.num_halo;
    DeviceMatrix x(ctx(), shard, kMaxDim, kMaxDim, exchanger.get());
    PinnedBuffer<float> input(static_cast<std::size_t>(rows * kMaxDim));
    PinnedBuffer<float> output(static_cast<std::size_t>(rows * kMaxDim));
    const cudaStream_t compute = ctx().compute_stream();
    const cudaStream_t comm_stream = ctx().comm_stream();
    const std::int64_t widths[] = {64, 7, 129, 1, 64, 129, 7, 64};
    std::int64_t bytes = 0;
    for (int round = 0; round < 8; ++round) {
        const auto cols = widths[round];
        const auto before = image(shard, cols, cols, round, true);
        std::copy(before.begin(), before.end(), input.data());
        std::fill(output.data(), output.data() + output.size(), 0.0f);
        const DenseView<float> view{x.view().data, rows, cols, cols};
        const auto bytes_now = before.size() * sizeof(float);
        if (round % 2 == 0) {
            delay(compute, 50);
        } else {
            delay(comm_stream, 30);
        }
        TEST_CUDA(
            cudaMemcpyAsync(view.data, input.data(), bytes_now, cudaMemcpyHostToDevice, compute));
        try {
            exchanger->start(view);
            if (round % 2 == 1) {
                delay(comm_stream, 30);
            }
            exchanger->finish();
        } catch (const std::exception& e) {
            abort_job(std::string("halo exchange failed: ") + e.what());
        }
        TEST_CUDA(
            cudaMemcpyAsync(output.data(), view.data, bytes_now, cudaMemcpyDeviceToHost, compute));
        TEST_CUDA(cudaStreamSynchronize(compute));
        EXPECT_TRUE(holds_exchanged_values(shard, output.data(), cols, cols, round))
            << "round " << round << " (" << (round % 2 == 0 ? "compute" : "comm")
            << " stream held)";
        bytes += shard.num_halo * cols * static_cast<std::int64_t>(sizeof(float));
    }
    EXPECT_EQ(exchanger->stats().exchanges, 8);
    EXPECT_EQ(exchanger->stats().bytes_received, bytes);
    TEST_CUDA(cudaStreamSynchronize(comm_stream));
}

TEST_P(GpuExchanger, StridedMatricesKeepTheirPadding)
{
    const auto kind = GetParam();
    const auto all = graphs();
    const auto shards = shards_for(all[1].csr, Partitioner::random, size());
    const Shard& shard = shards[rank()];
    REQUIRE_USABLE(shard);
    auto exchanger = make(kind, shard);
    // Strided and contiguous in turn, so that the staging path and the direct one follow one
    // another on the same exchanger.
    const std::pair<std::int64_t, std::int64_t> shapes[] = {
        {7, 9}, {7, 7}, {64, 68}, {1, 4}, {129, 131}, {64, 64}, {129, 129}, {3, 130}};
    int round = 0;
    for (const auto& [cols, ld] : shapes) {
        DeviceMatrix x(ctx(), shard, cols, ld);
        x.upload(image(shard, cols, ld, round, true));
        exchange(*exchanger, x.view());
        EXPECT_TRUE(holds_exchanged_values(shard, x.download().data(), cols, ld, round))
            << "width " << cols << " ld " << ld;
        ++round;
    }
    EXPECT_EQ(exchanger->stats().exchanges, 8);
}

TEST_P(GpuExchanger, TwoExchangersInFlightAtOnce)
{
    // Started in the same order on every rank (NCCL matches operations in issue order; MPI keeps
    // them apart by tag) and finished in the opposite order.
    const auto kind = GetParam();
    const auto all = graphs();
    const auto shards = shards_for(all[0].csr, Partitioner::random, size());
    const Shard& shard = shards[rank()];
    REQUIRE_USABLE(shard);
    auto a = make(kind, shard, kMaxDim, 64, 7300);
    auto b = make(kind, shard, kMaxDim, 64, 7301);
    DeviceMatrix xa(ctx(), shard, 7, 7, a.get());
    DeviceMatrix xb(ctx(), shard, 64, 66, b.get());
    xa.upload(image(shard, 7, 7, 4, true));
    xb.upload(image(shard, 64, 66, 5, true));
    try {
        a->start(xa.view());
        b->start(xb.view());
        b->finish();
        a->finish();
    } catch (const std::exception& e) {
        abort_job(std::string("halo exchange failed: ") + e.what());
    }
    EXPECT_TRUE(holds_exchanged_values(shard, xa.download().data(), 7, 7, 4));
    EXPECT_TRUE(holds_exchanged_values(shard, xb.download().data(), 64, 66, 5));
}

TEST_P(GpuExchanger, WorksWhicheverDeviceIsCurrent)
{
    // A library call that changed the current device must not send the exchanger's kernels and
    // copies to the wrong GPU; the caller's choice is restored afterwards.
    const auto kind = GetParam();
    const auto all = graphs();
    const auto shards = shards_for(all[2].csr, Partitioner::metis, size());
    const Shard& shard = shards[rank()];
    REQUIRE_USABLE(shard);
    if (!all_ranks(comm(), setup_->gpus >= 2)) {
        GTEST_SKIP() << "needs two CUDA devices on every rank's node";
    }
    auto exchanger = make(kind, shard);
    DeviceMatrix x(ctx(), shard, 64, 64, exchanger.get());
    x.upload(image(shard, 64, 64, 6, true));
    const int other = (ctx().device() + 1) % setup_->gpus;
    TEST_CUDA(cudaSetDevice(other));
    exchange(*exchanger, x.view());
    int current = -1;
    TEST_CUDA(cudaGetDevice(&current));
    EXPECT_EQ(current, other);
    TEST_CUDA(cudaSetDevice(ctx().device()));
    EXPECT_TRUE(holds_exchanged_values(shard, x.download().data(), 64, 64, 6));
}

TEST_P(GpuExchanger, RejectsMisuseWithoutDisturbingTheExchange)
{
    // Every refusal here happens before any communication, on the rank that misuses its own
    // exchanger, so it cannot leave a peer waiting.
    const auto kind = GetParam();
    const auto all = graphs();
    const auto shards = shards_for(all[1].csr, Partitioner::block, size());
    const Shard& shard = shards[rank()];
    REQUIRE_USABLE(shard);
    auto exchanger = make(kind, shard, 8);

    EXPECT_THROW(exchanger->finish(), halo::LogicError);
    DeviceMatrix wide(ctx(), shard, 9, 9);
    EXPECT_THROW(exchanger->start(wide.view()), halo::LogicError);
    DeviceMatrix x(ctx(), shard, 8, 8);
    auto short_view = x.view();
    short_view.rows -= 1;
    EXPECT_THROW(exchanger->start(short_view), halo::LogicError);
    // Host memory where device memory is expected.
    auto host = image(shard, 8, 8, 3, true);
    const DenseView<float> host_view{host.data(), x.view().rows, 8, 8};
    try {
        exchanger->start(host_view);
        ADD_FAILURE() << "start() accepted host memory";
    } catch (const halo::LogicError& e) {
        EXPECT_NE(std::string(e.what()).find("is not memory of device"), std::string::npos)
            << e.what();
    }

    // A second start() while one is in flight is refused; the first still completes.
    x.upload(image(shard, 8, 8, 3, true));
    try {
        exchanger->start(x.view());
    } catch (const std::exception& e) {
        abort_job(std::string("halo exchange failed: ") + e.what());
    }
    EXPECT_THROW(exchanger->start(x.view()), halo::LogicError);
    try {
        exchanger->finish();
    } catch (const std::exception& e) {
        abort_job(std::string("halo exchange failed: ") + e.what());
    }
    EXPECT_TRUE(holds_exchanged_values(shard, x.download().data(), 8, 8, 3));

    // Width 0 exchanges nothing (and a null matrix is fine then).
    exchange(*exchanger, DenseView<float>{nullptr, x.view().rows, 0, 0});
    EXPECT_EQ(exchanger->stats().exchanges, 2);
    EXPECT_EQ(exchanger->stats().bytes_sent, shard.plan.num_send() * 8 * 4);
    EXPECT_EQ(exchanger->stats().messages_sent,
              expected_messages(is_nccl(kind), shard, 8, kDefaultMessageBytes, pieces(kind)));

    // An exchanger belongs to the rank of its part, and is at least one column wide.
    const Shard& other = shards[(rank() + 1) % size()];
    EXPECT_THROW(make(kind, other), halo::LogicError);
    EXPECT_THROW(make(kind, shard, 0), halo::LogicError);
    if (is_nccl(kind)) {  // and moves its rows in at least one piece
        EXPECT_THROW(halo::make_nccl_exchanger(ctx(), *setup_->nccl, shard, 8,
                                               halo::NcclExchangerOptions{.pieces = 0}),
                     halo::LogicError);
    }
}

std::vector<Kind> kinds()
{
    if (kNccl) {
        return {Kind::nccl, Kind::nccl_registered, Kind::nccl_pieces};
    }
    return {Kind::mpi_staged, Kind::mpi_cuda_aware};
}

INSTANTIATE_TEST_SUITE_P(Device, GpuExchanger, ::testing::ValuesIn(kinds()),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                             return to_string(info.param);
                         });

// ---------------------------------------------------------------------------------------------
// One family only.

class GpuFamily : public ::testing::Test, protected GpuTestBase {
protected:
    static void SetUpTestSuite() { create(); }
    static void TearDownTestSuite() { destroy(); }

    // Another NCCL communicator over the suite's ranks (collective); null, with `error` set,
    // where this rank could not make it.
    static std::unique_ptr<halo::NcclComm> second_comm(std::string& error)
    {
        try {
            return std::make_unique<halo::NcclComm>(comm(), ctx());
        } catch (const std::exception& e) {
            error = e.what();
            return nullptr;
        }
    }
};

#if HALO_TEST_NCCL

TEST_F(GpuFamily, NcclCommMatchesTheMpiCommunicator)
{
    REQUIRE_SUITE();
    const auto& nccl = *setup_->nccl;
    EXPECT_NE(nccl.get(), nullptr);
    EXPECT_EQ(nccl.rank(), rank());
    EXPECT_EQ(nccl.size(), size());
    int count = 0;
    int user_rank = -1;
    int device = -1;
    EXPECT_EQ(ncclCommCount(nccl.get(), &count), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(nccl.get(), &user_rank), ncclSuccess);
    EXPECT_EQ(ncclCommCuDevice(nccl.get(), &device), ncclSuccess);
    EXPECT_EQ(count, size());
    EXPECT_EQ(user_rank, rank());
    EXPECT_EQ(device, ctx().device());
}

TEST_F(GpuFamily, AbortTearsACommunicatorDownAndExchangersRefuseIt)
{
    REQUIRE_SUITE();
    std::string error;
    auto second = second_comm(error);
    ASSERT_TRUE(all_ranks(comm(), error.empty())) << error;
    ASSERT_NE(second->get(), nullptr);
    second->abort();
    EXPECT_EQ(second->get(), nullptr);
    second->abort();  // a second abort is a no-op
    const auto all = graphs();
    const auto shards = shards_for(all[2].csr, Partitioner::block, size());
    EXPECT_THROW(halo::make_nccl_exchanger(ctx(), *second, shards[rank()], 8), halo::LogicError);
    second.reset();  // the destructor of an aborted communicator does nothing
    // The suite's communicator is untouched.
    auto exchanger = make(Kind::nccl, shards[rank()], 8);
    DeviceMatrix x(ctx(), shards[rank()], 8, 8);
    x.upload(image(shards[rank()], 8, 8, 1, true));
    exchange(*exchanger, x.view());
    EXPECT_TRUE(holds_exchanged_values(shards[rank()], x.download().data(), 8, 8, 1));
}

TEST_F(GpuFamily, RegisteredMatricesOutliveTheirExchangerAndKeepTheirRows)
{
    // The engine's matrices may be freed after the exchanger (the registry keeps them allocated
    // until the exchanger closes it, then each is freed by its own deleter). A second registered
    // exchanger on the same communicator registers its own memory beside the first's.
    REQUIRE_SUITE();
    const auto all = graphs();
    const auto shards = shards_for(all[0].csr, Partitioner::metis, size());
    const Shard& shard = shards[rank()];
    const auto rows = shard.num_owned + shard.num_halo;
    std::shared_ptr<float> kept;
    std::vector<float> expected;
    {
        auto exchanger = make(Kind::nccl_registered, shard, 64);
        auto other = make(Kind::nccl_registered, shard, 64);
        DeviceMatrix x(ctx(), shard, 64, 64, exchanger.get());
        DeviceMatrix y(ctx(), shard, 64, 64, other.get());
        x.upload(image(shard, 64, 64, 2, true));
        y.upload(image(shard, 64, 64, 3, true));
        exchange(*exchanger, x.view());
        exchange(*other, y.view());
        expected = x.download();
        EXPECT_TRUE(holds_exchanged_values(shard, expected.data(), 64, 64, 2));
        EXPECT_TRUE(holds_exchanged_values(shard, y.download().data(), 64, 64, 3));
        // y goes before its exchanger, x after it.
        kept = x.storage();
    }
    std::vector<float> host(static_cast<std::size_t>(rows * 64));
    TEST_CUDA(
        cudaMemcpy(host.data(), kept.get(), host.size() * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT_EQ(host, expected);
    kept.reset();  // freed after the exchanger closed its registry
    // The communicator still works, registered or not.
    auto plain = make(Kind::nccl, shard, 8);
    DeviceMatrix z(ctx(), shard, 8, 8);
    z.upload(image(shard, 8, 8, 4, true));
    exchange(*plain, z.view());
    EXPECT_TRUE(holds_exchanged_values(shard, z.download().data(), 8, 8, 4));
}

TEST_F(GpuFamily, AbortWithRegisteredBuffersTearsDownInAnyOrder)
{
    // The error path of halo-infer: the communicator aborted while registered buffers remain (NCCL
    // 2.28 faults inside ncclCommAbort then, unless NcclComm deregisters them first), then the
    // exchanger and the matrices destroyed after it; and the same through make_exchanger's
    // Exchange, destroyed while an exception unwinds.
    REQUIRE_SUITE();
    const auto all = graphs();
    const auto shards = shards_for(all[1].csr, Partitioner::metis, size());
    const Shard& shard = shards[rank()];
    std::string error;
    auto second = second_comm(error);
    ASSERT_TRUE(all_ranks(comm(), error.empty())) << error;
    auto exchanger = halo::make_nccl_exchanger(
        ctx(), *second, shard, 16, halo::NcclExchangerOptions{.register_buffers = true});
    auto x = std::make_unique<DeviceMatrix>(ctx(), shard, 16, 16, exchanger.get());
    x->upload(image(shard, 16, 16, 5, true));
    exchange(*exchanger, x->view());
    const auto expected = x->download();
    EXPECT_TRUE(holds_exchanged_values(shard, expected.data(), 16, 16, 5));
    TEST_CUDA(cudaDeviceSynchronize());
    second->abort();
    EXPECT_EQ(x->download(), expected);  // the memory stays this rank's until freed
    exchanger.reset();
    x.reset();
    second.reset();

    halo::ExchangeSpec spec;
    spec.transport = "nccl";
    spec.registration = halo::ExchangeSpec::Registration::on;
    bool caught = false;
    try {
        const auto made = halo::make_exchanger(spec, *setup_->world, shard, 16, &ctx());
        EXPECT_TRUE(made->registered());
        DeviceMatrix y(ctx(), shard, 16, 16, &made->exchanger());
        y.upload(image(shard, 16, 16, 6, true));
        exchange(made->exchanger(), y.view());
        EXPECT_TRUE(holds_exchanged_values(shard, y.download().data(), 16, 16, 6));
        throw std::runtime_error("injected");
    } catch (const std::runtime_error&) {
        caught = true;
    }
    EXPECT_TRUE(caught);
    // The suite's communicator is untouched.
    auto plain = make(Kind::nccl, shard, 8);
    DeviceMatrix z(ctx(), shard, 8, 8);
    z.upload(image(shard, 8, 8, 7, true));
    exchange(*plain, z.view());
    EXPECT_TRUE(holds_exchanged_values(shard, z.download().data(), 8, 8, 7));
}

#else

TEST_F(GpuFamily, MpiSplitsBlocksLargerThanMaxMessageBytes)
{
    REQUIRE_SUITE();
    const auto all = graphs();
    for (const auto& [g, method] :
         {std::pair{&all[0], Partitioner::metis}, std::pair{&all[2], Partitioner::block}}) {
        const auto shards = shards_for(g->csr, method, size());
        const Shard& shard = shards[rank()];
        // 64 bytes: 16 floats, less than one row of width 64; 30 bytes: 7 floats, so pieces end
        // in the middle of rows of every width.
        for (std::int64_t max_bytes : {64, 30}) {
            auto exchanger = make(Kind::mpi_staged, shard, kMaxDim, max_bytes);
            std::int64_t messages = 0;
            int round = 0;
            for (auto cols : kWidths) {
                SCOPED_TRACE(g->name + " max_message_bytes " + std::to_string(max_bytes) +
                             " width " + std::to_string(cols));
                DeviceMatrix x(ctx(), shard, cols, cols);
                x.upload(image(shard, cols, cols, round, true));
                exchange(*exchanger, x.view());
                EXPECT_TRUE(holds_exchanged_values(shard, x.download().data(), cols, cols, round));
                messages += expected_messages(false, shard, cols, max_bytes);
                ++round;
            }
            EXPECT_EQ(exchanger->stats().messages_sent, messages);
            // The split really happened: more messages than blocks.
            EXPECT_GT(sum_over_ranks(comm(), messages),
                      sum_over_ranks(comm(), 4 * nonempty_blocks(shard.plan.send_offsets)));
        }
    }
}

TEST_F(GpuFamily, MpiFinishReportsABlockShorterThanThePlanExpects)
{
    // Without check_halo_plan, a sender that drops a row completes the receive short; the
    // receiver must notice rather than leave a NaN in its halo.
    REQUIRE_SUITE();
    const auto all = graphs();
    auto shards = shards_for(all[2].csr, Partitioner::block, size());
    const int sender = 1;
    const auto receiver = shards[sender].plan.send_ranks.front();
    auto& plan = shards[sender].plan;
    plan.send_rows.erase(plan.send_rows.begin() + plan.send_offsets[1] - 1);
    for (std::size_t b = 1; b < plan.send_offsets.size(); ++b) {
        plan.send_offsets[b] -= 1;
    }
    const Shard& shard = shards[rank()];
    auto exchanger = make(Kind::mpi_staged, shard, 4);
    DeviceMatrix x(ctx(), shard, 4, 4);
    x.upload(image(shard, 4, 4, 0, true));
    try {
        exchanger->start(x.view());
    } catch (const std::exception& e) {
        abort_job(std::string("halo exchange failed: ") + e.what());
    }
    if (rank() == receiver) {
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
    MPI_Barrier(comm());
}

TEST_F(GpuFamily, CudaAwareOptionIsRefusedByAnMpiThatCannotReadDeviceMemory)
{
    REQUIRE_SUITE();
    const auto all = graphs();
    const auto shards = shards_for(all[2].csr, Partitioner::block, size());
    const auto refusal = cuda_aware_refusal(ctx(), comm(), shards[rank()]);
    if (all_ranks(comm(), refusal.empty())) {
        GTEST_SKIP() << "this MPI library is CUDA-aware; the Device/GpuExchanger.*/MpiCudaAware "
                        "tests exercise it";
    }
    EXPECT_NE(refusal.find("not CUDA-aware"), std::string::npos) << refusal;
    EXPECT_NE(refusal.find("MPIX_Query_cuda_support"), std::string::npos) << refusal;
}

#endif

}  // namespace
