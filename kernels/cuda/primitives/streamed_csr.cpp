// A host CSR streamed by row blocks into cuSPARSE SpMM (cusparse_csr.hpp, make_streamed_csr).
//
// Ordering (all on the device, the host never waits):
// - a block's buffers are allocated on the compute stream when it is prefetched, and the copy
//   stream waits for that point of the compute stream before writing them (the pool may hand out
//   memory that earlier compute freed);
// - the copies run on the copy stream and record the block's `ready` event; run() makes the
//   compute stream wait for it, then rebases the offsets and runs the SpMM;
// - the buffers are freed stream-ordered on the compute stream after the block's SpMM.
// A caller that prefetches block b + 1 before it runs block b gets the copy of b + 1 during the
// SpMM of b: the copy stream's wait is for the compute issued before that prefetch.
//
// cuSPARSE SpMM (CSR_ALG2, as in memory) balances the power-law rows that a row-per-warp kernel
// leaves to one warp (a row of 400k nonzeros in R-MAT 24: the row-split kernel took 0.86 s where
// cuSPARSE took 0.41). Given scalings of the operator's values, only the columns travel and a
// kernel makes the values on the device (r_i c_j): half the operator's bytes over the bus, for a
// gather of c_j on the device (slower at R-MAT 26 on an H100, so the engine asks for it only
// with EngineOptions::stream_scaled_operators).

#include <cuda_runtime_api.h>

#include <climits>
#include <deque>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "cuda/primitives/cusparse_csr.hpp"
#include "cuda/primitives/upload.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {
namespace {

// A block is one 32-bit cuSPARSE descriptor.
constexpr std::int64_t kMaxBlockNonzeros = INT_MAX;

// An event destroyed at scope exit; destroying an event with work pending is allowed
// (the runtime releases it when the work completes).
struct Event {
    cudaEvent_t event = nullptr;
    Event() { HALO_CUDA_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming)); }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    ~Event() { static_cast<void>(cudaEventDestroy(event)); }
};

// Page-locks [data, data + bytes) for the object's lifetime. Memory that cannot be registered
// (already registered by someone else, or refused by the driver) is still copied, from pageable
// memory: correct, but at the pageable rate (the reason is kept for algorithm()).
class Registration {
public:
    Registration() = default;
    Registration(const void* data, std::size_t bytes, std::string& refused)
    {
        if (bytes == 0) {
            return;
        }
        // cudaHostRegister does not write the memory; its signature is not const.
        void* ptr = const_cast<void*>(data);
        const auto status = cudaHostRegister(ptr, bytes, cudaHostRegisterDefault);
        if (status == cudaSuccess) {
            ptr_ = ptr;
        } else {
            static_cast<void>(cudaGetLastError());
            refused = cudaGetErrorString(status);
        }
    }
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    ~Registration()
    {
        if (ptr_ != nullptr) {
            static_cast<void>(cudaHostUnregister(ptr_));
        }
    }

private:
    void* ptr_ = nullptr;
};

