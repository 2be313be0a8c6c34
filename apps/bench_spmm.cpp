// halo-bench's SpMM mode (its top-level options; apps/halo_bench.cpp): the benchmark every SpMM
// kernel of HaloGNN is judged with (bench/README.md defines every number it prints).
//
// One graph, one GPU. It measures the device-to-device copy bandwidth first (the roofline), then
// for each dense width d and each kernel: checks the kernel against the CPU reference on a
// NaN-poisoned output, warms up, times `runs` launches one by one with CUDA events while rotating
// among enough input/output buffer sets that consecutive runs cannot be served from L2, and
// checks again on the last buffer set. cuSPARSE always runs as the baseline of the same run.
// Exit code: 0 every check passed, 1 an error stopped the run, 3 a kernel computed wrong values
// (FAILED) or could not run (ERROR).
#include "bench_spmm.hpp"

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app_common.hpp"
#include "bench_common.hpp"
#include "bench_util.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/io.hpp"
#include "halo/core/layer_type.hpp"
#include "halo/core/model.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/device.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"
#include "halo/kernels/cuda/mergepath.hpp"
#include "halo/kernels/cuda/rowsplit.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/gather_model.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo::bench_app {
namespace {

namespace bench = halo::cuda::bench;
using halo::cuda::Context;
// The mode's pieces (bench_spmm.hpp); these hide bench_app's CheckSet and make_check_set.
using spmm::BufferSets;
using spmm::CheckSet;
using spmm::GatherModel;
using spmm::Kernel;
using spmm::KernelEntry;
using spmm::kBaseline;
using spmm::make_check_set;
using spmm::make_reference;
using spmm::Record;
using spmm::Reference;

// ---------------------------------------------------------------------------------------------
// Kernels by name: the SpMM kernel registry's halo-bench kernels
// (halo/kernels_host/spmm_registry.hpp), each with the factory that builds its plan (preprocessing
// included) for widths up to max_dim, and the merge-path cost sweep's.

const std::vector<KernelEntry>& bench_kernels()
{
    static const std::vector<KernelEntry> registry = [] {
        std::vector<KernelEntry> out;
        for (const auto* k : halo::spmm_kernels(halo::spmm_use_bench)) {
            out.push_back(
                {k->name, k->description,
                 [k](Context& ctx, const halo::Csr& a, std::int64_t max_dim, bool l2_hints) {
                     static const halo::SpmmPlanHints none;
                     halo::SpmmPlanRequest request{max_dim, none};
                     request.l2_hints = l2_hints;
                     return k->make(ctx, a, request);
                 }});
        }
        return out;
    }();
    return registry;
}


struct Options {
    GraphOptions graph;
    std::vector<std::int64_t> dims{32, 64, 128, 256};
    std::vector<std::string> kernels{kBaseline};
    // X's element type for every kernel but the baseline (cuSPARSE reads fp32 always).
    std::string feature_type = "fp32";
    // Extra "mergepath(cost=N)" kernels: the merge-path cost sweep.
    std::vector<std::int64_t> mergepath_costs;
    // Extra "rowchunk(length=N)" kernels: the chunked row-split's unit-length sweep.
    std::vector<std::int64_t> rowchunk_lengths;
    KernelRunOptions run;
    bool e2e = false;
    E2eOptions e2e_model;
    // Caches of the gather model in MiB (empty: the device's L2; a single 0: no model).
    std::vector<double> gather_cache_mib;
    // SpmmPlanRequest::l2_hints of the registry's kernels (auto, autotune, the MergePath ones).
    bool l2_hints = false;
};

// ---------------------------------------------------------------------------------------------

// The merge-path cost sweep: one "mergepath(cost=N)" kernel per cost, appended to `extra` (which
// must keep its elements in place: the chosen list points into it).
void add_mergepath_costs(const std::vector<std::int64_t>& costs, std::deque<KernelEntry>& extra,
                         std::vector<const KernelEntry*>& chosen)
{
    for (const auto cost : costs) {
        if (cost < 1) {
            HALO_THROW(halo::InputError, "--mergepath-costs: cost ", cost, " must be at least 1");
        }
        const auto name = fmt::format("mergepath(cost={})", cost);
        for (const auto* c : chosen) {
            if (c->name == name) {
                HALO_THROW(halo::InputError, "--mergepath-costs: cost ", cost, " given twice");
            }
        }
        extra.push_back(
            {name, fmt::format("MergePath-SpMM, {} merge items per segment at every width", cost),
             [cost](Context& ctx, const halo::Csr& a, std::int64_t max_dim, bool) {
                 halo::cuda::MergePathOptions mo;
                 mo.cost = cost;
                 return halo::cuda::make_mergepath_spmm_plan(ctx, a, max_dim, mo);
             }});
        chosen.push_back(&extra.back());
    }
}

// The unit-length sweep of the chunked row-split: one "rowchunk(length=N)" kernel per length,
// appended like add_mergepath_costs's.
void add_rowchunk_lengths(const std::vector<std::int64_t>& lengths, std::deque<KernelEntry>& extra,
                          std::vector<const KernelEntry*>& chosen)
{
    for (const auto length : lengths) {
        if (length < 1) {
            HALO_THROW(halo::InputError, "--rowchunk-lengths: length ", length,
                       " must be at least 1");
        }
        const auto name = fmt::format("rowchunk(length={})", length);
        for (const auto* c : chosen) {
            if (c->name == name) {
                HALO_THROW(halo::InputError, "--rowchunk-lengths: length ", length, " given twice");
            }
        }
        extra.push_back(
            {name, fmt::format("chunked row-split, rows longer than {} nonzeros cut", length),
             [length](Context& ctx, const halo::Csr& a, std::int64_t max_dim, bool) {
                 return halo::cuda::make_rowchunk_spmm_plan(ctx, a, max_dim, {.length = length});
             }});
        chosen.push_back(&extra.back());
    }
}

std::vector<const KernelEntry*> resolve_kernels(const std::vector<std::string>& names)
{
    std::vector<const KernelEntry*> chosen;
    auto find = [](const std::string& name) -> const KernelEntry* {
        for (const auto& entry : bench_kernels()) {
            if (entry.name == name) {
                return &entry;
            }
        }
        return nullptr;
    };
    const auto* baseline = find(kBaseline);
    HALO_EXPECTS(baseline != nullptr, "the baseline ", kBaseline, " is registered");
    chosen.push_back(baseline);
    bool baseline_asked = false;
    for (const auto& name : names) {
        const auto* entry = find(name);
        if (entry == nullptr) {
            HALO_THROW(halo::InputError, "--kernels: unknown kernel '", name,
                       "' (known: ", halo::spmm_kernel_names(halo::spmm_use_bench), ")");
        }
        if (entry == baseline) {
            baseline_asked = true;
        } else if (std::find(chosen.begin(), chosen.end(), entry) == chosen.end()) {
            chosen.push_back(entry);
        }
    }
    if (!baseline_asked) {
        fmt::print("{} runs as the baseline of every comparison\n", kBaseline);
    }
    return chosen;
}

void check_dims(const std::vector<std::int64_t>& dims)
{
    if (dims.empty()) {
        HALO_THROW(halo::InputError, "--dims: no width given");
    }
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] < 1 || dims[i] > (std::int64_t{1} << 16)) {
            HALO_THROW(halo::InputError, "--dims: width ", dims[i], " outside [1, 65536]");
        }
        if (std::find(dims.begin(), dims.begin() + i, dims[i]) != dims.begin() + i) {
            HALO_THROW(halo::InputError, "--dims: width ", dims[i], " given twice");
        }
    }
}

