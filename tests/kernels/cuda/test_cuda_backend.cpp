// The CUDA context and backend against the CPU reference: every GPU operation runs on fresh seeded
// inputs and is compared with the reference kernel on the same input (STYLE.md point 3). Device
// buffers are poisoned with NaN before each operation, so a row, column or padding element that is
// written when it must not be, or read when beta == 0, shows up.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "halo/backend.hpp"
#include "halo/cuda/backend.hpp"
#include "halo/cuda/context.hpp"
#include "halo/cuda_error.hpp"
#include "halo/dense_ops.hpp"
#include "halo/engine.hpp"
#include "halo/error.hpp"
#include "halo/generators.hpp"
#include "halo/graph.hpp"
#include "halo/model.hpp"
#include "halo/shard.hpp"
#include "halo/spmm.hpp"
#include "halo_test.hpp"
#include "spmm_device_fixtures.hpp"

namespace {

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

// NaN equals NaN here: "unchanged" includes a poisoned element staying poisoned.
bool same(float a, float b)
{
    return (std::isnan(a) && std::isnan(b)) || a == b;
}

void expect_padding_nan(const HostMatrix& m, const std::string& what)
{
    for (std::int64_t i = 0; i < m.rows; ++i) {
        for (std::int64_t j = m.cols; j < m.ld; ++j) {
            ASSERT_TRUE(std::isnan(m.data[i * m.ld + j]))
                << what << ": padding (" << i << ", " << j << ") was written";
        }
    }
}

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
// Backend: copies, GEMM, element-wise

TEST(CudaBackend, CopiesHonourTheLeadingDimension)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto& backend = *gpu.backend;
    EXPECT_EQ(backend.name(), "cuda");
    const std::size_t before = gpu.ctx.bytes_in_use();
    {
        auto device = upload(backend, HostMatrix(37, 5, 8));  // all NaN, padding included
        const auto values = random_matrix(37, 5, 5, 11);
        backend.copy_from_host(values.data.data(), device.view);
        const auto back = download(backend, device);
        expect_padding_nan(back, "copy_from_host");
        for (std::int64_t i = 0; i < 37; ++i) {
            for (std::int64_t j = 0; j < 5; ++j) {
                ASSERT_EQ(back(i, j), values(i, j)) << i << ", " << j;
            }
        }
        HostMatrix contiguous(37, 5);
        backend.copy_to_host(device.view, contiguous.data.data());
        EXPECT_EQ(contiguous.data, values.data);
        EXPECT_GE(gpu.ctx.bytes_in_use(), before + 37 * 8 * sizeof(float));
        // Empty copies are no-ops.
        backend.copy_from_host(nullptr, {device.view.data, 0, 5, 8});
        backend.copy_to_host(halo::DenseView<const float>{device.view.data, 3, 0, 8}, nullptr);
    }
    gpu.ctx.synchronize();
    EXPECT_EQ(gpu.ctx.bytes_in_use(), before) << "a matrix's storage went back to the pool";
    const auto empty = backend.allocate(0, 7);
    EXPECT_NE(empty.data(), nullptr);
    EXPECT_THROW(backend.allocate(-1, 3), halo::LogicError);
}

void check_gemm(halo::Backend& backend, std::int64_t m, std::int64_t k, std::int64_t n, float alpha,
                float beta, std::uint64_t seed)
{
    SCOPED_TRACE(testing::Message() << "gemm m=" << m << " k=" << k << " n=" << n
                                    << " alpha=" << alpha << " beta=" << beta);
    // Padded operands: lda, ldb, ldc exceed the widths.
    const auto a = random_matrix(m, k, k + 3, seed);
    const auto b = random_matrix(k, n, n + 1, seed + 1);
    // beta == 0: C holds NaN, which must not reach the result.
    auto c = beta == 0.0f ? HostMatrix(m, n, n + 2) : random_matrix(m, n, n + 2, seed + 2);
    auto da = upload(backend, a);
    auto db = upload(backend, b);
    auto dc = upload(backend, c);
    backend.gemm(da.view, db.view, dc.view, alpha, beta);
    const auto got = download(backend, dc);
    halo::reference::gemm(a.cview(), b.cview(), c.view(), alpha, beta);
    expect_padding_nan(got, "gemm C");
    // Each element is a dot product of length k plus beta * c: rounding is bounded by a few eps
    // times k * max|a| * max|b| * |alpha| + |beta| * max|c|, for either evaluation order.
    const double scale = static_cast<double>(k) * a.max_abs() * b.max_abs() * std::abs(alpha) +
                         (beta == 0.0f ? 0.0 : std::abs(beta) * 1.0) + 1e-30;
    const float tol = tolerance<float>(4, scale);
    for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
            ASSERT_TRUE(std::isfinite(got(i, j))) << "(" << i << ", " << j << ")";
            ASSERT_NEAR(got(i, j), c(i, j), tol) << "(" << i << ", " << j << ")";
        }
    }
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