class StreamedCsr final : public StreamedSpmm {
public:
    StreamedCsr(Context& ctx, const Csr& a, const OperatorScaling* scaling, bool scaled_input)
        : ctx_(ctx), a_(a), values_streamed_(a.has_values() && scaling == nullptr)
    {
        if (scaling != nullptr) {
            check_scaling(a, *scaling);
            row_scale_ = upload(ctx_, scaling->row);
            col_scale_ = upload(ctx_, scaling->col);
            scaled_input_ = scaled_input && !scaling->col.empty();
        }
        HALO_CUDA_TRY(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
        offsets_ = std::make_unique<Registration>(a.indptr.data(),
                                                  a.indptr.size() * sizeof(offset_t), refused_);
        columns_ = std::make_unique<Registration>(a.indices.data(),
                                                  a.indices.size() * sizeof(local_id), refused_);
        if (values_streamed_) {
            values_ = std::make_unique<Registration>(a.values.data(),
                                                     a.values.size() * sizeof(float), refused_);
        }
    }

    // Queued blocks are released after their copies (the compute stream waits for them), and
    // the copy stream is drained before the registrations end.
    ~StreamedCsr() override
    {
        while (!queued_.empty()) {
            static_cast<void>(cudaStreamWaitEvent(ctx_.compute_stream(), queued_.front().ready->event));
            queued_.pop_front();
        }
        static_cast<void>(cudaStreamSynchronize(copy_));
        values_.reset();
        columns_.reset();
        offsets_.reset();
        static_cast<void>(cudaStreamDestroy(copy_));
    }
    StreamedCsr(const StreamedCsr&) = delete;
    StreamedCsr& operator=(const StreamedCsr&) = delete;

    void prefetch(RowRange rows) override
    {
        HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= a_.num_rows,
                     "rows [", rows.begin, ", ", rows.end, ") of an operator of ", a_.num_rows,
                     " rows");
        Block b;
        b.rows = rows;
        b.first = a_.indptr[rows.begin];
        b.nnz = a_.indptr[rows.end] - b.first;
        HALO_EXPECTS(b.nnz <= kMaxBlockNonzeros && rows.size() < INT_MAX, "a streamed block of ",
                     rows.size(), " rows and ", b.nnz, " nonzeros: its 32-bit offsets hold at most ",
                     kMaxBlockNonzeros, " nonzeros");
        const auto count = static_cast<std::size_t>(rows.size() + 1);
        const auto nnz = static_cast<std::size_t>(b.nnz);
        b.offsets = DeviceBuffer<std::int64_t>(ctx_, count);
        b.columns = DeviceBuffer<std::int32_t>(ctx_, nnz);
        b.values = DeviceBuffer<float>(ctx_, nnz);  // copied, or made on the device
        b.ready = std::make_unique<Event>();
        HALO_CUDA_TRY(cudaEventRecord(allocated_.event, ctx_.compute_stream()));
        HALO_CUDA_TRY(cudaStreamWaitEvent(copy_, allocated_.event));
        HALO_CUDA_TRY(cudaMemcpyAsync(b.offsets.data(), a_.indptr.data() + rows.begin,
                                      count * sizeof(std::int64_t), cudaMemcpyHostToDevice,
                                      copy_));
        copied_ += static_cast<std::int64_t>(count * sizeof(std::int64_t));
        if (nnz > 0) {
            HALO_CUDA_TRY(cudaMemcpyAsync(b.columns.data(), a_.indices.data() + b.first,
                                          nnz * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                                          copy_));
            copied_ += static_cast<std::int64_t>(nnz * sizeof(std::int32_t));
            if (values_streamed_) {
                HALO_CUDA_TRY(cudaMemcpyAsync(b.values.data(), a_.values.data() + b.first,
                                              nnz * sizeof(float), cudaMemcpyHostToDevice, copy_));
                copied_ += static_cast<std::int64_t>(nnz * sizeof(float));
            }
        }
        HALO_CUDA_TRY(cudaEventRecord(b.ready->event, copy_));
        queued_.push_back(std::move(b));
    }

