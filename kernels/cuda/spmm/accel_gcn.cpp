// Accel-GCN SpMM plan (paper 001): the host partition (accel_gcn_partition.cpp) uploaded once per
// prepared set of ranges, and the launches of the kernels of accel_gcn.cu on the compute stream.
//
// Ranges: the bounds of AccelGcnOptions::ranges cut the rows into segments, each degree-sorted
// and partitioned on its own into one shared upload; a range made of consecutive segments is one
// contiguous slice of the block metadata, hence one launch. Any other range is partitioned and
// uploaded on its first run() and cached (once per range), so later runs do no host work.
// A stored partition (AccelGcnOptions::partition) replaces the one built here once it passed
// check_stored_accel_gcn_partition(); ranges that are not unions of its segments still get their
// own partition on first use.
#include "halo/kernels/cuda/accel_gcn.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/primitives/cusparse_csr.hpp"  // upload_scaling
#include "cuda/primitives/spmm_checks.hpp"
#include "cuda/primitives/upload.hpp"
#include "cuda/primitives/zero_rows.hpp"
#include "cuda/spmm/accel_gcn_kernels.hpp"
#include "cuda/spmm/stored_metadata.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/accel_gcn_metadata.hpp"
#include "halo/kernels_host/accel_gcn_partition.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo::cuda {
namespace {

static_assert(sizeof(AccelGcnBlock) == 4 * sizeof(std::int32_t), "AccelGcnBlock mirrors int4");

using detail::upload;

// One uploaded partition; the host keeps only the segment bounds.
struct Prepared {
    std::vector<std::int64_t> segment_rows;
    std::vector<std::int64_t> segment_blocks;
    std::vector<std::int64_t> segment_split_rows;
    bool valued = false;
    DeviceBuffer<AccelGcnBlock> blocks;
    DeviceBuffer<std::int32_t> sorted_rows;
    DeviceBuffer<std::int32_t> indices;
    DeviceBuffer<float> values;
    DeviceBuffer<std::int32_t> split_rows;

