// MergePath-SpMM's plan (include/halo/kernels/cuda/mergepath.hpp): the argument checks, the
// operator's upload (SpmmPlanBase), the merge-path schedules per row range and cost (made on the
// host, uploaded once), the L2 hints' cold marks, and the registry's factories. Host code: the
// kernels and their launchers are in mergepath.cu (mergepath.cu's header comment says how they
// work).
#include "halo/kernels/cuda/mergepath.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/primitives/feature_vec.hpp"
#include "cuda/primitives/upload.hpp"
#include "cuda/primitives/zero_rows.hpp"
#include "cuda/spmm/mergepath_kernels.hpp"
#include "cuda/spmm/spmm_plan_base.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/device.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/spmm_cost_model.hpp"
#include "halo/kernels_host/spmm_registry.hpp"
#include "preprocess/hot_columns.hpp"
#include "preprocess/mergepath_schedule.hpp"

namespace halo::cuda {
namespace {

// Widths above this all share default_cost()'s last class, so scanning 1..kLastCostClass finds
// every default cost that a plan can use.
constexpr std::int64_t kLastCostClass = 65;

class MergePathSpmmPlan final : public detail::SpmmPlanBase {
public:
    MergePathSpmmPlan(Context& ctx, const Csr& a, std::int64_t max_dim,
                      const MergePathOptions& options, const OperatorScaling* scaling)
        : SpmmPlanBase(ctx, a, max_dim), options_(options), indptr_(a.indptr)
    {
        if (max_dim < 1) {
            HALO_THROW(InputError, "mergepath plan: max_dim ", max_dim, " must be at least 1");
        }
        if (options.cost < 0) {
            HALO_THROW(InputError, "mergepath plan: cost ", options.cost,
                       " must be positive (or 0 for the per-width default)");
        }
        if (options.min_segments < 0) {
            HALO_THROW(InputError, "mergepath plan: min_segments ", options.min_segments,
                       " must not be negative");
        }
        if (options.wide_from < 0 || (options.wide_from > 0 && options.wide_cost < 1)) {
            HALO_THROW(InputError, "mergepath plan: wide_from ", options.wide_from,
                       " needs a positive wide_cost (got ", options.wide_cost, ")");
        }
        validate(a, "the operator of a MergePath-SpMM plan");
        upload_operator(a, IndexWidth::bits64, scaling, options.scaled_form);
        std::set<std::int64_t> costs;
        for (std::int64_t w = 1; options.prepare_at_setup && w <= std::min(max_dim, kLastCostClass);
             ++w) {
            costs.insert(cost_for(w));
        }
        if (options.prepare_at_setup && options.wide_from > 0 && max_dim >= options.wide_from) {
            costs.insert(options.wide_cost);
        }
        for (const std::int64_t cost : costs) {
            (void)schedule(a.view().all_rows(), cost);
        }
        if (options.hint_hot_bytes > 0) {
            HALO_EXPECTS(options.hint_width >= 1, "hint_width ", options.hint_width);
            const std::int64_t hot = options.hint_hot_bytes / (4 * options.hint_width);
            // Marks only where some launch may hint and some column is cold: otherwise the
            // plan is the plain one.
            if (hot < a.num_cols && a.num_cols * max_dim * 4 >= options.hint_min_x_bytes) {
                mark_cold_columns(a, hot);
            }
        }
        finish_setup();
    }

