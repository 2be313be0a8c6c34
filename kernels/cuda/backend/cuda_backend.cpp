// The CUDA execution backend: matrices in the Context's memory pool, cuBLAS GEMM in fp32, the
// element-wise kernels of cuda_backend.cu, the SpMM plans of the registry's kernel chosen at
// construction (halo/kernels_host/spmm_registry.hpp), 16-bit stores (cuda_activations.hpp),
// all on the compute stream.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <deque>
#include <memory>
#include <string>

#include "cuda/backend/cuda_activations.hpp"
#include "cuda/backend/cuda_kernels.hpp"
#include "cuda/backend/engine_plans.hpp"
#include "cuda/primitives/cusparse_csr.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/aes.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo::cuda {
namespace {

// Widest dense operand a plan of this backend accepts. The engine's widths come from the model;
// the plan sizes its workspace per width on first use, so this bound costs nothing.
constexpr std::int64_t kMaxSpmmWidth = std::int64_t{1} << 20;

// Contiguous host <-> device copies at least this large go through pinned staging buffers: a
// pageable cudaMemcpy moves only a few GB/s (2.8 s for 8.6 GB of R-MAT 24 features on the H200
// machine), while copying into pinned memory with all host threads overlaps with the DMA.
constexpr std::size_t kStagedCopyMinBytes = std::size_t{64} << 20;
constexpr std::size_t kStageChunkBytes = std::size_t{32} << 20;

// memcpy split across the OpenMP threads (one thread cannot saturate host memory bandwidth).
void parallel_memcpy(char* dst, const char* src, std::size_t bytes)
{
    const auto n = static_cast<std::int64_t>(bytes);
    constexpr std::int64_t piece = std::int64_t{1} << 20;
#pragma omp parallel for schedule(static)
    for (std::int64_t off = 0; off < n; off += piece) {
        std::memcpy(dst + off, src + off, static_cast<std::size_t>(std::min(piece, n - off)));
    }
}

int checked_int(std::int64_t value, const char* what)
{
    HALO_EXPECTS(value >= 0 && value <= INT_MAX, what, " = ", value,
                 " is outside cuBLAS's 32-bit range");
    return static_cast<int>(value);
}

class CudaBackend final : public detail::ActivationStoringBackend {
public:
    CudaBackend(Context& ctx, SpmmChoice spmm)
        : ActivationStoringBackend(ctx), ctx_(ctx), spmm_(std::move(spmm))
    {
        HALO_EXPECTS(spmm_.kernel != nullptr && spmm_.kernel->make != nullptr,
                     "the CUDA backend needs a registered SpMM kernel");
        if (spmm_.aes) {
            validate(*spmm_.aes);
        }
    }

    ~CudaBackend() override
    {
        try {
            finish_downloads();
        } catch (...) {  // a destructor does not throw; the error surfaced at the last sync
        }
        if (download_stream_ != nullptr) {
            static_cast<void>(cudaStreamDestroy(download_stream_));
        }
        for (auto* event : uploads_) {
            if (event != nullptr) {
                static_cast<void>(cudaEventDestroy(event));
            }
        }
        if (upload_stream_ != nullptr) {
            static_cast<void>(cudaStreamSynchronize(upload_stream_));
            static_cast<void>(cudaStreamDestroy(upload_stream_));
        }
        drop_graph();
        for (auto& event : stage_events_) {
            if (event != nullptr) {
                static_cast<void>(cudaEventDestroy(event));
            }
        }
    }
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    std::string name() const override { return "cuda"; }

