// Exact SpMM over low-precision features: x stored as fp16 or bf16 halves the
// bytes the memory-bound kernels read, while products and sums stay fp32 and y stays fp32. So a
// result equals the fp32 SpMM of the rounded features (halo::round_features) up to the order of
// the fp32 sums. The Accel-GCN, MergePath and row-split plans implement FeatureSpmmPlan; the
// cuSPARSE baseline and the autotuned plan do not (as_feature_plan() returns null for them).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "halo/core/dense.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/feature_view.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo::cuda {

/// A row-major device matrix of features of `type` (halo/core/feature_view.hpp).
using halo::FeatureView;

/// An SpmmPlan that also reads fp16 / bf16 features. run_features() has run()'s contract (rows of
/// y outside `rows` untouched, asynchronous on the plan's compute stream, widths up to max_dim)
/// for x of any FeatureType; run() is run_features() with fp32. Kernels use 16-byte loads (8
/// halves) where x, y, the width and both leading dimensions allow them, scalar loads otherwise.
class FeatureSpmmPlan : public SpmmPlan {
public:
    void run_features(FeatureView x, DenseView<float> y, RowRange rows) override = 0;
    /// Every type by default; a plan that builds its 16-bit kernels on request says which.
    bool reads_features(FeatureType) const override { return true; }
    void run(DenseView<const float> x, DenseView<float> y, RowRange rows) final
    {
        run_features(fp32_features(x), y, rows);
    }

protected:
    /// x as features of FeatureType::fp32.
    static FeatureView fp32_features(DenseView<const float> x)
    {
        return {x.data, FeatureType::fp32, x.rows, x.cols, x.ld};
    }
};

/// The plan's low-precision entry point, or null when it has none.
inline FeatureSpmmPlan* as_feature_plan(SpmmPlan& plan) noexcept
{
    return dynamic_cast<FeatureSpmmPlan*>(&plan);
}

/// dst = src rounded to `type` (to nearest even, as halo::round_feature), element by element on
/// the device, asynchronously on `stream`; dst has src's shape and leading dimension `ld_dst`
/// (in elements, >= src.cols). fp32 copies. Throws halo::LogicError on bad shapes and
/// halo::CudaError when the launch fails.
void convert_features(cudaStream_t stream, DenseView<const float> src, FeatureType type, void* dst,
                      std::int64_t ld_dst);

}  // namespace halo::cuda
