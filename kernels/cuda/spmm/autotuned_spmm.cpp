// The autotuned SpMM plan (include/halo/kernels/cuda/autotune.hpp): host code over the candidates'
// plans. Times are CUDA events around one run() on the compute stream, so queued work before the
// start event does not count; the host work of a candidate's run (descriptor setup, launch) does,
// as it does in real runs. A candidate's first run of a new range may do one-time host work (a
// range partition, a workspace): the warm-up run absorbs it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/primitives/spmm_checks.hpp"
#include "cuda/spmm/stored_metadata.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/autotune.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/device.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/autotune_metadata.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo::cuda {
namespace {

// A trial shorter than this runs as a batch of back-to-back runs of about this length (at most
// kMaxBatch runs).
constexpr double kBatchMs = 0.25;
constexpr int kMaxBatch = 64;

// plan.run over x of any type: run_features where the plan reads fp16 / bf16, run for fp32;
// halo::InputError (a rejection: the autotuner skips the candidate) where it reads fp32 only.
void run_on(SpmmPlan& plan, const std::string& name, FeatureView x, DenseView<float> y,
            RowRange rows)
{
    if (FeatureSpmmPlan* features = as_feature_plan(plan)) {
        features->run_features(x, y, rows);
    } else if (x.type == FeatureType::fp32) {
        plan.run({static_cast<const float*>(x.data), x.rows, x.cols, x.ld}, y, rows);
    } else {
        HALO_THROW(InputError, name, " reads fp32 X only, not ", to_string(x.type));
    }
}

}  // namespace

AutotunedSpmmPlan::AutotunedSpmmPlan(Context& ctx, std::int64_t num_rows, std::int64_t num_cols,
                                     std::vector<Candidate> candidates,
                                     std::vector<std::string> unavailable, int trials, int warmup)
    : ctx_(ctx),
      num_rows_(num_rows),
      num_cols_(num_cols),
      candidates_(std::move(candidates)),
      unavailable_(std::move(unavailable)),
      table_(trials, warmup)
{
    HALO_EXPECTS(num_rows >= 0 && num_cols >= 0, "autotuned plan of a ", num_rows, " x ", num_cols,
                 " operator");
    HALO_EXPECTS(!candidates_.empty(), "autotuned plan without candidates");
    for (const auto& c : candidates_) {
        HALO_EXPECTS(c.plan != nullptr || c.make, "autotune candidate ", c.name,
                     " has neither a plan nor a way to build one");
        names_.push_back(c.name);
    }
    HALO_CUDA_TRY(cudaEventCreate(&start_));
    try {
        HALO_CUDA_TRY(cudaEventCreate(&stop_));
    } catch (...) {
        (void)cudaEventDestroy(start_);
        throw;
    }
}

AutotunedSpmmPlan::~AutotunedSpmmPlan()
{
    // Never throws: a failed destroy leaks an event at worst.
    (void)cudaEventDestroy(stop_);
    (void)cudaEventDestroy(start_);
}

MemoryReport AutotunedSpmmPlan::memory() const
{
    MemoryReport total;
    for (const auto& c : candidates_) {
        if (c.plan) {
            total += c.plan->memory();  // every built candidate reports its memory
        }
    }
    // The operator's nonzeros once, not once per copy: bytes per nonzero then show the copies.
    std::int64_t nnz = 0;
    for (const auto& c : candidates_) {
        if (c.plan) {
            nnz = std::max(nnz, c.plan->memory().nonzeros);
        }
    }
    total.nonzeros = nnz;
    return total;
}

SpmmPlan* AutotunedSpmmPlan::built(std::size_t i)
{
    auto& c = candidates_[i];
    if (!c.plan && c.make && !c.unavailable) {
        // Only a rejection of this operator is tolerated; device failures propagate.
        try {
            c.plan = c.make();
        } catch (const InputError& e) {
            unavailable_.push_back(c.name + ": " + e.what());
            c.unavailable = true;
        } catch (const LogicError& e) {
            unavailable_.push_back(c.name + ": " + e.what());
            c.unavailable = true;
        }
    }
    return c.plan.get();
}