    Matrix allocate(std::int64_t rows, std::int64_t cols) override
    {
        HALO_EXPECTS(rows >= 0 && cols >= 0, "cannot allocate ", rows, " x ", cols);
        const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
        HALO_EXPECTS(
            cols == 0 || count / static_cast<std::size_t>(cols) == static_cast<std::size_t>(rows),
            rows, " x ", cols, " overflows size_t");
        // At least one element, as the CPU backend: a matrix never has a null data pointer.
        const std::size_t bytes = (count > 0 ? count : 1) * sizeof(float);
        auto* ptr = static_cast<float*>(ctx_.allocate(bytes));
        Context* ctx = &ctx_;
        return Matrix(std::shared_ptr<float>(ptr, [ctx](float* p) { ctx->deallocate(p); }), rows,
                      cols);
    }

    // Page-locked, so that copies from and to it run at the bus's speed without staging.
    Matrix allocate_host(std::int64_t rows, std::int64_t cols) override
    {
        HALO_EXPECTS(rows >= 0 && cols >= 0, "cannot allocate ", rows, " x ", cols);
        const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
        auto buffer = std::make_shared<PinnedBuffer<float>>(count > 0 ? count : 1);
        float* data = buffer->data();
        return Matrix(std::shared_ptr<float>(std::move(buffer), data), rows, cols);
    }

