// Pieces that every halo-bench mode shares (the SpMM mode takes the top-level options,
// apps/bench_spmm.cpp; other kernel families add a subcommand in a file of their own,
// apps/bench_<mode>.cpp): the graph options and
// loader, median/min/max statistics, the device banner and the measured copy bandwidth that every
// roofline figure divides by, and the provenance (date, commit) that every JSON result records
// (the report itself: bench_report.hpp; bench/README.md).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "app_common.hpp"
#include "bench_util.hpp"
#include "halo/core/csr.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/device.hpp"

namespace halo::bench_app {

using Json = nlohmann::ordered_json;

struct Stats {
    double median = 0;
    double min = 0;
    double max = 0;
};

/// Median (mean of the two middle values for an even count), min and max; throws
/// halo::LogicError on an empty list.
Stats summarize(std::vector<double> values);

/// Geometric mean; 0 for an empty list.
double geomean(const std::vector<double>& values);

/// The timing, checking and output options of the kernel modes (spmm, attention, maxk, aes).
struct KernelRunOptions {
    int warmup = 10;
    int runs = 100;
    std::int64_t check_rows = 2000;
    std::uint64_t seed = 1;
    int device = 0;
    std::string json;
};

/// Adds --warmup, --runs, --check-rows, --seed (what it seeds: `seed_help`), --device and --json.
void add_kernel_run_options(CLI::App& cmd, KernelRunOptions& o, const std::string& seed_help);

/// `o.runs` launches timed with CUDA events on `stream` after `o.warmup` untimed ones;
/// launch(s) runs on input set s, rotated over `sets` (so inputs larger than L2 are not reused).
/// Checks the launches' errors; median, min and max in ms.
template <typename Launch>
Stats time_launches(const KernelRunOptions& o, cudaStream_t stream, std::int64_t sets,
                    Launch&& launch)
{
    for (int w = 0; w < o.warmup; ++w) {
        launch(w % sets);
    }
    cuda::bench::EventTimer timer(stream, o.runs);
    for (int r = 0; r < o.runs; ++r) {
        timer.start(r);
        launch((o.warmup + r) % sets);
        timer.stop(r);
    }
    cuda::bench::check_last_error();
    return summarize(timer.elapsed_ms());
}

/// A timing with the number of input sets it rotated over (for the JSON record).
struct Timing {
    Stats ms;
    std::int64_t sets = 0;
};

template <typename Launch>
Timing time_launch_sets(const KernelRunOptions& o, cudaStream_t stream, std::int64_t sets,
                        Launch&& launch)
{
    return {time_launches(o, stream, sets, std::forward<Launch>(launch)), sets};
}

/// Device memory that sizing the buffer sets leaves free (plans, workspaces, the CUDA runtime).
inline constexpr std::size_t kReserveBytes = std::size_t{512} << 20;

/// `count` floats rounded up to a multiple of 256 bytes, so every buffer of a set stays aligned.
std::size_t aligned_floats(std::int64_t count);

/// Sets needed so that one round of them (`set_bytes` each) exceeds twice the L2 cache.
std::int64_t wanted_sets(double set_bytes, std::int64_t l2_bytes);

/// `wanted` sets of `stride_bytes`, or fewer where free device memory less kReserveBytes holds
/// fewer; throws halo::CudaError when not even one fits.
std::int64_t fitting_sets(std::size_t stride_bytes, std::int64_t wanted);

/// Rows `rows` of `m`, packed on the host.
std::vector<float> gather_rows(DenseView<const float> m, const std::vector<std::int64_t>& rows,
                               cudaStream_t stream);

/// {"median", "min", "max"} of a timing, in that order.
Json stats_json(const Stats& s);

/// Writes `doc` (indented, one trailing newline) to `path` atomically and says so.
void write_json(const std::string& path, const Json& doc);

/// A subcommand `name` whose callback runs `run(*options, command)` under app::run_guarded and
/// leaves its exit code in `exit_code`; the mode adds its options to the returned subcommand,
/// bound to *options.
template <typename Options>
CLI::App* add_mode(CLI::App& app, const std::string& name, const std::string& description,
                   const std::shared_ptr<Options>& options,
                   int (*run)(const Options&, const std::string&), const std::string& command,
                   int& exit_code)
{
    auto* cmd = app.add_subcommand(name, description);
    cmd->callback([options, run, tool = "halo-bench " + name, &command, &exit_code] {
        exit_code = app::run_guarded(tool.c_str(), [&] { return run(*options, command); });
    });
    return cmd;
}

/// "2026-11-21T10:00:00Z".
std::string utc_now_iso();

/// The commit halo-bench was built from (CMake's HALO_GIT_COMMIT), "unknown" without one.
const char* git_commit();

double gib(double bytes);

/// How the benchmarked graph is read or generated and turned into a CSR operator.
struct GraphOptions {
    std::string graph;
    bool symmetrize = false;
    bool no_symmetrize = false;
    std::string self_loops = "keep";
    std::string normalize = "none";
    std::string row_order =
        "global";  // renumbering of the whole graph (halo/partition/row_order.hpp)
    std::int64_t shuffle_ids = -1;     // >= 0: seed of a random renumbering before row_order
};

/// Adds --graph (required when `graph_required`), --symmetrize / --no-symmetrize, --self-loops
/// --normalize, --row-order and --shuffle-ids to `cmd`.
void add_graph_options(CLI::App& cmd, GraphOptions& o, bool graph_required = true);

struct BenchGraph {
    Csr csr;
    std::string source;  // the file name, or the generator spec as to_string() spells it
    bool generated = false;
    bool symmetrized = false;
};

/// Reads or generates the graph and builds its CSR (generated graphs are symmetrized unless
/// --no-symmetrize), printing progress lines. Throws halo::InputError for an empty graph.
BenchGraph load_graph(const GraphOptions& o);

/// The checks of a kernel mode's options that need neither the device nor the graph's content,
/// made before either is opened (RELIABILITY.md "Errors before the job starts"): the generator
/// spec parses or the graph file can be read (its format detected), --self-loops and --normalize
/// name known values, --device is not negative, --check-rows is not negative, and the --json
/// file's directory exists. Throws halo::InputError or halo::IoError naming the option or file.
void check_before_device(const KernelRunOptions& run, const GraphOptions& graph);

/// The graph's JSON description: source, rows, cols, nnz, degrees, values, build options.
Json graph_json(const BenchGraph& g, const GraphOptions& o);

/// Graphs up to this many rows are checked on every row; larger ones on a seeded sample.
inline constexpr std::int64_t kFullCheckMaxRows = 200000;

/// The rows a correctness check compares, as a CSR of their own whose columns are renumbered to
/// the columns those rows read (each row keeps its nonzeros in order, values included), so a
/// reference needs only those rows of X on the host.
struct CheckSet {
    std::vector<std::int64_t> rows;     // rows of A that are compared, ascending
    std::vector<std::int64_t> columns;  // columns of A (rows of X) they read, in sub's numbering
    Csr sub;                            // rows.size() x columns.size()
    bool sampled = false;
};

/// Every row when A has at most kFullCheckMaxRows rows or `sample_rows` is 0 or covers them all;
/// otherwise `sample_rows` rows drawn from `seed`, plus the first, the last and the longest row
/// (where split-row schedules go wrong).
CheckSet make_check_set(const Csr& a, std::int64_t sample_rows, std::uint64_t seed);

/// The device of a benchmark: its Context (device checked against the visible ones), its
/// properties and the device-to-device copy bandwidth measured once at start.
struct BenchDevice {
    explicit BenchDevice(int device);

