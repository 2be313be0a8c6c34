// halo-infer: layer-wise GNN inference, one rank per dataset part (mpirun -np P halo-infer ...).
// A thin driver over halo::InferenceJob (include/halo/job/inference_job.hpp): the command line into
// InferOptions, the job, the printing. Exit codes (README "Exit codes"): 0 success; 1 an error
// in the inputs or during the run; 2 a command line that cannot describe a job.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "app_common.hpp"
#include "halo/comm/mpi_world.hpp"
#include "halo/core/layer_type.hpp"
#include "halo/job/infer_options.hpp"
#include "halo/job/inference_job.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// Puts an option in its --help group.
CLI::Option* in(CLI::Option* opt, const char* group)
{
    return opt->group(group);
}

// The dataset and the model.
void add_input_options(CLI::App& app, halo::InferOptions& o)
{
    // input
    in(app.add_option("dataset", o.dataset, "dataset written by halo-partition")->required(),
       "input");
    in(app.add_flag("--random-features", o.random_features,
                    "where the dataset stores no features (halo-partition without --features), "
                    "run on seeded random features of the model's input width; without this flag "
                    "such a dataset is refused before the job starts"),
       "input");
    in(app.add_flag("--int8-features", o.int8_features,
                    "keep the dataset's int8 features (halo-partition --quantize int8) int8 on "
                    "the backend: the first layer exchanges and aggregates them as int8, "
                    "dequantized in the SpMM's gather (exact, or AES with --spmm aes:W)"),
       "input");
    in(app.add_option("--activations", o.activations,
                      "the type the matrices between and inside layers are stored in: fp32, or "
                      "bf16 / fp16 with fp32 sums and the last layer's output fp32 "
                      "(docs/KERNELS.md, \"16-bit activations\")")
           ->capture_default_str(),
       "execution");
    in(app.add_option("--input-transform", o.input_transform,
                      "the first layer's transforms of the dataset's features (x W): auto (as an "
                      "SpMM of the nonzeros where at most 10% of the features are nonzero, e.g. "
                      "bag-of-words rows), sparse (always as an SpMM), dense (always a GEMM)")
           ->check(CLI::IsMember({"auto", "dense", "sparse"}))
           ->capture_default_str(),
       "input");
    in(app.add_option("--eval-nodes", o.eval_nodes,
                      "node ids (one per line) to report accuracy on, against the dataset's "
                      "labels"),
       "input");
    // model
    auto* model = in(app.add_option("--model", o.model, "HDF5 model file"), "model");
    auto* random = in(app.add_option("--random-model", o.random_model,
                                     "random model with these widths, input first, separated by "
                                     "commas or colons (128,128,64 or 128:128:64)"),
                      "model");
    model->excludes(random);
    in(app.add_option("--layer", o.layer,
                      "layer type of --random-model: " + halo::layer_type_list())
           ->check(CLI::IsMember(halo::layer_type_names()))
           ->capture_default_str(),
       "model");
    in(app.add_option("--k", o.k, "entries kept per row by --random-model maxk layers")
           ->check(CLI::Range(1, 1024))
           ->capture_default_str(),
       "model");
    in(app.add_option("--heads", o.heads, "heads of --random-model transformer and gat layers")
           ->check(CLI::Range(1, 1024))
           ->capture_default_str(),
       "model");
    in(app.add_option("--seed", o.seed, "seed of random weights and random input features")
           ->capture_default_str(),
       "model");
}