    void argmax_rows(DenseView<const float> src, std::int32_t* best) override
    {
        HALO_EXPECTS(src.cols > 0 || src.rows == 0, "argmax of rows of width 0");
        if (src.rows == 0) {
            return;
        }
        HALO_EXPECTS(best != nullptr && src.data != nullptr && src.ld >= src.cols,
                     "argmax_rows needs an output and a device view with ld >= cols");
        // Only the indices cross the bus (4 bytes a row instead of 4 per column).
        const auto bytes = static_cast<std::size_t>(src.rows) * sizeof(std::int32_t);
        auto* device_best = static_cast<std::int32_t*>(ctx_.allocate(bytes));
        try {
            detail::argmax_rows(ctx_.compute_stream(), src.data, src.rows, src.cols, src.ld,
                                device_best);
            HALO_CUDA_TRY(cudaMemcpyAsync(best, device_best, bytes, cudaMemcpyDeviceToHost,
                                          ctx_.compute_stream()));
            HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream()));
        } catch (...) {
            ctx_.deallocate(device_best);
            throw;
        }
        ctx_.deallocate(device_best);
    }

    void bind_thread() override { HALO_CUDA_TRY(cudaSetDevice(ctx_.device())); }

    // Free device memory minus a margin (5% of the device, at least 1 GiB) for the libraries'
    // handles and workspaces that the engine's budget does not count.
    std::int64_t default_memory_limit() override
    {
        std::size_t free = 0;
        std::size_t total = 0;
        HALO_CUDA_TRY(cudaMemGetInfo(&free, &total));
        const auto margin = std::max<std::int64_t>(std::int64_t{1} << 30,
                                                   static_cast<std::int64_t>(total / 20));
        return std::max<std::int64_t>(static_cast<std::int64_t>(free) - margin, 1);
    }

    // Returns once the host buffer may be reused (pinned or pageable alike).
    void copy_from_host(const float* host, DenseView<float> dst) override
    {
        if (dst.rows == 0 || dst.cols == 0) {
            return;
        }
        HALO_EXPECTS(host != nullptr && dst.data != nullptr && dst.ld >= dst.cols,
                     "copy_from_host needs a host buffer and a device view with ld >= cols");
        const auto width = static_cast<std::size_t>(dst.cols) * sizeof(float);
        const auto bytes = width * static_cast<std::size_t>(dst.rows);
        if (dst.ld == dst.cols && bytes >= kStagedCopyMinBytes && !is_pinned(host)) {
            staged_upload(reinterpret_cast<char*>(dst.data), reinterpret_cast<const char*>(host),
                          bytes);
            return;
        }
        if (dst.ld == dst.cols) {  // one contiguous DMA (pinned memory: at the bus's speed)
            HALO_CUDA_TRY(cudaMemcpyAsync(dst.data, host, bytes, cudaMemcpyHostToDevice,
                                          ctx_.compute_stream()));
        } else {
            HALO_CUDA_TRY(cudaMemcpy2DAsync(
                dst.data, static_cast<std::size_t>(dst.ld) * sizeof(float), host, width, width,
                static_cast<std::size_t>(dst.rows), cudaMemcpyHostToDevice, ctx_.compute_stream()));
        }
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream()));
    }

    void copy_to_host(DenseView<const float> src, float* host) override
    {
        if (src.rows == 0 || src.cols == 0) {
            return;
        }
        HALO_EXPECTS(host != nullptr && src.data != nullptr && src.ld >= src.cols,
                     "copy_to_host needs a host buffer and a device view with ld >= cols");
        const auto width = static_cast<std::size_t>(src.cols) * sizeof(float);
        const auto bytes = width * static_cast<std::size_t>(src.rows);
        if (src.ld == src.cols && bytes >= kStagedCopyMinBytes && !is_pinned(host)) {
            staged_download(reinterpret_cast<char*>(host),
                            reinterpret_cast<const char*>(src.data), bytes);
            return;
        }
        if (src.ld == src.cols) {
            HALO_CUDA_TRY(cudaMemcpyAsync(host, src.data, bytes, cudaMemcpyDeviceToHost,
                                          ctx_.compute_stream()));
        } else {
            HALO_CUDA_TRY(cudaMemcpy2DAsync(
                host, width, src.data, static_cast<std::size_t>(src.ld) * sizeof(float), width,
                static_cast<std::size_t>(src.rows), cudaMemcpyDeviceToHost, ctx_.compute_stream()));
        }
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream()));
    }

    void fill_random_features(const global_id* ids, std::uint64_t seed,
                              DenseView<float> dst) override
    {
        if (dst.rows == 0 || dst.cols == 0) {
            return;
        }
        HALO_EXPECTS(ids != nullptr && dst.data != nullptr && dst.ld >= dst.cols,
                     "fill_random_features needs ids and a device view with ld >= cols");
        // Only the ids cross the bus (8 bytes a row instead of 4 per feature).
        const auto bytes = static_cast<std::size_t>(dst.rows) * sizeof(global_id);
        auto* device_ids = static_cast<global_id*>(ctx_.allocate(bytes));
        try {
            HALO_CUDA_TRY(cudaMemcpyAsync(device_ids, ids, bytes, cudaMemcpyHostToDevice,
                                          ctx_.compute_stream()));
            detail::random_features(ctx_.compute_stream(), device_ids, dst.rows, dst.cols, seed,
                                    dst.data, dst.ld);
            HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream()));
        } catch (...) {
            ctx_.deallocate(device_ids);
            throw;
        }
        ctx_.deallocate(device_ids);
    }

    std::unique_ptr<SpmmPlan> make_spmm_plan(const Csr& a) override
    {
        return make_spmm_plan(a, SpmmPlanHints{});
    }

    std::unique_ptr<SpmmPlan> make_spmm_plan(const Csr& a, const SpmmPlanHints& hints) override
    {
        SpmmPlanRequest request{kMaxSpmmWidth, hints, spmm_.aes.value_or(AesOptions{})};
        request.l2_hints = spmm_.l2_hints;
        request.x_types = spmm_x_fp32 | spmm_x_bit(hints.activations);  // what the engine stores
        return spmm_.kernel->make(ctx_, a, request);
    }

    std::unique_ptr<SpmmPlan> make_scaled_spmm_plan(const Csr& pattern, const SpmmPlanHints& hints,
                                                    const OperatorScaling& scaling) override
    {
        // The registry says which forms the kernel takes: a form it does not take is the
        // values' (the caller builds them), whatever the operator's shape.
        const auto& kernel = *spmm_.kernel;
        if (!kernel.takes(spmm_form(&scaling, spmm_.pattern_operators))) {
            return nullptr;
        }
        HALO_EXPECTS(kernel.make_scaled != nullptr, "SpMM kernel ", kernel.name,
                     " takes scaled operators but has no scaled factory");
        SpmmPlanRequest request{kMaxSpmmWidth, hints, spmm_.aes.value_or(AesOptions{}), {},
                                spmm_.pattern_operators, spmm_.l2_hints};
        request.x_types = spmm_x_fp32 | spmm_x_bit(hints.activations);
        return kernel.make_scaled(ctx_, pattern, request, scaling);
    }

    std::unique_ptr<StreamedSpmm> make_streamed_spmm(const Csr& a, const SpmmPlanHints& hints,
                                                     const OperatorScaling* scaling,
                                                     bool scaled_input) override
    {
        static_cast<void>(hints);  // one kernel for every block: no stored choice covers a block
        return detail::make_streamed_csr(ctx_, a, scaling, scaled_input);
    }

    bool streams_scaled_operators() const override { return true; }

    // On a stream of its own, after the compute issued so far; the source is released once its
    // copy is known complete (then its stream-ordered free on the compute stream cannot overtake
    // the copy). At most one download stays in flight after the call: the host waits for the
    // previous one, which normally ended during the compute issued between them (so a caller
    // holds at most two sources at a time: the one downloading and the one it computes next).
    void download_async(const Matrix& src, float* host) override
    {
        if (src.rows() == 0 || src.cols() == 0) {
            return;
        }
        if (download_stream_ == nullptr) {
            HALO_CUDA_TRY(cudaStreamCreateWithFlags(&download_stream_, cudaStreamNonBlocking));
        }
        const auto bytes = static_cast<std::size_t>(src.rows() * src.cols()) * sizeof(float);
        Download d{src, nullptr};
        HALO_CUDA_TRY(cudaEventCreateWithFlags(&d.done, cudaEventDisableTiming));
        // The event records the compute stream's position; the download stream waits for it.
        HALO_CUDA_TRY(cudaEventRecord(d.done, ctx_.compute_stream()));
        HALO_CUDA_TRY(cudaStreamWaitEvent(download_stream_, d.done));
        HALO_CUDA_TRY(cudaMemcpyAsync(host, src.data(), bytes, cudaMemcpyDeviceToHost,
                                      download_stream_));
        HALO_CUDA_TRY(cudaEventRecord(d.done, download_stream_));
        downloads_.push_back(std::move(d));
        while (downloads_.size() > 1) {
            retire_download();
        }
    }

    void finish_downloads() override
    {
        while (!downloads_.empty()) {
            retire_download();
        }
    }

    // From page-locked memory into a contiguous view: on the upload stream after the compute
    // issued so far (dst may be memory that work before it frees or writes), so that copies
    // issued back to back run while the compute stream works; otherwise a synchronous copy.
    // Each call queues an entry that wait_upload() takes (null: nothing to wait for).
    // Each call queues exactly one entry, also when it throws.
    void upload_async(const float* host, DenseView<float> dst) override
    {
        uploads_.push_back(nullptr);
        if (dst.rows == 0 || dst.cols == 0 || dst.ld != dst.cols || !is_pinned(host)) {
            copy_from_host(host, dst);
            return;
        }
        if (upload_stream_ == nullptr) {
            HALO_CUDA_TRY(cudaStreamCreateWithFlags(&upload_stream_, cudaStreamNonBlocking));
        }
        const auto bytes = static_cast<std::size_t>(dst.rows * dst.cols) * sizeof(float);
        cudaEvent_t done = nullptr;
        HALO_CUDA_TRY(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
        uploads_.back() = done;  // destroyed by wait_upload or the destructor
        // The event records the compute stream's position; the upload stream waits for it.
        HALO_CUDA_TRY(cudaEventRecord(done, ctx_.compute_stream()));
        HALO_CUDA_TRY(cudaStreamWaitEvent(upload_stream_, done));
        HALO_CUDA_TRY(
            cudaMemcpyAsync(dst.data, host, bytes, cudaMemcpyHostToDevice, upload_stream_));
        HALO_CUDA_TRY(cudaEventRecord(done, upload_stream_));
    }

    void wait_upload() override
    {
        HALO_EXPECTS(!uploads_.empty(), "wait_upload() without an upload_async() before it");
        auto* done = uploads_.front();
        uploads_.pop_front();
        if (done == nullptr) {
            return;
        }
        const auto status = cudaStreamWaitEvent(ctx_.compute_stream(), done);
        static_cast<void>(cudaEventDestroy(done));  // allowed with the wait pending
        HALO_CUDA_TRY(status);
    }

    // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS gets B as its first operand.
    void gemm(DenseView<const float> a, DenseView<const float> b, DenseView<float> c, float alpha,
              float beta) override
    {
        HALO_EXPECTS(a.cols == b.rows, "A is ", a.rows, " x ", a.cols, ", B is ", b.rows, " x ",
                     b.cols);
        HALO_EXPECTS(c.rows == a.rows && c.cols == b.cols, "C is ", c.rows, " x ", c.cols,
                     ", expected ", a.rows, " x ", b.cols);
        const int m = checked_int(c.rows, "gemm rows");
        const int n = checked_int(c.cols, "gemm columns");
        const int k = checked_int(a.cols, "gemm inner dimension");
        if (m == 0 || n == 0) {
            return;
        }
        if (k == 0) {
            // No products: C = beta * C, and beta == 0 writes zeros without reading C.
            if (beta == 0.0f) {
                HALO_CUDA_TRY(
                    cudaMemset2DAsync(c.data, static_cast<std::size_t>(c.ld) * sizeof(float), 0,
                                      static_cast<std::size_t>(c.cols) * sizeof(float),
                                      static_cast<std::size_t>(c.rows), ctx_.compute_stream()));
            } else {
                detail::axpby(ctx_.compute_stream(), c.rows, c.cols, beta, c.data, c.ld, 0.0f,
                              c.data, c.ld);
            }
            return;
        }
        HALO_EXPECTS(a.ld >= a.cols && b.ld >= b.cols && c.ld >= c.cols,
                     "leading dimensions below the widths: lda ", a.ld, ", ldb ", b.ld, ", ldc ",
                     c.ld);
        const int lda = checked_int(a.ld, "lda");
        const int ldb = checked_int(b.ld, "ldb");
        const int ldc = checked_int(c.ld, "ldc");
        // cuBLAS follows BLAS: beta == 0 overwrites C without reading it.
        HALO_CUBLAS_TRY(cublasGemmEx(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                                     b.data, CUDA_R_32F, ldb, a.data, CUDA_R_32F, lda, &beta,
                                     c.data, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
    }

    void axpby(float alpha, DenseView<const float> x, float beta, DenseView<float> y) override
    {
        HALO_EXPECTS(x.rows == y.rows && x.cols == y.cols, "axpby shapes differ: ", x.rows, "x",
                     x.cols, " vs ", y.rows, "x", y.cols);
        HALO_EXPECTS(x.ld >= x.cols && y.ld >= y.cols, "leading dimensions below the widths");
        detail::axpby(ctx_.compute_stream(), y.rows, y.cols, alpha, x.data, x.ld, beta, y.data,
                      y.ld);
    }

    void bias_activation(DenseView<float> y, const float* bias, Activation act,
                         RowRange rows) override
    {
        HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= y.rows, "row range [",
                     rows.begin, ", ", rows.end, ") outside [0, ", y.rows, ")");
        if (rows.empty() || y.cols == 0) {
            return;
        }
        detail::bias_activation(ctx_.compute_stream(), y.row(rows.begin), rows.size(), y.cols, y.ld,
                                bias, act == Activation::relu);
    }

    std::unique_ptr<MaxkPlan> make_maxk_plan(const Csr& a, std::int64_t dim, std::int64_t k,
                                             const SpmmPlanHints& hints) override
    {
        return make_cuda_maxk_plan(ctx_, a, dim, k, hints);
    }

    std::unique_ptr<AttentionPlan> make_attention_plan(const Csr& a, std::int64_t max_dim,
                                                       AttentionKernel kernel,
                                                       const SpmmPlanHints& hints) override
    {
        return make_cuda_attention_plan(ctx_, a, max_dim, kernel, hints);
    }

    std::unique_ptr<QuantizedSpmmPlan> make_quantized_spmm_plan(const Csr& a,
                                                                std::int64_t max_dim) override
    {
        return make_cuda_quantized_spmm_plan(ctx_, a, max_dim, spmm_.aes ? &*spmm_.aes : nullptr);
    }

    void dequantize(const QuantizedView& x, DenseView<float> y) override
    {
        HALO_EXPECTS(x.rows == y.rows && x.cols == y.cols, "dequantize shapes differ: ", x.rows,
                     "x", x.cols, " vs ", y.rows, "x", y.cols);
        cuda::dequantize(ctx_.compute_stream(), x, y);
    }

    void normalize_rows(DenseView<const float> x, DenseView<float> y) override
    {
        HALO_EXPECTS(x.rows == y.rows && x.cols == y.cols, "normalize_rows shapes differ: ",
                     x.rows, "x", x.cols, " vs ", y.rows, "x", y.cols);
        cuda::normalize_rows(ctx_.compute_stream(), x, y);
    }

    bool begin_capture() override
    {
        drop_graph();
        // Thread-local mode: this thread's calls that cannot be recorded (allocations,
        // synchronizations) fail instead of silently running outside the graph.
        HALO_CUDA_TRY(
            cudaStreamBeginCapture(ctx_.compute_stream(), cudaStreamCaptureModeThreadLocal));
        return true;
    }

    void end_capture() override
    {
        cudaGraph_t graph = nullptr;
        const auto status = cudaStreamEndCapture(ctx_.compute_stream(), &graph);
        if (status != cudaSuccess || graph == nullptr) {
            static_cast<void>(cudaGetLastError());  // the capture's error, now reported here
            HALO_THROW(Error, "recording the forward pass as a CUDA graph failed: ",
                       cudaGetErrorString(status));
        }
        graph_ = graph;
        HALO_CUDA_TRY(cudaGraphInstantiate(&graph_exec_, graph_, 0));
    }

    void replay() override
    {
        HALO_EXPECTS(graph_exec_ != nullptr, "replay() without a recording");
        HALO_CUDA_TRY(cudaGraphLaunch(graph_exec_, ctx_.compute_stream()));
    }

    void synchronize() override
    {
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream()));
        finish_downloads();
    }

