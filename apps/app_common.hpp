// Small helpers shared by the command-line drivers: timing, progress lines, the command line as
// one string, and the top-level error handler that turns exceptions into messages and exit codes.
#pragma once

#include <fmt/core.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "halo/core/error.hpp"

namespace CLI {
class App;
}

namespace halo::app {

class Stopwatch {
public:
    Stopwatch() : start_(std::chrono::steady_clock::now()) {}
    double seconds() const
    {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
    void restart() { start_ = std::chrono::steady_clock::now(); }

private:
    std::chrono::steady_clock::time_point start_;
};

/// The whole command line, for created_by attributes and logs.
inline std::string command_line(int argc, char** argv)
{
    std::string line;
    for (int i = 0; i < argc; ++i) {
        if (i > 0) {
            line += ' ';
        }
        line += argv[i];
    }
    return line;
}

/// One progress line on stderr, "<tool>: [elapsed s] what", flushed (the tools' progress goes to
/// stderr, so that standard output holds the results and the summary, last).
inline void progress_line(const char* tool, double elapsed_seconds, const std::string& what)
{
    fmt::print(stderr, "{}: [{:8.2f} s] {}\n", tool, elapsed_seconds, what);
    std::fflush(stderr);
}

/// Peak resident set size of this process in bytes (Linux getrusage), 0 if unknown.
std::int64_t peak_rss_bytes();

/// Whether the user reads standard output on a terminal: the tools print their tables there by
/// default (halo-infer --report, halo-partition --report-tables). Under Open MPI's mpirun the
/// question goes to mpirun (a local rank's parent); a rank started by a remote daemon, or by
/// srun, answers no.
bool stdout_is_terminal();

/// Human-readable byte count ("1.5 GiB").
std::string format_bytes(double bytes);

/// Advice when this process may run on one core of several: `allowed` cores in its CPU affinity
/// of `online`, `local_size` ranks on the node (at most half as many as the cores: others stand
/// idle), OMP_NUM_THREADS unset (`omp_set` false); Open MPI binds each rank to one core by
/// default for up to two ranks, and the host phases (read, operators, write) then run their
/// OpenMP threads on that core only. A larger affinity set (a SLURM or container allocation) is
/// taken as chosen. Empty when there is nothing to say.
std::string core_binding_advice(int allowed, int online, int local_size, bool omp_set);
/// The same for this process (sched_getaffinity, the online cores, OMP_NUM_THREADS).
std::string core_binding_advice(int local_size);

/// A file-size limit (ulimit -f, a batch system's RLIMIT_FSIZE) kills a process that writes past
/// it with SIGXFSZ, silently. Ignored, the write fails with EFBIG instead and the writer's error
/// names the file ("File too large"), like a full disk's ENOSPC. Called first in the tools' main.
inline void fail_writes_past_file_size_limit()
{
    std::signal(SIGXFSZ, SIG_IGN);
}

/// Adds how a graph becomes its operator, as halo-partition and halo-bench take it:
/// --symmetrize (`symmetrize_help`) and --no-symmetrize, which exclude each other, --self-loops
/// (keep | drop | add) and --normalize (none | gcn | mean; `normalize_help`).
void add_graph_build_options(CLI::App& app, bool& symmetrize, bool& no_symmetrize,
                             std::string& self_loops, std::string& normalize,
                             const std::string& symmetrize_help, const std::string& normalize_help);

/// Exit status of every tool for a command line that cannot describe a run (an unknown option, a
/// bad value, options that exclude each other); 1 is an error in the inputs or during the run.
inline constexpr int kExitUsage = 2;

/// Parses the command line as every tool does: --help prints the help and gives 0; a parse error
/// prints "<tool>: error: <what> (<tool> --help lists the options)" on stderr and gives
/// kExitUsage (CLI11's own codes, 105 for a bad value and 109 for an unknown option, are not
/// used). Empty when the command line parsed and the tool should go on.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, const char* tool);

/// Runs `body`, printing "<tool>: error: <message>" for exceptions; returns the exit code
/// (0 success, 1 error; bad usage is parse_command_line's).
template <typename Body>
int run_guarded(const char* tool, Body&& body)
{
    try {
        return body();
    } catch (const halo::Error& e) {
        fmt::print(stderr, "{}: error: {}\n", tool, e.message());
    } catch (const std::exception& e) {
        fmt::print(stderr, "{}: error: {}\n", tool, e.what());
    }
    return 1;
}

}  // namespace halo::app
