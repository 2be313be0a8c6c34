// Lean memory and out-of-core execution on the CUDA backend: the engine's memory report against the allocator's peak, and the
// row-block driver (out of core) against the in-memory run. Skipped without a device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/model.hpp"
#include "halo/core/shard.hpp"
#include "halo/engine/engine.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo_test.hpp"
#include "spmm_device_fixtures.hpp"

namespace {

using halo::testing::Gpu;
using halo::testing::graph_csr;
using halo::testing::tolerance;

halo::Shard test_shard(int scale)
{
    const auto graph = graph_csr("rmat", scale, 3, false);
    const std::vector<std::int32_t> owner(static_cast<std::size_t>(graph.num_rows), 0);
    return halo::build_shard(graph, owner, 1, 0);
}

struct Result {
    std::vector<float> out;
    halo::MemoryReport memory;
    std::size_t peak = 0;  // the context's allocator peak over the engine's life
    bool out_of_core = false;
    std::string report;
};

Result run(const halo::Shard& shard, const halo::Model& model, halo::Execution execution,
           std::int64_t limit, halo::OperatorStream stream = halo::OperatorStream::values)
{
    Gpu gpu;  // a fresh context: its peak is this engine's
    auto exchanger = halo::make_local_exchanger(shard);
    halo::EngineOptions o;
    o.execution = execution;
    o.device_memory_limit = limit;
    o.operator_stream = stream;
    Result r;
    {
        halo::Engine engine(*gpu.backend, *exchanger, shard, model, o);
        const auto x = halo::random_node_features(shard.global_ids, model.input_dim(), 5);
        r.out = engine.run(x);
        gpu.ctx.synchronize();
        r.memory = engine.memory_report();
        r.out_of_core = engine.out_of_core();
        r.report = engine.kernel_report();
    }
    gpu.ctx.synchronize();
    r.peak = gpu.ctx.peak_bytes();
    return r;
}

std::int64_t smallest_limit(const halo::Shard& shard, const halo::Model& model)
{
    try {
        run(shard, model, halo::Execution::row_blocks, 1);
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

// The engine test's rule: each layer sums at most (max degree + widest layer) products per output
// in another order on the GPU; rounding grows with that count and the depth.
float engine_tolerance(const halo::Shard& shard, const halo::Model& model,
                       const std::vector<float>& want)
{
    double scale = 1.0;
    for (const auto v : want) {
        scale = std::max(scale, static_cast<double>(std::abs(v)));
    }
    const auto terms = static_cast<double>(halo::max_row_nnz(shard.csr.view()) + model.max_dim());
    return tolerance<float>(4.0 * terms * static_cast<double>(model.layers.size()), scale);
}

// The formula of docs/ENGINE.md ("Memory accounting") against what the pool handed out: the
// report is what the engine holds after its setup; the peak adds the setup's transients (a
// plan's int64 row offsets before narrowing, the degree column), so it may exceed the report
// by those and no more.
void expect_report_matches_peak(halo::LayerType type, const std::vector<std::int64_t>& dims)
{
    SCOPED_TRACE(halo::to_string(type));
    const auto shard = test_shard(12);
    const auto model = halo::random_model(type, dims, 11);
    const auto r = run(shard, model, halo::Execution::in_memory, 0);
    const auto total = r.memory.total();
    const auto peak = static_cast<std::int64_t>(r.peak);
    const auto n = shard.num_owned + shard.num_halo;
    const auto transients = 8 * (shard.num_owned + 2) + 4 * n;
    EXPECT_LE(total, peak) << halo::format_memory_report(r.memory);
    EXPECT_LE(peak, total + transients + (std::int64_t{1} << 20))
        << "allocator peak " << peak << " bytes, report:\n"
        << halo::format_memory_report(r.memory);
}

void expect_row_blocks_match(halo::LayerType type, const std::vector<std::int64_t>& dims,
                             halo::RandomModelOptions options = {})
{
    SCOPED_TRACE(halo::to_string(type));
    const auto shard = test_shard(11);
    const auto model = halo::random_model(type, dims, 11, options);
    const auto want = run(shard, model, halo::Execution::in_memory, 0);
    const auto smallest = smallest_limit(shard, model);
    ASSERT_GT(smallest, 0);
    const auto tol = engine_tolerance(shard, model, want.out);
    // z resident beside a few streamed blocks (SpMM layers), as the CPU test's roomy limit.
    const auto n = shard.num_owned + shard.num_halo;
    const auto resident = 2 * n * model.max_dim() * 4 + 2 * smallest;
    const bool spmm_layer = type == halo::LayerType::gcn || type == halo::LayerType::sage ||
                            type == halo::LayerType::gin;
    // The resident limit again with the pattern streamed (gcn and mean operators: scaled), and
    // with the default (automatic: the pattern here, one part; gcn's z scaled once per layer).
    using halo::OperatorStream;
    const std::vector<std::pair<std::int64_t, OperatorStream>> configs{
        {4 * smallest, OperatorStream::values},
        {64 * smallest, OperatorStream::values},
        {resident, OperatorStream::values},
        {resident, OperatorStream::pattern},
        {resident, OperatorStream::automatic}};
    for (const auto& [limit, stream] : configs) {
        const bool pattern = stream != OperatorStream::values;
        SCOPED_TRACE(stream == OperatorStream::automatic ? "automatic"
                     : pattern                           ? "pattern streamed"
                                                         : "values streamed");
        const auto got = run(shard, model, halo::Execution::row_blocks, limit, stream);
        EXPECT_TRUE(got.out_of_core);
        if (limit == resident && spmm_layer) {
            EXPECT_NE(got.report.find("all rows resident"), std::string::npos) << got.report;
            EXPECT_GT(got.memory.row_blocks, 1) << got.report;
            // gin's sum operator is a pattern already: nothing to scale.
            const bool scaled = pattern && type != halo::LayerType::gin;
            EXPECT_EQ(got.report.find("pattern streamed") != std::string::npos, scaled)
                << got.report;
            // gcn's z scaled by the column scalings (no c_j gathered per nonzero).
            EXPECT_EQ(got.report.find("scaled by the column scalings") != std::string::npos,
                      pattern && type == halo::LayerType::gcn)
                << got.report;
        }
        ASSERT_EQ(got.out.size(), want.out.size());
        // maxk's top-k may pick another entry where two are within rounding of each other (the
        // GEMM of a block may round differently from the GEMM of all rows): count such rows.
        std::int64_t off = 0;
        for (std::size_t k = 0; k < got.out.size(); ++k) {
            ASSERT_TRUE(std::isfinite(got.out[k])) << k;
            off += std::abs(got.out[k] - want.out[k]) > tol ? 1 : 0;
        }
        const auto allowed =
            type == halo::LayerType::maxk ? static_cast<std::int64_t>(got.out.size() / 100) : 0;
        EXPECT_LE(off, allowed) << "limit " << limit << ": " << off << " of " << got.out.size()
                                << " values outside " << tol << "\n"
                                << got.report;
        // The pool's peak stays within the limit, up to cuSPARSE's workspace and descriptors.
        EXPECT_LE(static_cast<std::int64_t>(got.peak), limit + (std::int64_t{8} << 20))
            << "limit " << limit << "\n"
            << halo::format_memory_report(got.memory);
    }
}

TEST(CudaMemoryReport, GcnMatchesTheAllocatorPeak)
{
    HALO_REQUIRE_GPUS(1);
    expect_report_matches_peak(halo::LayerType::gcn, {16, 32, 8});
}

TEST(CudaMemoryReport, SageMatchesTheAllocatorPeak)
{
    HALO_REQUIRE_GPUS(1);
    expect_report_matches_peak(halo::LayerType::sage, {16, 32, 8});
}

TEST(CudaMemoryReport, GinMatchesTheAllocatorPeak)
{
    HALO_REQUIRE_GPUS(1);
    expect_report_matches_peak(halo::LayerType::gin, {16, 24, 5});
}

TEST(CudaRowBlocks, GcnMatchesInMemory)
{
    HALO_REQUIRE_GPUS(1);
    expect_row_blocks_match(halo::LayerType::gcn, {16, 32, 8});
}

TEST(CudaRowBlocks, SageMatchesInMemory)
{
    HALO_REQUIRE_GPUS(1);
    expect_row_blocks_match(halo::LayerType::sage, {16, 32, 8});
}

TEST(CudaRowBlocks, GinMatchesInMemory)
{
    HALO_REQUIRE_GPUS(1);
    expect_row_blocks_match(halo::LayerType::gin, {16, 24, 5});
}

TEST(CudaRowBlocks, MaxkMatchesInMemory)
{
    HALO_REQUIRE_GPUS(1);
    halo::RandomModelOptions o;
    o.k = 8;
    expect_row_blocks_match(halo::LayerType::maxk, {16, 32, 16}, o);
}

TEST(CudaRowBlocks, GatMatchesInMemory)
{
    HALO_REQUIRE_GPUS(1);
    halo::RandomModelOptions o;
    o.heads = 2;
    expect_row_blocks_match(halo::LayerType::gat, {24, 16, 6}, o);
}

// Seeded features out of core (generated on the device, copied into the driver's host input)
// against the in-memory run's (generated in place on the device): the same model output.
TEST(CudaRowBlocks, RandomFeaturesMatchInMemory)
{
    HALO_REQUIRE_GPUS(1);
    const auto shard = test_shard(11);
    const auto model = halo::random_model(halo::LayerType::gcn, {16, 32, 8}, 11);
    auto run_random = [&](halo::Execution execution, std::int64_t limit) {
        Gpu gpu;
        auto exchanger = halo::make_local_exchanger(shard);
        halo::EngineOptions o;
        o.execution = execution;
        o.device_memory_limit = limit;
        halo::Engine engine(*gpu.backend, *exchanger, shard, model, o);
        auto out = engine.run_random(23);
        EXPECT_EQ(engine.out_of_core(), execution == halo::Execution::row_blocks);
        return out;
    };
    const auto want = run_random(halo::Execution::in_memory, 0);
    const auto smallest = smallest_limit(shard, model);
    ASSERT_GT(smallest, 0);
    // A chunk of a quarter of the limit: several chunks at the smallest limit.
    const auto got = run_random(halo::Execution::row_blocks, smallest);
    ASSERT_EQ(got.size(), want.size());
    const auto tol = engine_tolerance(shard, model, want);
    for (std::size_t k = 0; k < got.size(); ++k) {
        ASSERT_NEAR(got[k], want[k], tol) << k;
    }
}

enum class Streamed { valued, pattern, scaled, scaled_input };

// The streamed operator against the CPU reference: blocks prefetched ahead and run in order,
// a block run without its prefetch (what was prefetched is dropped), an empty block; a valued
// operator, a pattern one, and one whose values are row and column scalings streamed as its
// pattern alone; outputs poisoned before each run.
void expect_streamed_matches_reference(Streamed kind)
{
    SCOPED_TRACE(static_cast<int>(kind));
    Gpu gpu;
    auto a = graph_csr("rmat", 11, 7, kind == Streamed::valued);
    // Two empty rows at the start: a block of them has no nonzeros.
    a.indptr.insert(a.indptr.begin(), {0, 0});
    a.num_rows += 2;
    halo::OperatorScaling scaling;
    const bool scaled = kind == Streamed::scaled || kind == Streamed::scaled_input;
    if (scaled) {
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            scaling.row.push_back(0.25f + static_cast<float>(i % 7) / 8.0f);
        }
        for (std::int64_t j = 0; j < a.num_cols; ++j) {
            scaling.col.push_back(1.5f - static_cast<float>(j % 5) / 4.0f);
        }
        a.values.resize(static_cast<std::size_t>(a.nnz()));
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
                a.values[k] = scaling.row[i] * scaling.col[a.indices[k]];
            }
        }
    }
    const std::int64_t width = 24;
    std::vector<float> x(static_cast<std::size_t>(a.num_cols * width));
    for (std::size_t k = 0; k < x.size(); ++k) {
        x[k] = static_cast<float>(static_cast<std::int64_t>(k * 2654435761u % 2001) - 1000) / 1000;
    }
    std::vector<float> want(static_cast<std::size_t>(a.num_rows * width));
    halo::reference::spmm(a.view(), {x.data(), a.num_cols, width, width},
                          {want.data(), a.num_rows, width, width});
    // scaled_input: x padded (ld above the width: the padding must stay as it was) and scaled by
    // the column scalings in place, once; every block then reads it so.
    const std::int64_t ld = kind == Streamed::scaled_input ? width + 3 : width;
    std::vector<float> x_padded(static_cast<std::size_t>(a.num_cols * ld), -7.0f);
    for (std::int64_t j = 0; j < a.num_cols; ++j) {
        std::copy_n(x.data() + j * width, width, x_padded.data() + j * ld);
    }
    auto xd_full = gpu.backend->allocate(a.num_cols, ld);
    gpu.backend->copy_from_host(x_padded.data(), xd_full.view());
    const halo::DenseView<float> xd_view{xd_full.data(), a.num_cols, width, ld};
    ASSERT_TRUE(gpu.backend->streams_scaled_operators());
    auto streamed = gpu.backend->make_streamed_spmm(a, {}, scaled ? &scaling : nullptr,
                                                    kind == Streamed::scaled_input);
    EXPECT_EQ(streamed->scaled_input(), kind == Streamed::scaled_input);
    if (kind == Streamed::scaled_input) {
        // In two row ranges (as the row-block driver scales z chunk by chunk as it arrives).
        const std::int64_t half = a.num_cols / 3;
        streamed->scale_input(xd_view, {half, a.num_cols});
        streamed->scale_input(xd_view, {0, half});
        std::vector<float> back(x_padded.size());
        gpu.backend->copy_to_host(xd_full.view(), back.data());
        for (std::int64_t j = 0; j < a.num_cols; ++j) {
            for (std::int64_t c = 0; c < ld; ++c) {
                const auto k = static_cast<std::size_t>(j * ld + c);
                ASSERT_EQ(back[k], c < width ? x_padded[k] * scaling.col[j] : -7.0f)
                    << "row " << j << " column " << c;
            }
        }
    } else {
        EXPECT_THROW(streamed->scale_input(xd_view, {0, a.num_cols}), halo::LogicError);
    }
    const halo::DenseView<const float> xd{xd_full.data(), a.num_cols, width, ld};
    std::vector<halo::RowRange> blocks{{0, 2}, {2, 300}, {300, 301}, {301, 1200}};
    blocks.push_back({1200, a.num_rows});
    auto check = [&](halo::RowRange rows, const std::vector<float>& got) {
        for (std::int64_t i = rows.begin; i < rows.end; ++i) {
            for (std::int64_t j = 0; j < width; ++j) {
                const auto w = want[static_cast<std::size_t>(i * width + j)];
                const auto g = got[static_cast<std::size_t>((i - rows.begin) * width + j)];
                const auto terms = static_cast<double>(a.row_nnz(i)) + 1.0;
                const auto tol = tolerance<float>(2.0 * terms, terms);
                ASSERT_NEAR(g, w, tol) << "row " << i << " column " << j;
            }
        }
    };
    auto run_block = [&](halo::RowRange rows) {
        auto y = gpu.backend->allocate(rows.size(), width);
        std::vector<float> poison(static_cast<std::size_t>(rows.size() * width),
                                  std::numeric_limits<float>::quiet_NaN());
        gpu.backend->copy_from_host(poison.data(), y.view());
        streamed->run(rows, xd, y.view());
        std::vector<float> got(poison.size());
        gpu.backend->copy_to_host(y.view(), got.data());
        check(rows, got);
    };
    streamed->prefetch(blocks[0]);
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        if (b + 1 < blocks.size()) {
            streamed->prefetch(blocks[b + 1]);
        }
        run_block(blocks[b]);
    }
    // Prefetched, then another block runs: the prefetched one is dropped, the other is right.
    streamed->prefetch(blocks[1]);
    run_block(blocks[3]);
    run_block(blocks[1]);
    // Every block went up once, the dropped prefetch and the reruns more: values only where
    // neither a pattern nor scaled.
    const std::int64_t per_nnz = kind == Streamed::valued ? 8 : 4;  // scaled_input: columns only
    EXPECT_GE(streamed->copied_bytes(), a.nnz() * per_nnz);
    EXPECT_LT(streamed->copied_bytes(), 3 * (a.nnz() * per_nnz + 8 * (a.num_rows + 8)));
    EXPECT_NE(streamed->algorithm().find("cuSPARSE"), std::string::npos);
    EXPECT_EQ(streamed->algorithm().find("pattern streamed") != std::string::npos, scaled)
        << streamed->algorithm();
    EXPECT_EQ(streamed->algorithm().find("scaled by the column scalings") != std::string::npos,
              kind == Streamed::scaled_input)
        << streamed->algorithm();
    EXPECT_EQ(streamed->algorithm().find("refused"), std::string::npos) << streamed->algorithm();
}

