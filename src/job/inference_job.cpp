// InferenceJob's phases (include/halo/job/inference_job.hpp): start, read, check, plan, tune and
// run, write, report.
#include "halo/job/inference_job.hpp"

#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <thread>
#include <unordered_set>

#include "checkpoint.hpp"
#include "halo/comm/mpi_exchanger.hpp"
#include "halo/core/detail/parallel_copy.hpp"
#include "halo/core/detail/resident_memory.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/io.hpp"
#include "halo/core/progress.hpp"
#include "halo/core/result.hpp"
#include "halo/engine/feature_upload.hpp"
#include "halo/mpi/mpi_error.hpp"
#include "job_state.hpp"
#include "job_steps.hpp"

namespace halo {

namespace job {

void maybe_inject_fault(int rank, std::size_t layer)
{
    const char* spec = std::getenv("HALO_FAULT_INJECT");
    if (spec == nullptr) {
        return;
    }
    int fault_rank = -1;
    int fault_layer = -1;
    int sleep_seconds = -1;
    const int fields =
        std::sscanf(spec, "rank=%d,layer=%d,sleep=%d", &fault_rank, &fault_layer, &sleep_seconds);
    if (fields < 2 || (fields == 3 && sleep_seconds < 0)) {
        HALO_THROW(UsageError, "HALO_FAULT_INJECT='", spec,
                   "' (expected rank=R,layer=L or rank=R,layer=L,sleep=S)");
    }
    if (fault_rank == rank && fault_layer == static_cast<int>(layer)) {
        if (fields == 3) {
            std::fprintf(stderr,
                         "rank %d (pid %d): sleeping %d s before layer %zu (HALO_FAULT_INJECT)\n",
                         rank, static_cast<int>(::getpid()), sleep_seconds, layer);
            std::this_thread::sleep_for(std::chrono::seconds(sleep_seconds));
            return;
        }
        HALO_THROW(Error, "injected fault before layer ", layer, " (HALO_FAULT_INJECT)");
    }
}

namespace {

// The file system object at `path`: another halo-partition -o onto the path renames a new file
// over it, which changes the inode; --save-tuning edits it in place, which does not.
std::pair<dev_t, ino_t> file_identity(const std::string& path)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        return {};
    }
    return {st.st_dev, st.st_ino};
}

// The first failing rank's error, known on every rank: collective. Returns normally when no rank
// failed, else throws JobRefused on every rank (the failing rank reports it).
void agree(MPI_Comm comm, int rank, int size, const std::string& error, bool usage)
{
    int first_failed = error.empty() ? size : rank;
    HALO_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, comm));
    if (first_failed == size) {
        return;
    }
    int usage_flag = usage ? 1 : 0;
    HALO_MPI_TRY(MPI_Bcast(&usage_flag, 1, MPI_INT, first_failed, comm));
    throw JobRefused(rank == first_failed
                         ? error
                         : std::string("refused on rank ") + std::to_string(first_failed),
                     usage_flag == 1, rank == first_failed);
}

// Runs `check`, returning its error message (empty when it passed) and whether it was a usage
// error. Every exception type counts: the job must agree before any rank goes on.
template <typename Check>
std::string attempt(Check&& check, bool& usage)
{
    try {
        check();
        return {};
    } catch (const UsageError& e) {
        usage = true;
        return e.message();
    } catch (const Error& e) {
        return e.message();
    } catch (const std::exception& e) {
        return e.what();
    }
}

}  // namespace

}  // namespace job

void InferenceJob::State::say(const std::string& what) const
{
    if (progress) {
        progress(fmt::format("[{:8.2f} s] {}", process.seconds(), what));
    }
}

void InferenceJob::State::phase(const std::string& name, double seconds, double bytes,
                                const std::string& note)
{
    phases.add(name, seconds, bytes, note);
    if (bytes > 0.0 && seconds > 0.0) {
        say(fmt::format("{}: {:.3f} s, {:.3f} GB at {:.2f} GB/s", name, seconds, bytes / 1e9,
                        bytes / seconds / 1e9));
    } else {
        say(fmt::format("{}: {:.3f} s", name, seconds));
    }
}