// The inputs of width d: distinct for each (seed, d), so no width reuses another's values.
std::uint64_t x_seed(std::uint64_t seed, std::int64_t dim)
{
    return seed * 0x100000001b3ULL + static_cast<std::uint64_t>(dim);
}

// Each kernel's plan (its preprocessing), once, for the widest d; a kernel whose plan fails is
// kept with its error (REFUSED where the plan refused the operator), the baseline's failure thrown.
std::vector<Kernel> make_plans(Context& ctx, const halo::Csr& a,
                               const std::vector<const KernelEntry*>& kernel_entries,
                               halo::FeatureType feature_type, std::int64_t max_dim, bool l2_hints)
{
    std::vector<Kernel> kernels;
    for (const auto* entry : kernel_entries) {
        Kernel k;
        k.entry = entry;
        k.x_type = entry->name == kBaseline ? halo::FeatureType::fp32 : feature_type;
        halo::app::Stopwatch setup;
        try {
            k.plan = entry->make(ctx, a, max_dim, l2_hints);
            ctx.synchronize();
            k.setup_ms = setup.seconds() * 1e3;
            fmt::print("plan {} ({}): {} ready in {:.1f} ms\n", entry->name, entry->description,
                       k.plan->algorithm(), k.setup_ms);
        } catch (const halo::Error& e) {
            if (entry->name == kBaseline) {
                throw;  // no baseline, no benchmark
            }
            k.plan.reset();
            k.error = e.message();
            k.refused = dynamic_cast<const halo::InputError*>(&e) != nullptr;
            fmt::print("plan {}: {}: {}\n", entry->name, k.refused ? "REFUSED" : "ERROR", k.error);
        }
        kernels.push_back(std::move(k));
    }
    return kernels;
}

