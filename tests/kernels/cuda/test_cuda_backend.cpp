// The CUDA context and what of the CUDA backend is its own (the pool, staged copies, the cuSPARSE
// plan's index widths and limits, whole layers against the CPU backend); what every backend must
// do is the conformance suite's (test_backend_conformance_cuda). Every GPU operation runs on fresh
// seeded inputs and is compared with the reference on the same input (STYLE.md point 3); device
// buffers are poisoned with NaN first, so an element written when it must not be shows up.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/detail/argmax.hpp"
#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/model.hpp"
#include "halo/core/shard.hpp"
#include "halo/engine/engine.hpp"
#include "halo/engine/feature_upload.hpp"
#include "halo/kernels/cuda/accel_gcn.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/mergepath.hpp"
#include "halo/kernels/cuda/rowsplit.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/dense_ops.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo/kernels_host/spmm_registry.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo_test.hpp"
#include "spmm_device_fixtures.hpp"

namespace {

using halo::testing::check_spmm;
using halo::testing::DeviceMatrix;
using halo::testing::download;
using halo::testing::Gpu;
using halo::testing::graph_csr;
using halo::testing::HostMatrix;
using halo::testing::kNaN;
using halo::testing::random_matrix;
using halo::testing::row_max_abs;
using halo::testing::tolerance;
using halo::testing::upload;

// ---------------------------------------------------------------------------------------------
// Context

TEST(CudaContext, OwnsDeviceStreamsHandlesAndCountsMemory)
{
    HALO_REQUIRE_GPUS(1);
    const int count = halo::testing::gpu_count();
    halo::cuda::Context ctx;
    EXPECT_EQ(ctx.device(), 0);
    int current = -1;
    HALO_CUDA_TRY(cudaGetDevice(&current));
    EXPECT_EQ(current, ctx.device());

    ASSERT_NE(ctx.compute_stream(), nullptr);
    ASSERT_NE(ctx.comm_stream(), nullptr);
    EXPECT_NE(ctx.compute_stream(), ctx.comm_stream());
    for (const auto stream : {ctx.compute_stream(), ctx.comm_stream()}) {
        unsigned flags = 0;
        HALO_CUDA_TRY(cudaStreamGetFlags(stream, &flags));
        EXPECT_EQ(flags & cudaStreamNonBlocking, cudaStreamNonBlocking);
    }
    cudaStream_t bound = nullptr;
    HALO_CUSPARSE_TRY(cusparseGetStream(ctx.cusparse(), &bound));
    EXPECT_EQ(bound, ctx.compute_stream());
    HALO_CUBLAS_TRY(cublasGetStream(ctx.cublas(), &bound));
    EXPECT_EQ(bound, ctx.compute_stream());
    cublasMath_t mode{};
    HALO_CUBLAS_TRY(cublasGetMathMode(ctx.cublas(), &mode));
    EXPECT_EQ(mode & CUBLAS_TF32_TENSOR_OP_MATH, 0) << "TF32 must stay off";

    cudaMemPool_t pool = nullptr;
    HALO_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, ctx.device()));
    std::uint64_t threshold = 0;
    HALO_CUDA_TRY(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    EXPECT_EQ(threshold, std::numeric_limits<std::uint64_t>::max());

    EXPECT_EQ(ctx.allocate(0), nullptr);
    EXPECT_EQ(ctx.bytes_in_use(), 0u);
    const std::size_t mib = std::size_t{1} << 20;
    void* a = ctx.allocate(3 * mib);
    void* b = ctx.allocate(mib);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(ctx.bytes_in_use(), 4 * mib);
    EXPECT_EQ(ctx.peak_bytes(), 4 * mib);
    ctx.deallocate(a);
    EXPECT_EQ(ctx.bytes_in_use(), mib);
    EXPECT_EQ(ctx.peak_bytes(), 4 * mib);
    ctx.deallocate(b);
    ctx.deallocate(nullptr);
    EXPECT_EQ(ctx.bytes_in_use(), 0u);
    ctx.synchronize();

    const auto report = ctx.memory_report();
    std::printf("%s\n", report.c_str());
    EXPECT_EQ(report.rfind("device 0 (", 0), 0u) << report;
    EXPECT_NE(report.find("0.0 MiB in use, peak 4.0 MiB"), std::string::npos) << report;
    EXPECT_NE(report.find(" free of "), std::string::npos) << report;

    // A device buffer round trip through the pool, and the counters following it.
    {
        halo::cuda::DeviceBuffer<std::int64_t> buffer(ctx, 1000);
        EXPECT_EQ(ctx.bytes_in_use(), 8000u);
        std::vector<std::int64_t> in(1000);
        std::iota(in.begin(), in.end(), -500);
        std::vector<std::int64_t> out(1000, 0);
        HALO_CUDA_TRY(cudaMemcpyAsync(buffer.data(), in.data(), buffer.bytes(),
                                      cudaMemcpyHostToDevice, ctx.compute_stream()));
        HALO_CUDA_TRY(cudaMemcpyAsync(out.data(), buffer.data(), buffer.bytes(),
                                      cudaMemcpyDeviceToHost, ctx.compute_stream()));
        ctx.synchronize();
        EXPECT_EQ(in, out);
        halo::cuda::DeviceBuffer<std::int64_t> moved(std::move(buffer));
        EXPECT_EQ(buffer.data(), nullptr);
        EXPECT_EQ(moved.size(), 1000u);
    }
    EXPECT_EQ(ctx.bytes_in_use(), 0u);

    // Device choice: explicit index, else local rank modulo the device count.
    halo::cuda::ContextOptions last;
    last.device = count - 1;
    EXPECT_EQ(halo::cuda::Context(last).device(), count - 1);
    halo::cuda::ContextOptions wrapped;
    wrapped.local_rank = count + 1;
    EXPECT_EQ(halo::cuda::Context(wrapped).device(), 1 % count);
    halo::cuda::ContextOptions invalid;
    invalid.device = count + 3;
    try {
        halo::cuda::Context bad(invalid);
        FAIL() << "expected halo::CudaError for device " << invalid.device;
    } catch (const halo::CudaError& e) {
        EXPECT_NE(e.message().find("device " + std::to_string(count + 3) + " requested"),
                  std::string::npos)
            << e.message();
    }
    HALO_CUDA_TRY(cudaSetDevice(ctx.device()));
}