std::size_t AutotunedSpmmPlan::release_unkept()
{
    std::vector<bool> kept(candidates_.size(), false);
    for (const auto& [key, choice] : table_.entries()) {
        if (choice.index < kept.size()) {
            kept[choice.index] = true;
        }
    }
    std::size_t freed = 0;
    for (std::size_t i = 0; i < candidates_.size(); ++i) {
        auto& c = candidates_[i];
        if (!kept[i] && c.plan && c.make) {
            c.plan.reset();  // stream-ordered frees, after the runs that used its buffers
            ++freed;
        }
    }
    return freed;
}

double AutotunedSpmmPlan::time_candidate(std::size_t i, FeatureView x, DenseView<float> y,
                                         RowRange rows)
{
    SpmmPlan* plan = built(i);
    if (plan == nullptr) {
        HALO_THROW(InputError, "autotune candidate ", candidates_[i].name, " is unavailable");
    }
    const cudaStream_t stream = ctx_.compute_stream();
    const auto wall = std::chrono::steady_clock::now();
    struct AddWall {
        double& total;
        std::chrono::steady_clock::time_point t0;
        ~AddWall()
        {
            total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
    } add_wall{tuning_seconds_, wall};
    // One run between two events; a run shorter than kBatchMs is timed again as a batch of runs
    // issued back to back, and the batch's mean is the trial's time. Alone, a run of a small
    // operator (10-40 us) waited for its own launch (the host issues it after the start event on
    // an idle stream) and jittered by as much as the candidates differ: on an H100 the three
    // trials kept MergePath over slices on Citeseer at 1.21x cuSPARSE where MergePath ran 1.70x.
    // In a batch the host keeps ahead of the device, as in a forward pass or a CUDA graph.
    auto timed = [&](int runs) {
        HALO_CUDA_TRY(cudaEventRecord(start_, stream));
        for (int r = 0; r < runs; ++r) {
            run_on(*plan, candidates_[i].name, x, y, rows);
        }
        HALO_CUDA_TRY(cudaEventRecord(stop_, stream));
        HALO_CUDA_TRY(cudaEventSynchronize(stop_));
        float ms = 0.0f;
        HALO_CUDA_TRY(cudaEventElapsedTime(&ms, start_, stop_));
        return static_cast<double>(ms) / runs;
    };
    const double once = timed(1);
    if (once >= kBatchMs) {
        return once;
    }
    const auto runs =
        static_cast<int>(std::min<double>(kMaxBatch, std::ceil(kBatchMs / std::max(once, 1e-3))));
    return timed(std::max(runs, 2));
}

bool AutotunedSpmmPlan::reads_features(FeatureType type) const
{
    return type == FeatureType::fp32 ||
           std::any_of(candidates_.begin(), candidates_.end(), [type](const Candidate& c) {
               if (c.unavailable) {
                   return false;
               }
               if (const auto* kernel = find_spmm_kernel(c.name, spmm_use_autotune)) {
                   return kernel->reads(type);
               }
               return c.plan != nullptr && c.plan->reads_features(type);
           });
}

void AutotunedSpmmPlan::run_features(FeatureView x, DenseView<float> y, RowRange rows)
{
    // The shared preconditions (but the width bound, each candidate's own), so that misuse is a
    // LogicError here rather than every candidate "failing" alike.
    if (!detail::check_feature_operands(x, y, rows, num_rows_, num_cols_,
                                        std::numeric_limits<std::int64_t>::max())) {
        // Nothing to compute: the first candidate that reads X's type runs it untimed.
        for (std::size_t i = 0; i < candidates_.size(); ++i) {
            SpmmPlan* plan = built(i);
            if (plan != nullptr &&
                (x.type == FeatureType::fp32 || as_feature_plan(*plan) != nullptr)) {
                run_on(*plan, candidates_[i].name, x, y, rows);
                return;
            }
        }
        HALO_THROW(InputError, "autotuned SpMM plan: no candidate that reads ", to_string(x.type),
                   " X could be built");
    }
    const AutotuneKey key{rows.begin, rows.end, x.cols, x.type};
    const auto& choice =
        table_.choose(key, names_, [&](std::size_t i) { return time_candidate(i, x, y, rows); });
    SpmmPlan* plan = built(choice.index);
    if (plan == nullptr) {
        HALO_THROW(InputError, "autotune: the chosen kernel ", names_[choice.index],
                   " cannot be built for this operator (", unavailable_.back(), ")");
    }
    run_on(*plan, names_[choice.index], x, y, rows);
    last_ = names_[choice.index];
}

std::string AutotunedSpmmPlan::algorithm() const
{
    return last_.empty() ? "autotune" : "autotune(" + last_ + ")";
}

void AutotunedSpmmPlan::preload(const std::vector<std::pair<AutotuneKey, AutotuneChoice>>& choices,
                                const std::vector<std::string>& notes)
{
    for (const auto& [key, choice] : choices) {
        HALO_EXPECTS(choice.names == names_, "autotune: stored choices over other candidates");
        table_.preload(key, choice);
    }
    notes_.insert(notes_.end(), notes.begin(), notes.end());
}

void AutotunedSpmmPlan::set_identity(KernelMetadata identity, std::string device)
{
    identity_ = std::move(identity);
    device_ = std::move(device);
}

std::vector<KernelMetadata> AutotunedSpmmPlan::tuning_metadata() const
{
    bool measured = false;
    for (const auto& [key, choice] : table_.entries()) {
        measured = measured || !choice.stored;
    }
    if (!measured || identity_.kernel.empty()) {
        return {};
    }
    return {autotune_to_metadata(table_, identity_, device_)};
}

std::string AutotunedSpmmPlan::report() const
{
    auto out = table_.report();
    for (const auto& n : notes_) {
        out += "note: " + n + "\n";
    }
    for (const auto& u : unavailable_) {
        out += "unavailable: " + u + "\n";
    }
    return out;
}

const std::vector<std::string>& autotune_candidate_names()
{
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const auto* k : spmm_kernels(spmm_use_autotune)) {
            out.push_back(k->name);
        }
        return out;
    }();
    return names;
}

