// halo-bench --e2e (bench_common.hpp): a whole inference as halo-infer runs it: the graph written
// as a one-part dataset into a temporary directory (removed at exit), then halo::InferenceJob on
// one rank with InferOptions that halo::validate checked (a random model, random features,
// --repeat = warm-up + runs), so that both tools take the same defaults (the replay of the
// forward pass as a CUDA graph, one synchronization per layer, the overlap) and the same phases
// (read, check, plan, tune, run, write). From the job's per-run times (JobSummary::runs), after
// the warm-up: per layer wall time, SpMM, dense, exchange and waiting (zero on one part), and the
// forward pass; medians. What the defaults do not measure is printed as n/a: per-layer times
// need --no-cuda-graph, SpMM and dense --step-timing.
#include <fmt/core.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "bench_common.hpp"
#include "bench_report.hpp"
#include "halo/comm/mpi_world.hpp"
#include "halo/core/model.hpp"
#include "halo/core/shard.hpp"
#include "halo/job/infer_options.hpp"
#include "halo/job/inference_job.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo/store/store.hpp"

namespace halo::bench_app {

namespace {

// A directory of this run under the temporary directory, removed with what it holds when the run
// ends, whichever way it ends.
class TempDir {
public:
    TempDir()
    {
        auto pattern = (std::filesystem::temp_directory_path() / "halo-bench-e2e-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            HALO_THROW(IoError, "cannot create a temporary directory ", pattern, ": ",
                       std::generic_category().message(errno));
        }
        path_ = pattern;
    }
    ~TempDir()
    {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

// The graph as a one-part dataset (docs/FORMAT.md), as halo-partition --parts 1 writes it.
void write_one_part_dataset(const std::filesystem::path& path, const Csr& a, const GraphOptions& g,
                            const std::string& command)
{
    const std::vector<std::int32_t> owner(a.num_rows, 0);
    DatasetInfo info;
    info.num_nodes = a.num_rows;
    info.num_nonzeros = a.nnz();
    info.num_parts = 1;
    info.partitioner = "none (one part)";
    info.normalization = g.normalize;
    info.self_loops = g.self_loops;
    info.created_by = "halo-bench --e2e: " + command;
    DatasetWriter writer(path, info, owner);
    writer.write_part(build_shard(a, owner, 1, 0));
    writer.commit();
}

// The job's options: halo-infer's defaults but for what halo-bench --e2e sets.
InferOptions job_options(const KernelRunOptions& o, const E2eOptions& e2e)
{
    InferOptions job;
    job.backend = e2e.backend;
    if (job.cuda()) {
        job.device = o.device;
    }
    job.random_model = e2e.model_dims;
    job.layer = e2e.layer;
    job.seed = o.seed;
    job.random_features = true;
    job.repeat = o.warmup + o.runs;
    job.step_timing = e2e.step_timing;
    job.no_cuda_graph = e2e.no_cuda_graph;
    job.activations = e2e.activations;
    job.quiet = true;
    job.dataset = "dataset.h5";  // replaced by the temporary one; validate wants a name
    job.out = "out";
    validate(job);
    return job;
}

struct Medians {
    std::vector<Stats> total, spmm, dense, exchange, waiting;
    Stats forward;
    bool layer_measured = true;  // no timed run replayed the forward pass
};

// Medians over the runs after the warm-up.
Medians medians(const JobSummary& summary, int warmup, std::size_t layers)
{
    std::vector<std::vector<double>> total(layers), spmm(layers), dense(layers), exch(layers),
        wait(layers);
    std::vector<double> forward;
    Medians m;
    for (std::size_t r = static_cast<std::size_t>(warmup); r < summary.runs.size(); ++r) {
        const auto& run = summary.runs[r];
        forward.push_back(run.forward_seconds * 1e3);
        if (run.replayed || run.layers.size() != layers) {
            m.layer_measured = false;
            continue;
        }
        for (std::size_t l = 0; l < layers; ++l) {
            const auto& t = run.layers[l];
            total[l].push_back(t.total * 1e3);
            spmm[l].push_back(t.spmm * 1e3);
            dense[l].push_back(t.dense * 1e3);
            exch[l].push_back(t.exchange * 1e3);
            wait[l].push_back(t.waiting * 1e3);
        }
    }
    HALO_EXPECTS(!forward.empty(), "halo-bench --e2e: the job ran no timed run");
    m.forward = summarize(forward);
    for (std::size_t l = 0; l < layers; ++l) {
        const auto med = [&](const std::vector<double>& v) {
            return v.empty() ? Stats{} : summarize(v);
        };
        m.total.push_back(med(total[l]));
        m.spmm.push_back(med(spmm[l]));
        m.dense.push_back(med(dense[l]));
        m.exchange.push_back(med(exch[l]));
        m.waiting.push_back(med(wait[l]));
    }
    return m;
}

// The job on one rank; its refusal (JobRefused) or failure as an error of halo-bench.
JobSummary run_job(const InferOptions& options, const std::string& command)
{
    MpiWorld world(nullptr, nullptr, MPI_THREAD_MULTIPLE);
    InferenceJob job(world, options, command, std::chrono::steady_clock::now(), 0.0, {});
    try {
        job.start();
    } catch (const JobRefused& e) {
        HALO_THROW(InputError, e.message());
    }
    try {
        return job.run();
    } catch (...) {
        job.abandon();
        throw;
    }
}

}  // namespace

int run_e2e(const KernelRunOptions& o, const E2eOptions& e2e, const GraphOptions& g,
            const std::string& date, const std::string& command)
{
    // Before the device and the graph: the options, the model's widths.
    check_before_device(o, g);
    const auto dims = parse_dims(e2e.model_dims);
    auto options = job_options(o, e2e);
    std::optional<BenchDevice> device;
    if (options.cuda()) {
        device.emplace(o.device);  // its name and copy bandwidth for the record
    }
    const auto graph = load_graph(g);
    const auto& a = graph.csr;
    fmt::print("graph {}: {} rows, {} nonzeros ({})\n", graph.source, a.num_rows, a.nnz(),
               a.has_values() ? "float32 values" : "pattern, all ones");
    const TempDir dir;
    write_one_part_dataset(dir.path() / "dataset.h5", a, g, command);
    options.dataset = (dir.path() / "dataset.h5").string();
    options.out = (dir.path() / "out").string();
    const auto summary = run_job(options, command);
    const auto model = random_model(parse_layer_type(e2e.layer), dims, o.seed);
    const auto layers = model.layers.size();
    const auto m = medians(summary, o.warmup, layers);
    const bool replayed = !summary.runs.empty() && summary.runs.back().replayed;
    const bool layer_measured = m.layer_measured;
    const bool step_measured = layer_measured && options.step_timing;
    const auto cell = [](double v, bool measured) {
        return measured ? fmt::format("{:>10.3f}", v) : fmt::format("{:>10}", "n/a");
    };
    const auto value = [](double v, bool measured) { return measured ? Json(v) : Json(nullptr); };
    fmt::print(
        "\ne2e: random {} model {} on {} ({} rows, {} nonzeros), {} backend, {} activations, "
        "one part, halo::InferenceJob; medians of {} runs after {} warm-up; {}\n",
        e2e.layer, e2e.model_dims, graph.source, a.num_rows, a.nnz(), options.backend,
        e2e.activations, o.runs,
        o.warmup,
        replayed              ? "replayed as a CUDA graph (--no-cuda-graph times each layer)"
        : options.step_timing ? "synchronized after every step (--step-timing)"
                              : "one synchronization per layer (--step-timing splits SpMM and "
                                "dense)");
    fmt::print("{:>5} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "layer", "width", "total ms",
               "spmm ms", "dense ms", "exch ms", "wait ms");
    Json records = Json::array();
    for (std::size_t l = 0; l < layers; ++l) {
        const auto& layer = model.layers[l];
        const auto t = m.total[l].median;
        const auto sp = m.spmm[l].median;
        const auto de = m.dense[l].median;
        const auto ex = m.exchange[l].median;
        const auto wa = m.waiting[l].median;
        fmt::print("{:>5} {:>5}->{:<5} {} {} {} {} {}\n", l, layer.in_dim, layer.out_dim,
                   cell(t, layer_measured), cell(sp, step_measured), cell(de, step_measured),
                   cell(ex, step_measured), cell(wa, step_measured));
        records.push_back({{"layer", l},
                           {"in_dim", layer.in_dim},
                           {"out_dim", layer.out_dim},
                           {"aggregate_first", layer.aggregate_first()},
                           {"total_ms", value(t, layer_measured)},
                           {"spmm_ms", value(sp, step_measured)},
                           {"dense_ms", value(de, step_measured)},
                           {"exchange_ms", value(ex, step_measured)},
                           {"waiting_ms", value(wa, step_measured)}});
    }
    fmt::print("forward: median {:.3f} ms (min {:.3f}, max {:.3f}){}{}\n", m.forward.median,
               m.forward.min, m.forward.max, summary.memory_line.empty() ? "" : "; ",
               summary.memory_line);
    if (!o.json.empty()) {
        auto settings = run_settings(o);
        settings["no_cuda_graph"] = options.no_cuda_graph;
        write_report(o.json,
                     {"halo-bench --e2e", date, command, device ? &*device : nullptr, &graph, &g},
                     std::move(settings),
                     {{"backend", options.backend},
                      {"activations", e2e.activations},
                      {"model", {{"layer", e2e.layer}, {"dims", e2e.model_dims}, {"seed", o.seed}}},
                      {"replayed", replayed},
                      {"step_timing", options.step_timing},
                      {"forward_ms", stats_json(m.forward)},
                      {"layers", std::move(records)}});
    }
    return 0;
}

}  // namespace halo::bench_app