TEST(CudaContext, PinnedBuffersHoldDataAndMove)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    halo::cuda::PinnedBuffer<float> pinned(4096);
    ASSERT_NE(pinned.data(), nullptr);
    EXPECT_EQ(pinned.size(), 4096u);
    cudaPointerAttributes attributes{};
    HALO_CUDA_TRY(cudaPointerGetAttributes(&attributes, pinned.data()));
    EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
    for (std::size_t k = 0; k < pinned.size(); ++k) {
        pinned.data()[k] = static_cast<float>(k);
    }
    halo::cuda::PinnedBuffer<float> moved(std::move(pinned));
    EXPECT_EQ(pinned.data(), nullptr);
    EXPECT_EQ(moved.data()[4095], 4095.0f);
    halo::cuda::PinnedBuffer<char> empty(0);
    EXPECT_EQ(empty.data(), nullptr);
    halo::cuda::PinnedBuffer<std::int32_t> i32(3);
    halo::cuda::PinnedBuffer<std::int64_t> i64(3);
    EXPECT_NE(i32.data(), nullptr);
    EXPECT_NE(i64.data(), nullptr);

    // From 64 MiB: plain memory page-locked with cudaHostRegister; a device round trip through
    // it, after a move (the moved-from buffer frees nothing), at the size limit and past it.
    for (const std::size_t count : {(std::size_t{64} << 20) / 4, (std::size_t{80} << 20) / 4 + 3}) {
        halo::cuda::PinnedBuffer<float> large(count);
        HALO_CUDA_TRY(cudaPointerGetAttributes(&attributes, large.data()));
        EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
        for (std::size_t k = 0; k < count; k += 4097) {
            large.data()[k] = static_cast<float>(k);
        }
        halo::cuda::PinnedBuffer<float> back(std::move(large));
        halo::cuda::PinnedBuffer<float> copy(count);
        halo::cuda::DeviceBuffer<float> device(ctx, count);
        HALO_CUDA_TRY(cudaMemcpyAsync(device.data(), back.data(), count * sizeof(float),
                                      cudaMemcpyHostToDevice, ctx.compute_stream()));
        HALO_CUDA_TRY(cudaMemcpyAsync(copy.data(), device.data(), count * sizeof(float),
                                      cudaMemcpyDeviceToHost, ctx.compute_stream()));
        ctx.synchronize();
        for (std::size_t k = 0; k < count; k += 4097) {
            ASSERT_EQ(copy.data()[k], static_cast<float>(k)) << k;
        }
    }
}

