// The phases of a job after start, by file: job_steps.cpp (read, check, plan, and run_phases,
// which runs them all), job_run.cpp (tune and run: the repeated forward passes), job_finish.cpp
// (write: each rank its rows; report: the reductions, the tuning write-back, the manifest).
#pragma once

#include <fmt/core.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "halo/job/inference_job.hpp"
#include "job_state.hpp"

namespace halo::job {

/// HALO_FAULT_INJECT="rank=R,layer=L": rank R throws before layer L (tests of the abort path).
/// "rank=R,layer=L,sleep=S": rank R sleeps S seconds there instead, its peers waiting in the
/// layer's halo exchange, so that a test can kill it (tests/apps/test_faults.sh). Rank -1 only
/// checks the variable's form (UsageError).
void maybe_inject_fault(int rank, std::size_t layer);

/// read, check, plan, tune and run, write, report; the summary's timings.
JobSummary run_phases(InferenceJob::State& job);

/// The median of `v` (the upper middle one of an even count), 0 for none.
double median(std::vector<double> v);
/// "1 run", "N runs".
std::string runs_note(int repeat);

// Progress of the first run, one line per layer as it ends (rank 0): the next layer's start
// ends the previous one; the run's end ends the last (and, out of core, every layer at once).
class LayerProgress {
public:
    LayerProgress(const State& job, std::int64_t rows) : job_(job), rows_(rows) {}
    void start(std::size_t layer)
    {
        if (active_) {
            finish_until(layer);
        }
    }
    void begin_run(std::size_t first_layer)
    {
        active_ = true;
        reported_ = first_layer;
        watch_.restart();
    }
    void end_run(const Engine& engine)
    {
        if (active_) {
            finish_until(job_.model.layers.size(), &engine);
        }
        active_ = false;
    }

private:
    void finish_until(std::size_t layer, const Engine* engine = nullptr)
    {
        for (; reported_ < layer; ++reported_) {
            const auto& l = job_.model.layers[reported_];
            const double seconds = engine != nullptr && !engine->replayed() && engine->out_of_core()
                                       ? engine->timings()[reported_].total
                                       : watch_.seconds();
            job_.say(fmt::format("layer {} of {} ({} {}->{}): {:.3f} s, {:.3g} rows/s on rank 0",
                                 reported_ + 1, job_.model.layers.size(), to_string(l.type),
                                 l.in_dim, l.out_dim, seconds,
                                 seconds > 0.0 ? double(rows_) / seconds : 0.0));
            watch_.restart();
        }
    }

    const State& job_;
    std::int64_t rows_;  // this rank's
    Stopwatch watch_;
    bool active_ = false;
    std::size_t reported_ = 0;
};

/// tune and run (job_run.cpp): the --repeat forward passes (the first one with layer progress
/// and the checkpoint), their times; the last one's download deferred to the write where the
/// engine allows. `uploaded`: the features already on the device (FeatureUpload), used by the
/// first run and then dropped.
Runs run_repeats(State& job, Engine& engine, const Shard& shard, std::optional<Matrix>& uploaded,
                 LayerProgress& progress, Restart& restart, std::size_t first_layer);

/// write (job_finish.cpp): this rank's rows, their argmax and, with --save-layers, every layer's;
/// returns the predictions.
std::vector<std::int32_t> write_piece(State& job, const Engine& engine, Backend& backend,
                                      const Shard& shard, Runs& runs);

/// report (job_finish.cpp): the reductions over ranks, the tuning write-back, rank 0's tables,
/// the job's last collective, and the manifest last on rank 0.
JobSummary report_and_finish(State& job, Engine& engine, const BackendInstance& backend,
                             const Exchange& exchange, const Shard& shard,
                             const std::vector<std::int32_t>& prediction, const Runs& runs,
                             double load_seconds);

}  // namespace halo::job
