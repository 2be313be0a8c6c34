// Host side of the unfused attention baseline (include/halo/cuda/fused3s.hpp): the pattern on the
// device, a score per nonzero, and cuSPARSE SpMM with the normalized scores as the CSR values.
//
// Choices:
// - The score and softmax kernels read int64 offsets and int32 columns (the host types). cuSPARSE
//   gets one index type for offsets and columns, as in cusparse_spmm.cpp: 32-bit when nnz, rows
//   and columns fit in int32, else 64-bit for both (columns widened on the device).
// - A row range [b, e) is its own cuSPARSE descriptor with rebased offsets, made on first use and
//   kept; the workspace of a (range, width, strides) is sized on first use and grows only.
// - CUSPARSE_SPMM_CSR_ALG2 with row-major dense operands: deterministic, no atomics.
#include <climits>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/backend/cuda_kernels.hpp"
#include "cuda/attention/fused3s_kernels.hpp"
#include "halo/cuda/fused3s.hpp"
#include "halo/cuda_error.hpp"
#include "halo/error.hpp"

namespace halo::cuda {
namespace {

constexpr cusparseSpMMAlg_t kAlgorithm = CUSPARSE_SPMM_CSR_ALG2;

// Destroys a dense descriptor at scope exit (made per call: the pointers change).
template <typename Descr>
struct DnMat {
    Descr descr = nullptr;
    DnMat() = default;
    DnMat(const DnMat&) = delete;
    DnMat& operator=(const DnMat&) = delete;
    ~DnMat()
    {
        if (descr != nullptr) {
            (void)cusparseDestroyDnMat(descr);
        }
    }
};

// The CSR descriptor of one row range and the rebased offsets it points at.
struct Range {
    cusparseSpMatDescr_t descr = nullptr;
    DeviceBuffer<std::int32_t> offsets32;
    DeviceBuffer<std::int64_t> offsets64;

    Range() = default;
    Range(const Range&) = delete;
    Range& operator=(const Range&) = delete;
    ~Range()
    {
        if (descr != nullptr) {
            (void)cusparseDestroySpMat(descr);
        }
    }
};

void check_rows(RowRange rows, std::int64_t num_rows)
{
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= num_rows, "row range [",
                 rows.begin, ", ", rows.end, ") outside [0, ", num_rows, ")");
}

}  // namespace

struct UnfusedAttentionPlan::Impl {
    Context& ctx;
    std::int64_t num_rows = 0;
    std::int64_t num_cols = 0;
    std::int64_t nnz = 0;
    bool wide = false;
    std::vector<offset_t> indptr;  // host copy: each range's first nonzero and count
    DeviceBuffer<std::int64_t> offsets64;
    DeviceBuffer<std::int32_t> offsets32;  // cuSPARSE's, when 32-bit
    DeviceBuffer<std::int32_t> columns32;
    DeviceBuffer<std::int64_t> columns64;  // cuSPARSE's, when 64-bit
    DeviceBuffer<float> scores;
    std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<Range>> ranges;
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>,
             std::size_t>
        workspace_sizes;
    DeviceBuffer<char> workspace;

    Impl(Context& c, const Csr& a)
        : ctx(c), num_rows(a.num_rows), num_cols(a.num_cols), nnz(a.nnz()), indptr(a.indptr)
    {
        validate(a, "the pattern of an unfused attention plan");
        wide = nnz > INT_MAX || num_rows > INT_MAX || num_cols > INT_MAX;
        const cudaStream_t stream = ctx.compute_stream();
        offsets64 = DeviceBuffer<std::int64_t>(ctx, indptr.size());
        HALO_CUDA_TRY(cudaMemcpyAsync(offsets64.data(), indptr.data(), offsets64.bytes(),
                                      cudaMemcpyHostToDevice, stream));
        columns32 = DeviceBuffer<std::int32_t>(ctx, a.indices.size());
        if (nnz > 0) {
            HALO_CUDA_TRY(cudaMemcpyAsync(columns32.data(), a.indices.data(), columns32.bytes(),
                                          cudaMemcpyHostToDevice, stream));
        }
        if (wide) {
            columns64 = DeviceBuffer<std::int64_t>(ctx, a.indices.size());
            detail::widen_indices(stream, columns32.data(), columns64.data(), nnz);
        } else {
            offsets32 = DeviceBuffer<std::int32_t>(ctx, indptr.size());
            detail::shift_offsets(stream, offsets64.data(), offsets32.data(),
                                  static_cast<std::int64_t>(indptr.size()), 0);
        }
        scores = DeviceBuffer<float>(ctx, static_cast<std::size_t>(nnz));
        // Once, at setup: a failed upload surfaces here rather than in a later run.
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
    }

