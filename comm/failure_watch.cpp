// One rank's failure told to every rank (include/halo/mpi/failure_watch.hpp).
#include "halo/mpi/failure_watch.hpp"

#include <string>
#include <vector>

#include "halo/mpi/mpi_error.hpp"

namespace halo {

namespace {

constexpr int kFailTag = 1;  // failing rank -> every other rank: its rank
constexpr int kAckTag = 2;   // each rank -> the failing rank: it knows
constexpr int kEndTag = 3;   // the failing rank -> each rank: every rank knows, end now
// A rank that answered waits this long for the failing rank's word to end (which comes once every
// rank answered, at most the failing rank's 20 s later), then ends anyway.
constexpr auto kEndTimeout = std::chrono::seconds(25);
// How often the thread looks for an announcement: a rank ends this long after it, at most.
constexpr auto kPollInterval = std::chrono::milliseconds(20);

}  // namespace

FailureWatch::FailureWatch(MPI_Comm comm, std::function<void(int)> on_peer_failure,
                           std::function<void(int)> on_notice)
    : on_peer_failure_(std::move(on_peer_failure)), on_notice_(std::move(on_notice))
{
    HALO_MPI_TRY(MPI_Comm_dup(comm, &comm_));
    HALO_MPI_TRY(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    HALO_MPI_TRY(MPI_Comm_rank(comm_, &rank_));
    HALO_MPI_TRY(MPI_Comm_size(comm_, &size_));
    int level = MPI_THREAD_SINGLE;
    HALO_MPI_TRY(MPI_Query_thread(&level));
    if (level == MPI_THREAD_MULTIPLE && size_ > 1) {
        thread_ = std::thread(&FailureWatch::listen, this);
    }
}

FailureWatch::~FailureWatch()
{
    stop();
    if (comm_ != MPI_COMM_NULL) {
        MPI_Comm_free(&comm_);
    }
}

void FailureWatch::stop() noexcept
{
    stop_.store(true);
    if (thread_.joinable()) {
        thread_.join();
    }
}

void FailureWatch::listen()
{
    // Every announcement is answered, not only the first: where several ranks fail at once (the
    // dataset replaced under every rank), each waits for every other rank's answer.
    int incoming = -1;
    MPI_Request fail = MPI_REQUEST_NULL;
    if (MPI_Irecv(&incoming, 1, MPI_INT, MPI_ANY_SOURCE, kFailTag, comm_, &fail) != MPI_SUCCESS) {
        return;  // the main thread's next MPI call meets the same fault and reports it
    }
    int end_value = 0;
    MPI_Request end = MPI_REQUEST_NULL;
    auto deadline = std::chrono::steady_clock::time_point::max();
    while (failed_peer_.load() >= 0 || !stop_.load()) {
        int done = 0;
        MPI_Status status{};
        if (MPI_Test(&fail, &done, &status) != MPI_SUCCESS) {
            return;
        }
        if (done != 0) {
            if (failed_peer_.load() < 0) {
                failed_peer_.store(incoming);
                // halo-infer: from here a SIGTERM (mpirun ending the job once a failing rank
                // exits) ends this rank silently with status 1: the failing rank said what failed.
                if (on_notice_) {
                    on_notice_(incoming);
                }
                // Ending before every rank knows would let mpirun end the others by a signal
                // before they know why (a "terminated by a signal" line, a status of 143): wait
                // for a failing rank's word, which it sends once every rank answered.
                MPI_Irecv(&end_value, 1, MPI_INT, MPI_ANY_SOURCE, kEndTag, comm_, &end);
                deadline = std::chrono::steady_clock::now() + kEndTimeout;
            }
            int me = rank_;
            MPI_Send(&me, 1, MPI_INT, status.MPI_SOURCE, kAckTag, comm_);
            MPI_Irecv(&incoming, 1, MPI_INT, MPI_ANY_SOURCE, kFailTag, comm_, &fail);
            continue;
        }
        if (failed_peer_.load() >= 0) {
            int ended = 0;
            MPI_Test(&end, &ended, MPI_STATUS_IGNORE);
            if (ended != 0 || std::chrono::steady_clock::now() >= deadline) {
                if (on_peer_failure_) {
                    on_peer_failure_(failed_peer_.load());
                }
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        } else {
            std::this_thread::sleep_for(kPollInterval);
        }
    }
    for (auto* request : {&fail, &end}) {
        if (*request != MPI_REQUEST_NULL) {
            MPI_Cancel(request);
            MPI_Wait(request, MPI_STATUS_IGNORE);
        }
    }
}

int FailureWatch::announce(std::chrono::milliseconds timeout) noexcept
{
    if (!active()) {
        return size_ - 1;
    }
    // The sends read rank_, which outlives any send left pending here.
    std::vector<int> acks(static_cast<std::size_t>(size_), -1);
    std::vector<MPI_Request> sends;
    std::vector<MPI_Request> answers;
    for (int r = 0; r < size_; ++r) {
        if (r == rank_) {
            continue;
        }
        MPI_Request send = MPI_REQUEST_NULL;
        MPI_Request answer = MPI_REQUEST_NULL;
        if (MPI_Isend(&rank_, 1, MPI_INT, r, kFailTag, comm_, &send) == MPI_SUCCESS) {
            sends.push_back(send);
        }
        if (MPI_Irecv(&acks[static_cast<std::size_t>(r)], 1, MPI_INT, r, kAckTag, comm_, &answer) ==
            MPI_SUCCESS) {
            answers.push_back(answer);
        }
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int missing = size_ - 1;
    while (true) {
        int all = 0;
        MPI_Testall(static_cast<int>(sends.size()), sends.data(), &all, MPI_STATUSES_IGNORE);
        missing = size_ - 1 - static_cast<int>(answers.size());  // answers never posted
        for (auto& answer : answers) {
            int done = 0;
            MPI_Test(&answer, &done, MPI_STATUS_IGNORE);
            missing += done != 0 ? 0 : 1;
        }
        if (missing == 0) {
            break;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            // No answer may land in `acks` once it is gone; the caller aborts the job next.
            for (auto& answer : answers) {
                if (answer != MPI_REQUEST_NULL) {
                    MPI_Cancel(&answer);
                    MPI_Wait(&answer, MPI_STATUS_IGNORE);
                }
            }
            return missing;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Every rank knows: tell them to end. Their receives are posted, so the sends complete at
    // once; the wait is bounded all the same.
    std::vector<MPI_Request> ends;
    for (int r = 0; r < size_; ++r) {
        MPI_Request end = MPI_REQUEST_NULL;
        if (r != rank_ && MPI_Isend(&rank_, 1, MPI_INT, r, kEndTag, comm_, &end) == MPI_SUCCESS) {
            ends.push_back(end);
        }
    }
    const auto end_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    int all = 0;
    while (all == 0 && std::chrono::steady_clock::now() < end_deadline) {
        MPI_Testall(static_cast<int>(ends.size()), ends.data(), &all, MPI_STATUSES_IGNORE);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return 0;
}

void detail::agree_on_failure(MPI_Comm comm, const char* what, bool failed,
                              const std::string& message, bool input)
{
    int rank = 0;
    int size = 1;
    HALO_MPI_TRY(MPI_Comm_rank(comm, &rank));
    HALO_MPI_TRY(MPI_Comm_size(comm, &size));
    // {lowest failed rank, lowest failed rank whose error is no InputError, every rank failed}
    int agreed[3] = {failed ? rank : size, failed && !input ? rank : size, failed ? 1 : 0};
    HALO_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, agreed, 3, MPI_INT, MPI_MIN, comm));
    const int first = agreed[0];
    if (first == size) {
        return;
    }
    const bool every_rank = agreed[2] == 1;
    const bool reporter = rank == first;
    // The type is the reporter's, so that every rank throws the same type.
    const bool input_error = agreed[1] != first;
    const auto text =
        reporter ? message
                 : "rank " + std::to_string(first) + " failed " + what + " (its error is above)";
    if (input_error) {
        throw Collective<InputError>(text, first, every_rank, reporter);
    }
    throw Collective<Error>(text, first, every_rank, reporter);
}

}  // namespace halo