// Backend, runs, and the halo exchange.
void add_execution_options(CLI::App& app, halo::InferOptions& o)
{
    // execution
    in(app.add_option("--backend", o.backend, "cpu | cuda")
           ->check(CLI::IsMember({"cpu", "cuda"}))
           ->capture_default_str(),
       "execution");
    in(app.add_option("--device", o.device,
                      "CUDA device of every rank (default: local rank modulo the visible "
                      "devices)")
           ->check(CLI::Range(0, 1024)),
       "execution");
    in(app.add_option("--repeat", o.repeat, "run inference this many times, report the median")
           ->check(CLI::Range(1, 10000))
           ->capture_default_str(),
       "execution");
    in(app.add_flag("--cuda-graph", o.cuda_graph,
                    "require the forward pass to be recorded as a CUDA graph on the second "
                    "--repeat run and replayed (the default wherever it applies: one CUDA rank, "
                    "no --save-layers, no --step-timing); an error where it cannot apply"),
       "execution");
    in(app.add_flag("--no-cuda-graph", o.no_cuda_graph, "never record or replay the forward pass"),
       "execution");
    // exchange
    in(app.add_option("--exchange", o.exchange,
                      "halo exchange: nccl (default with --backend cuda) | mpi (the cpu "
                      "backend's; with cuda host-staged or CUDA-aware MPI); append -int8, or "
                      "give int8 alone for the default transport, to send rows as int8 with a "
                      "scale and zero point per row (approximate, ~1/4 of the bytes)")
           ->check(CLI::IsMember({"nccl", "mpi", "int8", "nccl-int8", "mpi-int8"})),
       "exchange");
    in(app.add_option("--nccl-register", o.nccl_register,
                      "NCCL user buffer registration (docs/ENGINE.md). auto: where every rank "
                      "can register, else NCCL's own buffers with a note; on: required; off: "
                      "never")
           ->check(CLI::IsMember({"auto", "on", "off"}))
           ->capture_default_str(),
       "exchange");
    in(app.add_option("--exchange-pieces", o.exchange_pieces,
                      "NCCL: move each exchange in this many pieces, packing the send rows of "
                      "one while the previous one moves (default 2; 1: pack all rows, then send)")
           ->check(CLI::Range(1, 64)),
       "exchange");
    auto* no_overlap =
        in(app.add_flag("--no-overlap", o.no_overlap,
                        "finish the halo exchange before aggregating any row (for measurements)"),
           "exchange");
    in(app.add_option("--overlap", o.overlap,
                      "what gcn, sage and gin layers aggregate while halo rows travel: interior "
                      "(the rows without halo columns), split (every row's local columns, then "
                      "the halo columns added; rounding differs), auto (split on cuda, interior "
                      "on cpu)")
           ->check(CLI::IsMember({"auto", "interior", "split"}))
           ->capture_default_str()
           ->excludes(no_overlap),
       "exchange");
    in(app.add_option("--split-share", o.split_share,
                      "with the split overlap: the share (0 to 1) of the boundary rows' local "
                      "nonzeros that run split; the others run whole after the exchange")
           ->check(CLI::Range(0.0, 1.0))
           ->capture_default_str(),
       "exchange");
}

// Kernel choices and device memory.
void add_kernel_options(CLI::App& app, halo::InferOptions& o)
{
    // kernels
    in(app.add_option(
              "--spmm", o.spmm,
              "SpMM kernel of --backend cuda: " + halo::spmm_kernel_help(halo::spmm_use_infer))
           ->check([](const std::string& v) {
               try {
                   static_cast<void>(halo::parse_spmm_choice(v));
               } catch (const halo::InputError& e) {
                   return e.message();
               }
               return std::string();
           }),
       "kernels");
    in(app.add_option("--attention", o.attention,
                      "kernel of agnn and transformer layers: fused (Fused3S, fp16 tensor cores, "
                      "approximate; on --backend cuda) | exact (fp32; gat always runs exact)")
           ->check(CLI::IsMember({"fused", "exact"}))
           ->capture_default_str(),
       "kernels");
    auto* save_tuning =
        in(app.add_flag("--save-tuning", o.save_tuning,
                        "with --spmm autotune: store the choices in the dataset and fail if that "
                        "fails (they are stored by default anyway where the dataset is "
                        "writable)"),
           "kernels");
    in(app.add_flag("--no-save-tuning", o.no_save_tuning,
                    "do not store the autotuner's choices in the dataset")
           ->excludes(save_tuning),
       "kernels");
    in(app.add_flag("--ignore-kernel-metadata", o.ignore_kernel_metadata,
                    "do not use the kernel metadata stored in the dataset"),
       "kernels");
    in(app.add_flag("--host-operator-values", o.host_values,
                    "build the gcn and mean operators' values on the host and upload them (by "
                    "default the CUDA backend makes them on the device from the scalings)"),
       "kernels");
    in(app.add_flag("--pattern-operators", o.pattern_operators,
                    "cuda: MergePath, row-split and Accel-GCN plans keep the gcn operator as its "
                    "pattern and scalings, no values array (less memory, ~9% slower gcn)"),
       "kernels");
    in(app.add_flag("--l2-hints", o.l2_hints,
                    "cuda: MergePath loads X with L2 evict_first / evict_last hints where X is "
                    "past 32x the L2 (pays where plans run tens of times)"),
       "kernels");
    // memory
    in(app.add_option("--device-memory-limit", o.device_memory_limit,
                      "device memory the engine may use, with units (24GiB, 1.5GB); a larger "
                      "working set runs over row blocks from host memory"),
       "memory");
    in(app.add_flag("--out-of-core", o.out_of_core,
                    "run over row blocks even when the shard fits (needs a limit on the CPU "
                    "backend)"),
       "memory");
    auto* pattern = in(app.add_flag("--stream-operator-pattern", o.stream_pattern,
                                    "out of core: copy a scaled operator's pattern alone and "
                                    "make its values on the device, always"),
                       "memory");
    in(app.add_flag("--stream-operator-values", o.stream_values,
                    "out of core: copy a scaled operator's values with its pattern, always")
           ->excludes(pattern),
       "memory");
}