TEST(CudaStreamedSpmm, ValuedMatchesTheReference)
{
    HALO_REQUIRE_GPUS(1);
    expect_streamed_matches_reference(Streamed::valued);
}

TEST(CudaStreamedSpmm, PatternMatchesTheReference)
{
    HALO_REQUIRE_GPUS(1);
    expect_streamed_matches_reference(Streamed::pattern);
}

TEST(CudaStreamedSpmm, ScaledPatternMatchesTheReference)
{
    HALO_REQUIRE_GPUS(1);
    expect_streamed_matches_reference(Streamed::scaled);
}

// The input scaled by the column scalings once (scale_input), the values made as r_i alone.
TEST(CudaStreamedSpmm, ScaledInputMatchesTheReference)
{
    HALO_REQUIRE_GPUS(1);
    expect_streamed_matches_reference(Streamed::scaled_input);
}

// upload_async from page-locked memory (three pieces in flight, on the upload stream) and from
// pageable memory (a synchronous copy): the compute issued after each wait_upload sees its rows.
TEST(CudaBackend, AsynchronousUploadsPrecedeTheWorkAfterTheirWait)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const std::int64_t rows = 1 << 16;
    const std::int64_t cols = 16;
    auto pinned = gpu.backend->allocate_host(3 * rows, cols);
    std::vector<float> pageable(static_cast<std::size_t>(rows * cols));
    for (std::int64_t k = 0; k < 3 * rows * cols; ++k) {
        pinned.data()[k] = static_cast<float>(k % 1000003);
    }
    for (std::size_t k = 0; k < pageable.size(); ++k) {
        pageable[k] = -static_cast<float>(k % 999983);
    }
    auto dev = gpu.backend->allocate(4 * rows, cols);
    auto twice = gpu.backend->allocate(4 * rows, cols);
    std::vector<float> poison(static_cast<std::size_t>(4 * rows * cols), std::nanf(""));
    gpu.backend->copy_from_host(poison.data(), dev.view());
    for (int m = 0; m < 3; ++m) {
        gpu.backend->upload_async(pinned.data() + m * rows * cols,
                                  dev.rows_view(m * rows, (m + 1) * rows));
    }
    gpu.backend->upload_async(pageable.data(), dev.rows_view(3 * rows, 4 * rows));
    for (int m = 0; m < 4; ++m) {
        gpu.backend->wait_upload();
        gpu.backend->axpby(2.0f, dev.rows_view(m * rows, (m + 1) * rows), 0.0f,
                           twice.rows_view(m * rows, (m + 1) * rows));
    }
    EXPECT_THROW(gpu.backend->wait_upload(), halo::LogicError);
    std::vector<float> back(static_cast<std::size_t>(4 * rows * cols));
    gpu.backend->copy_to_host(twice.view(), back.data());
    for (std::int64_t k = 0; k < 4 * rows * cols; ++k) {
        const float want = k < 3 * rows * cols
                               ? pinned.data()[k]
                               : pageable[static_cast<std::size_t>(k - 3 * rows * cols)];
        ASSERT_EQ(back[static_cast<std::size_t>(k)], 2.0f * want) << k;
    }
}