// The X and Y buffer sets of width `dim` (X seeded, converted to --feature-type where asked),
// as many as exceed twice the L2 where they fit; none where not even one fits, each kernel's
// record then SKIPPED (appended to `records`).
std::optional<BufferSets> make_buffer_sets(const Options& o, const halo::Csr& a, std::int64_t dim,
                                           halo::FeatureType feature_type, std::int64_t l2_bytes,
                                           const std::vector<Kernel>& kernels,
                                           std::vector<Record>& records, cudaStream_t stream)
{
    const auto set_bytes = (a.num_cols + a.num_rows) * dim * std::int64_t{sizeof(float)};
    const bool lowp = feature_type != halo::FeatureType::fp32;
    // Enough sets that what the smallest reader reads (X in its type and Y) exceeds twice L2.
    const auto read_bytes =
        a.num_cols * dim * static_cast<std::int64_t>(halo::feature_bytes(feature_type)) +
        a.num_rows * dim * std::int64_t{sizeof(float)};
    const auto wanted = wanted_sets(static_cast<double>(read_bytes), l2_bytes);
    BufferSets buffers;
    buffers.x_stride = aligned_floats(a.num_cols * dim);
    buffers.y_stride = aligned_floats(a.num_rows * dim);
    if (lowp) {
        buffers.lowp_type = feature_type;
        buffers.h_stride = 2 * aligned_floats((a.num_cols * dim + 1) / 2);
    }
    const auto stride_bytes =
        (buffers.x_stride + buffers.y_stride + buffers.h_stride / 2) * sizeof(float);
    const auto free = bench::free_device_memory();
    const std::size_t fit = free > kReserveBytes ? (free - kReserveBytes) / stride_bytes : 0;
    const auto sets =
        static_cast<std::int64_t>(std::min(static_cast<std::size_t>(wanted), fit));
    if (sets == 0) {
        const auto why = fmt::format(
            "one X/Y set needs {}, {} of device memory free and {} of it kept in reserve",
            halo::app::format_bytes(static_cast<double>(set_bytes)),
            halo::app::format_bytes(static_cast<double>(free)),
            halo::app::format_bytes(static_cast<double>(kReserveBytes)));
        fmt::print("d = {}: SKIPPED: {}\n", dim, why);
        for (const auto& k : kernels) {
            Record rec;
            rec.kernel = k.entry->name;
            rec.dim = dim;
            rec.status = "SKIPPED";
            rec.message = why;
            records.push_back(std::move(rec));
        }
        return std::nullopt;
    }
    fmt::print("d = {}: {} buffer set(s) of {:.1f} MiB (X and Y){}\n", dim, sets,
               set_bytes / double(1 << 20),
               sets < wanted ? fmt::format(", fewer than the {} that exceed twice L2: "
                                           "timings may include L2 reuse",
                                           wanted)
                             : "");
    std::fflush(stdout);

    buffers.count = sets;
    buffers.x = bench::DeviceArray(buffers.x_stride * sets);
    buffers.y = bench::DeviceArray(buffers.y_stride * sets);
    // One seeded stream of values over all sets: every set holds different inputs.
    bench::fill_uniform(buffers.x.data(), buffers.x.size(), x_seed(o.run.seed, dim), -1.0f,
                        1.0f, stream);
    bench::fill_value(buffers.y.data(), buffers.y.size(),
                      std::numeric_limits<float>::quiet_NaN(), stream);
    if (lowp) {
        // X converted once per set on the device; the timed runs read only the converted X.
        buffers.h = bench::DeviceArray(buffers.h_stride / 2 * sets);
        for (std::int64_t set = 0; set < sets; ++set) {
            halo::cuda::convert_features(stream, {buffers.x_set(set), a.num_cols, dim, dim},
                                         feature_type, buffers.h_set(set), dim);
        }
    }
    bench::synchronize(stream);
    return buffers;
}