TEST(CudaContext, HugeAllocationFailsWithAdvice)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    HALO_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
    void* small = ctx.allocate(1 << 20);
    const std::size_t huge = 2 * total_bytes;
    try {
        ctx.allocate(huge);
        FAIL() << "allocating " << huge << " bytes should fail";
    } catch (const halo::CudaError& e) {
        const auto& m = e.message();
        std::printf("%s\n", m.c_str());
        EXPECT_NE(m.find("out of memory on device 0"), std::string::npos) << m;
        EXPECT_NE(m.find("requested"), std::string::npos) << m;
        EXPECT_NE(m.find(std::to_string(huge) + " bytes"), std::string::npos) << m;
        EXPECT_NE(m.find(" free of "), std::string::npos) << m;
        EXPECT_NE(m.find("1.0 MiB in use by this rank"), std::string::npos) << m;
        EXPECT_NE(m.find("try more ranks (a smaller shard per GPU)"), std::string::npos) << m;
    }
    // The failure leaves no error behind, and the pool still serves.
    EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
    EXPECT_EQ(ctx.bytes_in_use(), std::size_t{1} << 20);
    void* again = ctx.allocate(1 << 20);
    EXPECT_NE(again, nullptr);
    ctx.deallocate(again);
    ctx.deallocate(small);
    ctx.synchronize();
    EXPECT_EQ(ctx.bytes_in_use(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Backend: memory and large copies

// The backend's matrices come from the Context's pool and go back to it (the copies, GEMM and
// element-wise operations themselves are the conformance suite's: test_backend_conformance_cuda).
TEST(CudaBackend, MatricesComeFromTheContextPool)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    EXPECT_EQ(gpu.backend->name(), "cuda");
    const std::size_t before = gpu.ctx.bytes_in_use();
    {
        auto device = upload(*gpu.backend, HostMatrix(37, 5, 8));
        EXPECT_GE(gpu.ctx.bytes_in_use(), before + 37 * 8 * sizeof(float));
    }
    gpu.ctx.synchronize();
    EXPECT_EQ(gpu.ctx.bytes_in_use(), before) << "a matrix's storage went back to the pool";
}

// Contiguous copies of 64 MiB and more go through the pinned double buffer in 32 MiB chunks;
// 100 MB with a partial last chunk, modified on the device in between so that the download
// cannot pass by reading back what was uploaded through a stale staging buffer.
TEST(CudaBackend, LargeCopiesThroughPinnedStagingRoundTrip)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const std::int64_t rows = 5'000'003;
    const std::int64_t cols = 5;
    std::vector<float> host(static_cast<std::size_t>(rows * cols));
    for (std::size_t k = 0; k < host.size(); ++k) {
        host[k] = static_cast<float>(k % 1000003);  // exact in float, distinct across chunks
    }
    auto m = gpu.backend->allocate(rows, cols);
    gpu.backend->copy_from_host(host.data(), m.view());
    gpu.backend->axpby(2.0f, m.view(), 0.0f, m.view());
    std::vector<float> back(host.size(), std::nanf(""));
    gpu.backend->copy_to_host(m.view(), back.data());
    for (std::size_t k = 0; k < host.size(); ++k) {
        ASSERT_EQ(back[k], 2.0f * host[k]) << "element " << k;
    }
}

// ---------------------------------------------------------------------------------------------
// cuSPARSE SpMM

TEST(CusparseSpmm, SixtyFourBitIndicesGiveTheSameResults)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 2000;
    for (const bool valued : {false, true}) {
        const auto a = graph_csr("rmat", 10, ++seed, valued);
        const auto plan =
            halo::cuda::make_cusparse_spmm_plan(gpu.ctx, a, 256, halo::cuda::IndexWidth::bits64);
        EXPECT_EQ(plan->algorithm(), "cusparse-csr-alg2-i64");
        EXPECT_EQ(gpu.backend->make_spmm_plan(a)->algorithm(), "cusparse-csr-alg2");
        const auto n = a.num_rows;
        for (const std::int64_t width : {1, 33, 256}) {
            check_spmm(*gpu.backend, *plan, a, width, {{0, n}}, ++seed);
            check_spmm(*gpu.backend, *plan, a, width, {{0, n / 3}, {n / 3, n}}, ++seed);
            check_spmm(*gpu.backend, *plan, a, width, {{n / 4, n / 2}, {n - 1, n}}, ++seed);
        }
    }
}

// The pieces of consecutive rows that a range splits into (at most `limit` nonzeros each, a
// longer row alone), as the plan cuts them.
std::int64_t count_pieces(const halo::Csr& a, std::int64_t limit)
{
    std::int64_t pieces = 0;
    std::int64_t r = 0;
    while (r < a.num_rows) {
        auto e = r + 1;
        while (e < a.num_rows && a.indptr[e + 1] - a.indptr[r] <= limit) {
            ++e;
        }
        ++pieces;
        r = e;
    }
    return pieces;
}

// Past 2^31 nonzeros an operator runs as 32-bit cuSPARSE calls over pieces of consecutive rows
// (no 64-bit columns); IndexWidth::small_pieces cuts at 1000 nonzeros, so that the pieces, their
// rebased offsets, ranges over several pieces and a row longer than a piece run here.
TEST(CusparseSpmm, ThirtyTwoBitPiecesGiveTheSameResults)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 2100;
    auto long_row = graph_csr("rmat", 11, 2099, false);
    {
        // Row 5 gets every column: longer than a piece.
        halo::Csr b;
        b.num_rows = long_row.num_rows;
        b.num_cols = long_row.num_cols;
        for (std::int64_t r = 0; r < long_row.num_rows; ++r) {
            if (r == 5) {
                for (halo::local_id c = 0; c < b.num_cols; ++c) {
                    b.indices.push_back(c);
                }
            } else {
                b.indices.insert(b.indices.end(), long_row.indices.begin() + long_row.indptr[r],
                                 long_row.indices.begin() + long_row.indptr[r + 1]);
            }
            b.indptr.push_back(static_cast<halo::offset_t>(b.indices.size()));
        }
        long_row = std::move(b);
    }
    for (const bool valued : {false, true}) {
        for (auto a : {graph_csr("rmat", 10, ++seed, false), long_row}) {
            if (valued) {
                a.values = halo::testing::random_floats(a.indices.size(), ++seed);
            }
            const auto plan = halo::cuda::make_cusparse_spmm_plan(
                gpu.ctx, a, 256, halo::cuda::IndexWidth::small_pieces);
            const auto pieces = count_pieces(a, 1000);
            ASSERT_GT(pieces, 3) << a.nnz() << " nonzeros";
            EXPECT_EQ(plan->algorithm(),
                      "cusparse-csr-alg2 (" + std::to_string(pieces) + " pieces)");
            const auto n = a.num_rows;
            for (const std::int64_t width : {1, 33, 256}) {
                check_spmm(*gpu.backend, *plan, a, width, {{0, n}}, ++seed);
                check_spmm(*gpu.backend, *plan, a, width, {{0, n / 3}, {n / 3, n}}, ++seed);
                check_spmm(*gpu.backend, *plan, a, width, {{n / 4, n / 2}, {n - 1, n}}, ++seed);
                check_spmm(*gpu.backend, *plan, a, width, {{5, 6}, {4, 7}}, ++seed);
            }
        }
    }
}