private:
    void drop_graph() noexcept
    {
        if (graph_exec_ != nullptr) {
            static_cast<void>(cudaGraphExecDestroy(graph_exec_));
            graph_exec_ = nullptr;
        }
        if (graph_ != nullptr) {
            static_cast<void>(cudaGraphDestroy(graph_));
            graph_ = nullptr;
        }
    }

    // Page-locked host memory (allocate_host, cudaMallocHost, cudaHostRegister): copied directly.
    static bool is_pinned(const void* host)
    {
        cudaPointerAttributes attributes{};
        if (cudaPointerGetAttributes(&attributes, host) != cudaSuccess) {
            static_cast<void>(cudaGetLastError());
            return false;
        }
        return attributes.type == cudaMemoryTypeHost;
    }

    void ensure_staging()
    {
        if (staging_[0].data() != nullptr) {
            return;
        }
        for (int b = 0; b < 2; ++b) {
            staging_[b] = PinnedBuffer<char>(kStageChunkBytes);
            HALO_CUDA_TRY(cudaEventCreateWithFlags(&stage_events_[b], cudaEventDisableTiming));
        }
    }

    // Chunk i is copied into staging buffer i % 2 while the DMA of chunk i - 1 runs; a buffer is
    // refilled only after the DMA that read it (its event) has completed.
    void staged_upload(char* device, const char* host, std::size_t bytes)
    {
        ensure_staging();
        const cudaStream_t stream = ctx_.compute_stream();
        std::size_t chunk = 0;
        for (std::size_t off = 0; off < bytes; off += kStageChunkBytes, ++chunk) {
            const std::size_t n = std::min(kStageChunkBytes, bytes - off);
            const int b = static_cast<int>(chunk % 2);
            if (chunk >= 2) {
                HALO_CUDA_TRY(cudaEventSynchronize(stage_events_[b]));
            }
            parallel_memcpy(staging_[b].data(), host + off, n);
            HALO_CUDA_TRY(cudaMemcpyAsync(device + off, staging_[b].data(), n,
                                          cudaMemcpyHostToDevice, stream));
            HALO_CUDA_TRY(cudaEventRecord(stage_events_[b], stream));
        }
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
    }

    // The DMA of chunk i into buffer i % 2 runs while chunk i - 1 is copied out of the other.
    void staged_download(char* host, const char* device, std::size_t bytes)
    {
        ensure_staging();
        const cudaStream_t stream = ctx_.compute_stream();
        const std::size_t chunks = (bytes + kStageChunkBytes - 1) / kStageChunkBytes;
        auto drain = [&](std::size_t i) {
            const int b = static_cast<int>(i % 2);
            const std::size_t off = i * kStageChunkBytes;
            HALO_CUDA_TRY(cudaEventSynchronize(stage_events_[b]));
            parallel_memcpy(host + off, staging_[b].data(), std::min(kStageChunkBytes, bytes - off));
        };
        for (std::size_t i = 0; i < chunks; ++i) {
            const int b = static_cast<int>(i % 2);
            const std::size_t off = i * kStageChunkBytes;
            // Buffer b last held chunk i - 2, drained at the end of iteration i - 1.
            HALO_CUDA_TRY(cudaMemcpyAsync(staging_[b].data(), device + off,
                                          std::min(kStageChunkBytes, bytes - off),
                                          cudaMemcpyDeviceToHost, stream));
            HALO_CUDA_TRY(cudaEventRecord(stage_events_[b], stream));
            if (i >= 1) {
                drain(i - 1);
            }
        }
        drain(chunks - 1);
    }

    struct Download {
        Matrix src;
        cudaEvent_t done = nullptr;
    };

    // Waits for the oldest download, then releases its source and event.
    void retire_download()
    {
        auto d = std::move(downloads_.front());
        downloads_.pop_front();
        const auto status = cudaEventSynchronize(d.done);
        static_cast<void>(cudaEventDestroy(d.done));
        HALO_CUDA_TRY(status);
    }

    Context& ctx_;
    SpmmChoice spmm_;
    cudaStream_t download_stream_ = nullptr;
    std::deque<Download> downloads_;
    cudaStream_t upload_stream_ = nullptr;
    std::deque<cudaEvent_t> uploads_;  // upload_async's, oldest first (null: nothing to wait for)
    cudaGraph_t graph_ = nullptr;  // the recording of begin_capture() .. end_capture()
    cudaGraphExec_t graph_exec_ = nullptr;
    PinnedBuffer<char> staging_[2];
    cudaEvent_t stage_events_[2] = {nullptr, nullptr};
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(Context& ctx, const SpmmChoice& spmm)
{
    return std::make_unique<CudaBackend>(ctx, spmm);
}

std::unique_ptr<Backend> make_cuda_backend(Context& ctx, std::string_view spmm)
{
    return make_cuda_backend(ctx, parse_spmm_choice(spmm, spmm_use_infer));
}

}  // namespace halo::cuda
