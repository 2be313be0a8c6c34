#include "app_common.hpp"

#include <sys/resource.h>

#include <CLI/CLI.hpp>

namespace halo::app {

std::int64_t peak_rss_bytes()
{
    rusage usage{};
    if (getrusage(RUSAGE_SELF, &usage) != 0) {
        return 0;
    }
    return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
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