// The scalings of `sides` of `pattern` (bit 0: rows, bit 1: columns; seeded uniform in [lo, hi))
// and the matrix whose values they make, r_i c_j (a missing side counts as ones).
std::pair<halo::OperatorScaling, halo::Csr> scaled_operator(const halo::Csr& pattern, int sides,
                                                            std::uint64_t& seed, float lo, float hi)
{
    halo::OperatorScaling scaling;
    if ((sides & 1) != 0) {
        scaling.row = halo::testing::random_floats(pattern.num_rows, ++seed, lo, hi);
    }
    if ((sides & 2) != 0) {
        scaling.col = halo::testing::random_floats(pattern.num_cols, ++seed, lo, hi);
    }
    auto expected = pattern;
    expected.values.assign(pattern.indices.size(), 1.0f);
    for (std::int64_t i = 0; i < pattern.num_rows; ++i) {
        for (auto k = pattern.indptr[i]; k < pattern.indptr[i + 1]; ++k) {
            const float r = scaling.row.empty() ? 1.0f : scaling.row[i];
            expected.values[k] = scaling.col.empty() ? r : r * scaling.col[pattern.indices[k]];
        }
    }
    return {std::move(scaling), std::move(expected)};
}

// The pattern and its scalings in, the values r_i c_j made on the device: the same results as a
// plan given those values from the host, for every index layout; the pattern's own values (if
// any) are not read; scalings of the wrong length are refused before anything is uploaded.
TEST(CusparseSpmm, ScaledPlanMakesTheValuesOnTheDevice)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 2200;
    using halo::cuda::IndexWidth;
    for (const auto width : {IndexWidth::automatic, IndexWidth::small_pieces, IndexWidth::bits64}) {
        for (const int sides : {0, 1, 2, 3}) {  // bit 0: row scaling, bit 1: column scaling
            SCOPED_TRACE("index width " + std::to_string(static_cast<int>(width)) + ", sides " +
                         std::to_string(sides));
            auto pattern = graph_csr("rmat", 10, ++seed, sides == 3);  // values to be ignored
            const auto [scaling, expected] = scaled_operator(pattern, sides, seed, -1.0f, 1.0f);
            const auto plan =
                halo::cuda::make_scaled_cusparse_spmm_plan(gpu.ctx, pattern, 256, scaling, width);
            EXPECT_NE(plan->algorithm().find("values made on the device"), std::string::npos)
                << plan->algorithm();
            const auto n = pattern.num_rows;
            for (const std::int64_t cols : {1, 64}) {
                check_spmm(*gpu.backend, *plan, expected, cols, {{0, n}}, ++seed);
                check_spmm(*gpu.backend, *plan, expected, cols, {{n / 3, n}, {0, n / 3}}, ++seed);
            }
        }
    }
    const auto a = graph_csr("rmat", 8, 3, false);
    halo::OperatorScaling short_rows;
    short_rows.row.assign(a.num_rows - 1, 1.0f);
    EXPECT_THROW(halo::cuda::make_scaled_cusparse_spmm_plan(gpu.ctx, a, 8, short_rows),
                 halo::LogicError);
    halo::OperatorScaling long_cols;
    long_cols.col.assign(a.num_cols + 1, 1.0f);
    EXPECT_THROW(halo::cuda::make_scaled_cusparse_spmm_plan(gpu.ctx, a, 8, long_cols),
                 halo::LogicError);
    // The backend's own: cuSPARSE (the default kernel), MergePath, row-split and Accel-GCN make
    // it; Accel-GCN, whose partition orders the nonzeros on the host, declines a column scaling
    // unless pattern operators are asked for (ScaledPatternSpmm below).
    const halo::OperatorScaling ones;
    EXPECT_NE(gpu.backend->make_scaled_spmm_plan(a, {}, ones), nullptr);
    for (const char* kernel : {"mergepath", "rowsplit", "rowchunk", "accel_gcn"}) {
        const auto backend = halo::cuda::make_cuda_backend(gpu.ctx, kernel);
        EXPECT_NE(backend->make_scaled_spmm_plan(a, {}, ones), nullptr) << kernel;
    }
    halo::OperatorScaling columns;
    columns.col.assign(a.num_cols, 0.5f);
    const auto accel = halo::cuda::make_cuda_backend(gpu.ctx, "accel_gcn");
    EXPECT_EQ(accel->make_scaled_spmm_plan(a, {}, columns), nullptr);
}

