// The job's reports after its runs: per-layer times and device memory reduced over ranks, the
// manifest, rank 0's closing notes (src/job/job_state.hpp).
#include <fmt/core.h>

#include <filesystem>
#include <iterator>

#include "halo/core/io.hpp"
#include "halo/core/memory_report.hpp"
#include "halo/core/result.hpp"
#include "halo/mpi/mpi_error.hpp"
#include "job_state.hpp"
#ifdef HALO_HAVE_CUDA
#include "halo/kernels/cuda/context.hpp"
#endif

namespace halo::job {

Stat reduce_stat(MPI_Comm comm, double value, int size)
{
    struct {
        double value;
        int rank;
    } mine{value, 0}, top{0.0, 0};
    HALO_MPI_TRY(MPI_Comm_rank(comm, &mine.rank));
    HALO_MPI_TRY(MPI_Allreduce(&mine, &top, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm));
    Stat s;
    s.max = top.value;
    s.max_rank = top.rank;
    HALO_MPI_TRY(MPI_Allreduce(&value, &s.mean, 1, MPI_DOUBLE, MPI_SUM, comm));
    s.mean /= size;
    return s;
}

nlohmann::json report_layers(State& job, const Engine& engine, Reports& reports)
{
    const auto comm = job.world.comm();
    const auto size = job.size;
    const bool step_timing = job.o.step_timing;
    const auto& model = job.model;
    auto out = std::back_inserter(job.report);
    nlohmann::json layers_json = nlohmann::json::array();
    fmt::format_to(out, "{:>5} {:>6} {:>10} | {:>21} | {:>21} | {:>21} | {:>11} | {:>9}\n", "layer",
                   "type", "width", "total ms (max/mean)", "compute ms (max/mean)",
                   "exchange ms (max/mean)", "waiting max", "skew max");
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
        const auto& t = engine.timings()[l];
        const auto tot = reduce_stat(comm, t.total * 1e3, size);
        const auto comp = reduce_stat(comm, t.compute * 1e3, size);
        const auto exch = reduce_stat(comm, t.exchange * 1e3, size);
        const auto wait = reduce_stat(comm, t.waiting * 1e3, size);
        const auto skew = reduce_stat(comm, t.skew * 1e3, size);
        const auto bytes = reduce_stat(comm, static_cast<double>(t.exchanged_bytes), size);
        const auto fp32_bytes = reduce_stat(comm, static_cast<double>(t.fp32_exchange_bytes), size);
        reports.exchanged_total += bytes.mean * size;
        reports.fp32_total += fp32_bytes.mean * size;
        const auto& layer = model.layers[l];
        // Only what was measured: per-step splits need --step-timing, and a replayed graph has
        // no per-layer times at all.
        const auto ms = [](const Stat& v, bool measured) {
            return measured ? fmt::format("{:>10.3f} {:>10.3f}", v.max, v.mean)
                            : fmt::format("{:>10} {:>10}", "n/a", "n/a");
        };
        const bool layer_measured = !engine.replayed();
        const bool step_measured = layer_measured && step_timing;
        const auto max_ms = [&](const Stat& v) {
            return step_measured ? fmt::format("{:.3f}", v.max) : std::string("n/a");
        };
        fmt::format_to(out, "{:>5} {:>6} {:>4}->{:<5} | {} | {} | {} | {:>11} | {:>9}\n", l,
                       to_string(layer.type), layer.in_dim, layer.out_dim, ms(tot, layer_measured),
                       ms(comp, step_measured), ms(exch, step_measured), max_ms(wait),
                       max_ms(skew));
        layers_json.push_back(
            {{"layer", l},
             {"timing", engine.replayed() ? "replayed (not measured per layer)"
                        : step_timing     ? "per step"
                                          : "per layer (compute and exchange not split)"},
             {"type", to_string(layer.type)},
             {"in_dim", layer.in_dim},
             {"out_dim", layer.out_dim},
             {"aggregate_first", layer.aggregate_first()},
             {"total_ms", {{"max", tot.max}, {"mean", tot.mean}, {"max_rank", tot.max_rank}}},
             {"compute_ms", {{"max", comp.max}, {"mean", comp.mean}, {"max_rank", comp.max_rank}}},
             {"exchange_ms", {{"max", exch.max}, {"mean", exch.mean}}},
             {"waiting_ms", {{"max", wait.max}, {"mean", wait.mean}}},
             {"skew_ms", {{"max", skew.max}, {"mean", skew.mean}}},
             {"exchanged_bytes_per_rank", {{"max", bytes.max}, {"mean", bytes.mean}}},
             {"fp32_exchange_bytes_per_rank",
              {{"max", fp32_bytes.max}, {"mean", fp32_bytes.mean}}}});
    }
    return layers_json;
}

