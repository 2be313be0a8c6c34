// What the exact CUDA SpMM plans over their own device layouts (MergePath, row-split, resident)
// share: the entry points of a FeatureSpmmPlan (run, run_add, fp16/bf16 features), the operand
// checks before every launch, the operator's arrays on the device in the forms the registry
// names (values, values made on the device from scalings, a pattern with its scalings), the
// suffix their algorithm() names that form with, and their memory report. A plan says how to
// launch (launch()) and what else it holds; its kernels stay in its .cu file. Host code, private
// to halo_kernels.
#pragma once

#include <cstdint>
#include <string>

#include "cuda/primitives/cusparse_csr.hpp"  // DeviceScaling
#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"
#include "halo/kernels/cuda/backend.hpp"  // IndexWidth, ScaledForm
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo::cuda::detail {

class SpmmPlanBase : public FeatureSpmmPlan {
public:
    SpmmPlanBase(const SpmmPlanBase&) = delete;
    SpmmPlanBase& operator=(const SpmmPlanBase&) = delete;

    void run_features(FeatureView x, DenseView<float> y, RowRange rows) final;
    bool adds_in_place() const final { return true; }
    void run_add(DenseView<const float> x, DenseView<float> y, RowRange rows) final;
    /// The operator's arrays uploaded by upload_operator or upload_scaling; a plan with more
    /// adds to it.
    MemoryReport memory() const override;

protected:
    SpmmPlanBase(Context& ctx, const Csr& a, std::int64_t max_dim);
    ~SpmmPlanBase() override = default;

    /// y[rows] = A[rows] x (add: y[rows] += A[rows] x) on the compute stream, for operands that
    /// passed the checks and a nonempty range of a nonzero width.
    virtual void launch(FeatureView x, DenseView<float> y, RowRange rows, bool add) = 0;

    /// Uploads a's offsets (int32 where `offsets` allows it and nnz + 2 warps stays below 2^31,
    /// else int64), columns, and values: a's own, or with `scaling`, row * column scalings made on
    /// the device (ScaledForm::automatic with column scalings), else the pattern and the scalings
    /// (pattern_scaled()). Asynchronous: finish_setup() waits.
    void upload_operator(const Csr& a, IndexWidth offsets, const OperatorScaling* scaling,
                         ScaledForm form);
    /// Uploads `scaling` alone (a plan that keeps its own copy of the pattern).
    void upload_scaling(const Csr& a, const OperatorScaling& scaling);
    /// Waits for the setup's uploads: a failed one surfaces at setup, not in a later run.
    void finish_setup() const;

    /// ", pattern with scalings", ", values made on the device" or "".
    std::string form_suffix() const;
    bool pattern_scaled() const noexcept { return pattern_scaled_; }
    bool wide_offsets() const noexcept { return wide_; }

    Context& ctx_;
    std::int64_t num_rows_ = 0;
    std::int64_t num_cols_ = 0;
    std::int64_t max_dim_ = 0;
    // upload_operator's arrays (empty where the plan keeps its own layout).
    DeviceBuffer<std::int32_t> offsets32_;
    DeviceBuffer<std::int64_t> offsets64_;
    DeviceBuffer<std::int32_t> columns_;
    DeviceBuffer<float> values_;  // empty for a pattern matrix or a pattern-scaled plan
    DeviceScaling scaling_;       // a pattern-scaled plan's scalings

private:
    void run_rows(FeatureView x, DenseView<float> y, RowRange rows, bool add);

    bool wide_ = false;            // int64 offsets
    bool scaled_ = false;          // values made on the device from an OperatorScaling
    bool pattern_scaled_ = false;  // a pattern with an OperatorScaling: no values array
};

}  // namespace halo::cuda::detail
