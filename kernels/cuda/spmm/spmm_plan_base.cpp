// SpmmPlanBase (spmm_plan_base.hpp): the scaffolding of the MergePath, row-split and resident
// plans.
#include "cuda/spmm/spmm_plan_base.hpp"

#include <climits>
#include <vector>

#include "cuda/primitives/spmm_checks.hpp"
#include "cuda/primitives/upload.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {

namespace {
// Kernels add a lane index (at most two warps' worth) to an offset before its bound check.
constexpr std::int64_t kOffsetSlack = 64;
}  // namespace

SpmmPlanBase::SpmmPlanBase(Context& ctx, const Csr& a, std::int64_t max_dim)
    : ctx_(ctx), num_rows_(a.num_rows), num_cols_(a.num_cols), max_dim_(max_dim)
{
}

void SpmmPlanBase::run_features(FeatureView x, DenseView<float> y, RowRange rows)
{
    run_rows(x, y, rows, false);
}

void SpmmPlanBase::run_add(DenseView<const float> x, DenseView<float> y, RowRange rows)
{
    run_rows(fp32_features(x), y, rows, true);
}

void SpmmPlanBase::run_rows(FeatureView x, DenseView<float> y, RowRange rows, bool add)
{
    if (!check_feature_operands(x, y, rows, num_rows_, num_cols_, max_dim_)) {
        return;
    }
    HALO_EXPECTS(y.data != nullptr && (x.data != nullptr || num_cols_ == 0),
                 "null device operands");
    launch(x, y, rows, add);
}

void SpmmPlanBase::upload_operator(const Csr& a, IndexWidth offsets, const OperatorScaling* scaling,
                                   ScaledForm form)
{
    wide_ = offsets == IndexWidth::bits64 || a.nnz() > std::int64_t{INT_MAX} - kOffsetSlack;
    if (wide_) {
        offsets64_ = upload(ctx_, a.indptr);
    } else {
        const std::vector<std::int32_t> narrow(a.indptr.begin(), a.indptr.end());
        offsets32_ = upload(ctx_, narrow);
    }
    columns_ = upload(ctx_, a.indices);
    if (scaling != nullptr && !scaling->col.empty() && form == ScaledForm::automatic) {
        values_ = wide_
                      ? device_scaled_values(ctx_, a, offsets64_.data(), columns_.data(), *scaling)
                      : device_scaled_values(ctx_, a, offsets32_.data(), columns_.data(), *scaling);
        scaled_ = true;
    } else if (scaling != nullptr) {
        // Pattern-only: the scalings (rows + columns floats) instead of a values array. The
        // pattern's own values, if any, are ignored (Backend::make_scaled_spmm_plan).
        upload_scaling(a, *scaling);
    } else if (a.has_values()) {
        values_ = upload(ctx_, a.values);
    }
}

void SpmmPlanBase::upload_scaling(const Csr& a, const OperatorScaling& scaling)
{
    scaling_ = cuda::detail::upload_scaling(ctx_, a, scaling);
    pattern_scaled_ = true;
}

void SpmmPlanBase::finish_setup() const
{
    HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream()));
}

std::string SpmmPlanBase::form_suffix() const
{
    return pattern_scaled_ ? ", pattern with scalings"
           : scaled_       ? ", values made on the device"
                           : "";
}

MemoryReport SpmmPlanBase::memory() const
{
    MemoryReport r;
    r.row_pointers = static_cast<std::int64_t>(offsets32_.bytes() + offsets64_.bytes());
    r.indices = static_cast<std::int64_t>(columns_.bytes());
    // 0 for a pattern operator; the scalings of a scaled one (rows + columns floats).
    r.values = static_cast<std::int64_t>(values_.bytes() + scaling_.bytes());
    r.nonzeros = static_cast<std::int64_t>(columns_.size());
    return r;
}

}  // namespace halo::cuda::detail