// Every kernel at width `dim` on `buffers`: the references of the first and last set, then each
// kernel measured (or its plan's error recorded) and its speed-up over the baseline; appends to
// `records`.
void measure_kernels(const Options& o, const halo::Csr& a, const CheckSet& cs, std::int64_t dim,
                     halo::FeatureType feature_type, const BufferSets& buffers,
                     std::vector<Kernel>& kernels, double copy_gb_per_s,
                     const GatherModel& gather, std::vector<Record>& records, cudaStream_t stream)
{
    const auto sets = buffers.count;
    const bool lowp = feature_type != halo::FeatureType::fp32;
    const auto set_bytes = (a.num_cols + a.num_rows) * dim * std::int64_t{sizeof(float)};
    // The references of the first and the last set (the two that checks use), computed
    // before any kernel runs and shared by all of them: on fp32 X for the baseline, on X
    // rounded to --feature-type for the others.
    std::vector<Reference> refs;
    std::vector<Reference> lowp_refs;
    std::vector<std::int64_t> checked_sets{0};
    if (sets > 1) {
        checked_sets.push_back(sets - 1);
    }
    for (const auto set : checked_sets) {
        refs.push_back(make_reference(cs, buffers.x_set(set), a.num_cols, dim, stream));
        if (lowp) {
            lowp_refs.push_back(
                make_reference(cs, buffers.x_set(set), a.num_cols, dim, stream, feature_type));
        }
    }

    const auto first = records.size();
    for (auto& k : kernels) {
        Record rec;
        rec.kernel = k.entry->name;
        rec.feature_type = halo::to_string(k.x_type);
        rec.dim = dim;
        rec.sets = sets;
        rec.set_bytes = set_bytes;
        rec.setup_ms = k.setup_ms;
        if (!k.plan) {
            rec.status = k.refused ? "SKIPPED" : "ERROR";
            rec.message = k.refused ? "plan refused the operator: " + k.error : k.error;
        } else if (k.x_type != halo::FeatureType::fp32 &&
                   halo::cuda::as_feature_plan(*k.plan) == nullptr) {
            rec.status = "SKIPPED";
            rec.message = "reads fp32 features only";
        } else {
            try {
                measure(k, rec, o.run, a, cs, buffers,
                        k.x_type == halo::FeatureType::fp32 ? refs : lowp_refs, copy_gb_per_s,
                        gather, stream);
                // After the runs: a plan that decides per width (autotune, auto) names the
                // kernel it ran at this width.
                rec.algorithm = k.plan->algorithm();
            } catch (const halo::Error& e) {
                if (k.entry->name == kBaseline) {
                    throw;
                }
                rec.status = "ERROR";
                rec.message = e.message();
            }
        }
        print_row(measured_row(rec));
        records.push_back(std::move(rec));
    }
    const auto& base = records[first];  // the baseline runs first
    for (auto i = first; i < records.size(); ++i) {
        auto& r = records[i];
        if (r.status != "ERROR" && r.status != "SKIPPED" && base.status != "ERROR") {
            r.speedup = base.ms.median / r.ms.median;
        }
    }
}