// download_async into page-locked memory, three in flight, then finish_downloads.
TEST(CudaBackend, AsynchronousDownloadsLandAfterFinish)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const std::int64_t rows = 1 << 16;
    const std::int64_t cols = 16;
    auto host = gpu.backend->allocate_host(3 * rows, cols);
    std::vector<float> src(static_cast<std::size_t>(rows * cols));
    for (int m = 0; m < 3; ++m) {
        for (std::size_t k = 0; k < src.size(); ++k) {
            src[k] = static_cast<float>(m * 1000003 + static_cast<std::int64_t>(k));
        }
        auto dev = gpu.backend->allocate(rows, cols);
        gpu.backend->copy_from_host(src.data(), dev.view());
        gpu.backend->download_async(dev, host.data() + m * rows * cols);
    }  // each device matrix is released by the backend once its copy is done
    gpu.backend->finish_downloads();
    for (int m = 0; m < 3; ++m) {
        for (std::int64_t k = 0; k < rows * cols; ++k) {
            ASSERT_EQ(host.data()[m * rows * cols + k], static_cast<float>(m * 1000003 + k)) << k;
        }
    }
}

TEST(CudaBackend, PinnedHostMatricesRoundTripLargeCopies)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const std::int64_t rows = (std::int64_t{80} << 20) / (4 * 64);  // 80 MiB: above staging
    auto host = gpu.backend->allocate_host(rows, 64);
    for (std::int64_t k = 0; k < rows * 64; ++k) {
        host.data()[k] = static_cast<float>(k % 1000003);
    }
    auto dev = gpu.backend->allocate(rows, 64);
    gpu.backend->copy_from_host(host.data(), dev.view());
    auto back = gpu.backend->allocate_host(rows, 64);
    gpu.backend->copy_to_host(dev.view(), back.data());
    for (std::int64_t k = 0; k < rows * 64; ++k) {
        ASSERT_EQ(back.data()[k], host.data()[k]) << k;
    }
    EXPECT_GT(gpu.backend->default_memory_limit(), 0);
}

}  // namespace