    std::string algorithm() const override
    {
        std::string name =
            options_.cost > 0 ? "mergepath-cost" + std::to_string(options_.cost) : "mergepath";
        if (options_.wide_from > 0) {
            name += " (cost " + std::to_string(options_.wide_cost) +
                    " from d = " + std::to_string(options_.wide_from) + ")";
        }
        if (marked_) {
            name += ", L2 hints (" + std::to_string(hot_columns_) + " hot columns, " +
                    std::to_string(static_cast<int>(100.0 * hot_share_ + 0.5)) + "% of reads)";
        }
        return name + form_suffix();
    }

private:
    void launch(FeatureView x, DenseView<float> y, RowRange rows, bool add) override
    {
        const std::int64_t width = x.cols;
        const Prepared& p = schedule(rows, cost_for(width));
        const cudaStream_t stream = ctx_.compute_stream();
        const auto num_split = static_cast<std::int64_t>(p.host.split_rows.size());
        // Adding: the segments' atomics add to y's own values. Zeroing: the kernel is its
        // dependent and overlaps it.
        const bool dependent =
            !add && detail::zero_rows(stream, p.split_rows.data(), num_split, width, y.data, y.ld);
        using mergepath_kernels::Hints;
        const Hints hints = !marked_ ? mergepath_kernels::kPlain
                            : num_cols_ * width * 4 >= options_.hint_min_x_bytes
                                ? mergepath_kernels::kHinted
                                : mergepath_kernels::kMarked;
        mergepath_kernels::launch_spmm(
            stream, {.indptr = offsets64_.data(),
                     .indices = columns_.data(),
                     .values = values_.data(),
                     .row_scale = scaling_.row.data(),
                     .col_scale = scaling_.col.data(),
                     .segment_rows = p.segment_rows.data(),
                     .num_segments = p.host.num_segments(),
                     .cost = p.host.cost,
                     .items = p.host.items,
                     .range_begin = p.host.range.begin,
                     .first_nonzero = p.host.first_nonzero,
                     .x = x,
                     .y = y,
                     .add = add,
                     .dependent = dependent,
                     // 16-byte lanes (4 fp32 or 8 fp16/bf16 columns) where every access of a
                     // lane is aligned.
                     .vec = detail::lane_columns(x.type, x.data, x.ld, y.data, y.ld, width),
                     .hints = hints});
    }

    // Marks (kColdMark) the device indices of the nonzeros whose column is not among the `hot`
    // most-read ones: reads counted and indices marked on the device, the hot set picked on the
    // host from the counts (preprocess/hot_columns.hpp; mark_cold_columns there is the same on
    // the host). The host's indices stay unmarked.
    void mark_cold_columns(const Csr& a, std::int64_t hot)
    {
        HALO_EXPECTS(a.num_cols <= std::numeric_limits<std::int32_t>::max(),
                     "L2 hints past 2^31 - 1 columns");
        const cudaStream_t stream = ctx_.compute_stream();
        const std::int64_t nnz = a.nnz();
        DeviceBuffer<std::uint32_t> reads_d(ctx_, static_cast<std::size_t>(a.num_cols));
        HALO_CUDA_TRY(cudaMemsetAsync(reads_d.data(), 0, reads_d.bytes(), stream));
        mergepath_kernels::count_column_reads(stream, columns_.data(), nnz, reads_d.data());
        std::vector<std::uint32_t> reads(static_cast<std::size_t>(a.num_cols));
        if (!reads.empty()) {
            HALO_CUDA_TRY(cudaMemcpyAsync(reads.data(), reads_d.data(), reads_d.bytes(),
                                          cudaMemcpyDeviceToHost, stream));
        }
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
        const auto set = mergepath::hot_set(reads, hot);
        const auto is_hot_d = detail::upload(ctx_, set.is_hot);
        mergepath_kernels::mark_cold_indices(stream, columns_.data(), nnz, is_hot_d.data());
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));  // is_hot leaves scope
        marked_ = true;
        hot_columns_ = set.hot;
        hot_share_ = nnz == 0 ? 0.0 : static_cast<double>(set.hot_reads) / static_cast<double>(nnz);
    }

    // A row range's schedule on the host (kept: the kernel's scalars, and the source of the
    // asynchronous upload) and on the device.
    struct Prepared {
        mergepath::Schedule host;
        DeviceBuffer<std::int64_t> segment_rows;
        DeviceBuffer<std::int64_t> split_rows;
    };

    std::int64_t cost_for(std::int64_t width) const
    {
        if (options_.wide_from > 0 && width >= options_.wide_from) {
            return options_.wide_cost;
        }
        return options_.cost > 0 ? options_.cost : mergepath::default_cost(width);
    }

