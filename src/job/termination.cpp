// SIGTERM and SIGINT during a job (scancel, a time limit, Ctrl-C, mpirun ending the job): rank 0
// prints one line, removes the lock and an --out still empty (output_dir.hpp), and the signal
// then ends the process as by default. After another rank announced its failure
// (halo/mpi/failure_watch.hpp) the signal is mpirun ending the job once that rank exited: no line,
// exit status 1. Only write(), unlink(), rmdir() and _exit() run in the handler; the line is built
// before it is installed.
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "halo/job/inference_job.hpp"
#include "output_dir.hpp"

namespace halo {

namespace {

char termination_note[200];
std::size_t termination_note_length = 0;
volatile std::sig_atomic_t peer_failed = 0;

extern "C" void report_termination(int signal)
{
    if (peer_failed != 0) {
        job::signal_cleanup();
        ::_exit(1);
    }
    if (termination_note_length > 0) {
        static_cast<void>(::write(STDERR_FILENO, termination_note, termination_note_length));
    }
    job::signal_cleanup();
    std::signal(signal, SIG_DFL);
    std::raise(signal);
}

}  // namespace

void job::note_peer_failure(int /*failed_rank*/) noexcept
{
    peer_failed = 1;
}

void install_job_termination_report(int rank)
{
    // One line per job, not per rank: rank 0's (a signal to another rank alone is named by
    // mpirun, which then ends the job).
    termination_note_length = 0;
    if (rank == 0) {
        const int n = std::snprintf(
            termination_note, sizeof termination_note,
            "halo-infer: rank %d: terminated by a signal (SIGTERM or SIGINT: scancel, a time "
            "limit, Ctrl-C, or mpirun ending the job); the run is incomplete, no manifest\n",
            rank);
        termination_note_length = n > 0 ? static_cast<std::size_t>(n) : 0;
    }
    std::signal(SIGTERM, report_termination);
    std::signal(SIGINT, report_termination);
}

}  // namespace halo