nlohmann::json report_memory(State& job, const Engine& engine)
{
    const auto memory = engine.memory_report();
    const auto memory_total =
        reduce_stat(job.world.comm(), static_cast<double>(memory.total()), job.size);
    // Out of core: bytes between host and device over the layers' wall time (the copies run
    // beside the compute, so their own duration is not observable from the host; this is a lower
    // bound of their rate, and the bus's share of the run when compared with the pinned rate).
    double moved = 0.0;
    double moved_seconds = 0.0;
    for (const auto& t : engine.timings()) {
        moved += static_cast<double>(t.transferred_bytes);
        moved_seconds += t.total;
    }
    const auto copy_rate = reduce_stat(
        job.world.comm(), moved_seconds > 0.0 ? moved / moved_seconds / 1e9 : 0.0, job.size);
    auto out = std::back_inserter(job.report);
    // The CPU backend's buffers are host memory (the manifest's key stays "device_memory").
    fmt::format_to(out, "{} memory by component, rank 0 ({}; max total over ranks {}):\n{}",
                   job.cuda ? "device" : "host", engine.out_of_core() ? "out of core" : "in memory",
                   format_bytes(static_cast<std::int64_t>(memory_total.max)),
                   format_memory_report(memory));
    if (engine.out_of_core()) {
        fmt::format_to(out,
                       "  row-block copies: {:.2f} GB/s over the layers' wall time (mean over "
                       "ranks)\n",
                       copy_rate.mean);
    }
    auto json = nlohmann::json::parse(memory_report_json(memory));
    json["max_total_over_ranks"] = memory_total.max;
    json["row_block_copy_gbps_mean"] = copy_rate.mean;
    return json;
}

std::string device_memory_line(const State& job, const BackendInstance& backend,
                               const HaloExchanger& exchanger)
{
#ifdef HALO_HAVE_CUDA
    if (backend.context) {
        const auto peak = reduce_stat(job.world.comm(),
                                      static_cast<double>(backend.context->peak_bytes()), job.size);
        const auto registered = reduce_stat(
            job.world.comm(), static_cast<double>(exchanger.stats().registered_bytes), job.size);
        return fmt::format(
            "device memory: rank 0 {}; pool peak over ranks max {:.2f} GiB, mean {:.2f} GiB{}",
            backend.context->memory_report(), peak.max / (1 << 30), peak.mean / (1 << 30),
            registered.max > 0
                ? fmt::format("; registered with NCCL besides (outside the pool): max {:.2f} "
                              "GiB, mean {:.2f} GiB",
                              registered.max / (1 << 30), registered.mean / (1 << 30))
                : "");
    }
#endif
    static_cast<void>(job);
    static_cast<void>(backend);
    static_cast<void>(exchanger);
    return {};
}