TEST(CudaBackend, RandomFeaturesOnTheDeviceEqualTheHostGeneratorBitForBit)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    // Ids as a shard holds them: unordered, sparse, up to scale-34 magnitudes; widths that do and
    // do not divide a block; a view narrower than its leading dimension keeps the rest untouched.
    for (const std::int64_t dim : {1, 7, 64, 129}) {
        SCOPED_TRACE("dim " + std::to_string(dim));
        std::vector<halo::global_id> ids;
        for (std::int64_t r = 0; r < 30011; ++r) {
            ids.push_back((r * 7919 + 13) % 40009 + (r % 3 == 0 ? (std::int64_t{1} << 34) : 0));
        }
        const std::uint64_t seed = 0x5eed + static_cast<std::uint64_t>(dim);
        const auto expected = halo::random_node_features(ids, dim, seed);
        const std::int64_t ld = dim + 3;
        const auto rows = static_cast<std::int64_t>(ids.size());
        auto m = gpu.backend->allocate(rows, ld);
        std::vector<float> poison(static_cast<std::size_t>(rows * ld), std::nanf(""));
        gpu.backend->copy_from_host(poison.data(), m.view());
        gpu.backend->fill_random_features(ids.data(), seed, {m.data(), rows, dim, ld});
        std::vector<float> back(poison.size(), 0.0f);
        gpu.backend->copy_to_host(m.view(), back.data());
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t j = 0; j < ld; ++j) {
                const float got = back[r * ld + j];
                if (j < dim) {
                    ASSERT_EQ(std::memcmp(&got, &expected[r * dim + j], sizeof(float)), 0)
                        << "row " << r << " column " << j << ": " << got << " vs "
                        << expected[r * dim + j];
                } else {
                    ASSERT_TRUE(std::isnan(got)) << "padding column " << j << " of row " << r;
                }
            }
        }
    }
}

TEST(CudaBackend, GemmMatchesTheReference)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 100;
    for (const std::int64_t m : {1, 3, 33, 129}) {
        for (const std::int64_t k : {1, 3, 33, 129}) {
            for (const std::int64_t n : {1, 3, 33, 129}) {
                check_gemm(*gpu.backend, m, k, n, 1.0f, 0.0f, seed += 3);
            }
        }
    }
    check_gemm(*gpu.backend, 1000, 256, 64, 1.0f, 0.0f, 7);
    check_gemm(*gpu.backend, 77, 31, 45, 1.0f, 1.0f, 8);  // sage: accumulate into C
    check_gemm(*gpu.backend, 64, 17, 9, -0.5f, 2.5f, 9);
    check_gemm(*gpu.backend, 5, 129, 300, 2.0f, 0.0f, 10);
}

TEST(CudaBackend, GemmWithEmptyInnerDimensionScalesC)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto& backend = *gpu.backend;
    auto a_store = backend.allocate(1, 1);
    const halo::DenseView<const float> a{a_store.data(), 6, 0, 0};
    const halo::DenseView<const float> b{a_store.data(), 0, 4, 4};
    auto poisoned = upload(backend, HostMatrix(6, 4, 5));
    backend.gemm(a, b, poisoned.view, 1.0f, 0.0f);
    auto zeros = download(backend, poisoned);
    expect_padding_nan(zeros, "k = 0");
    for (std::int64_t i = 0; i < 6; ++i) {
        for (std::int64_t j = 0; j < 4; ++j) {
            EXPECT_EQ(zeros(i, j), 0.0f);
        }
    }
    const auto c = random_matrix(6, 4, 5, 3);
    auto dc = upload(backend, c);
    backend.gemm(a, b, dc.view, 1.0f, 2.0f);
    const auto scaled = download(backend, dc);
    for (std::int64_t i = 0; i < 6; ++i) {
        for (std::int64_t j = 0; j < 4; ++j) {
            EXPECT_EQ(scaled(i, j), 2.0f * c(i, j));
        }
    }
    EXPECT_THROW(
        backend.gemm(a, halo::DenseView<const float>{a_store.data(), 1, 4, 4}, dc.view, 1.0f, 0.0f),
        halo::LogicError);
}

