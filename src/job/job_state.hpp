// What the phases of one InferenceJob share (src/job/inference_job.cpp, job_reports.cpp).
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "halo/comm/exchange_spec.hpp"
#include "halo/comm/mpi_world.hpp"
#include "halo/core/model.hpp"
#include "halo/engine/backend_spec.hpp"
#include "halo/engine/engine.hpp"
#include "halo/job/inference_job.hpp"
#include "halo/mpi/failure_watch.hpp"
#include "halo/store/store.hpp"
#include "output_dir.hpp"
#include "phase_table.hpp"

namespace halo::job {

class Stopwatch {
public:
    Stopwatch() : start_(std::chrono::steady_clock::now()) {}
    explicit Stopwatch(std::chrono::steady_clock::time_point start) : start_(start) {}
    double seconds() const
    {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
    void restart() { start_ = std::chrono::steady_clock::now(); }

private:
    std::chrono::steady_clock::time_point start_;
};

/// The medians of --repeat runs; the output is the engine's host buffer, valid until its next run.
struct Runs {
    std::span<const float> output;        // empty when the last run's download was deferred
    bool deferred = false;                // the last run left its output on the device
    std::vector<double> run_seconds;      // each run's, the last without a deferred download
    double median_seconds = 0.0;          // the whole call, upload and download included
    double forward_median_seconds = 0.0;  // the layers only, the slowest rank's
    std::vector<RunTimes> times;          // each run's (JobSummary::runs)
};

/// Max and mean over ranks of one value.
struct Stat {
    double max = 0.0;
    double mean = 0.0;
    int max_rank = 0;  // the lowest rank with the maximum
};
Stat reduce_stat(MPI_Comm comm, double value, int size);

/// What the reports after the runs found, for the manifest and the summary.
struct Reports {
    std::array<std::int64_t, 2> totals{0, 0};  // evaluation nodes: correct, evaluated
    double exchanged_total = 0.0;              // bytes over all ranks and layers
    double fp32_total = 0.0;                   // the same as fp32 rows
    nlohmann::json layers;                     // per-layer rows
    nlohmann::json memory;                     // rank 0's device memory by component
    nlohmann::json phases;                     // the phase table
    Stat load;                                 // dataset read and plan check, over ranks
    std::string memory_line;                   // the CUDA pool's usage (empty on the CPU)
};

}  // namespace halo::job

namespace halo {

struct InferenceJob::State {
    State(MpiWorld& w, InferOptions options, std::string cmd,
          std::chrono::steady_clock::time_point started, double mpi, ProgressSink sink)
        : world(w),
          o(std::move(options)),
          command(std::move(cmd)),
          process(started),
          mpi_seconds(mpi),
          progress(w.rank() == 0 && !o.quiet ? std::move(sink) : ProgressSink()),
          rank(w.rank()),
          size(w.size()),
          cuda(o.cuda())
    {
    }

    /// One progress line (rank 0 unless quiet): "[elapsed] what".
    void say(const std::string& what) const;
    /// A phase ended: its row in the table and a progress line.
    void phase(const std::string& name, double seconds, double bytes = -1.0,
               const std::string& note = {});

    MpiWorld& world;
    const InferOptions o;
    const std::string command;
    const job::Stopwatch process;
    const double mpi_seconds;
    const ProgressSink progress;
    const int rank;
    const int size;
    const bool cuda;
    DatasetInfo info;
    Model model;
    std::pair<dev_t, ino_t> dataset_identity{};
    std::optional<job::OutputDir> out_dir;
    bool started = false;
    std::function<void()> end_process;         // InferenceJob::on_peer_failure
    std::unique_ptr<FailureWatch> watch;       // from start to the last collective
    bool peers_finished = false;               // every rank passed the last collective
    job::PhaseLog phases;
    job::Stopwatch step;     // restarted by each phase
    std::string report;      // rank 0's tables and notes (JobSummary::report)
    int resumed_after = -1;  // --resume: the last layer finished before this job
};

}  // namespace halo

namespace halo::job {

using State = InferenceJob::State;

/// Per-layer times reduced over ranks: the table (rank 0, into state.report) and its manifest
/// rows; adds the bytes moved over all ranks and layers.
nlohmann::json report_layers(State& job, const Engine& engine, Reports& reports);
/// Device memory by component: rank 0's table, and the manifest's JSON.
nlohmann::json report_memory(State& job, const Engine& engine);
/// On a CUDA backend: rank 0's pool usage and the peak over ranks (collective), else empty.
std::string device_memory_line(const State& job, const BackendInstance& backend,
                               const HaloExchanger& exchanger);
/// The manifest (rank 0, after every rank wrote its piece).
void write_manifest(const State& job, const Exchange& exchange, const Engine& engine,
                    const Runs& runs, const Reports& reports);
/// Rank 0's closing notes into state.report: memory, exchange volume, kernels, accuracy.
void summarize(State& job, const Engine& engine, const Reports& reports);

}  // namespace halo::job