// The result, checkpoints and what is printed.
void add_output_options(CLI::App& app, halo::InferOptions& o, bool& report, bool& no_report,
                        bool& layer_timing_only)
{
    // output
    in(app.add_option("--out", o.out, "output directory (one piece per rank + manifest.json)")
           ->required(),
       "output");
    in(app.add_flag("--overwrite", o.overwrite,
                    "--out may hold another job's result: remove it first (else refused)"),
       "output");
    in(app.add_flag("--save-layers", o.save_layers, "also store every layer's output"), "output");
    in(app.add_option("--checkpoint", o.checkpoint,
                      "write each finished layer's rows here, per rank and atomically, as the "
                      "first run goes (with checkpoint.json naming the job), so that --resume can "
                      "continue after a failure"),
       "output");
    in(app.add_option("--resume", o.resume,
                      "a --checkpoint directory of this job (same dataset, model, seed and rank "
                      "count; another is refused by name): start after the last layer that every "
                      "rank finished; the result equals an uninterrupted run's"),
       "output");
    in(app.add_flag("--no-sync", o.no_sync,
                    "rename the result pieces into place without flushing them to disk first "
                    "(docs/FORMAT.md, \"Results\")"),
       "output");
    // diagnostics
    in(app.add_flag("-q,--quiet", o.quiet, "no progress lines and no tables: errors only"),
       "diagnostics");
    auto* report_flag = in(app.add_flag("--report", report,
                                        "print the per-layer, memory and phase tables before "
                                        "the summary (default where standard output is a "
                                        "terminal; the manifest holds them always)"),
                           "diagnostics");
    in(app.add_flag("--no-report", no_report, "no tables, only the summary line")
           ->excludes(report_flag),
       "diagnostics");
    auto* layer_only = in(app.add_flag("--layer-timing-only", layer_timing_only,
                                       "synchronize once per layer (the default; kept for "
                                       "scripts that name it)"),
                          "diagnostics");
    in(app.add_flag("--step-timing", o.step_timing,
                    "synchronize after every step of a layer, so that the per-layer table splits "
                    "compute, exchange and waiting")
           ->excludes(layer_only),
       "diagnostics");
    in(app.add_flag("--exchange-barrier", o.exchange_barrier,
                    "wait for the device and every rank before each halo exchange (for "
                    "measurements, docs/ENGINE.md)"),
       "diagnostics");
    in(app.add_flag("--sync-layers", o.sync_layers,
                    "barrier before every layer, so per-layer times exclude the ranks' arrival "
                    "skew (for measurements)"),
       "diagnostics");
}

// halo-infer's options, bound to `o` (and --report / --no-report / --layer-timing-only to the
// flags), in --help groups.
void add_options(CLI::App& app, halo::InferOptions& o, bool& report, bool& no_report,
                 bool& layer_timing_only)
{
    add_input_options(app, o);
    add_execution_options(app, o);
    add_kernel_options(app, o);
    add_output_options(app, o, report, no_report, layer_timing_only);
}

// A failure of this rank after start: one line naming the rank, then the job ends on every rank
// with status 1 (InferenceJob::fail); MPI_Abort only where a rank did not answer within 20 s.
int end_failed(halo::InferenceJob& job, const halo::MpiWorld& world, const std::string& message)
{
    // After another rank's announcement this error is a consequence of that failure, which that
    // rank reported; announcing it all the same keeps every rank alive until all know.
    if (!job.peer_failed()) {
        fmt::print(stderr, "rank {}: halo-infer: error: {}\n", world.rank(), message);
        std::fflush(stderr);
    }
    switch (job.fail()) {
    case halo::InferenceJob::FailureEnd::alone:
        return kExitError;
    case halo::InferenceJob::FailureEnd::told:
        std::fflush(stdout);
        std::_Exit(kExitError);  // the others end without MPI_Finalize: no rank may wait in it
    case halo::InferenceJob::FailureEnd::unanswered:
        break;
    }
    world.abort("halo-infer: a rank did not answer the failure above within 20 s (or MPI gives "
                "no MPI_THREAD_MULTIPLE): ending the job with MPI_Abort");
}

}  // namespace