TEST(CudaBackend, AxpbyMatchesTheCpuBackend)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    std::uint64_t seed = 300;
    for (const auto& shape : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {1, 1}, {3, 33}, {129, 31}, {1000, 7}}) {
        for (const auto& [alpha, beta] : std::vector<std::pair<float, float>>{
                 {1.0f, 0.0f}, {1.5f, -0.5f}, {1.0f, 1.0f}, {0.0f, 2.0f}}) {
            const auto [rows, cols] = shape;
            SCOPED_TRACE(testing::Message()
                         << rows << " x " << cols << " alpha " << alpha << " beta " << beta);
            const auto x = random_matrix(rows, cols, cols + 2, ++seed);
            auto y = beta == 0.0f ? HostMatrix(rows, cols, cols + 1)
                                  : random_matrix(rows, cols, cols + 1, ++seed);
            auto dx = upload(*gpu.backend, x);
            auto dy = upload(*gpu.backend, y);
            gpu.backend->axpby(alpha, dx.view, beta, dy.view);
            const auto got = download(*gpu.backend, dy);
            cpu->axpby(alpha, x.cview(), beta, y.view());
            expect_padding_nan(got, "axpby y");
            // One product and one sum; the GPU may fuse them (one rounding fewer).
            const float tol = tolerance<float>(2, std::abs(alpha) + std::abs(beta));
            for (std::int64_t i = 0; i < rows; ++i) {
                for (std::int64_t j = 0; j < cols; ++j) {
                    ASSERT_TRUE(std::isfinite(got(i, j))) << i << ", " << j;
                    ASSERT_NEAR(got(i, j), y(i, j), tol) << i << ", " << j;
                }
            }
        }
    }
    auto a = gpu.backend->allocate(2, 3);
    auto b = gpu.backend->allocate(3, 2);
    EXPECT_THROW(gpu.backend->axpby(1.0f, a.view(), 1.0f, b.view()), halo::LogicError);
}

TEST(CudaBackend, BiasActivationMatchesTheReferenceOnItsRowsOnly)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 500;
    for (const std::int64_t cols : {1, 3, 33, 129}) {
        for (const bool with_bias : {false, true}) {
            for (const auto act : {halo::Activation::none, halo::Activation::relu}) {
                for (const auto range : {halo::RowRange{0, 40}, halo::RowRange{7, 23},
                                         halo::RowRange{39, 40}, halo::RowRange{12, 12}}) {
                    SCOPED_TRACE(testing::Message() << "cols " << cols << " bias " << with_bias
                                                    << " act " << halo::to_string(act) << " rows ["
                                                    << range.begin << ", " << range.end << ")");
                    auto y = random_matrix(40, cols, cols + 1, ++seed);
                    y(10, 0) = kNaN;  // relu maps NaN to 0 on both sides; none keeps it
                    const auto bias = random_matrix(1, cols, cols, ++seed);
                    auto dy = upload(*gpu.backend, y);
                    auto dbias = upload(*gpu.backend, bias);
                    gpu.backend->bias_activation(dy.view, with_bias ? dbias.view.data : nullptr,
                                                 act, range);
                    const auto got = download(*gpu.backend, dy);
                    halo::reference::bias_activation(
                        y.view(), with_bias ? bias.data.data() : nullptr, act, range);
                    expect_padding_nan(got, "bias_activation");
                    // A single rounded addition and a comparison: bit-identical to the CPU.
                    for (std::int64_t i = 0; i < 40; ++i) {
                        for (std::int64_t j = 0; j < cols; ++j) {
                            ASSERT_TRUE(same(got(i, j), y(i, j)))
                                << "(" << i << ", " << j << "): " << got(i, j) << " vs " << y(i, j);
                        }
                    }
                }
            }
        }
    }
    auto m = gpu.backend->allocate(4, 2);
    EXPECT_THROW(gpu.backend->bias_activation(m.view(), nullptr, halo::Activation::relu, {2, 5}),
                 halo::LogicError);
}