// The JSON record: the report's header, then settings and records.
void write_report(const Options& o, const ReportHeader& header, const CheckSet& cs,
                  halo::FeatureType feature_type, const std::vector<Record>& records)
{
    auto settings = run_settings(o.run, &cs);
    settings["baseline"] = kBaseline;
    settings["feature_type"] = halo::to_string(feature_type);
    settings["baseline_feature_type"] = "fp32";
    settings["mergepath_costs"] = o.mergepath_costs;
    settings["rowchunk_lengths"] = o.rowchunk_lengths;
    Json rows = Json::array();
    for (const auto& r : records) {
        rows.push_back(row_json(measured_row(r)));
    }
    bench_app::write_report(o.run.json, header, std::move(settings),
                            {{"records", std::move(rows)}});
}

int run_spmm(const Options& o, const std::string& command)
{
    const auto date = utc_now_iso();
    check_dims(o.dims);
    auto kernel_entries = resolve_kernels(o.kernels);
    std::deque<KernelEntry> sweep_entries;
    add_mergepath_costs(o.mergepath_costs, sweep_entries, kernel_entries);
    add_rowchunk_lengths(o.rowchunk_lengths, sweep_entries, kernel_entries);
    const auto feature_type = halo::parse_feature_type(o.feature_type);

    if (o.e2e) {  // a job of its own, which opens the device only on the CUDA backend
        return run_e2e(o.run, o.e2e_model, o.graph, date, command);
    }
    check_before_device(o.run, o.graph);

    // 0. The device and its copy bandwidth (the roofline every kernel is held against), before a
    // possibly long graph build.
    BenchDevice device(o.run.device);
    auto& ctx = device.ctx;
    const auto stream = ctx.compute_stream();
    const auto& info = device.info;
    const double copy_gb_per_s = device.copy_gb_per_s();

    // 1. The graph.
    halo::app::Stopwatch load_time;
    const auto graph = load_graph(o.graph);
    const auto& a = graph.csr;
    const auto max_degree = halo::max_row_nnz(a.view());
    const double avg_degree = static_cast<double>(a.nnz()) / static_cast<double>(a.num_rows);
    fmt::print(
        "graph {}: {} rows, {} columns, {} nonzeros ({}), degree avg {:.2f} max {} "
        "({:.1f} s)\n",
        graph.source, a.num_rows, a.num_cols, a.nnz(),
        a.has_values() ? "float32 values" : "pattern, all ones", avg_degree, max_degree,
        load_time.seconds());

    // 2. The gather model, for the X types the kernels read.
    std::vector<halo::FeatureType> x_types{halo::FeatureType::fp32};
    if (feature_type != halo::FeatureType::fp32) {
        x_types.push_back(feature_type);
    }
    const GatherModel gather(a, o.gather_cache_mib, info.l2_cache_bytes, o.dims, x_types);
    std::fflush(stdout);

    // 3. Plans: each kernel's preprocessing, once, for the widest d.
    const auto max_dim = *std::max_element(o.dims.begin(), o.dims.end());
    auto kernels = make_plans(ctx, a, kernel_entries, feature_type, max_dim, o.l2_hints);

    // 4. The rows every check compares.
    const auto cs = make_check_set(a, o.run.check_rows, o.run.seed);
    if (cs.sampled) {
        fmt::print(
            "checking {} of {} rows: a seeded sample of {} plus the first, the last and "
            "the longest row\n",
            cs.rows.size(), a.num_rows, o.run.check_rows);
    } else {
        fmt::print("checking all {} rows\n", a.num_rows);
    }
    std::fflush(stdout);

    // 5. Every width, every kernel.
    std::vector<Record> records;
    for (const auto dim : o.dims) {
        const auto buffers = make_buffer_sets(o, a, dim, feature_type, info.l2_cache_bytes,
                                              kernels, records, stream);
        if (buffers) {
            measure_kernels(o, a, cs, dim, feature_type, *buffers, kernels, copy_gb_per_s, gather,
                            records, stream);
        }
    }

    // 6. The table and the JSON file.
    print_table(records);
    int failures = 0;
    for (const auto& r : records) {
        if (r.status == "FAILED" || r.status == "ERROR") {
            ++failures;
        }
    }
    fmt::print("\n{}: {} of {} measurements failed\n", failures ? "FAILED" : "ok", failures,
               records.size());

    if (!o.run.json.empty()) {
        write_report(o, {"halo-bench", date, command, &device, &graph, &o.graph}, cs, feature_type,
                     records);
    }
    return failures ? 3 : 0;
}

}  // namespace

