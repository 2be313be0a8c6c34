// How a job ends when one rank fails after start (docs/CLI.md "Errors and exit codes"): the
// failing rank tells every other rank on a communicator of its own, and each rank has a thread
// that listens there, so that a rank blocked in a collective, a halo exchange or a device wait
// still learns of it. No MPI_Abort: the failing rank prints its line, the others stay silent,
// every rank exits 1. Needs MPI_THREAD_MULTIPLE (the thread calls MPI beside the main thread);
// without it the watch is inactive and the caller ends the job with MPI_Abort.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

namespace halo::job {

/// Another rank (`failed_rank`) announced its failure: a SIGTERM or SIGINT from now on ends this
/// process with status 1 and no line (termination.cpp), after the --out clean-up of rank 0.
/// Async-signal-safe.
void note_peer_failure(int failed_rank) noexcept;

class FailureWatch {
public:
    /// Collective over `comm` (duplicates it). `on_peer_failure` runs on the watch's thread once
    /// another rank announced a failure and this rank answered it; the process should end there
    /// (the main thread may be blocked for good). An empty function only records the failure.
    FailureWatch(MPI_Comm comm, std::function<void(int failed_rank)> on_peer_failure);
    ~FailureWatch();
    FailureWatch(const FailureWatch&) = delete;
    FailureWatch& operator=(const FailureWatch&) = delete;

    /// Whether the thread runs (MPI gives MPI_THREAD_MULTIPLE and the world has several ranks).
    bool active() const noexcept { return thread_.joinable(); }
    /// The rank whose failure was announced to this one, or -1.
    int failed_peer() const noexcept { return failed_peer_.load(); }
    /// This rank failed: tells every other rank and waits up to `timeout` for each to answer.
    /// Returns the number of ranks that did not answer (0: every rank knows and ends). Never
    /// throws; an inactive watch returns the number of other ranks.
    int announce(std::chrono::milliseconds timeout) noexcept;
    /// Stops the thread; local. Called once no rank can announce a failure any more (after the
    /// job's last collective), so no announcement is left unreceived.
    void stop() noexcept;

private:
    void listen();

    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0;
    int size_ = 1;
    std::function<void(int)> on_peer_failure_;
    std::atomic<bool> stop_{false};
    std::atomic<int> failed_peer_{-1};
    std::thread thread_;
};

}  // namespace halo::job
