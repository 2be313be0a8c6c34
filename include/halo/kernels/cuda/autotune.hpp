// The autotuned SpMM plan of the CUDA backend: it holds a plan of every exact kernel (cuSPARSE,
// Accel-GCN, MergePath-SpMM, row-split, chunked row-split) and, on the first run of each (row
// range, width), times each of them on the real operands with CUDA events and keeps the fastest
// (include/halo/kernels_host/autotune.hpp); later runs of that shape run the chosen kernel only.
// Approximate kernels never take part. Costs: every candidate keeps its own device copy of the
// operator, and the first run of a shape synchronizes the compute stream (a few runs of every
// candidate).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"
#include "halo/kernels_host/accel_gcn_partition.hpp"
#include "halo/kernels_host/autotune.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo::cuda {

/// A FeatureSpmmPlan: X of fp16 / bf16 gets choices of its own (AutotuneKey::x_type) among the
/// candidates that read it; one that does not (cuSPARSE) is a failed candidate for that key.
class AutotunedSpmmPlan final : public FeatureSpmmPlan {
public:
    struct Candidate {
        std::string name;
        std::unique_ptr<SpmmPlan> plan;
        /// Builds `plan` when it is first needed (plan null): a run whose choice is stored then
        /// builds only the chosen kernels, timing a new shape builds the rest, and a candidate
        /// released by release_unkept() is built again if a new shape must be timed. A candidate
        /// whose build throws halo::InputError or LogicError is unavailable from then on.
        std::function<std::unique_ptr<SpmmPlan>()> make;
        bool unavailable = false;
    };

    /// `candidates` (at least one) compute the same product of a num_rows x num_cols operator; ties
    /// go to the earlier one. `unavailable` lists kernels that could not be built ("name: why"),
    /// for report(). Each candidate runs `warmup` untimed and `trials` timed times per shape; a
    /// timed run shorter than 0.25 ms is timed again as a batch of up to 64 back-to-back runs
    /// (the batch's mean is the trial's time), so that launch latency and jitter do not decide
    /// between the kernels of a small operator.
    AutotunedSpmmPlan(Context& ctx, std::int64_t num_rows, std::int64_t num_cols,
                      std::vector<Candidate> candidates, std::vector<std::string> unavailable = {},
                      int trials = 3, int warmup = 1);
    ~AutotunedSpmmPlan() override;
    AutotunedSpmmPlan(const AutotunedSpmmPlan&) = delete;
    AutotunedSpmmPlan& operator=(const AutotunedSpmmPlan&) = delete;

    /// Every candidate writes only rows [rows.begin, rows.end) of y, so the timing runs on the real
    /// x and y; the chosen candidate runs last and leaves its result. Empty ranges and width 0
    /// are passed to the first candidate untimed. Throws halo::InputError when every candidate
    /// rejects the shape.
    void run_features(FeatureView x, DenseView<float> y, RowRange rows) override;
    /// fp32; fp16 / bf16 where a candidate that is not known unavailable reads it: its registry
    /// entry's x_types (spmm_use_autotune), or, for a name outside the registry, its built plan.
    bool reads_features(FeatureType type) const override;
    /// "autotune(<kernel of the last run>)", "autotune" before the first run.
    std::string algorithm() const override;
    /// AutotuneTable::report() plus one "unavailable: name: why" line per kernel not built.
    std::string report() const override;
    /// Host wall time spent timing candidates so far.
    double tuning_seconds() const override { return tuning_seconds_; }

    const AutotuneTable& table() const noexcept { return table_; }
    /// Adds choices made earlier (AutotuneTable::preload) and notes for report().
    void preload(const std::vector<std::pair<AutotuneKey, AutotuneChoice>>& choices,
                 const std::vector<std::string>& notes);
    const std::vector<std::string>& candidate_names() const noexcept { return names_; }
    /// Names the operator (metadata_for_operator("autotune", op, a)) and the device, so that
    /// tuning_metadata() can say what the choices belong to. Without it, nothing is offered.
    void set_identity(KernelMetadata identity, std::string device);
    /// The table as kernels/autotune/<op> metadata when this process timed at least one shape
    /// (preloaded choices alone are not worth writing back) and set_identity() was called.
    std::vector<KernelMetadata> tuning_metadata() const override;
    /// The candidates' memory summed (each holds its own copy of the operator), nonzeros counted
    /// once. Timing runs in place (into the run's own output): no tuning scratch.
    MemoryReport memory() const override;
    /// Frees every built candidate that no (range, width) of the table chose and that can be
    /// built again (it has `make`): after the shapes of a forward pass are tuned, only the kept
    /// kernels hold device memory (issue 48: on R-MAT 22 the tried candidates' operator copies
    /// stayed for the whole run). Returns how many were freed.
    std::size_t release_unkept() override;

private:
    /// The candidate's plan, built now if deferred; null when it cannot be built.
    SpmmPlan* built(std::size_t i);
    double tuning_seconds_ = 0.0;
    double time_candidate(std::size_t i, FeatureView x, DenseView<float> y, RowRange rows);

    Context& ctx_;
    std::int64_t num_rows_;
    std::int64_t num_cols_;
    std::vector<Candidate> candidates_;
    std::vector<std::string> names_;
    std::vector<std::string> unavailable_;
    std::vector<std::string> notes_;
    KernelMetadata identity_;
    std::string device_;
    AutotuneTable table_;
    cudaEvent_t start_ = nullptr;
    cudaEvent_t stop_ = nullptr;
    std::string last_;
};

struct AutotunePlanOptions {
    /// Row ranges run() will be asked for (interior and boundary rows): Accel-GCN partitions
    /// them at plan creation.
    std::vector<RowRange> ranges;
    /// Accel-GCN's partition, precomputed (the dataset's kernels/accel_gcn group).
    std::shared_ptr<const AccelGcnPartition> accel_gcn_partition;
    /// Choices stored by an earlier run (autotune_from_metadata entries): preloaded, so those
    /// shapes are not timed again, and only the kernels they chose are built with the plan (the
    /// others when a shape must be timed: then the operator `a` must still be alive, as the
    /// engine's operators are for its plans' lifetime).
    std::vector<std::pair<AutotuneKey, AutotuneChoice>> stored_choices;
    /// Lines for report() about stored metadata that was not used, and why.
    std::vector<std::string> notes;
    /// SpmmPlanRequest::l2_hints of every candidate.
    bool l2_hints = false;
};

/// The candidates' names, in the order make_autotuned_spmm_plan tries them: the SpMM kernel
/// registry's autotune candidates in its order (halo/kernels_host/spmm_registry.hpp).
const std::vector<std::string>& autotune_candidate_names();

/// Builds the exact plans over `a` for widths up to `max_dim` with the registry's factories
/// (autotune_candidate_names(): cusparse, accel_gcn, mergepath with its default cost and with
/// costs 200 and 400, rowsplit; ties go to the earlier, so to cuSPARSE). A kernel whose plan
/// rejects `a` (e.g. Accel-GCN beyond 2^31 - 1 nonzeros) is left out and named in report(). Stored
/// choices are preloaded when every kernel was built (otherwise they are ignored, with a note).
/// Throws halo::InputError when `a` is not a valid CSR matrix or no plan could be built.
std::unique_ptr<AutotunedSpmmPlan> make_autotuned_spmm_plan(
    Context& ctx, const Csr& a, std::int64_t max_dim, const AutotunePlanOptions& options = {});

}  // namespace halo::cuda