    cuda::Context ctx;
    cuda::DeviceInfo info;
    cuda::bench::CopyBandwidth copy;
    cuda::bench::HostCopyBandwidth host_copy;  // pinned and pageable, each way

    double copy_gb_per_s() const noexcept { return copy.median_gb_per_s(); }
    /// {"index", "name", "compute_capability", "multiprocessors", "memory_bytes",
    ///  "l2_cache_bytes"}.
    Json device_json() const;
    /// {"copy_bytes", "runs", "median_ms", "min_ms", "max_ms", "gb_per_s", "host": {"copy_bytes",
    ///  "runs", "pinned_h2d_gb_per_s", "pinned_d2h_gb_per_s", "pageable_h2d_gb_per_s",
    ///  "pageable_d2h_gb_per_s"}}.
    Json copy_json() const;
};

/// The SpMM mode (apps/bench_spmm.cpp): its options at halo-bench's top level, and in `run` what
/// runs it when no subcommand is named (returning the exit code: 2 without --graph).
void add_spmm_mode(CLI::App& app, const std::string& command, std::function<int()>& run);

/// The random model of halo-bench --e2e, and the job options it changes from halo-infer's
/// defaults (halo::InferOptions: the engine takes the same policy defaults as halo-infer).
struct E2eOptions {
    std::string backend = "cuda";  // halo-infer --backend: cuda | cpu
    std::string model_dims = "128,128,64";
    std::string layer = "gcn";  // a name of the layer table (halo/core/layer_types.def)
    bool step_timing = false;   // halo-infer --step-timing: SpMM and dense per layer
    bool no_cuda_graph = false; // halo-infer --no-cuda-graph: per-layer times without it
    std::string activations = "fp32";  // halo-infer --activations: fp32 | bf16 | fp16
};

/// halo-bench --e2e (apps/bench_e2e.cpp): the graph of `g` written as a one-part dataset into a
/// temporary directory and the random model run over it by halo::InferenceJob on one rank (as
/// halo-infer runs it, with its defaults; the device opened only on the CUDA backend),
/// `o.warmup` + `o.runs` times; prints and writes to o.json (when set) the median over the last
/// `o.runs` per layer of wall, SpMM, dense, exchange and waiting time. Returns the exit code.
int run_e2e(const KernelRunOptions& o, const E2eOptions& e2e, const GraphOptions& g,
            const std::string& date, const std::string& command);

/// The subcommands (apps/bench_<mode>.cpp). `command` is halo-bench's whole command line, which
/// each records in its JSON; the callback sets `exit_code` (0 ok, 1 error, 3 a failed check).
void add_maxk_command(CLI::App& app, const std::string& command, int& exit_code);
void add_attention_command(CLI::App& app, const std::string& command, int& exit_code);
void add_aes_command(CLI::App& app, const std::string& command, int& exit_code);
// Feature load time, file to device, fp32 vs int8 (apps/bench_load.cpp).
void add_load_command(CLI::App& app, const std::string& command, int& exit_code);

}  // namespace halo::bench_app
