// One distributed inference job, the floor above the engine, the exchangers and the store
// (docs/ARCHITECTURE.md): halo-infer parses its options into InferOptions, runs this, prints.
//
// Phases: start (every check that needs no part's data, on every rank alike, and --out with its
// lock), read (each rank its part), check (the halo plans, collectively), plan (exchange and
// engine), tune and run (the forward passes), write (each rank its rows), report (reductions,
// the tuning choices into the dataset, the manifest last). An error found in start is thrown as
// JobRefused on every rank; one found later is this rank's alone: the driver prints it and calls
// fail(), which tells every other rank (each listens on a thread of the job, so a rank blocked in
// a collective learns of it too) and says how the process ends.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/engine/engine.hpp"
#include "halo/job/infer_options.hpp"

namespace halo {

class MpiWorld;

/// An error that every rank of the job found alike in start(), before any rank read its part:
/// every rank throws it and exactly one (`reporter()`) prints it; no rank needs to abort.
/// `usage()`: the command line itself (exit 2), else the inputs (exit 1).
class JobRefused : public Error {
public:
    JobRefused(const std::string& message, bool usage, bool reporter)
        : Error(message, nullptr, 0), usage_(usage), reporter_(reporter)
    {
    }
    bool usage() const noexcept { return usage_; }
    bool reporter() const noexcept { return reporter_; }

private:
    bool usage_ = false;
    bool reporter_ = false;
};

/// What one run of the forward pass measured (halo-bench --e2e takes its medians over the runs
/// after its warm-up).
struct RunTimes {
    double forward_seconds = 0.0;  // the layers only, the slowest rank's
    /// The run replayed a recorded forward pass (a CUDA graph): no per-layer times then.
    bool replayed = false;
    /// This rank's per-layer times (Engine::timings; empty where replayed); spmm, dense, exchange
    /// and waiting only with InferOptions::step_timing.
    std::vector<LayerTiming> layers;
};

/// What a finished job prints: the summary line's figures and rank 0's tables.
struct JobSummary {
    std::int64_t nodes = 0;
    int ranks = 0;
    std::string backend;
    std::string model;
    std::string activations;  // fp32 | bf16 | fp16 (--activations)
    std::size_t layers = 0;
    int repeat = 1;
    double forward_seconds = 0.0;  // median of the runs, the layers only, the slowest rank's
    double run_seconds = 0.0;      // median of the runs, upload and download included
    double total_seconds = 0.0;    // process start to the manifest
    std::vector<RunTimes> runs;    // each of the --repeat runs, in order
    std::string memory_line;       // CUDA backend: the device pool's usage (else empty)
    std::string out;
    /// Rank 0: the per-layer, memory and phase tables, the kernels chosen, the accuracy, the
    /// exchange volume, notes (what halo-infer --report prints; the manifest holds the same).
    std::string report;
};

/// One line of progress (rank 0, "-q" drops them): a phase or layer ended, or ~10% of a long
/// read or write.
using ProgressSink = std::function<void(const std::string& line)>;

class InferenceJob {
public:
    /// `options` must have passed validate(). `command` is recorded in the manifest; `started`
    /// is when the process started (the total time counts from it), `mpi_seconds` MPI's start.
    InferenceJob(MpiWorld& world, InferOptions options, std::string command,
                 std::chrono::steady_clock::time_point started, double mpi_seconds,
                 ProgressSink progress);
    ~InferenceJob();
    InferenceJob(const InferenceJob&) = delete;
    InferenceJob& operator=(const InferenceJob&) = delete;

    /// Collective. Reads the dataset's root attributes and the model on every rank, checks them
    /// with the rank count (validate_job), and on rank 0 checks --out, locks it and, with
    /// --overwrite, removes an earlier result. Throws JobRefused on every rank if any failed.
    void start();
    /// Collective: the phases after start, ending with the manifest. Throws on a failure of
    /// this rank (the caller then calls abandon() and aborts the job).
    JobSummary run();
    /// After a failure of this rank: removes the lock and an --out the job created while it is
    /// still empty. Never throws.
    void abandon() noexcept;

    /// Before start(): what ends the process once another rank announced its failure (on a
    /// thread of the job, after rank 0 removed the lock and an empty --out; the main thread may
    /// be blocked in MPI or on the device for good). halo-infer passes std::_Exit(1). Without
    /// it the announcement is only recorded (peer_failed()).
    void on_peer_failure(std::function<void()> end_process);
    /// How the process ends after fail().
    enum class FailureEnd {
        alone,      // no rank waits for this one (one rank, or all past the last collective):
                    // return 1 and finalize MPI as usual
        told,       // every other rank knows and ends with status 1: exit 1 at once, without
                    // MPI_Finalize (the others will not reach it)
        unanswered  // a rank did not answer within 20 s (or MPI lacks MPI_THREAD_MULTIPLE):
                    // only MPI_Abort ends it
    };
    /// After run() threw on this rank: abandon(), then tells every other rank and waits up to
    /// 20 s for each to answer. Never throws.
    FailureEnd fail() noexcept;
    /// Whether another rank announced its failure to this one: an error of this rank is then a
    /// consequence of it, which that rank reports.
    bool peer_failed() const noexcept;

    /// The job's state, shared by its phases (src/job/job_state.hpp); opaque to callers.
    struct State;

private:
    std::unique_ptr<State> state_;
};

/// Installs the handlers of SIGTERM and SIGINT for a job: rank 0 prints one line saying the
/// run is incomplete, removes the lock and an --out still empty, and the signal then ends the
/// process as by default. Called by InferenceJob::start.
void install_job_termination_report(int rank);

}  // namespace halo
