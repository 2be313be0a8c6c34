// Column-tiled SpMM: an exact plan run over slices of at most `tile` feature columns, one launch
// per slice. Y = A X splits by columns exactly (each slice of Y reads only that slice of X), and
// each slice's gathers read `tile` features of an X row instead of d, so d / tile times as many X
// rows fit in L2 while the slice runs. Where X outgrows L2 and the gathers are the traffic (the
// gather model, halo/kernels_host/gather_model.hpp; docs/NOTEBOOK.md "The gather-bound limit"), the
// X rows fetched again fall by more than the extra reads of A cost; where X fits in L2 it is a
// loss, so it is an autotune candidate, never a default. Results are bit-identical to the inner
// plan's on the same slice (the sums of one element do not depend on the other columns).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "cuda/primitives/spmm_checks.hpp"
#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"
#include "halo/kernels/cuda/mergepath.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo::cuda {
namespace {

class ColumnTiledSpmmPlan final : public FeatureSpmmPlan {
public:
    ColumnTiledSpmmPlan(std::unique_ptr<SpmmPlan> inner, std::int64_t tile, std::int64_t num_rows,
                        std::int64_t num_cols, std::int64_t max_dim)
        : inner_(std::move(inner)),
          feature_inner_(as_feature_plan(*inner_)),
          tile_(tile),
          num_rows_(num_rows),
          num_cols_(num_cols),
          max_dim_(max_dim)
    {
        HALO_EXPECTS(tile >= 1, "column tile of ", tile);
    }

    void run_features(FeatureView x, DenseView<float> y, RowRange rows) override
    {
        if (!detail::check_feature_operands(x, y, rows, num_rows_, num_cols_, max_dim_)) {
            return;
        }
        const auto bytes = static_cast<std::int64_t>(feature_bytes(x.type));
        for (std::int64_t c0 = 0; c0 < x.cols; c0 += tile_) {
            const auto w = std::min(tile_, x.cols - c0);
            const FeatureView xs{static_cast<const char*>(x.data) + c0 * bytes, x.type, x.rows, w,
                                 x.ld};
            const DenseView<float> ys{y.data + c0, y.rows, w, y.ld};
            if (feature_inner_ != nullptr) {
                feature_inner_->run_features(xs, ys, rows);
            } else {
                HALO_EXPECTS(x.type == FeatureType::fp32, "the inner plan ", inner_->algorithm(),
                             " reads fp32 features only");
                inner_->run({static_cast<const float*>(xs.data), xs.rows, w, x.ld}, ys, rows);
            }
        }
    }

    bool reads_features(FeatureType type) const override
    {
        return feature_inner_ != nullptr ? inner_->reads_features(type)
                                         : type == FeatureType::fp32;
    }
    std::string algorithm() const override
    {
        return inner_->algorithm() + ", column slices of " + std::to_string(tile_);
    }
    MemoryReport memory() const override { return inner_->memory(); }

private:
    std::unique_ptr<SpmmPlan> inner_;
    FeatureSpmmPlan* feature_inner_;
    std::int64_t tile_;
    std::int64_t num_rows_;
    std::int64_t num_cols_;
    std::int64_t max_dim_;
};

}  // namespace

// The registry's factory (halo/kernels_host/spmm_registry.hpp): MergePath at cost 400 (the
// autotuner's pick for large power-law operators) over slices of 128 columns, with L2 hints where a
// slice's X is past 32x the L2 when the request asks (SpmmPlanRequest::l2_hints); its schedule is
// made for widths up to 128 only.
std::unique_ptr<SpmmPlan> mergepath_c400_t128_spmm_factory(Context& ctx, const Csr& a,
                                                           const SpmmPlanRequest& request)
{
    constexpr std::int64_t tile = 128;
    const auto width = std::min(request.max_dim, tile);
    auto inner = make_mergepath_spmm_plan(
        ctx, a, width, with_requested_hints(ctx, request, width, MergePathOptions{.cost = 400}));
    return std::make_unique<ColumnTiledSpmmPlan>(std::move(inner), tile, a.num_rows, a.num_cols,
                                                 request.max_dim);
}

}  // namespace halo::cuda