// ---------------------------------------------------------------------------------------------
// cuSPARSE SpMM

// Per-row tolerance of a SpMM row: a sum of nnz products |a| * |x| in some order.
float spmm_row_tolerance(const halo::Csr& a, std::int64_t i, float max_x)
{
    return tolerance<float>(4, std::max<double>(1.0, a.row_nnz(i)) * row_max_abs(a, i) * max_x);
}

// Runs the plan over `ranges` in order on a NaN-poisoned y; after each run, rows not yet covered
// must still be NaN and covered rows must match the reference.
void check_spmm(halo::Backend& backend, halo::SpmmPlan& plan, const halo::Csr& a,
                std::int64_t width, const std::vector<halo::RowRange>& ranges, std::uint64_t seed)
{
    SCOPED_TRACE(testing::Message()
                 << a.num_rows << " rows, " << a.nnz() << " nonzeros, "
                 << (a.has_values() ? "valued" : "pattern") << ", width " << width);
    const auto x = random_matrix(a.num_cols, width, width + 3, seed);
    HostMatrix want(a.num_rows, width, width + 1);
    halo::reference::spmm(a.view(), x.cview(), want.view());
    auto dx = upload(backend, x);
    auto dy = upload(backend, HostMatrix(a.num_rows, width, width + 1));
    const float max_x = x.max_abs();
    std::vector<char> covered(a.num_rows, 0);
    for (const auto& range : ranges) {
        SCOPED_TRACE(testing::Message()
                     << "after rows [" << range.begin << ", " << range.end << ")");
        plan.run(dx.view, dy.view, range);
        for (auto i = range.begin; i < range.end; ++i) {
            covered[i] = 1;
        }
        const auto got = download(backend, dy);
        expect_padding_nan(got, "spmm y");
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            const float tol = spmm_row_tolerance(a, i, max_x);
            for (std::int64_t j = 0; j < width; ++j) {
                if (covered[i] == 0) {
                    ASSERT_TRUE(std::isnan(got(i, j))) << "row " << i << " outside the ranges "
                                                       << "was written: " << got(i, j);
                } else {
                    ASSERT_TRUE(std::isfinite(got(i, j))) << "(" << i << ", " << j << ")";
                    ASSERT_NEAR(got(i, j), want(i, j), tol) << "(" << i << ", " << j << ")";
                }
            }
        }
    }
}

