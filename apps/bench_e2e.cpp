// halo-bench --e2e (bench_common.hpp): a whole single-GPU inference through the engine (CUDA
// backend, one part) with halo-infer's engine options (halo::engine_options of the job's
// InferOptions: the replay of the forward pass as a CUDA graph, one synchronization per layer),
// per layer: wall time, SpMM, dense, exchange and waiting (zero on one part); medians. What the
// defaults do not measure is printed as n/a: per-layer times need --no-cuda-graph, SpMM and
// dense --step-timing.
#include <fmt/core.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "halo/cuda/backend.hpp"
#include "halo/cuda/context.hpp"
#include "halo/cuda/device.hpp"
#include "halo/engine.hpp"
#include "halo/exchanger.hpp"
#include "halo/graph.hpp"
#include "halo/infer_options.hpp"
#include "halo/io.hpp"
#include "halo/model.hpp"
#include "halo/shard.hpp"
#include "halo/shard_builder.hpp"

namespace halo::bench_app {

int run_e2e(const KernelRunOptions& o, const E2eOptions& model_options,
            const std::string& normalize, cuda::Context& ctx, const Csr& a,
            const std::string& source, const std::string& date, const std::string& command,
            double copy_gb_per_s)
{
    const std::vector<std::int32_t> owner(a.num_rows, 0);
    const auto shard = halo::build_shard(a, owner, 1, 0);
    const auto model = halo::random_model(halo::parse_layer_type(model_options.layer),
                                          halo::parse_dims(model_options.model_dims), o.seed);
    auto backend = halo::cuda::make_cuda_backend(ctx);
    auto exchanger = halo::make_local_exchanger(shard);
    halo::InferOptions job;
    job.backend = "cuda";
    job.step_timing = model_options.step_timing;
    job.no_cuda_graph = model_options.no_cuda_graph;
    const auto eopt = halo::engine_options(job, 1, normalize);
    halo::Engine engine(*backend, *exchanger, shard, model, eopt);
    const auto x = halo::random_node_features(shard.global_ids, model.input_dim(), o.seed);
    for (int r = 0; r < o.warmup; ++r) {
        engine.run(x);
    }
    const auto layers = model.layers.size();
    std::vector<std::vector<double>> total(layers), spmm(layers), dense(layers), exch(layers),
        wait(layers);
    std::vector<double> forward;
    for (int r = 0; r < o.runs; ++r) {
        engine.run(x);
        double sum = 0.0;
        for (std::size_t l = 0; l < layers; ++l) {
            const auto& t = engine.timings()[l];
            total[l].push_back(t.total * 1e3);
            spmm[l].push_back(t.spmm * 1e3);
            dense[l].push_back(t.dense * 1e3);
            exch[l].push_back(t.exchange * 1e3);
            wait[l].push_back(t.waiting * 1e3);
            sum += t.total * 1e3;
        }
        forward.push_back(engine.replayed() ? engine.forward_seconds() * 1e3 : sum);
    }
    // What was measured: a replay has no per-layer times, one synchronization per layer no split.
    const bool layer_measured = !engine.replayed();
    const bool step_measured = layer_measured && eopt.step_timing;
    const auto cell = [](double v, bool measured) {
        return measured ? fmt::format("{:>10.3f}", v) : fmt::format("{:>10}", "n/a");
    };
    const auto value = [](double v, bool measured) { return measured ? Json(v) : Json(nullptr); };
    fmt::print(
        "\ne2e: random {} model {} on {} ({} rows, {} nonzeros), CUDA backend, one part; "
        "medians of {} runs after {} warm-up; {}\n",
        model_options.layer, model_options.model_dims, source, a.num_rows, a.nnz(), o.runs,
        o.warmup,
        engine.replayed()  ? "replayed as a CUDA graph (--no-cuda-graph times each layer)"
        : eopt.step_timing ? "synchronized after every step (--step-timing)"
                           : "one synchronization per layer (--step-timing splits SpMM and dense)");
    fmt::print("{:>5} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "layer", "width", "total ms",
               "spmm ms", "dense ms", "exch ms", "wait ms");
    Json records = Json::array();
    for (std::size_t l = 0; l < layers; ++l) {
        const auto& layer = model.layers[l];
        const auto t = summarize(total[l]).median;
        const auto sp = summarize(spmm[l]).median;
        const auto de = summarize(dense[l]).median;
        const auto ex = summarize(exch[l]).median;
        const auto wa = summarize(wait[l]).median;
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
    const auto fwd = summarize(forward);
    fmt::print("forward: median {:.3f} ms (min {:.3f}, max {:.3f}); {}\n", fwd.median, fwd.min,
               fwd.max, ctx.memory_report());
    if (!o.json.empty()) {
        Json doc;
        doc["tool"] = "halo-bench --e2e";
        doc["date"] = date;
        doc["git_commit"] = git_commit();
        doc["command"] = command;
        doc["device"] = halo::cuda::device_info(ctx.device()).name;
        doc["graph"] = {{"source", source}, {"rows", a.num_rows}, {"nnz", a.nnz()}};
        doc["copy_gb_per_s"] = copy_gb_per_s;
        doc["model"] = {
            {"layer", model_options.layer}, {"dims", model_options.model_dims}, {"seed", o.seed}};
        doc["replayed"] = engine.replayed();
        doc["step_timing"] = eopt.step_timing;
        doc["forward_ms"] = stats_json(fwd);
        doc["layers"] = records;
        write_json(o.json, doc);
    }
    return 0;
}

}  // namespace halo::bench_app