std::unique_ptr<AutotunedSpmmPlan> make_autotuned_spmm_plan(Context& ctx, const Csr& a,
                                                            std::int64_t max_dim,
                                                            const AutotunePlanOptions& options)
{
    validate(a, "the operator of an autotuned SpMM plan");
    HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
    // By value (but the operator): a deferred candidate builds after this call returns. The
    // candidates see the ranges but no stored metadata: what they use of it comes in `options`.
    SpmmPlanHints hints;
    hints.ranges = options.ranges;
    auto make =
        [&ctx, a = &a, max_dim, hints = std::move(hints), partition = options.accel_gcn_partition,
         l2_hints = options.l2_hints](const std::string& name) -> std::unique_ptr<SpmmPlan> {
        const auto* kernel = find_spmm_kernel(name, spmm_use_autotune);
        HALO_EXPECTS(kernel != nullptr && kernel->make != nullptr, "autotune candidate ", name,
                     " is not a registered kernel");
        return kernel->make(ctx, *a,
                            SpmmPlanRequest{max_dim, hints, {}, partition, false, l2_hints});
    };
    std::vector<AutotunedSpmmPlan::Candidate> candidates;
    std::vector<std::string> unavailable;
    if (!options.stored_choices.empty()) {
        // Stored choices: only the kernels they chose are built now (one operator copy each,
        // instead of one per candidate); the others only if a shape must be timed.
        const auto& names = autotune_candidate_names();
        std::vector<bool> chosen(names.size(), false);
        for (const auto& [key, choice] : options.stored_choices) {
            if (choice.names == names && choice.index < names.size()) {
                chosen[choice.index] = true;
            }
        }
        for (std::size_t i = 0; i < names.size(); ++i) {
            AutotunedSpmmPlan::Candidate c{names[i], nullptr,
                                           [make, name = names[i]] { return make(name); }};
            if (chosen[i]) {
                try {
                    c.plan = c.make();
                    c.make = nullptr;
                } catch (const InputError&) {  // unavailable: said when it is first needed
                } catch (const LogicError&) {
                }
            }
            candidates.push_back(std::move(c));
        }
        auto plan = std::make_unique<AutotunedSpmmPlan>(ctx, a.num_rows, a.num_cols,
                                                        std::move(candidates));
        plan->preload(options.stored_choices, options.notes);
        return plan;
    }
    for (const auto& name : autotune_candidate_names()) {
        // Only a rejection of this operator is tolerated; device failures propagate. A built
        // candidate keeps its factory: release_unkept() may free it and a new shape rebuild it.
        try {
            candidates.push_back({name, make(name), [make, name] { return make(name); }});
        } catch (const InputError& e) {
            unavailable.push_back(name + ": " + e.what());
        } catch (const LogicError& e) {
            unavailable.push_back(name + ": " + e.what());
        }
    }
    if (candidates.empty()) {
        std::string why;
        for (const auto& u : unavailable) {
            why += "; " + u;
        }
        HALO_THROW(InputError, "autotuned SpMM plan: no kernel accepts the ", a.num_rows, " x ",
                   a.num_cols, " operator with ", a.nnz(), " nonzeros", why);
    }
    auto plan = std::make_unique<AutotunedSpmmPlan>(ctx, a.num_rows, a.num_cols,
                                                    std::move(candidates), std::move(unavailable));
    auto notes = options.notes;
    if (!options.stored_choices.empty() &&
        plan->candidate_names() != autotune_candidate_names()) {
        notes.push_back("stored autotune choices ignored: not every candidate could be built");
        plan->preload({}, notes);
    } else {
        plan->preload(options.stored_choices, notes);
    }
    return plan;
}

