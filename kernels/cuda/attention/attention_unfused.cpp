// Host side of the unfused attention baseline (include/halo/kernels/cuda/fused3s.hpp): the pattern
// on the device, a score per nonzero, and cuSPARSE SpMM with the normalized scores as the CSR
// values.
//
// Choices:
// - The score and softmax kernels read int64 offsets and int32 columns (the host types); cuSPARSE
//   reads the pattern in one index type for offsets and columns, over row ranges with their own
//   descriptors (kernels/cuda/primitives/cusparse_csr.hpp, as the cuSPARSE SpMM plan).
// - CUSPARSE_SPMM_CSR_ALG2 with row-major dense operands: deterministic, no atomics.
#include <memory>

#include "cuda/attention/fused3s_kernels.hpp"
#include "cuda/primitives/cusparse_csr.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/fused3s.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda {
namespace {

void check_rows(RowRange rows, std::int64_t num_rows)
{
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= num_rows, "row range [",
                 rows.begin, ", ", rows.end, ") outside [0, ", num_rows, ")");
}

// `a`, once checked: before anything is uploaded.
const Csr& checked(const Csr& a)
{
    validate(a, "the pattern of an unfused attention plan");
    return a;
}

}  // namespace

struct UnfusedAttentionPlan::Impl {
    Context& ctx;
    std::int64_t num_rows = 0;
    std::int64_t num_cols = 0;
    // The pattern as cuSPARSE reads it, with the host-typed offsets and columns that the score
    // kernels read; its values are the scores.
    detail::CusparseCsr csr;

    Impl(Context& c, const Csr& a)
        : ctx(c),
          num_rows(a.num_rows),
          num_cols(a.num_cols),
          csr(c, checked(a), IndexWidth::automatic, true)
    {
        // Once, at setup: a failed upload surfaces here rather than in a later run.
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
    }

    detail::SddmmArgs sddmm_args(RowRange rows)
    {
        detail::SddmmArgs args;
        args.offsets = csr.offsets64();
        args.columns = csr.columns32();
        args.row_begin = rows.begin;
        args.row_end = rows.end;
        args.scores = csr.values();
        return args;
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
    return impl_->csr.nnz();
}

const float* UnfusedAttentionPlan::scores() const noexcept
{
    return impl_->csr.values();
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
    impl_->csr.spmm(v, out, rows);
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
    impl_->csr.spmm(v, out, rows);
}

std::unique_ptr<UnfusedAttentionPlan> make_unfused_attention_plan(Context& ctx, const Csr& a)
{
    return std::make_unique<UnfusedAttentionPlan>(ctx, a);
}

}  // namespace halo::cuda
