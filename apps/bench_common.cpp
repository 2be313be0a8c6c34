// Shared pieces of the halo-bench modes (bench_common.hpp).
#include "bench_common.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <numeric>
#include <random>
#include <unordered_set>

#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/partition/row_order.hpp"

#ifndef HALO_GIT_COMMIT
#define HALO_GIT_COMMIT "unknown"
#endif

namespace halo::bench_app {
namespace {

// The copy that measures the bandwidth: large against any L2, short enough to repeat.
constexpr std::size_t kCopyBytes = std::size_t{2} << 30;
constexpr int kCopyWarmup = 3;
constexpr int kCopyRuns = 20;
constexpr std::size_t kHostCopyBytes = std::size_t{1} << 30;  // pinned vs pageable
constexpr int kHostCopyRuns = 5;

bool is_generator_spec(const std::string& input)
{
    return input.rfind("rmat:", 0) == 0 || input.rfind("er:", 0) == 0;
}

cuda::ContextOptions context_options(int device)
{
    const int devices = cuda::device_count();
    if (devices == 0) {
        HALO_THROW(CudaError, "no CUDA device visible to this process");
    }
    if (device < 0 || device >= devices) {
        HALO_THROW(InputError, "--device ", device, ": only ", devices, " CUDA device(s) visible");
    }
    cuda::ContextOptions options;
    options.device = device;
    return options;
}

}  // namespace

Stats summarize(std::vector<double> values)
{
    HALO_EXPECTS(!values.empty(), "no values to summarize");
    std::sort(values.begin(), values.end());
    const auto n = values.size();
    Stats s;
    s.median = n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
    s.min = values.front();
    s.max = values.back();
    return s;
}

double geomean(const std::vector<double>& values)
{
    if (values.empty()) {
        return 0;
    }
    double log_sum = 0;
    for (const auto x : values) {
        log_sum += std::log(x);
    }
    return std::exp(log_sum / static_cast<double>(values.size()));
}

void add_kernel_run_options(CLI::App& cmd, KernelRunOptions& o, const std::string& seed_help)
{
    cmd.add_option("--warmup", o.warmup, "untimed launches per measurement")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    cmd.add_option("--runs", o.runs, "timed launches per measurement (median reported)")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    cmd.add_option("--check-rows", o.check_rows,
                   "rows checked on graphs of more than 200000 rows (a seeded sample; 0: all)")
        ->capture_default_str();
    cmd.add_option("--seed", o.seed, seed_help)->capture_default_str();
    cmd.add_option("--device", o.device, "CUDA device index")->capture_default_str();
    cmd.add_option("--json", o.json, "also write the results as JSON to this file");
}

std::size_t aligned_floats(std::int64_t count)
{
    constexpr std::size_t align = 256 / sizeof(float);
    return (static_cast<std::size_t>(count) + align - 1) / align * align;
}

std::int64_t wanted_sets(double set_bytes, std::int64_t l2_bytes)
{
    return std::max<std::int64_t>(
        1, static_cast<std::int64_t>(std::ceil(2.0 * static_cast<double>(l2_bytes) / set_bytes)));
}

std::int64_t fitting_sets(std::size_t stride_bytes, std::int64_t wanted)
{
    const auto free = cuda::bench::free_device_memory();
    const std::size_t fit = free > kReserveBytes ? (free - kReserveBytes) / stride_bytes : 0;
    if (fit == 0) {
        HALO_THROW(CudaError, "one buffer set of ", app::format_bytes(double(stride_bytes)),
                   " does not fit: ", app::format_bytes(double(free)), " free, ",
                   app::format_bytes(double(kReserveBytes)), " kept in reserve");
    }
    return std::min<std::int64_t>(wanted, static_cast<std::int64_t>(fit));
}

std::vector<float> gather_rows(DenseView<const float> m, const std::vector<std::int64_t>& rows,
                               cudaStream_t stream)
{
    std::vector<float> out(rows.size() * static_cast<std::size_t>(m.cols));
    cuda::bench::gather_rows_to_host(m, rows.data(), static_cast<std::int64_t>(rows.size()),
                                     out.data(), stream);
    return out;
}

Json stats_json(const Stats& s)
{
    return {{"median", s.median}, {"min", s.min}, {"max", s.max}};
}

void write_json(const std::string& path, const Json& doc)
{
    write_file_atomic(path, doc.dump(2) + "\n");
    fmt::print("wrote {}\n", path);
}

std::string utc_now_iso()
{
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm utc{};
    gmtime_r(&now, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

const char* git_commit()
{
    return HALO_GIT_COMMIT;
}

double gib(double bytes)
{
    return bytes / double(std::size_t{1} << 30);
}

void add_graph_options(CLI::App& cmd, GraphOptions& o, bool graph_required)
{
    auto* graph = cmd.add_option("--graph", o.graph,
                                 "graph file (edge list, Matrix Market, .hcsr; gzip or plain) or a "
                                 "generator: rmat:SCALE:EF[:SEED], er:N:M[:SEED]");
    if (graph_required) {
        graph->required();
    }
    app::add_graph_build_options(cmd, o.symmetrize, o.no_symmetrize, o.self_loops, o.normalize,
                                 "use A | A^T (the default for generated graphs)",
                                 "none (pattern, or the file's weights) | gcn | mean");
    cmd.add_option("--row-order", o.row_order,
                   "renumber the graph's nodes before timing (P A P^T, every kernel and cuSPARSE "
                   "alike): global (as built) | rcm (reverse Cuthill-McKee) | rabbit (Rabbit "
                   "order's communities); docs/PARTITION.md")
        ->check(CLI::IsMember({"global", "rcm", "rabbit"}))
        ->capture_default_str();
    cmd.add_option("--shuffle-ids", o.shuffle_ids,
                   "renumber the nodes by a random permutation of this seed first (before "
                   "--row-order): the same graph with ids that carry no locality")
        ->check(CLI::NonNegativeNumber);
}

void check_before_device(const KernelRunOptions& run, const GraphOptions& graph)
{
    if (is_generator_spec(graph.graph)) {
        (void)parse_graph_spec(graph.graph);
    } else {
        (void)detect_graph_format(graph.graph);  // IoError naming the file it cannot read
    }
    (void)parse_self_loops(graph.self_loops);
    (void)parse_normalization(graph.normalize);
    (void)parse_row_order(graph.row_order);
    if (run.device < 0) {
        HALO_THROW(InputError, "--device ", run.device,
                   ": a CUDA device index must not be negative");
    }
    if (run.check_rows < 0) {
        HALO_THROW(InputError, "--check-rows ", run.check_rows, ": must be 0 (all) or positive");
    }
    if (!run.json.empty()) {
        const std::filesystem::path json(run.json);
        const auto dir = json.has_parent_path() ? json.parent_path() : std::filesystem::path(".");
        std::error_code ec;
        if (!std::filesystem::is_directory(dir, ec)) {
            HALO_THROW(IoError, "--json ", run.json, ": directory ", dir.string(),
                       " does not exist");
        }
        if (std::filesystem::is_directory(json, ec)) {
            HALO_THROW(IoError, "--json ", run.json, ": is a directory");
        }
    }
}

BenchGraph load_graph(const GraphOptions& o)
{
    BenchGraph g;
    g.generated = is_generator_spec(o.graph);
    EdgeList edges;
    if (g.generated) {
        const auto spec = parse_graph_spec(o.graph);
        g.source = to_string(spec);
        fmt::print("generating {}\n", g.source);
        std::fflush(stdout);
        edges = generate(spec);
    } else {
        g.source = o.graph;
        fmt::print("reading {} ({})\n", o.graph, to_string(detect_graph_format(o.graph)));
        std::fflush(stdout);
        edges = read_graph(o.graph);
    }
    // Generated edge lists are directed draws; GNN adjacencies are undirected, so generated graphs
    // are symmetrized unless asked not to be. Files are taken as they are unless asked.
    g.symmetrized = o.symmetrize || (g.generated && !o.no_symmetrize);
    BuildOptions build;
    build.symmetrize = g.symmetrized;
    build.self_loops = parse_self_loops(o.self_loops);
    build.normalization = parse_normalization(o.normalize);
    fmt::print("building the CSR: symmetrize {}{}, self-loops {}, normalize {}\n",
               g.symmetrized ? "yes" : "no",
               g.generated && !o.no_symmetrize && !o.symmetrize
                   ? " (default for generated graphs; --no-symmetrize turns it off)"
                   : "",
               o.self_loops, o.normalize);
    g.csr = build_csr(edges, build);
    if (g.csr.num_rows == 0 || g.csr.nnz() == 0) {
        HALO_THROW(InputError, g.source, ": the graph has ", g.csr.num_rows, " rows and ",
                   g.csr.nnz(), " nonzeros; nothing to benchmark");
    }
    if (o.shuffle_ids >= 0) {
        std::vector<std::int64_t> keys(static_cast<std::size_t>(g.csr.num_rows));
        std::iota(keys.begin(), keys.end(), std::int64_t{0});
        std::shuffle(keys.begin(), keys.end(),
                     std::mt19937_64(static_cast<std::uint64_t>(o.shuffle_ids)));
        g.csr = permute_by_keys(g.csr, keys);
        fmt::print("renumbered the nodes by a random permutation (seed {})\n", o.shuffle_ids);
    }
    if (const auto order = parse_row_order(o.row_order); order != RowOrder::global) {
        const auto start = std::chrono::steady_clock::now();
        const auto keys =
            row_order_keys(g.csr, std::vector<std::int32_t>(g.csr.num_rows, 0), 1, order);
        g.csr = permute_by_keys(g.csr, keys);
        fmt::print("renumbered the nodes in {} order: {:.2f} s\n", o.row_order,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return g;
}

Json graph_json(const BenchGraph& g, const GraphOptions& o)
{
    const auto& a = g.csr;
    const double avg_degree =
        a.num_rows > 0 ? static_cast<double>(a.nnz()) / static_cast<double>(a.num_rows) : 0.0;
    return {{"source", g.source},
            {"rows", a.num_rows},
            {"cols", a.num_cols},
            {"nnz", a.nnz()},
            {"avg_degree", avg_degree},
            {"max_degree", max_row_nnz(a.view())},
            {"values", a.has_values() ? "float32" : "pattern"},
            {"symmetrized", g.symmetrized},
            {"self_loops", o.self_loops},
            {"normalize", o.normalize},
            {"row_order", o.row_order},
            {"shuffle_ids", o.shuffle_ids}};
}

CheckSet make_check_set(const Csr& a, std::int64_t sample_rows, std::uint64_t seed)
{
    CheckSet cs;
    if (a.num_rows <= kFullCheckMaxRows || sample_rows <= 0 || sample_rows >= a.num_rows) {
        cs.rows.resize(static_cast<std::size_t>(a.num_rows));
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            cs.rows[static_cast<std::size_t>(i)] = i;
        }
    } else {
        cs.sampled = true;
        std::mt19937_64 rng(seed);
        std::uniform_int_distribution<std::int64_t> pick(0, a.num_rows - 1);
        std::unordered_set<std::int64_t> chosen;
        while (static_cast<std::int64_t>(chosen.size()) < sample_rows) {
            chosen.insert(pick(rng));
        }
        std::int64_t longest = 0;
        for (std::int64_t i = 1; i < a.num_rows; ++i) {
            longest = a.row_nnz(i) > a.row_nnz(longest) ? i : longest;
        }
        chosen.insert({0, a.num_rows - 1, longest});
        cs.rows.assign(chosen.begin(), chosen.end());
        std::sort(cs.rows.begin(), cs.rows.end());
    }
    std::vector<local_id> position(static_cast<std::size_t>(a.num_cols), -1);
    cs.sub.num_rows = static_cast<std::int64_t>(cs.rows.size());
    cs.sub.indptr.assign(1, 0);
    for (const auto i : cs.rows) {
        for (auto p = a.indptr[i]; p < a.indptr[i + 1]; ++p) {
            const auto c = a.indices[p];
            if (position[c] < 0) {
                position[c] = static_cast<local_id>(cs.columns.size());
                cs.columns.push_back(c);
            }
            cs.sub.indices.push_back(position[c]);
            if (a.has_values()) {
                cs.sub.values.push_back(a.values[p]);
            }
        }
        cs.sub.indptr.push_back(static_cast<offset_t>(cs.sub.indices.size()));
    }
    cs.sub.num_cols = static_cast<std::int64_t>(cs.columns.size());
    return cs;
}

BenchDevice::BenchDevice(int device)
    : ctx(context_options(device)), info(cuda::device_info(ctx.device()))
{
    cuda::bench::set_device(ctx.device());
    fmt::print("device {}: {} (sm_{}{}, {} SMs, {:.1f} GiB, L2 {:.1f} MiB)\n", info.index,
               info.name, info.compute_major, info.compute_minor, info.multiprocessors,
               gib(static_cast<double>(info.global_memory_bytes)),
               info.l2_cache_bytes / double(1 << 20));
    copy = cuda::bench::measure_copy_bandwidth(ctx.compute_stream(), kCopyBytes, kCopyWarmup,
                                               kCopyRuns);
    fmt::print(
        "device-to-device copy of {:.2f} GiB: median {:.3f} ms (min {:.3f}, max {:.3f}, {} "
        "runs) = {:.1f} GB/s read + written\n",
        gib(static_cast<double>(copy.copy_bytes)), copy.median_ms, copy.min_ms, copy.max_ms,
        copy.runs, copy_gb_per_s());
    host_copy = cuda::bench::measure_host_copy_bandwidth(ctx.compute_stream(), kHostCopyBytes,
                                                         kCopyWarmup, kHostCopyRuns);
    fmt::print(
        "host copies of {:.2f} GiB (median of {}): pinned {:.1f} GB/s host to device, {:.1f} GB/s "
        "device to host; pageable {:.1f} and {:.1f} GB/s\n",
        gib(static_cast<double>(host_copy.copy_bytes)), host_copy.runs,
        host_copy.pinned_h2d_gb_per_s, host_copy.pinned_d2h_gb_per_s,
        host_copy.pageable_h2d_gb_per_s, host_copy.pageable_d2h_gb_per_s);
    std::fflush(stdout);
}

Json BenchDevice::device_json() const
{
    return {{"index", info.index},
            {"name", info.name},
            {"compute_capability", fmt::format("{}.{}", info.compute_major, info.compute_minor)},
            {"multiprocessors", info.multiprocessors},
            {"memory_bytes", info.global_memory_bytes},
            {"l2_cache_bytes", info.l2_cache_bytes}};
}

Json BenchDevice::copy_json() const
{
    return {{"copy_bytes", copy.copy_bytes},
            {"runs", copy.runs},
            {"median_ms", copy.median_ms},
            {"min_ms", copy.min_ms},
            {"max_ms", copy.max_ms},
            {"gb_per_s", copy_gb_per_s()},
            {"host",
             {{"copy_bytes", host_copy.copy_bytes},
              {"runs", host_copy.runs},
              {"pinned_h2d_gb_per_s", host_copy.pinned_h2d_gb_per_s},
              {"pinned_d2h_gb_per_s", host_copy.pinned_d2h_gb_per_s},
              {"pageable_h2d_gb_per_s", host_copy.pageable_h2d_gb_per_s},
              {"pageable_d2h_gb_per_s", host_copy.pageable_d2h_gb_per_s}}}};
}

}  // namespace halo::bench_app
