#include "app_common.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

namespace halo::app {

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, const char* tool)
{
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) {  // --help, --help-all
            return app.exit(e);
        }
        fmt::print(stderr, "{}: error: {} ({} --help lists the options)\n", tool, e.what(), tool);
        return kExitUsage;
    }
    return std::nullopt;
}

std::int64_t peak_rss_bytes()
{
    rusage usage{};
    if (getrusage(RUSAGE_SELF, &usage) != 0) {
        return 0;
    }
    return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string core_binding_advice(int allowed, int online, int local_size, bool omp_set)
{
    // One core is what mpirun's default binding gives; a larger set (a SLURM or container
    // allocation) is the user's choice.
    if (omp_set || allowed != 1 || online <= 1 || local_size > online / 2) {
        return {};
    }
    return "this rank may use 1 of the node's " + std::to_string(online) +
           " cores (its CPU affinity; mpirun binds each rank to a core by default), so the host "
           "phases (dataset read, operators, result write) run on one core: launch with `mpirun "
           "--bind-to none` or give each rank its cores (`--map-by slot:PE=N`, SLURM "
           "`--cpus-per-task`), or set OMP_NUM_THREADS to keep this binding";
}

std::string core_binding_advice(int local_size)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        return {};
    }
    const auto online = sysconf(_SC_NPROCESSORS_ONLN);
    return core_binding_advice(CPU_COUNT(&set), static_cast<int>(online), local_size,
                               std::getenv("OMP_NUM_THREADS") != nullptr);
}

bool stdout_is_terminal()
{
    if (::isatty(STDOUT_FILENO) == 0) {
        return false;
    }
    if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) {
        return true;
    }
    // Open MPI gives each local rank a pseudo-terminal whatever mpirun's output is: ask mpirun,
    // the parent process of a local rank.
    const auto parent = fmt::format("/proc/{}/fd/1", static_cast<long>(::getppid()));
    const int fd = ::open(parent.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    const bool terminal = ::isatty(fd) != 0;
    ::close(fd);
    return terminal;
}

std::string format_bytes(double bytes)
{
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        ++u;
    }
    return fmt::format("{:.{}f} {}", bytes, u == 0 ? 0 : 1, units[u]);
}

void add_graph_build_options(CLI::App& app, bool& symmetrize, bool& no_symmetrize,
                             std::string& self_loops, std::string& normalize,
                             const std::string& symmetrize_help, const std::string& normalize_help)
{
    auto* sym = app.add_flag("--symmetrize", symmetrize, symmetrize_help);
    app.add_flag("--no-symmetrize", no_symmetrize, "keep a generated graph directed")
        ->excludes(sym);
    app.add_option("--self-loops", self_loops, "keep | drop | add")
        ->check(CLI::IsMember({"keep", "drop", "add"}))
        ->capture_default_str();
    app.add_option("--normalize", normalize, normalize_help)
        ->check(CLI::IsMember({"none", "gcn", "mean"}))
        ->capture_default_str();
}

}  // namespace halo::app