void add_spmm_mode(CLI::App& app, const std::string& command, std::function<int()>& run)
{
    auto o = std::make_shared<Options>();
    // A subcommand brings its own options, so --graph is required only when no subcommand is
    // given (checked by `run`).
    add_graph_options(app, o->graph, false);
    app.add_option("--dims", o->dims, "dense widths d, comma-separated")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--kernels", o->kernels,
                   "kernels to time, comma-separated (known: " +
                       halo::spmm_kernel_names(halo::spmm_use_bench) + "); " + kBaseline +
                       " always runs as the baseline")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--feature-type,--x-type", o->feature_type,
                   "element type of X for every kernel but the baseline (fp32 | fp16 | bf16; "
                   "converted once on the device, fp32 accumulation and output; " +
                       std::string(kBaseline) + " reads fp32 always)")
        ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
        ->capture_default_str();
    app.add_option("--mergepath-costs", o->mergepath_costs,
                   "merge-path cost sweep: adds a kernel mergepath(cost=N) per cost, "
                   "comma-separated")
        ->delimiter(',');
    app.add_option("--rowchunk-lengths", o->rowchunk_lengths,
                   "chunked row-split unit-length sweep: adds a kernel rowchunk(length=N) per "
                   "length, comma-separated")
        ->delimiter(',');
    app.add_option("--gather-cache-mib", o->gather_cache_mib,
                   "caches of the gather model in MiB, comma-separated (default: the device's L2; "
                   "0: no model); the first gives the %gather column (bench/README.md)")
        ->delimiter(',');
    app.add_flag("--l2-hints", o->l2_hints,
                 "auto, autotune and the MergePath kernels load X with L2 hints where X is past "
                 "32x the L2 (as halo-infer --l2-hints)");
    app.add_option("--warmup", o->run.warmup, "untimed launches per kernel and width")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    app.add_option("--runs", o->run.runs, "timed launches per kernel and width (median reported)")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    app.add_option("--check-rows", o->run.check_rows,
                   "rows checked on graphs of more than 200000 rows (a seeded sample; 0: all)")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40))
        ->capture_default_str();
    app.add_option("--seed", o->run.seed, "seed of the dense inputs and the checked-row sample")
        ->capture_default_str();
    app.add_option("--device", o->run.device, "CUDA device index")->capture_default_str();
    app.add_option("--json", o->run.json, "also write the results as JSON to this file");
    app.add_flag("--e2e", o->e2e,
                 "time a whole inference instead (halo-infer's job on one rank, one part): per "
                 "layer wall, SpMM, dense, exchange and waiting time");
    app.add_option("--backend", o->e2e_model.backend, "with --e2e: cuda | cpu")
        ->check(CLI::IsMember({"cuda", "cpu"}))
        ->capture_default_str();
    app.add_option("--model-dims", o->e2e_model.model_dims,
                   "with --e2e: widths of the random model")
        ->capture_default_str();
    app.add_option("--activations", o->e2e_model.activations,
                   "with --e2e: halo-infer --activations (fp32 | bf16 | fp16)")
        ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
        ->capture_default_str();
    app.add_option("--layer", o->e2e_model.layer, "with --e2e: " + halo::layer_type_list())
        ->check(CLI::IsMember(halo::layer_type_names()))
        ->capture_default_str();
    app.add_flag("--step-timing", o->e2e_model.step_timing,
                 "with --e2e: synchronize after every step, so that each layer's SpMM and dense "
                 "times are measured (as halo-infer --step-timing; no CUDA graph then)");
    app.add_flag("--no-cuda-graph", o->e2e_model.no_cuda_graph,
                 "with --e2e: never replay the forward pass as a CUDA graph (as halo-infer "
                 "--no-cuda-graph: per-layer times measured, SpMM and dense not split)");
    run = [o, &command] {
        if (o->graph.graph.empty()) {
            fmt::print(stderr, "halo-bench: --graph is required (or name a mode; see --help)\n");
            return 2;
        }
        return app::run_guarded("halo-bench", [&] { return run_spmm(*o, command); });
    };
}

}  // namespace halo::bench_app