TEST(CusparseSpmm, RandomGraphsAllWidthsAndRowRanges)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 1000;
    for (const std::string kind : {"rmat", "er"}) {
        for (const bool valued : {false, true}) {
            const auto a = graph_csr(kind, kind == "rmat" ? 10 : 11, ++seed, valued);
            const auto plan = gpu.backend->make_spmm_plan(a);
            EXPECT_EQ(plan->algorithm(), "cusparse-csr-alg2");
            const auto n = a.num_rows;
            const auto s = n / 3;
            for (const std::int64_t width : {1, 3, 31, 32, 33, 100, 256}) {
                check_spmm(*gpu.backend, *plan, a, width, {{0, n}}, ++seed);
                // Interior then boundary, as the engine runs them around the exchange.
                check_spmm(*gpu.backend, *plan, a, width, {{0, s}, {s, n}}, ++seed);
                // A range in the middle, an empty one and a single last row.
                check_spmm(*gpu.backend, *plan, a, width,
                           {{n / 4, n / 2}, {n / 2, n / 2}, {n - 1, n}}, ++seed);
            }
        }
    }
}

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
        const auto n = a.num_rows;
        for (const std::int64_t width : {1, 33, 256}) {
            check_spmm(*gpu.backend, *plan, a, width, {{0, n}}, ++seed);
            check_spmm(*gpu.backend, *plan, a, width, {{0, n / 3}, {n / 3, n}}, ++seed);
            check_spmm(*gpu.backend, *plan, a, width, {{n / 4, n / 2}, {n - 1, n}}, ++seed);
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

TEST(CusparseSpmm, EmptyRowsAndRangesWithoutNonzeros)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    // 50 x 40; rows 10 .. 29 empty; the others hold a few seeded columns.
    halo::Csr a;
    a.num_rows = 50;
    a.num_cols = 40;
    std::uint64_t state = 12345;
    for (std::int64_t i = 0; i < 50; ++i) {
        if (i < 10 || i >= 30) {
            for (halo::local_id c = static_cast<halo::local_id>(i % 7); c < 40; c += 9) {
                a.indices.push_back(c);
            }
        }
        a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));
    }
    for (const bool valued : {false, true}) {
        if (valued) {
            a.values = halo::testing::random_floats(a.indices.size(), ++state);
        }
        const auto plan = gpu.backend->make_spmm_plan(a);
        for (const std::int64_t width : {1, 33}) {
            check_spmm(*gpu.backend, *plan, a, width, {{12, 20}}, ++state);  // no nonzero
            check_spmm(*gpu.backend, *plan, a, width, {{10, 30}, {0, 10}, {30, 50}}, ++state);
            check_spmm(*gpu.backend, *plan, a, width, {{5, 35}, {0, 5}, {35, 50}}, ++state);
        }
    }
    // A matrix without any nonzero, and one without rows.
    halo::Csr zero;
    zero.num_rows = 8;
    zero.num_cols = 8;
    zero.indptr.assign(9, 0);
    const auto zero_plan = gpu.backend->make_spmm_plan(zero);
    check_spmm(*gpu.backend, *zero_plan, zero, 5, {{0, 8}}, 9);
    halo::Csr none;
    const auto none_plan = gpu.backend->make_spmm_plan(none);
    check_spmm(*gpu.backend, *none_plan, none, 5, {{0, 0}}, 10);
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
                              const halo::Model& model, const std::vector<float>& features)
{
    auto exchanger = halo::make_local_exchanger(shard);
    halo::Engine engine(backend, *exchanger, shard, model, {});
    return engine.run(features);
}

void expect_engine_matches_cpu(halo::LayerType type, const std::vector<std::int64_t>& dims)
{
    SCOPED_TRACE(halo::to_string(type));
    const auto graph = graph_csr("rmat", 10, 3, false);
    const std::vector<std::int32_t> owner(graph.num_rows, 0);
    const auto shard = halo::build_shard(graph, owner, 1, 0);
    const auto model = halo::random_model(type, dims, 11);
    const auto features = halo::random_node_features(shard.global_ids, dims.front(), 5);

    auto cpu = halo::make_cpu_backend();
    const auto want = run_engine(*cpu, shard, model, features);

    Gpu gpu;
    const std::size_t before = gpu.ctx.bytes_in_use();
    const auto got = run_engine(*gpu.backend, shard, model, features);
    gpu.ctx.synchronize();
    EXPECT_EQ(gpu.ctx.bytes_in_use(), before) << "the engine returned all its device memory";
    ASSERT_EQ(got.size(), want.size());

    double scale = 1.0;
    for (const auto v : want) {
        scale = std::max(scale, static_cast<double>(std::abs(v)));
    }
    // As in the engine's dense test: each layer sums at most (max degree + widest layer) products
    // per output, in a different order on the GPU; rounding grows with that count and the depth.
    const auto terms = static_cast<double>(halo::max_row_nnz(graph.view()) + model.max_dim());
    const auto tol = tolerance<float>(4.0 * terms * model.layers.size(), scale);
    for (std::size_t k = 0; k < got.size(); ++k) {
        ASSERT_TRUE(std::isfinite(got[k])) << k;
        ASSERT_NEAR(got[k], want[k], tol) << "element " << k;
    }
    // The same input again agrees to rounding (cuSPARSE's SpMM is not bitwise reproducible).
    const auto again = run_engine(*gpu.backend, shard, model, features);
    for (std::size_t k = 0; k < got.size(); ++k) {
        ASSERT_NEAR(again[k], got[k], tol) << "second run, element " << k;
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
