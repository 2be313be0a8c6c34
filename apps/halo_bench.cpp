// halo-bench: the benchmark harness of HaloGNN's kernels (docs/ARCHITECTURE.md "Tests and
// measurements"; bench/README.md defines every number it prints). Its top-level options are the
// SpMM mode (apps/bench_spmm.cpp, with --e2e: apps/bench_e2e.cpp); other kernel families are
// subcommands, each in a file of its own (apps/bench_<mode>.cpp).
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "app_common.hpp"
#include "bench_common.hpp"

int main(int argc, char** argv)
{
    CLI::App app{
        "halo-bench: time SpMM kernels on one GPU against cuSPARSE and the measured copy "
        "bandwidth, each checked against the CPU reference. Other kernel families are "
        "subcommands (halo-bench <mode> --help)"};
    const auto command = halo::app::command_line(argc, argv);
    std::function<int()> run_spmm;
    halo::bench_app::add_spmm_mode(app, command, run_spmm);  // apps/bench_spmm.cpp

    // Subcommands (apps/bench_<mode>.cpp) set the exit code from their callbacks.
    int mode_exit_code = 0;
    app.require_subcommand(0, 1);
    halo::bench_app::add_maxk_command(app, command, mode_exit_code);  // apps/bench_maxk.cpp
    halo::bench_app::add_attention_command(app, command, mode_exit_code);  // apps/bench_attention.cpp
    halo::bench_app::add_aes_command(app, command, mode_exit_code);  // apps/bench_aes.cpp
    halo::bench_app::add_load_command(app, command, mode_exit_code);  // apps/bench_load.cpp
    if (const auto exit_code = halo::app::parse_command_line(app, argc, argv, "halo-bench")) {
        return *exit_code;
    }
    if (!app.get_subcommands().empty()) {
        return mode_exit_code;
    }
    return run_spmm();
}