    // `pattern`: the partition's values, if any, are left behind (a scaled plan).
    Prepared(Context& ctx, const AccelGcnPartition& p, bool pattern)
        : segment_rows(p.segment_rows),
          segment_blocks(p.segment_blocks),
          segment_split_rows(p.segment_split_rows),
          valued(!pattern && !p.values.empty()),
          blocks(upload(ctx, p.blocks)),
          sorted_rows(upload(ctx, p.sorted_rows)),
          indices(upload(ctx, p.indices)),
          values(valued ? upload(ctx, p.values) : DeviceBuffer<float>{}),
          split_rows(upload(ctx, p.split_rows))
    {
    }
};

class AccelGcnPlan final : public FeatureSpmmPlan {
public:
    AccelGcnPlan(Context& ctx, const Csr& a, std::int64_t max_dim, const AccelGcnOptions& options,
                 const OperatorScaling* scaling)
        : ctx_(ctx),
          a_(a),
          max_dim_(max_dim),
          options_{options.warps_per_block, options.deg_bound, options.degree_sort},
          scaled_(scaling != nullptr)
    {
        HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
        validate(a_, "the operator of an Accel-GCN SpMM plan");
        validate(options_);
        if (scaling != nullptr) {
            // A pattern with its scalings: the pattern's own values, if any, are ignored
            // (Backend::make_scaled_spmm_plan), and no values array is made.
            scaling_ = detail::upload_scaling(ctx_, a_, *scaling);
            a_.values.clear();
            a_.values.shrink_to_fit();
        }
        if (options.partition != nullptr) {
            const AccelGcnPartition& stored = *options.partition;
            check_stored_accel_gcn_partition(a_.view(), stored, options_, options.ranges);
            if (stored.indices.size() == static_cast<std::size_t>(a_.nnz())) {
                main_ = std::make_unique<Prepared>(ctx_, stored, scaled_);
            } else {
                // Stored without its nonzeros (derived data): gather them from the matrix.
                AccelGcnPartition full = stored;
                accel_gcn_gather_nonzeros(a_.view(), full);
                main_ = std::make_unique<Prepared>(ctx_, full, scaled_);
            }
        } else {
            const std::vector<RowRange> segments = accel_gcn_segments(a_.num_rows, options.ranges);
            main_ = std::make_unique<Prepared>(
                ctx_, build_accel_gcn_partition(a_.view(), segments, options_), scaled_);
        }
        launch_ = {options_.warps_per_block, options_.deg_bound, options_.warp_nonzeros(),
                   detail::accel_gcn_tile_cap(options_.warps_per_block), options.combined_warps};
        // Once, at setup: any failure of the uploads surfaces here rather than in a later run.
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream()));
    }

    AccelGcnPlan(const AccelGcnPlan&) = delete;
    AccelGcnPlan& operator=(const AccelGcnPlan&) = delete;

    void run_features(FeatureView x, DenseView<float> y, RowRange rows) override
    {
        if (!detail::check_feature_operands(x, y, rows, a_.num_rows, a_.num_cols, max_dim_)) {
            return;
        }
        const std::int64_t d = x.cols;
        const Prepared* prep = main_.get();
        auto first = std::find(prep->segment_rows.begin(), prep->segment_rows.end(), rows.begin);
        auto last = std::find(prep->segment_rows.begin(), prep->segment_rows.end(), rows.end);
        if (first == prep->segment_rows.end() || last == prep->segment_rows.end()) {
            prep = prepared_range(rows);
            first = prep->segment_rows.begin();
            last = first + 1;
        }
        const std::size_t s0 = static_cast<std::size_t>(first - prep->segment_rows.begin());
        const std::size_t s1 = static_cast<std::size_t>(last - prep->segment_rows.begin());
        const cudaStream_t stream = ctx_.compute_stream();

        const std::int64_t split_begin = prep->segment_split_rows[s0];
        const bool zeroed =
            detail::zero_rows(stream, prep->split_rows.data() + split_begin,
                              prep->segment_split_rows[s1] - split_begin, d, y.data, y.ld);
        const std::int64_t block_begin = prep->segment_blocks[s0];
        detail::accel_gcn_spmm(stream, zeroed, launch_, prep->blocks.data() + block_begin,
                               prep->segment_blocks[s1] - block_begin, prep->sorted_rows.data(),
                               prep->indices.data(), prep->valued ? prep->values.data() : nullptr,
                               scaling_.row.data(), scaling_.col.data(), x.data, x.type, x.ld,
                               y.data, y.ld, d);
    }

    std::string algorithm() const override
    {
        return "accel-gcn-w" + std::to_string(options_.warps_per_block) + "-b" +
               std::to_string(options_.deg_bound) + (options_.degree_sort ? "" : "-nosort") +
               (launch_.combined_warps ? "" : "-nocombine") +
               (scaled_ ? ", pattern with scalings" : "");
    }

    // Accel-GCN holds no CSR offsets: its block metadata (blocks, sorted rows, split rows) stands
    // in for them and is counted as kernel metadata; indices and values are in partition order.
    MemoryReport memory() const override
    {
        MemoryReport r;
        auto add = [&r](const Prepared& p) {
            r.kernel_metadata += static_cast<std::int64_t>(p.blocks.bytes() + p.sorted_rows.bytes() +
                                                           p.split_rows.bytes());
            r.indices += static_cast<std::int64_t>(p.indices.bytes());
            r.values += static_cast<std::int64_t>(p.values.bytes());
        };
        if (main_) {
            add(*main_);
            r.nonzeros = static_cast<std::int64_t>(main_->indices.size());
        }
        // A scaled plan's scalings stand in for its values (rows + columns floats).
        r.values += static_cast<std::int64_t>(scaling_.bytes());
        for (const auto& [key, p] : extra_) {
            add(*p);
        }
        return r;
    }

private:
    // The partition of a range that is not a union of the prepared segments: built and uploaded on
    // its first run (host work, once per range), then reused.
    const Prepared* prepared_range(RowRange rows)
    {
        const auto key = std::make_pair(rows.begin, rows.end);
        auto found = extra_.find(key);
        if (found == extra_.end()) {
            const RowRange segment[] = {rows};
            found =
                extra_
                    .emplace(key, std::make_unique<Prepared>(
                                      ctx_, build_accel_gcn_partition(a_.view(), segment, options_),
                                      scaled_))
                    .first;
        }
        return found->second.get();
    }

    Context& ctx_;
    Csr a_;  // host copy: partitions of ranges asked for later are built from it
    std::int64_t max_dim_ = 0;
    AccelGcnPartitionOptions options_;
    detail::AccelGcnLaunch launch_;
    bool scaled_ = false;            // a pattern with an OperatorScaling: no values array
    detail::DeviceScaling scaling_;  // its scalings
    std::unique_ptr<Prepared> main_;
    std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<Prepared>> extra_;
};

AccelGcnOptions ablation(bool degree_sort, bool combined_warps)
{
    AccelGcnOptions options;
    options.degree_sort = degree_sort;
    options.combined_warps = combined_warps;
    return options;
}