    detail::SddmmArgs sddmm_args(RowRange rows)
    {
        detail::SddmmArgs args;
        args.offsets = offsets64.data();
        args.columns = columns32.data();
        args.row_begin = rows.begin;
        args.row_end = rows.end;
        args.scores = scores.data();
        return args;
    }

    cusparseSpMatDescr_t range_descriptor(RowRange rows)
    {
        const auto key = std::make_pair(rows.begin, rows.end);
        const auto found = ranges.find(key);
        if (found != ranges.end()) {
            return found->second->descr;
        }
        auto range = std::make_unique<Range>();
        const cudaStream_t stream = ctx.compute_stream();
        const std::int64_t first = indptr[rows.begin];
        const std::int64_t count = rows.size() + 1;
        void* offsets = nullptr;
        void* columns = nullptr;
        cusparseIndexType_t index_type = CUSPARSE_INDEX_32I;
        if (wide) {
            index_type = CUSPARSE_INDEX_64I;
            columns = columns64.data() + first;
            range->offsets64 = DeviceBuffer<std::int64_t>(ctx, count);
            detail::shift_offsets(stream, offsets64.data() + rows.begin, range->offsets64.data(),
                                  count, first);
            offsets = range->offsets64.data();
        } else {
            columns = columns32.data() + first;
            if (rows.begin == 0) {
                offsets = offsets32.data();
            } else {
                range->offsets32 = DeviceBuffer<std::int32_t>(ctx, count);
                detail::shift_offsets(stream, offsets32.data() + rows.begin,
                                      range->offsets32.data(), count, first);
                offsets = range->offsets32.data();
            }
        }
        HALO_CUSPARSE_TRY(cusparseCreateCsr(
            &range->descr, rows.size(), num_cols, indptr[rows.end] - first, offsets, columns,
            scores.data() + first, index_type, index_type, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
        const auto descr = range->descr;
        ranges.emplace(key, std::move(range));
        return descr;
    }

    // out[rows] = S[rows] v with S's values the current scores.
    void spmm(DenseView<const float> v, DenseView<float> out, RowRange rows)
    {
        const cudaStream_t stream = ctx.compute_stream();
        const std::int64_t width = v.cols;
        if (indptr[rows.end] == indptr[rows.begin]) {
            HALO_CUDA_TRY(cudaMemset2DAsync(out.row(rows.begin),
                                            static_cast<std::size_t>(out.ld) * sizeof(float), 0,
                                            static_cast<std::size_t>(width) * sizeof(float),
                                            static_cast<std::size_t>(rows.size()), stream));
            return;
        }
        const cusparseSpMatDescr_t a = range_descriptor(rows);
        DnMat<cusparseConstDnMatDescr_t> vd;
        HALO_CUSPARSE_TRY(cusparseCreateConstDnMat(&vd.descr, num_cols, width, v.ld, v.data,
                                                   CUDA_R_32F, CUSPARSE_ORDER_ROW));
        DnMat<cusparseDnMatDescr_t> od;
        HALO_CUSPARSE_TRY(cusparseCreateDnMat(&od.descr, rows.size(), width, out.ld,
                                              out.row(rows.begin), CUDA_R_32F, CUSPARSE_ORDER_ROW));
        const float alpha = 1.0f;
        const float beta = 0.0f;
        const auto key = std::make_tuple(rows.begin, rows.end, width, v.ld, out.ld);
        auto size = workspace_sizes.find(key);
        if (size == workspace_sizes.end()) {
            std::size_t bytes = 0;
            HALO_CUSPARSE_TRY(cusparseSpMM_bufferSize(
                ctx.cusparse(), CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                &alpha, a, vd.descr, &beta, od.descr, CUDA_R_32F, kAlgorithm, &bytes));
            size = workspace_sizes.emplace(key, bytes).first;
        }
        if (size->second > workspace.bytes()) {
            workspace = DeviceBuffer<char>(ctx, size->second);
        }
        HALO_CUSPARSE_TRY(cusparseSpMM(ctx.cusparse(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                                       CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a, vd.descr, &beta,
                                       od.descr, CUDA_R_32F, kAlgorithm, workspace.data()));
    }

    void check_out(DenseView<const float> v, DenseView<float> out, RowRange rows) const
    {
        check_rows(rows, num_rows);
        HALO_EXPECTS(v.rows >= num_cols, "V has ", v.rows, " rows, the pattern ", num_cols,
                     " columns");
        HALO_EXPECTS(out.rows >= num_rows && out.cols == v.cols, "O is ", out.rows, " x ", out.cols,
                     ", expected ", num_rows, " x ", v.cols);
        HALO_EXPECTS(v.ld >= v.cols && out.ld >= out.cols, "leading dimensions ", v.ld, " and ",
                     out.ld, " below the width ", v.cols);
    }
};

UnfusedAttentionPlan::UnfusedAttentionPlan(Context& ctx, const Csr& a)
    : impl_(std::make_unique<Impl>(ctx, a))
{
}

UnfusedAttentionPlan::~UnfusedAttentionPlan() = default;

std::int64_t UnfusedAttentionPlan::num_rows() const noexcept
{
    return impl_->num_rows;
}

std::int64_t UnfusedAttentionPlan::num_cols() const noexcept
{
    return impl_->num_cols;
}

std::int64_t UnfusedAttentionPlan::nnz() const noexcept
{
    return impl_->nnz;
}

const float* UnfusedAttentionPlan::scores() const noexcept
{
    return impl_->scores.data();
}

void UnfusedAttentionPlan::run(DenseView<const float> q, DenseView<const float> k,
                               DenseView<const float> v, float scale, DenseView<float> out,
                               RowRange rows)
{
    impl_->check_out(v, out, rows);
    HALO_EXPECTS(q.cols == k.cols, "Q has ", q.cols, " columns, K has ", k.cols);
    HALO_EXPECTS(q.rows >= impl_->num_rows && k.rows >= impl_->num_cols, "Q has ", q.rows,
                 " rows and K ", k.rows, "; the pattern is ", impl_->num_rows, " x ",
                 impl_->num_cols);
    HALO_EXPECTS(q.ld >= q.cols && k.ld >= k.cols, "leading dimensions ", q.ld, " and ", k.ld,
                 " below the width ", q.cols);
    if (rows.empty() || v.cols == 0) {
        return;
    }
    const cudaStream_t stream = impl_->ctx.compute_stream();
    const auto args = impl_->sddmm_args(rows);
    detail::sddmm_dot(stream, args, q.data, q.ld, k.data, k.ld, q.cols, scale);
    detail::csr_row_softmax(stream, args);
    impl_->spmm(v, out, rows);
}

void UnfusedAttentionPlan::run_additive(const float* el, const float* er, float negative_slope,
                                        DenseView<const float> v, DenseView<float> out,
                                        RowRange rows)
{
    impl_->check_out(v, out, rows);
    if (rows.empty() || v.cols == 0) {
        return;
    }
    HALO_EXPECTS(el != nullptr && (er != nullptr || impl_->num_cols == 0), "null score vectors");
    const cudaStream_t stream = impl_->ctx.compute_stream();
    const auto args = impl_->sddmm_args(rows);
    detail::sddmm_additive(stream, args, el, er, negative_slope);
    detail::csr_row_softmax(stream, args);
    impl_->spmm(v, out, rows);
}

std::unique_ptr<UnfusedAttentionPlan> make_unfused_attention_plan(Context& ctx, const Csr& a)
{
    return std::make_unique<UnfusedAttentionPlan>(ctx, a);
}

}  // namespace halo::cuda