int main(int argc, char** argv)
{
    const auto started = std::chrono::steady_clock::now();
    halo::app::fail_writes_past_file_size_limit();
    halo::InferOptions o;
    bool report = false;
    bool no_report = false;
    bool layer_timing_only = false;
    CLI::App app{"halo-infer: distributed layer-wise GNN inference, one rank per dataset part"};
    app.footer(
        "Exit status: 0 success; 1 an error in the inputs or during the run (one line on "
        "stderr); 2 a command line that cannot describe a job.");
    add_options(app, o, report, no_report, layer_timing_only);
    // Options are parsed and checked before MPI starts; what failed is reported once, by rank 0,
    // after MPI_Init, and every rank then finalizes cleanly (no MPI_Abort).
    std::optional<CLI::ParseError> parse_error;
    std::string usage_error;
    try {
        app.parse(argc, argv);
        for (auto& c : o.random_model) {
            c = c == ':' ? ',' : c;  // ':' survives sbatch --export, which splits on commas
        }
        halo::validate(o);
    } catch (const CLI::ParseError& e) {
        parse_error = e;
    } catch (const halo::Error& e) {
        usage_error = e.message();
    }
    std::unique_ptr<halo::MpiWorld> world;
    double mpi_seconds = 0.0;
    try {
        world = std::make_unique<halo::MpiWorld>(&argc, &argv, MPI_THREAD_MULTIPLE);
        mpi_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    } catch (const std::exception& e) {
        fmt::print(stderr, "halo-infer: cannot start MPI: {}\n", e.what());
        return kExitError;
    }
    const bool lead = world->rank() == 0;
    if (parse_error) {
        if (parse_error->get_exit_code() == 0) {  // --help
            return lead ? app.exit(*parse_error) : 0;
        }
        if (lead) {
            fmt::print(stderr, "halo-infer: error: {} (halo-infer --help lists the options)\n",
                       parse_error->what());
        }
        return kExitUsage;
    }
    if (!usage_error.empty()) {
        if (lead) {
            fmt::print(stderr, "halo-infer: error: {}\n", usage_error);
        }
        return kExitUsage;
    }
    o.report = !o.quiet && !no_report && (report || (lead && halo::app::stdout_is_terminal()));
    const auto progress = [](const std::string& line) {
        fmt::print(stderr, "halo-infer: {}\n", line);
        std::fflush(stderr);
    };
    halo::InferenceJob job(*world, o, halo::app::command_line(argc, argv), started, mpi_seconds,
                           progress);
    // Another rank failed and said so: this one ends silently with status 1 (see end_failed).
    job.on_peer_failure([] { std::_Exit(kExitError); });
    try {
        job.start();
    } catch (const halo::JobRefused& e) {
        if (e.reporter()) {
            fmt::print(stderr, "halo-infer: error: {}\n", e.message());
        }
        return e.usage() ? kExitUsage : kExitError;
    } catch (const std::exception& e) {  // MPI itself failed: no collective may follow
        world->abort(fmt::format("halo-infer: error: {}", e.what()));
    }
    if (lead && !o.quiet) {
        if (const auto advice = halo::app::core_binding_advice(world->local_size());
            !advice.empty()) {
            fmt::print(stderr, "halo-infer: note: {}\n", advice);
        }
    }
    try {
        const auto summary = job.run();
        if (lead && !o.quiet) {
            if (o.report) {
                fmt::print("{}\n", summary.report);
            }
            fmt::print(
                "{} nodes, {} rank{}, {} backend, model {} ({} layers), {} activations: "
                "forward {:.3f} ms (median of {}), total {:.2f} s; results in {}/\n",
                summary.nodes, summary.ranks, summary.ranks == 1 ? "" : "s", summary.backend,
                summary.model, summary.layers, summary.activations,
                summary.forward_seconds * 1e3, summary.repeat,
                summary.total_seconds, summary.out);
        }
        return 0;
    } catch (const halo::Error& e) {
        return end_failed(job, *world, e.message());
    } catch (const std::exception& e) {
        return end_failed(job, *world, e.what());
    }
}
