// How an MPI job ends when one rank fails where the others cannot know (docs/CLI.md "Errors and
// exit codes"; halo-infer after start, the distributed halo-partition): the failing rank tells
// every other rank on a communicator of its own, and each rank has a thread that listens there,
// so that a rank blocked in a collective, a halo exchange or a device wait still learns of it.
// No MPI_Abort: the failing rank prints its line, the others stay silent, every rank exits 1.
// Needs MPI_THREAD_MULTIPLE (the thread calls MPI beside the main thread); without it the watch
// is inactive and the caller ends the job with MPI_Abort.
//
// Where the ranks can still agree (they all reach the same collective), `collectively` is the
// cheaper way: one reduction, then every rank throws a CollectiveError and leaves normally.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "halo/core/error.hpp"

namespace halo {

class FailureWatch {
public:
    /// Collective over `comm` (duplicates it). `on_peer_failure` runs on the watch's thread once
    /// another rank announced a failure and this rank answered it; the process should end there
    /// (the main thread may be blocked for good). An empty function only records the failure.
    /// `on_notice`, where given, runs on the thread as soon as the announcement arrives (halo-
    /// infer's signal handler then ends the process silently).
    FailureWatch(MPI_Comm comm, std::function<void(int failed_rank)> on_peer_failure,
                 std::function<void(int failed_rank)> on_notice = {});
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
    std::function<void(int)> on_notice_;
    std::atomic<bool> stop_{false};
    std::atomic<int> failed_peer_{-1};
    std::thread thread_;
};

/// An error that every rank of a communicator throws together, after one collective agreed on it
/// (`collectively`): exactly one rank, reporter(), prints it, and every rank may leave and
/// finalize MPI as usual (no MPI_Abort, no FailureWatch). Thrown as Collective<E>, so that a
/// caller catching the original type E (InputError, Error) still catches it.
class CollectiveError {
public:
    CollectiveError(int failed_rank, bool every_rank, bool reporter)
        : failed_rank_(failed_rank), every_rank_(every_rank), reporter_(reporter)
    {
    }
    virtual ~CollectiveError() = default;
    /// The lowest rank that failed.
    int failed_rank() const noexcept { return failed_rank_; }
    /// Whether every rank failed (the same cause everywhere: the message needs no rank).
    bool every_rank() const noexcept { return every_rank_; }
    /// Whether this rank prints the error (the lowest rank that failed).
    bool reporter() const noexcept { return reporter_; }
    /// The message: the reporter's own; on the other ranks one naming the failed rank.
    virtual const std::string& text() const noexcept = 0;

private:
    int failed_rank_ = 0;
    bool every_rank_ = false;
    bool reporter_ = false;
};

template <typename E>
class Collective : public E, public CollectiveError {
public:
    Collective(const std::string& message, int failed_rank, bool every_rank, bool reporter)
        : E(message, nullptr, 0), CollectiveError(failed_rank, every_rank, reporter)
    {
    }
    const std::string& text() const noexcept override { return E::message(); }
};

namespace detail {
/// The agreement of `collectively`: whether this rank `failed`, its message, whether it was an
/// InputError. Throws Collective<InputError> or Collective<Error> on every rank where any failed;
/// returns where none did. Collective over `comm`.
void agree_on_failure(MPI_Comm comm, const char* what, bool failed, const std::string& message,
                      bool input);
}  // namespace detail

/// Runs `body` on every rank of `comm`; when it throws on some rank, every rank throws a
/// CollectiveError: the lowest failing rank its own message (an InputError stays one), the others
/// one naming that rank and `what` ("reading its slice"), so that no rank waits in a later
/// collective for a rank that left. One MPI_Allreduce.
template <typename Body>
void collectively(MPI_Comm comm, const char* what, Body&& body)
{
    bool failed = true;
    bool input = false;
    std::string message;
    try {
        body();
        failed = false;
    } catch (const InputError& e) {
        message = e.message();
        input = true;
    } catch (const Error& e) {
        message = e.message();
    } catch (const std::exception& e) {
        message = e.what();
    } catch (...) {
        message = "an exception of unknown type";
    }
    detail::agree_on_failure(comm, what, failed, message, input);
}

}  // namespace halo