// MergePath, row-split and Accel-GCN scaled plans. The pattern form keeps the pattern and its
// scalings and stores no values (c_j applied in the gather, r_i per row sum), for every
// combination of sides, row ranges split across launches and widths 1 to 256; the device holds
// the pattern plus rows + columns floats. The backend's plans (ScaledForm::automatic) do so where
// only rows are scaled; where columns are scaled too MergePath and row-split make the values on
// the device and Accel-GCN declines (the host builds them), unless the choice asks for pattern
// operators (halo-infer --pattern-operators).
TEST(ScaledPatternSpmm, ExactKernelsKeepThePatternAndItsScalings)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 3300;
    using halo::cuda::ScaledForm;
    for (const std::string kernel : {"mergepath", "rowsplit", "rowchunk", "accel_gcn"}) {
        const auto automatic = halo::cuda::make_cuda_backend(gpu.ctx, kernel);
        auto choice = halo::parse_spmm_choice(kernel);
        choice.pattern_operators = true;
        const auto lean = halo::cuda::make_cuda_backend(gpu.ctx, choice);
        for (const int sides : {0, 1, 2, 3}) {  // bit 0: row scaling, bit 1: column scaling
            SCOPED_TRACE(kernel + ", sides " + std::to_string(sides));
            const auto pattern = graph_csr("rmat", 10, ++seed, false);
            ASSERT_FALSE(pattern.has_values());
            const auto [scaling, expected] = scaled_operator(pattern, sides, seed, 0.1f, 1.0f);
            const auto scalings =
                static_cast<std::int64_t>(4 * (scaling.row.size() + scaling.col.size()));
            const bool columns = !scaling.col.empty();
            std::vector<std::pair<std::string, std::unique_ptr<halo::SpmmPlan>>> plans;
            if (kernel == "mergepath") {
                halo::cuda::MergePathOptions options;
                options.scaled_form = ScaledForm::pattern;
                plans.emplace_back("pattern", halo::cuda::make_mergepath_spmm_plan(
                                                  gpu.ctx, pattern, 256, options, &scaling));
            } else if (kernel == "accel_gcn") {
                plans.emplace_back("pattern", halo::cuda::make_accel_gcn_spmm_plan(
                                                  gpu.ctx, pattern, 256, {}, &scaling));
            } else if (kernel == "rowchunk") {
                plans.emplace_back("pattern", halo::cuda::make_rowchunk_spmm_plan(
                                                  gpu.ctx, pattern, 256, {.length = 8}, &scaling,
                                                  ScaledForm::pattern));
            } else {
                plans.emplace_back("pattern",
                                   halo::cuda::make_rowsplit_spmm_plan(
                                       gpu.ctx, pattern, 256, halo::cuda::IndexWidth::automatic,
                                       &scaling, ScaledForm::pattern));
            }
            plans.emplace_back("lean backend", lean->make_scaled_spmm_plan(pattern, {}, scaling));
            auto chosen = automatic->make_scaled_spmm_plan(pattern, {}, scaling);
            if (kernel == "accel_gcn" && columns) {
                EXPECT_EQ(chosen, nullptr) << "Accel-GCN declines a column scaling by default";
            } else {
                plans.emplace_back(columns ? "automatic" : "pattern", std::move(chosen));
            }
            for (auto& [form, plan] : plans) {
                ASSERT_NE(plan, nullptr) << form;
                const bool kept = form != "automatic";
                EXPECT_NE(plan->algorithm().find(kept ? "pattern with scalings"
                                                      : "values made on the device"),
                          std::string::npos)
                    << form << ": " << plan->algorithm();
                EXPECT_EQ(plan->memory().values, kept ? scalings : 4 * pattern.nnz()) << form;
                const auto n = pattern.num_rows;
                for (const std::int64_t width : {1, 7, 64, 256}) {
                    check_spmm(*gpu.backend, *plan, expected, width, {{0, n}}, ++seed);
                    check_spmm(*gpu.backend, *plan, expected, width, {{n / 3, n}, {0, n / 3}},
                               ++seed);
                }
            }
        }
    }
}

// cusparseSpMM with CSR_ALG2 is not bitwise reproducible from run to run: on an H200 with CUDA 13
// repeated runs differed in the last bits (2026-11-21). The runs must still agree to rounding.
TEST(CusparseSpmm, RepeatedRunsAgreeToRounding)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = graph_csr("rmat", 11, 77, true);
    const auto plan = gpu.backend->make_spmm_plan(a);
    const auto x = random_matrix(a.num_cols, 64, 64, 78);
    auto dx = upload(*gpu.backend, x);
    auto dy = upload(*gpu.backend, HostMatrix(a.num_rows, 64));
    plan->run(dx.view, dy.view, {0, a.num_rows});
    const auto first = download(*gpu.backend, dy);
    // x is in [-1, 1) and each output sums at most max-row-nnz products of magnitude <= max|a|.
    double max_a = 0.0;
    for (const auto v : a.values) {
        max_a = std::max(max_a, static_cast<double>(std::abs(v)));
    }
    const auto tol =
        tolerance<float>(2.0 * halo::max_row_nnz(a.view()), max_a * halo::max_row_nnz(a.view()));
    for (int r = 0; r < 3; ++r) {
        plan->run(dx.view, dy.view, {0, a.num_rows});
        const auto again = download(*gpu.backend, dy);
        for (std::size_t k = 0; k < first.data.size(); ++k) {
            ASSERT_NEAR(again.data[k], first.data[k], tol) << "run " << r << " element " << k;
        }
    }
}