void write_manifest(const State& job, const Exchange& exchange, const Engine& engine,
                    const Runs& runs, const Reports& reports)
{
    const auto& o = job.o;
    nlohmann::json manifest;
    manifest["format"] = result_manifest_format;
    manifest["version"] = result_format_version;
    manifest["dataset"] = std::filesystem::absolute(o.dataset).string();
    manifest["model"] = o.model_name();
    manifest["seed"] = o.seed;
    manifest["random_features"] = job.info.feature_dim == 0;
    manifest["backend"] = o.backend;
    manifest["exchange"] = exchange.name();
    manifest["nccl_registered"] = exchange.registered();
    manifest["overlap"] = !o.no_overlap;
    manifest["overlap_mode"] = o.overlap_name();
    manifest["split_share"] = o.split_share;
    manifest["exchange_barrier"] = o.exchange_barrier;
    manifest["exchange_pieces"] = exchange.pieces();
    manifest["spmm"] = o.spmm_name();
    manifest["attention"] = o.attention;
    manifest["int8_features"] = o.int8_features;
    manifest["activations"] = o.activations;
    manifest["activation_storage"] = engine.activation_storage();
    // Rank 0's choice (--input-transform); empty note: dense (no sparse input was set up).
    manifest["input_transform"] = {{"option", o.input_transform},
                                   {"note", engine.sparse_input_note()}};
    manifest["step_timing"] = o.step_timing;
    manifest["cuda_graph"] = engine.replayed();
    manifest["num_parts"] = job.size;
    manifest["num_nodes"] = job.info.num_nodes;
    manifest["output_dim"] = job.model.output_dim();
    manifest["created_by"] = "halo-infer: " + job.command;
    manifest["run_seconds_median"] = runs.median_seconds;
    manifest["forward_seconds_median"] = runs.forward_median_seconds;
    manifest["repeat"] = o.repeat;
    manifest["load_seconds_max"] = reports.load.max;  // dataset read and plan check
    if (!o.resume.empty()) {
        manifest["resumed"] = {{"checkpoint", std::filesystem::absolute(o.resume).string()},
                               {"after_layer", job.resumed_after}};
    }
    if (!o.checkpoint.empty()) {
        manifest["checkpoint"] = std::filesystem::absolute(o.checkpoint).string();
    }
    manifest["synced"] = !o.no_sync;
    manifest["layers"] = reports.layers;
    manifest["phases"] = reports.phases;
    manifest["device_memory"] = reports.memory;
    if (!reports.memory_line.empty()) {
        manifest["device_memory_line"] = reports.memory_line;
    }
    manifest["kernels"] = engine.kernel_report();
    if (reports.fp32_total > 0.0) {
        manifest["halo_exchange_bytes"] = {{"moved", reports.exchanged_total},
                                           {"as_fp32_rows", reports.fp32_total}};
    }
    if (reports.totals[1] > 0) {
        manifest["accuracy"] = {
            {"eval_nodes", o.eval_nodes},
            {"evaluated", reports.totals[1]},
            {"correct", reports.totals[0]},
            {"accuracy", double(reports.totals[0]) / double(reports.totals[1])}};
    }
    nlohmann::json pieces = nlohmann::json::array();
    for (int p = 0; p < job.size; ++p) {
        pieces.push_back({{"part", p}, {"file", result_piece_path("", p).filename().string()}});
    }
    manifest["pieces"] = pieces;
    write_file_atomic(result_manifest_path(o.out), manifest.dump(2) + "\n");
}

void summarize(State& job, const Engine& engine, const Reports& reports)
{
    auto out = std::back_inserter(job.report);
    if (!reports.memory_line.empty()) {
        fmt::format_to(out, "{}\n", reports.memory_line);
    }
    if (reports.fp32_total > 0.0) {
        fmt::format_to(out,
                       "halo exchange: {:.3f} MB moved over all ranks and layers, {:.3f} MB as "
                       "fp32 rows would be ({:.1f}% saved)\n",
                       reports.exchanged_total / 1e6, reports.fp32_total / 1e6,
                       100.0 * (1.0 - reports.exchanged_total / reports.fp32_total));
    }
    if (const auto kernels = engine.kernel_report(); !kernels.empty()) {
        fmt::format_to(out, "SpMM kernels chosen on rank 0:\n{}", kernels);
    }
    if (reports.totals[1] > 0) {
        fmt::format_to(out, "accuracy on {}: {:.4f} ({} of {})\n", job.o.eval_nodes,
                       double(reports.totals[0]) / double(reports.totals[1]), reports.totals[0],
                       reports.totals[1]);
    }
}

}  // namespace halo::job