// A plan with lines for report() about the stored metadata it was given; it reads what the
// Accel-GCN plan it wraps reads (fp32, fp16, bf16 X).
class NotedPlan final : public FeatureSpmmPlan {
public:
    NotedPlan(std::unique_ptr<SpmmPlan> plan, std::vector<std::string> notes)
        : plan_(std::move(plan)), features_(as_feature_plan(*plan_)), notes_(std::move(notes))
    {
        HALO_EXPECTS(features_ != nullptr, "the noted Accel-GCN plan reads fp32 X only");
    }
    void run_features(FeatureView x, DenseView<float> y, RowRange rows) override
    {
        features_->run_features(x, y, rows);
    }
    bool reads_features(FeatureType type) const override { return plan_->reads_features(type); }
    std::string algorithm() const override { return plan_->algorithm(); }
    bool exact() const override { return plan_->exact(); }
    std::string report() const override
    {
        auto out = plan_->report();
        for (const auto& n : notes_) {
            out += "note: " + n + "\n";
        }
        return out;
    }
    MemoryReport memory() const override { return plan_->memory(); }

private:
    std::unique_ptr<SpmmPlan> plan_;
    FeatureSpmmPlan* features_;
    std::vector<std::string> notes_;
};

}  // namespace

std::unique_ptr<SpmmPlan> make_accel_gcn_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                   const AccelGcnOptions& options,
                                                   const OperatorScaling* scaling)
{
    return std::make_unique<AccelGcnPlan>(ctx, a, max_dim, options, scaling);
}

std::shared_ptr<const AccelGcnPartition> detail::stored_accel_gcn_partition(
    const Csr& a, const SpmmPlanHints& hints, std::vector<std::string>& notes)
{
    const auto* md = find_stored(hints, accel_gcn_metadata_kernel);
    if (md == nullptr) {
        return nullptr;
    }
    const auto view = a.view();
    if (!built_for(*md, a)) {
        notes.push_back(md->origin + ": built for another operator; partitioning again");
        return nullptr;
    }
    auto p = std::make_shared<AccelGcnPartition>(accel_gcn_from_metadata(*md, view));
    try {
        check_stored_accel_gcn_partition(view, *p, AccelGcnPartitionOptions{}, hints.ranges);
    } catch (const InputError& e) {
        notes.push_back(md->origin + ": " + e.message() + "; partitioning again");
        return nullptr;
    }
    notes.push_back("accel_gcn: block partition loaded from " + md->origin);
    return p;
}

// The registry's factories (halo/kernels_host/spmm_registry.hpp).

namespace {

std::unique_ptr<SpmmPlan> accel_gcn_plan(Context& ctx, const Csr& a, const SpmmPlanRequest& request,
                                         const OperatorScaling* scaling)
{
    AccelGcnOptions options;
    options.ranges = request.hints.ranges;
    options.partition = request.accel_gcn_partition;
    if (options.partition != nullptr) {
        return make_accel_gcn_spmm_plan(ctx, a, request.max_dim, options, scaling);
    }
    std::vector<std::string> notes;
    options.partition = detail::stored_accel_gcn_partition(a, request.hints, notes);
    auto plan = make_accel_gcn_spmm_plan(ctx, a, request.max_dim, options, scaling);
    if (notes.empty()) {
        return plan;
    }
    return std::make_unique<NotedPlan>(std::move(plan), std::move(notes));
}

}  // namespace

std::unique_ptr<SpmmPlan> accel_gcn_spmm_factory(Context& ctx, const Csr& a,
                                                 const SpmmPlanRequest& request)
{
    return accel_gcn_plan(ctx, a, request, nullptr);
}

// Its partition puts the nonzeros in block order on the host, so it cannot make the values on
// the device from the CSR order: where the columns are scaled (gcn) it takes the operator only
// as pattern operators (its registry entry's forms; the engine builds the values on the host
// otherwise); where only the rows are (mean) it keeps the pattern and the row scaling
// (cuda::ScaledForm).
std::unique_ptr<SpmmPlan> accel_gcn_scaled_factory(Context& ctx, const Csr& pattern,
                                                   const SpmmPlanRequest& request,
                                                   const OperatorScaling& scaling)
{
    HALO_EXPECTS(scaling.col.empty() || request.pattern_operators,
                 "Accel-GCN asked for a gcn operator's pattern and scalings without pattern "
                 "operators, a form its registry entry does not take");
    return accel_gcn_plan(ctx, pattern, request, &scaling);
}

// The ablations of halo-bench (paper 001, Fig. 8).
std::unique_ptr<SpmmPlan> accel_gcn_nosort_spmm_factory(Context& ctx, const Csr& a,
                                                        const SpmmPlanRequest& request)
{
    return make_accel_gcn_spmm_plan(ctx, a, request.max_dim, ablation(false, true));
}

std::unique_ptr<SpmmPlan> accel_gcn_nocombine_spmm_factory(Context& ctx, const Csr& a,
                                                           const SpmmPlanRequest& request)
{
    return make_accel_gcn_spmm_plan(ctx, a, request.max_dim, ablation(true, false));
}

}  // namespace halo::cuda