TEST(CusparseSpmm, OneDenseRowOfOneHundredThousandNonzeros)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const std::int64_t cols = 100000;
    halo::Csr a;
    a.num_rows = 4;
    a.num_cols = cols;
    a.indices = {3, 99999};  // row 0
    a.indptr.push_back(2);
    for (halo::local_id c = 0; c < cols; ++c) {  // row 1: every column
        a.indices.push_back(c);
    }
    a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));
    a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));  // row 2: empty
    a.indices.push_back(50000);                                         // row 3
    a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));
    for (const bool valued : {false, true}) {
        if (valued) {
            a.values = halo::testing::random_floats(a.indices.size(), 31);
        }
        const auto plan = gpu.backend->make_spmm_plan(a);
        for (const std::int64_t width : {1, 33, 100}) {
            check_spmm(*gpu.backend, *plan, a, width, {{0, 4}}, 40 + width);
            check_spmm(*gpu.backend, *plan, a, width, {{1, 2}, {3, 4}, {0, 1}, {2, 3}}, 50 + width);
        }
    }
}

TEST(CusparseSpmm, RejectsBadOperatorsAndOperands)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    halo::Csr bad;
    bad.num_rows = 2;
    bad.num_cols = 2;
    bad.indptr = {0, 1, 2};
    bad.indices = {0, 5};  // column outside the matrix
    EXPECT_THROW(gpu.backend->make_spmm_plan(bad), halo::InputError);

    const auto a = graph_csr("rmat", 6, 5, false);
    const auto plan = halo::cuda::make_cusparse_spmm_plan(gpu.ctx, a, 8);
    auto x = gpu.backend->allocate(a.num_cols, 9);
    auto y = gpu.backend->allocate(a.num_rows, 9);
    EXPECT_THROW(plan->run(x.view(), y.view(), {0, a.num_rows}), halo::LogicError);  // > max_dim
    auto y8 = gpu.backend->allocate(a.num_rows, 8);
    EXPECT_THROW(plan->run(x.view(), y8.view(), {0, a.num_rows}), halo::LogicError);  // widths
    auto x8 = gpu.backend->allocate(a.num_cols, 8);
    EXPECT_THROW(plan->run(x8.view(), y8.view(), {0, a.num_rows + 1}), halo::LogicError);
    EXPECT_THROW(plan->run(x8.rows_view(1, a.num_cols), y8.view(), {0, a.num_rows}),
                 halo::LogicError);  // x too short
    EXPECT_NO_THROW(plan->run(x8.view(), y8.view(), {0, a.num_rows}));
    gpu.ctx.synchronize();
}

// ---------------------------------------------------------------------------------------------
// Engine on the CUDA backend

std::vector<float> run_engine(halo::Backend& backend, const halo::Shard& shard,
                              const halo::Model& model, const std::vector<float>& features,
                              bool device_values = true, std::string* report = nullptr)
{
    auto exchanger = halo::make_local_exchanger(shard);
    halo::EngineOptions options;
    options.device_operator_values = device_values;
    halo::Engine engine(backend, *exchanger, shard, model, options);
    auto out = engine.run(features);
    if (report != nullptr) {
        *report = engine.kernel_report();
    }
    return out;
}

void expect_engine_matches_cpu(halo::LayerType type, const std::vector<std::int64_t>& dims,
                               bool device_values);

// The tolerance of a CUDA engine run against `want` (the CPU backend's, or another CUDA run's):
// as in the engine's dense test, each layer sums at most (max degree + widest layer) products per
// output, in a different order on the GPU; rounding grows with that count and the depth.
double engine_tolerance(const halo::Csr& graph, const halo::Model& model,
                        const std::vector<float>& want)
{
    double scale = 1.0;
    for (const auto v : want) {
        scale = std::max(scale, static_cast<double>(std::abs(v)));
    }
    const auto terms = static_cast<double>(halo::max_row_nnz(graph.view()) + model.max_dim());
    return tolerance<float>(4.0 * terms * model.layers.size(), scale);
}

// The CUDA engine against the CPU one, with the operators' values made on the device from their
// scalings (the default) and built on the host (EngineOptions::device_operator_values).
void expect_engine_matches_cpu(halo::LayerType type, const std::vector<std::int64_t>& dims)
{
    for (const bool device_values : {true, false}) {
        SCOPED_TRACE(std::string(halo::to_string(type)) +
                     (device_values ? ", values made on the device" : ", values from the host"));
        expect_engine_matches_cpu(type, dims, device_values);
    }
}