// The registry's factories (halo/kernels_host/spmm_registry.hpp).

// --spmm autotune: stored choices for this operator and device are preloaded (and the kernels
// they chose built); the stored Accel-GCN partition is loaded once for its candidate. The plan
// offers its new choices as metadata of the hints' operator.
std::unique_ptr<SpmmPlan> autotune_spmm_factory(Context& ctx, const Csr& a,
                                                const SpmmPlanRequest& request)
{
    const auto& hints = request.hints;
    AutotunePlanOptions options;
    options.ranges = hints.ranges;
    options.l2_hints = request.l2_hints;
    options.accel_gcn_partition = detail::stored_accel_gcn_partition(a, hints, options.notes);
    const auto device = device_info(ctx.device()).name;
    const auto* md = detail::find_stored(hints, autotune_metadata_kernel);
    if (md != nullptr && !detail::built_for(*md, a)) {
        options.notes.push_back(md->origin + ": built for another operator; timing again");
    } else if (md != nullptr) {
        auto stored = autotune_from_metadata(*md, a.view(), device, autotune_candidate_names());
        if (!stored.note.empty()) {
            options.notes.push_back(md->origin + ": " + stored.note);
        } else {
            options.notes.push_back("autotune: " + std::to_string(stored.entries.size()) +
                                    " choice(s) loaded from " + md->origin);
        }
        options.stored_choices = std::move(stored.entries);
    }
    auto plan = make_autotuned_spmm_plan(ctx, a, request.max_dim, options);
    if (!hints.op.empty()) {
        plan->set_identity(metadata_for_operator(autotune_metadata_kernel, hints.op, a.view()),
                           device);
    }
    return plan;
}

// --spmm auto: the autotuner when the hints carry choices it would load (none of the notes that
// make it time again), the cost model's kernels otherwise: nothing is timed.
namespace {

bool stored_choices_apply(Context& ctx, const Csr& a, const SpmmPlanHints& hints)
{
    const auto* md = detail::find_stored(hints, autotune_metadata_kernel);
    if (md == nullptr || !detail::built_for(*md, a)) {
        return false;
    }
    const auto stored = autotune_from_metadata(*md, a.view(), device_info(ctx.device()).name,
                                               autotune_candidate_names());
    return stored.note.empty() && !stored.entries.empty();
}

}  // namespace

std::unique_ptr<SpmmPlan> stored_or_modeled_spmm_factory(Context& ctx, const Csr& a,
                                                         const SpmmPlanRequest& request)
{
    if (stored_choices_apply(ctx, a, request.hints)) {
        return autotune_spmm_factory(ctx, a, request);
    }
    return make_modeled_spmm_plan(ctx, a, request);
}

// The same over a pattern and its scalings: null only where stored choices apply (their kernels
// read the host's values), which a request without stored metadata never has; otherwise the cost
// model's plan over the kernels that take the operator's form, whatever its shape.
std::unique_ptr<SpmmPlan> stored_or_modeled_scaled_factory(Context& ctx, const Csr& pattern,
                                                           const SpmmPlanRequest& request,
                                                           const OperatorScaling& scaling)
{
    if (stored_choices_apply(ctx, pattern, request.hints)) {
        return nullptr;
    }
    return make_modeled_spmm_plan(ctx, pattern, request, &scaling);
}

}  // namespace halo::cuda
