// MergePath-SpMM (paper 003): an exact SpMM whose work is split by the merge path of rows and
// nonzeros into segments of equal cost, so that neither long rows nor runs of empty rows unbalance
// it. Rows that lie wholly in one segment are written with plain stores; rows that segments share
// are zeroed first and accumulated with atomics (the only atomics). Threads are mapped by width:
// several segments per warp below 32 columns, several warps per segment above.
#pragma once

#include <cstdint>
#include <memory>

#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo::cuda {

struct MergePathOptions {
    /// Merge items (rows + nonzeros) per segment; 0 takes the paper's default for each width
    /// (mergepath::default_cost: 50 up to width 2, 15 up to 8, 20 up to 16, 30 up to 32, 35 up to
    /// 64, 50 above).
    std::int64_t cost = 0;
    /// Section III-C-1's floor on parallelism: a range with fewer than this many segments at the
    /// chosen cost gets a smaller cost (about this many segments). 0 disables it.
    std::int64_t min_segments = 1024;
    /// Widths of at least `wide_from` (0: none) take `wide_cost` merge items per segment instead
    /// of `cost` (the cost model's larger cost for large operators at wide widths,
    /// halo/kernels_host/spmm_cost_model.hpp): one plan, one copy of the operator, for every width.
    std::int64_t wide_from = 0;
    std::int64_t wide_cost = 0;
    /// Whether the full range's schedule of every cost that widths 1..max_dim can use is made at
    /// setup (true), or each (range, cost) on its first run only (false: the cost model's plan,
    /// which runs few widths of many possible; the engine's first run is never recorded).
    bool prepare_at_setup = true;
    /// How a plan given an OperatorScaling holds it (ScaledForm, halo/kernels/cuda/backend.hpp).
    ScaledForm scaled_form = ScaledForm::automatic;
    /// L2 residency hints, for X far larger than the L2 (docs/KERNELS.md, "L2 hints"): with
    /// `hint_hot_bytes` > 0 the plan marks every nonzero whose column is outside the hot set (the
    /// most-read columns whose X rows at `hint_width` features fit in hint_hot_bytes), and a
    /// launch whose X (columns x width x 4 bytes) is at least `hint_min_x_bytes` loads the X rows
    /// of cold columns with L2 evict_first and of hot ones with evict_last, so that rows read once
    /// do not evict rows read again. Other launches, and fp16/bf16 features, read the marked
    /// indices with plain loads; results are bit-identical either way. Nothing is marked where
    /// every column is hot or X at max_dim stays below hint_min_x_bytes.
    std::int64_t hint_hot_bytes = 0;
    std::int64_t hint_width = 128;
    std::int64_t hint_min_x_bytes = 0;
};

/// `options` with the cost model's L2 hints (halo/kernels_host/spmm_cost_model.hpp): the hot set
/// kHintHotShare of the device's L2 at min(max_dim, kSliceWidth) features, hinted where X is at
/// least kHintCacheFactor times the L2. A plan whose X never gets there is the plain one.
MergePathOptions with_large_x_hints(Context& ctx, std::int64_t max_dim, MergePathOptions options);

/// with_large_x_hints where the request asks for them (SpmmPlanRequest::l2_hints), else `options`:
/// the registry's MergePath factories.
MergePathOptions with_requested_hints(Context& ctx, const SpmmPlanRequest& request,
                                      std::int64_t max_dim, MergePathOptions options);

/// The plan uploads `a` and prepares the merge-path schedule of the full row range for every cost
/// that widths 1..max_dim can use (at most five with the defaults). run() on another row range
/// prepares that range's schedule on its first call (host binary searches and one upload, cached
/// and reused afterwards); later runs only launch. run() is asynchronous on ctx.compute_stream(),
/// x and y are device views, rows of y outside the range are untouched. Results are exact up to
/// fp32 rounding; split rows are summed with atomics, so they may differ in the last bits from
/// run to run. Throws halo::InputError when `a` is not a valid CSR matrix or options are invalid.
/// The plan is a FeatureSpmmPlan (as_feature_plan()): fp16/bf16 features, 8 columns per lane
/// where aligned. With `scaling`, `a` is read as a pattern and the values are
/// scaling.row[i] * scaling.col[j] (the host's values, if any, are not read;
/// Backend::make_scaled_spmm_plan): made on the device, or never formed (the scalings applied in
/// the kernel), as options.scaled_form says.
std::unique_ptr<SpmmPlan> make_mergepath_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                   const MergePathOptions& options = {},
                                                   const OperatorScaling* scaling = nullptr);

}  // namespace halo::cuda