void expect_engine_matches_cpu(halo::LayerType type, const std::vector<std::int64_t>& dims,
                               bool device_values)
{
    const auto graph = graph_csr("rmat", 10, 3, false);
    const std::vector<std::int32_t> owner(graph.num_rows, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    const auto model = halo::random_model(type, dims, 11);
    const auto features = halo::random_node_features(shard.global_ids, dims.front(), 5);

    auto cpu = halo::make_cpu_backend();
    const auto want = run_engine(*cpu, shard, model, features);

    Gpu gpu;
    const std::size_t before = gpu.ctx.bytes_in_use();
    std::string report;
    const auto got = run_engine(*gpu.backend, shard, model, features, device_values, &report);
    gpu.ctx.synchronize();
    // gcn and sage aggregate with scaled operators (gcn, mean); gin sums the pattern.
    const bool scaled = device_values && type != halo::LayerType::gin;
    EXPECT_EQ(report.find("values made on the device") != std::string::npos ||
                  report.find("pattern with scalings") != std::string::npos,
              scaled)
        << report;
    EXPECT_EQ(gpu.ctx.bytes_in_use(), before) << "the engine returned all its device memory";
    ASSERT_EQ(got.size(), want.size());

    const auto tol = engine_tolerance(graph, model, want);
    for (std::size_t k = 0; k < got.size(); ++k) {
        ASSERT_TRUE(std::isfinite(got[k])) << k;
        ASSERT_NEAR(got[k], want[k], tol) << "element " << k;
    }
    // The same input again agrees to rounding (cuSPARSE's SpMM is not bitwise reproducible).
    const auto again = run_engine(*gpu.backend, shard, model, features, device_values);
    for (std::size_t k = 0; k < got.size(); ++k) {
        ASSERT_NEAR(again[k], got[k], tol) << "second run, element " << k;
    }
}

TEST(CudaBackend, ArgmaxRowsOnTheDeviceEqualsTheHosts)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const float nan = std::nanf("");
    const float inf = std::numeric_limits<float>::infinity();
    // Ties (the first wins), NaN first, NaN later, -inf only, one column; then random rows.
    std::vector<std::vector<float>> rows{{1, 3, 3, 2}, {nan, 5, 6, 7}, {1, nan, 0, 4},
                                         {-inf, -inf, -inf, -inf}, {0, -0.0f, 0, 0}};
    for (int r = 0; r < 3000; ++r) {
        std::vector<float> row(4);
        for (int j = 0; j < 4; ++j) {
            row[j] = static_cast<float>((r * 7 + j * 13) % 11) - 5.0f;
        }
        rows.push_back(row);
    }
    for (const std::int64_t cols : {std::int64_t{1}, std::int64_t{4}}) {
        const auto n = static_cast<std::int64_t>(rows.size());
        const std::int64_t ld = 6;  // wider than the view
        std::vector<float> host(n * ld, 99.0f);
        for (std::int64_t i = 0; i < n; ++i) {
            std::copy_n(rows[i].begin(), cols, host.begin() + i * ld);
        }
        const auto m = gpu.backend->allocate(n, ld);
        gpu.backend->copy_from_host(host.data(), m.view());
        std::vector<std::int32_t> best(n, -1);
        gpu.backend->argmax_rows(halo::DenseView<const float>{m.data(), n, cols, ld}, best.data());
        for (std::int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(best[i], halo::detail::argmax_row(host.data() + i * ld, cols))
                << "row " << i << ", " << cols << " columns";
        }
    }
}