InferenceJob::InferenceJob(MpiWorld& world, InferOptions options, std::string command,
                           std::chrono::steady_clock::time_point started, double mpi_seconds,
                           ProgressSink progress)
    : state_(std::make_unique<State>(world, std::move(options), std::move(command), started,
                                     mpi_seconds, std::move(progress)))
{
}

InferenceJob::~InferenceJob() = default;

void InferenceJob::start()
{
    auto& s = *state_;
    install_job_termination_report(s.rank);
    s.phases.add("mpi start", s.mpi_seconds);
    s.step.restart();
    // What needs no part's data, on every rank alike: the dataset's root attributes, the model,
    // the rules between them and the rank count.
    bool usage = false;
    auto error = job::attempt(
        [&] {
            job::maybe_inject_fault(-1, 0);  // a malformed HALO_FAULT_INJECT is a usage error
            s.dataset_identity = job::file_identity(s.o.dataset);
            s.info = read_dataset_info(s.o.dataset);
            s.model = load_model(s.o);
            validate_job(s.o, s.info, s.model, s.size);
            if (!s.o.resume.empty()) {
                job::check_checkpoint(s.o.resume,
                                      job::checkpoint_identity(s.o, s.info, s.model, s.size));
            }
        },
        usage);
    job::agree(s.world.comm(), s.rank, s.size, error, usage);
    // --out on rank 0: created, locked, and free of another job's result.
    if (s.rank == 0) {
        error = job::attempt(
            [&] {
                s.out_dir.emplace(s.o.out, s.o.overwrite);
                if (!s.o.checkpoint.empty()) {
                    job::open_checkpoint(s.o.checkpoint,
                                         job::checkpoint_identity(s.o, s.info, s.model, s.size));
                }
            },
            usage);
    }
    job::agree(s.world.comm(), s.rank, s.size, error, usage);
    // From here a failure is one rank's: the others learn of it from the watch (fail()).
    s.watch = std::make_unique<FailureWatch>(
        s.world.comm(),
        [end = s.end_process](int /*failed_rank*/) {
            job::signal_cleanup();  // rank 0's lock and empty --out; nothing elsewhere
            if (end) {
                end();
            }
        },
        job::note_peer_failure);
    s.started = true;
    s.phase("start", s.step.seconds(), -1.0,
            fmt::format("dataset attributes, model ({}), checks, --out", s.o.model_name()));
}

JobSummary InferenceJob::run()
{
    auto& s = *state_;
    HALO_EXPECTS(s.started, "InferenceJob::run before start");
    JobSummary summary = job::run_phases(s);
    summary.nodes = s.info.num_nodes;
    summary.ranks = s.size;
    summary.backend = s.o.backend;
    summary.activations = s.o.activations;
    summary.model = s.model.name.empty() ? s.o.model_name() : s.model.name;
    summary.layers = s.model.layers.size();
    summary.repeat = s.o.repeat;
    summary.out = s.o.out;
    summary.report = std::move(s.report);
    if (s.out_dir) {
        s.out_dir->release();
        s.out_dir.reset();
    }
    summary.total_seconds = s.process.seconds();
    return summary;
}

void InferenceJob::abandon() noexcept
{
    if (state_ && state_->out_dir) {
        state_->out_dir->release();
        state_->out_dir.reset();
    }
}

void InferenceJob::on_peer_failure(std::function<void()> end_process)
{
    HALO_EXPECTS(!state_->started, "InferenceJob::on_peer_failure after start");
    state_->end_process = std::move(end_process);
}

InferenceJob::FailureEnd InferenceJob::fail() noexcept
{
    abandon();
    auto& s = *state_;
    if (s.size == 1 || s.peers_finished) {
        return FailureEnd::alone;
    }
    if (!s.watch || !s.watch->active()) {
        return FailureEnd::unanswered;
    }
    // Long enough for a rank whose listening thread waits behind a busy MPI progress engine,
    // short enough that the job ends within 30 s.
    constexpr auto kAnswerTimeout = std::chrono::seconds(20);
    return s.watch->announce(kAnswerTimeout) == 0 ? FailureEnd::told : FailureEnd::unanswered;
}

bool InferenceJob::peer_failed() const noexcept
{
    return state_->watch && state_->watch->failed_peer() >= 0;
}

}  // namespace halo