    // The schedule of (rows, cost), made and uploaded on first use. Keyed by the requested cost:
    // effective_cost() depends only on the range, so the key determines the schedule.
    const Prepared& schedule(RowRange rows, std::int64_t cost)
    {
        const auto key = std::make_tuple(rows.begin, rows.end, cost);
        const auto found = prepared_.find(key);
        if (found != prepared_.end()) {
            return *found->second;
        }
        const CsrView pattern{num_rows_, num_cols_, indptr_.data(), nullptr, nullptr};
        const std::int64_t items = rows.size() + indptr_[rows.end] - indptr_[rows.begin];
        auto p = std::make_unique<Prepared>();
        p->host = mergepath::make_schedule(
            pattern, rows, mergepath::effective_cost(items, cost, options_.min_segments));
        p->segment_rows = detail::upload(ctx_, p->host.segment_rows);
        p->split_rows = detail::upload(ctx_, p->host.split_rows);
        const Prepared& ref = *p;
        prepared_.emplace(key, std::move(p));
        return ref;
    }

public:
    MemoryReport memory() const override
    {
        MemoryReport r = SpmmPlanBase::memory();
        for (const auto& [key, p] : prepared_) {  // the merge-path schedules
            r.kernel_metadata +=
                static_cast<std::int64_t>(p->segment_rows.bytes() + p->split_rows.bytes());
        }
        return r;
    }

private:
    MergePathOptions options_;
    bool marked_ = false;           // L2 hints: the device indices carry cold marks
    std::int64_t hot_columns_ = 0;  // the columns whose nonzeros are not marked cold
    double hot_share_ = 0.0;        // and their share of the nonzeros
    std::vector<offset_t> indptr_;  // host copy: the schedules of new ranges
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::unique_ptr<Prepared>>
        prepared_;
};

}  // namespace

MergePathOptions with_large_x_hints(Context& ctx, std::int64_t max_dim, MergePathOptions options)
{
    const auto l2 = device_info(ctx.device()).l2_cache_bytes;
    options.hint_hot_bytes = static_cast<std::int64_t>(kHintHotShare * static_cast<double>(l2));
    options.hint_width = std::clamp<std::int64_t>(max_dim, 1, kSliceWidth);
    options.hint_min_x_bytes = kHintCacheFactor * l2;
    return options;
}

std::unique_ptr<SpmmPlan> make_mergepath_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                   const MergePathOptions& options,
                                                   const OperatorScaling* scaling)
{
    return std::make_unique<MergePathSpmmPlan>(ctx, a, max_dim, options, scaling);
}

MergePathOptions with_requested_hints(Context& ctx, const SpmmPlanRequest& request,
                                      std::int64_t max_dim, MergePathOptions options)
{
    return request.l2_hints ? with_large_x_hints(ctx, max_dim, options) : options;
}

// The registry's factories (halo/kernels_host/spmm_registry.hpp): the paper's per-width cost, and
// the larger fixed costs the autotuner also tries.

std::unique_ptr<SpmmPlan> mergepath_spmm_factory(Context& ctx, const Csr& a,
                                                 const SpmmPlanRequest& request)
{
    return make_mergepath_spmm_plan(ctx, a, request.max_dim,
                                    with_requested_hints(ctx, request, request.max_dim, {}));
}

std::unique_ptr<SpmmPlan> mergepath_c200_spmm_factory(Context& ctx, const Csr& a,
                                                      const SpmmPlanRequest& request)
{
    return make_mergepath_spmm_plan(
        ctx, a, request.max_dim,
        with_requested_hints(ctx, request, request.max_dim, MergePathOptions{.cost = 200}));
}

std::unique_ptr<SpmmPlan> mergepath_c400_spmm_factory(Context& ctx, const Csr& a,
                                                      const SpmmPlanRequest& request)
{
    return make_mergepath_spmm_plan(
        ctx, a, request.max_dim,
        with_requested_hints(ctx, request, request.max_dim, MergePathOptions{.cost = 400}));
}

// Cost 400 with L2 hints at every width (bench: the hints measured on any graph; with
// SpmmPlanRequest::l2_hints, the cost model and the autotuner's MergePath candidates hint where X
// is past 32x the L2 only).
std::unique_ptr<SpmmPlan> mergepath_c400_l2hints_spmm_factory(Context& ctx, const Csr& a,
                                                              const SpmmPlanRequest& request)
{
    auto options = with_large_x_hints(ctx, request.max_dim, MergePathOptions{.cost = 400});
    options.hint_min_x_bytes = 0;
    return make_mergepath_spmm_plan(ctx, a, request.max_dim, options);
}

std::unique_ptr<SpmmPlan> mergepath_scaled_factory(Context& ctx, const Csr& pattern,
                                                   const SpmmPlanRequest& request,
                                                   const OperatorScaling& scaling)
{
    MergePathOptions options;
    options.scaled_form = scaled_form(request);
    return make_mergepath_spmm_plan(ctx, pattern, request.max_dim,
                                    with_requested_hints(ctx, request, request.max_dim, options),
                                    &scaling);
}

}  // namespace halo::cuda