// halo-infer's path for features in the dataset: read_shard hands the rows over in groups on a
// thread of its own (which never selected the device) while the main thread goes on; the
// uploaded matrix holds the rows bit for bit, and a run on it equals a run on the host features.
TEST(CudaEngine, FeaturesUploadedOnAReaderThreadGiveTheSameResult)
{
    HALO_REQUIRE_GPUS(1);
    const auto graph = graph_csr("rmat", 11, 3, false);
    const std::vector<std::int32_t> owner(graph.num_rows, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    const std::int64_t dim = 24;
    const auto model = halo::random_model(halo::LayerType::gcn, {dim, 16, 5}, 11);
    const auto x = halo::random_node_features(shard.global_ids, dim, 5);
    const auto n = shard.num_owned;

    Gpu gpu;
    const std::size_t before = gpu.ctx.bytes_in_use();
    halo::FeatureUpload upload(*gpu.backend, std::int64_t{1} << 30);
    // Groups of 300 rows (the last one shorter), as the reader's 64 MiB groups.
    std::thread reader([&] {
        for (std::int64_t r0 = 0; r0 < n; r0 += 300) {
            halo::FeatureRowsRead g;
            g.first_row = r0;
            g.count = std::min<std::int64_t>(300, n - r0);
            g.total_rows = n;
            g.cols = dim;
            g.rows = x.data() + r0 * dim;
            upload(g);
        }
    });
    reader.join();
    ASSERT_TRUE(upload.declined().empty()) << upload.declined();
    auto matrix = upload.take(n, dim);
    ASSERT_TRUE(matrix.has_value());
    std::vector<float> back(x.size(), std::nanf(""));
    gpu.backend->copy_to_host(matrix->view(), back.data());
    ASSERT_EQ(std::memcmp(back.data(), x.data(), x.size() * sizeof(float)), 0);

    {
        auto exchanger = halo::make_local_exchanger(shard);
        halo::Engine engine(*gpu.backend, *exchanger, shard, model, {});
        const auto want = engine.run(x);
        const auto out = engine.forward(*matrix);
        const std::vector<float> got(out.begin(), out.end());
        matrix.reset();
        ASSERT_EQ(got.size(), want.size());
        // A deferred download, fetched in two batches on a thread of its own into page-locked
        // memory (halo-infer's result write), equals the run's own download.
        engine.defer_download();
        EXPECT_TRUE(engine.forward(x).empty());
        const auto pinned = gpu.backend->allocate_host(n, 5);
        std::fill_n(pinned.data(), n * 5, std::nanf(""));
        std::thread writer([&] {
            gpu.backend->bind_thread();
            engine.download_rows(n / 3, n - n / 3, pinned.data() + n / 3 * 5);
            engine.download_rows(0, n / 3, pinned.data());
        });
        writer.join();
        std::vector<std::int32_t> best(n, -1);
        engine.deferred_predictions(best.data());
        for (std::int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(best[i], halo::detail::argmax_row(pinned.data() + i * 5, 5)) << "row " << i;
        }
        const auto direct = engine.run(x);
        ASSERT_EQ(direct.size(), want.size());
        const auto tol = engine_tolerance(graph, model, want);
        for (std::size_t k = 0; k < got.size(); ++k) {
            ASSERT_TRUE(std::isfinite(got[k])) << k;
            ASSERT_NEAR(got[k], want[k], tol) << "element " << k;
            ASSERT_NEAR(pinned.data()[k], direct[k], tol) << "deferred, element " << k;
        }
    }
    gpu.ctx.synchronize();
    EXPECT_EQ(gpu.ctx.bytes_in_use(), before) << "the upload and the engine returned their memory";
}

// Engine::set_sparse_input on the device: the first layer's transforms as the backend's SpMM of
// the input's nonzeros match the CPU backend's dense run within the tolerance, for every layer
// type, computed, recorded and replayed as a CUDA graph; a random input afterwards keeps the
// dense product (a recording made with the sparse one is not replayed for it).
TEST(CudaEngine, SparseInputMatchesTheDenseProduct)
{
    HALO_REQUIRE_GPUS(1);
    const auto graph = graph_csr("rmat", 11, 4, false);
    const std::vector<std::int32_t> owner(graph.num_rows, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    const auto n = shard.num_owned;
    const std::int64_t in = 300;
    std::vector<float> x(static_cast<std::size_t>(n * in), 0.0f);
    std::uint64_t state = 99;
    for (auto& v : x) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        if ((state >> 33) % 50 == 0) {
            v = static_cast<float>(1 + (state >> 40) % 4);
        }
    }
    const auto csr = halo::sparse_rows(x.data(), n, in, 0.05);
    ASSERT_TRUE(csr.has_value());
    Gpu gpu;
    for (const auto type :
         {halo::LayerType::gcn, halo::LayerType::sage, halo::LayerType::gin,
          halo::LayerType::transformer, halo::LayerType::gat, halo::LayerType::linear}) {
        SCOPED_TRACE(halo::to_string(type));
        const auto model = halo::random_model(type, {in, 32, 6}, 21);
        halo::EngineOptions options;
        options.attention = halo::AttentionKernel::exact;
        auto cpu = halo::make_cpu_backend();
        auto cpu_exchanger = halo::make_local_exchanger(shard);
        halo::Engine reference(*cpu, *cpu_exchanger, shard, model, options);
        const auto want = reference.run(x);
        const auto want_random = reference.run_random(4);
        const auto tol = engine_tolerance(graph, model, want);
        options.replay = true;
        options.step_timing = false;
        auto exchanger = halo::make_local_exchanger(shard);
        halo::Engine engine(*gpu.backend, *exchanger, shard, model, options);
        ASSERT_TRUE(engine.set_sparse_input(*csr));
        EXPECT_NE(engine.kernel_report().find("first-layer transforms as SpMM"), std::string::npos)
            << engine.kernel_report();
        for (int run = 0; run < 3; ++run) {
            const auto got = engine.run(x);
            ASSERT_EQ(got.size(), want.size());
            for (std::size_t k = 0; k < got.size(); ++k) {
                ASSERT_NEAR(got[k], want[k], tol) << "run " << run << ", element " << k;
            }
        }
        EXPECT_TRUE(engine.replayed()) << engine.kernel_report();
        const auto random = engine.run_random(4);
        for (std::size_t k = 0; k < random.size(); ++k) {
            ASSERT_NEAR(random[k], want_random[k], engine_tolerance(graph, model, want_random))
                << "random input, element " << k;
        }
    }
}

TEST(CudaEngine, GcnMatchesTheCpuBackend)
{
    HALO_REQUIRE_GPUS(1);
    expect_engine_matches_cpu(halo::LayerType::gcn, {16, 32, 7});
    expect_engine_matches_cpu(halo::LayerType::gcn, {48, 8, 4});
}

TEST(CudaEngine, SageMatchesTheCpuBackend)
{
    HALO_REQUIRE_GPUS(1);
    expect_engine_matches_cpu(halo::LayerType::sage, {16, 32, 6});
}

TEST(CudaEngine, GinMatchesTheCpuBackend)
{
    HALO_REQUIRE_GPUS(1);
    expect_engine_matches_cpu(halo::LayerType::gin, {16, 24, 5});
}

}  // namespace