    void run(RowRange rows, DenseView<const float> x, DenseView<float> y) override
    {
        HALO_EXPECTS(y.rows == rows.size() && x.rows == a_.num_cols && x.cols == y.cols,
                     "a block of ", rows.size(), " rows into a ", y.rows, " x ", y.cols,
                     " view, reading ", x.rows, " x ", x.cols, " (the operator has ", a_.num_cols,
                     " columns)");
        const cudaStream_t stream = ctx_.compute_stream();
        if (queued_.empty() || queued_.front().rows.begin != rows.begin ||
            queued_.front().rows.end != rows.end) {
            while (!queued_.empty()) {  // out of order: released after their copies
                HALO_CUDA_TRY(cudaStreamWaitEvent(stream, queued_.front().ready->event));
                queued_.pop_front();
            }
            prefetch(rows);
        }
        Block b = std::move(queued_.front());
        queued_.pop_front();
        HALO_CUDA_TRY(cudaStreamWaitEvent(stream, b.ready->event));
        const std::int64_t width = x.cols;
        if (rows.empty() || width == 0) {
            return;
        }
        if (b.nnz == 0) {
            HALO_CUDA_TRY(cudaMemset2DAsync(y.data, static_cast<std::size_t>(y.ld) * sizeof(float),
                                            0, static_cast<std::size_t>(width) * sizeof(float),
                                            static_cast<std::size_t>(rows.size()), stream));
            return;
        }
        DeviceBuffer<std::int32_t> offsets(ctx_, static_cast<std::size_t>(rows.size() + 1));
        shift_offsets(stream, b.offsets.data(), offsets.data(), rows.size() + 1, b.first);
        if (!values_streamed_) {  // r_i c_j (r_i where x carries c_j), or ones for a pattern
            scaled_values(stream, rows.size(), offsets.data(), b.columns.data(),
                          row_scale_.size() > 0 ? row_scale_.data() + rows.begin : nullptr,
                          col_scale_.size() > 0 && !scaled_input_ ? col_scale_.data() : nullptr,
                          b.values.data());
        }
        cusparseSpMatDescr_t a = nullptr;
        HALO_CUSPARSE_TRY(cusparseCreateCsr(&a, rows.size(), a_.num_cols, b.nnz, offsets.data(),
                                            b.columns.data(), b.values.data(), CUSPARSE_INDEX_32I,
                                            CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                            CUDA_R_32F));
        const std::unique_ptr<std::remove_pointer_t<cusparseSpMatDescr_t>,
                              decltype(&cusparseDestroySpMat)>
            a_owner(a, &cusparseDestroySpMat);
        DnMat<cusparseConstDnMatDescr_t> xd;
        HALO_CUSPARSE_TRY(cusparseCreateConstDnMat(&xd.descr, x.rows, width, x.ld, x.data,
                                                   CUDA_R_32F, CUSPARSE_ORDER_ROW));
        DnMat<> yd;
        HALO_CUSPARSE_TRY(cusparseCreateDnMat(&yd.descr, rows.size(), width, y.ld, y.data,
                                              CUDA_R_32F, CUSPARSE_ORDER_ROW));
        const float alpha = 1.0f;
        const float beta = 0.0f;
        std::size_t bytes = 0;
        HALO_CUSPARSE_TRY(cusparseSpMM_bufferSize(
            ctx_.cusparse(), CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
            &alpha, a, xd.descr, &beta, yd.descr, CUDA_R_32F, kCsrSpmmAlgorithm, &bytes));
        if (bytes > workspace_.bytes()) {
            workspace_ = DeviceBuffer<char>(ctx_, bytes);  // the old one freed stream-ordered
        }
        HALO_CUSPARSE_TRY(cusparseSpMM(ctx_.cusparse(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                                       CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a, xd.descr,
                                       &beta, yd.descr, CUDA_R_32F, kCsrSpmmAlgorithm,
                                       workspace_.data()));
    }

    std::int64_t copied_bytes() const override { return copied_; }

    bool scaled_input() const override { return scaled_input_; }

    void scale_input(DenseView<float> x, RowRange rows) override
    {
        HALO_EXPECTS(scaled_input_, "scale_input on a streamed operator that reads x as given");
        HALO_EXPECTS(x.rows == a_.num_cols && x.ld >= x.cols, "scale_input of ", x.rows, " x ",
                     x.cols, " (ld ", x.ld, ") for an operator of ", a_.num_cols, " columns");
        HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= x.rows,
                     "scale_input of rows [", rows.begin, ", ", rows.end, ") of ", x.rows);
        if (rows.empty()) {
            return;
        }
        scale_rows(ctx_.compute_stream(), x.data + rows.begin * x.ld, rows.size(), x.cols, x.ld,
                   col_scale_.data() + rows.begin);
    }

    std::string algorithm() const override
    {
        std::string out = "cuSPARSE SpMM over row blocks copied on a copy stream";
        if (!values_streamed_ && a_.has_values()) {
            out += scaled_input_ ? " (pattern streamed, values as row scalings, x's rows scaled "
                                   "by the column scalings once per layer)"
                                 : " (pattern streamed, values as row and column scalings)";
        }
        if (!refused_.empty()) {
            out += " (pageable: cudaHostRegister refused: " + refused_ + ")";
        }
        return out;
    }

private:
    struct Block {
        RowRange rows;
        std::int64_t first = 0;
        std::int64_t nnz = 0;
        DeviceBuffer<std::int64_t> offsets;
        DeviceBuffer<std::int32_t> columns;
        DeviceBuffer<float> values;
        std::unique_ptr<Event> ready;
    };

    Context& ctx_;
    const Csr& a_;
    bool values_streamed_ = false;
    bool scaled_input_ = false;
    DeviceBuffer<float> row_scale_;
    DeviceBuffer<float> col_scale_;
    cudaStream_t copy_ = nullptr;
    Event allocated_;
    std::string refused_;
    std::unique_ptr<Registration> offsets_;
    std::unique_ptr<Registration> columns_;
    std::unique_ptr<Registration> values_;
    std::deque<Block> queued_;
    DeviceBuffer<char> workspace_;
    std::int64_t copied_ = 0;
};

}  // namespace

std::unique_ptr<StreamedSpmm> make_streamed_csr(Context& ctx, const Csr& a,
                                                const OperatorScaling* scaling, bool scaled_input)
{
    return std::make_unique<StreamedCsr>(ctx, a, scaling, scaled_input);
}

}  // namespace halo::cuda::detail
