// The phases of a job after start (src/job/job_steps.hpp): the read, check and plan phases here,
// and run_phases, which runs every phase in turn. Every rank runs them; rank 0 reports progress.
#include "job_steps.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <functional>
#include <memory>

#include "halo/comm/mpi_exchanger.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/io.hpp"
#include "halo/core/progress.hpp"
#include "halo/engine/feature_upload.hpp"
#include "halo/mpi/mpi_error.hpp"

namespace halo::job {

namespace {

// --input-transform auto: the first layer's x W as an SpMM where at most this share of the
// dataset's features is nonzero. Measured on an H100 (docs/PERFORMANCE.md "Sparse input
// features: where the SpMM wins"): the SpMM of 50,000 x 1024 rows by a 1024 x 256 weight grows
// with the nonzeros and meets the dense GEMM at about 14%; 10% keeps a margin.
constexpr double kSparseInputDensity = 0.10;

// The bytes of the shard as stored: a 16-bit feature dataset (halo-partition --quantize fp16 |
// bf16) is read as 2 bytes a value, though the shard holds them widened to float32.
double stored_bytes(const Shard& s, const DatasetInfo& info)
{
    const auto b = [](const auto& v) { return static_cast<double>(v.size() * sizeof(v[0])); };
    double total = b(s.global_ids) + b(s.halo_global_ids) + b(s.csr.indptr) + b(s.csr.indices) +
                   b(s.csr.values) + b(s.plan.recv_ranks) + b(s.plan.recv_offsets) +
                   b(s.plan.send_ranks) + b(s.plan.send_offsets) + b(s.plan.send_rows) +
                   b(s.labels);
    const auto stored = feature_type_from_stored_name(info.feature_type);
    const bool bits16 = stored.has_value() && *stored != FeatureType::fp32;
    total += !s.features_int8.empty()
                 ? b(s.features_int8) + b(s.feature_scale) + b(s.feature_zero_point)
             : bits16 ? b(s.features) / 2
                      : b(s.features);
    return total;
}

// Features from the dataset go to the device while the rest of the part is read where that
// pays and is safe: a device backend, float32 features into float32 layers, and a matrix of at
// most an eighth of the device memory the engine may use, so that holding it beside the engine's
// buffers until the first run does not change its in-memory / out-of-core decision; never with
// an explicit memory limit or --out-of-core (the user rations the device), nor with
// HALO_FEATURE_UPLOAD=0 (a measurement switch). Null otherwise.
std::unique_ptr<FeatureUpload> feature_upload(const State& job, Backend& backend)
{
    const auto& o = job.o;
    if (const char* env = std::getenv("HALO_FEATURE_UPLOAD");
        env != nullptr && env == std::string("0")) {
        return nullptr;
    }
    if (backend.uses_host_memory() || job.info.feature_dim <= 0 || o.int8_features ||
        job.info.feature_type == "int8" || !o.device_memory_limit.empty() || o.out_of_core) {
        return nullptr;
    }
    return std::make_unique<FeatureUpload>(backend, backend.default_memory_limit() / 8);
}

std::string read_note(const DatasetInfo& info, const FeatureUpload* upload)
{
    if (info.feature_dim <= 0) {
        return "part";
    }
    if (upload == nullptr) {
        return "part, features included";
    }
    if (!upload->declined().empty()) {
        return "part, features included (not uploaded during the read: " + upload->declined() + ")";
    }
    return fmt::format(
        "part, features included and uploaded during the read ({:.3f} GB in {:.3f} s of "
        "copies on the reader's thread)",
        static_cast<double>(upload->bytes()) / 1e9, upload->seconds());
}

// The engine's options: the policy defaults from InferOptions, the stored kernel metadata of
// this part, and the per-layer hook (fault injection, --sync-layers, progress).
EngineOptions make_engine_options(State& job, std::function<void(std::size_t)> on_layer,
                                  Restart& restart, const Shard& shard)
{
    auto eopt = engine_options(job.o, job.size, job.info.normalization);
    eopt.after_layer = restart.hook(shard, job.model);
    job.step.restart();
    if (job.cuda && !job.o.ignore_kernel_metadata) {
        // Kernel metadata stored for this part (docs/FORMAT.md): Accel-GCN's partition, the
        // autotuner's choices. Plans take what applies to them and say so in the kernel report.
        for (const auto& name : list_kernel_metadata(job.o.dataset, job.rank)) {
            const auto slash = name.find('/');
            if (auto md = read_kernel_metadata(job.o.dataset, job.rank, name.substr(0, slash),
                                               name.substr(slash + 1))) {
                eopt.kernel_metadata.push_back(std::move(*md));
            }
        }
    }
    const MPI_Comm comm = job.world.comm();
    eopt.before_layer = [rank = job.rank, comm, sync = job.o.sync_layers,
                         on_layer = std::move(on_layer)](std::size_t layer) {
        maybe_inject_fault(rank, layer);
        if (sync) {
            HALO_MPI_TRY(MPI_Barrier(comm));
        }
        on_layer(layer);
    };
    job.phase("kernel metadata read", job.step.seconds(), -1.0,
              fmt::format("{} group(s)", eopt.kernel_metadata.size()));
    return eopt;
}

}  // namespace

JobSummary run_phases(State& job)
{
    const auto& o = job.o;
    const auto& info = job.info;
    auto& world = job.world;
    // The backend first, so that the features can go to the device while the part is read;
    // declared before the engine, whose device memory goes back to the context's pool first.
    job.step.restart();
    auto spec = o.backend_spec();
    spec.local_rank = world.local_rank();
    spec.local_size = world.local_size();
    const auto backend = make_backend(spec);
    // "device" only where there is one: the CPU backend runs on the host.
    job.phase(job.cuda ? "device start" : "backend start", job.step.seconds(), -1.0,
              job.cuda ? "CUDA context, streams, library handles" : "cpu backend, on the host");

    // read: this rank's part (rank 0 tells the progress of its features).
    job.step.restart();
    auto upload = feature_upload(job, *backend.backend);
    ShardReadOptions read_options;
    std::optional<ProgressMeter> features_meter;
    if (upload || (job.progress && info.feature_dim > 0)) {
        read_options.features = [&](const FeatureRowsRead& group) {
            if (upload) {
                (*upload)(group);
            }
            if (job.progress) {
                if (!features_meter) {
                    const double value_bytes = group.int8 ? 1.0 : 4.0;
                    features_meter.emplace(
                        [&job](const std::string& l) { job.say(l); }, "read part 0 (features)",
                        double(group.total_rows * group.cols) * value_bytes / 1e9);
                }
                features_meter->advance(double(group.count * group.cols) *
                                        (group.int8 ? 1.0 : 4.0));
            }
        };
    }
    const auto shard = read_shard(o.dataset, job.rank, read_options);
    std::optional<Matrix> uploaded;
    if (upload) {
        uploaded = upload->take(shard.num_owned, info.feature_dim);
    }
    const double read_seconds = job.step.seconds();
    job.phase("dataset read", read_seconds, stored_bytes(shard, info),
              read_note(info, upload.get()));

    // check: the halo plans across ranks, before any exchange.
    job.step.restart();
    check_halo_plan(world.comm(), shard, o.dataset);
    const double check_seconds = job.step.seconds();
    job.phase("halo plan check", check_seconds, -1.0, "collective");

    // plan: the exchange and the engine.
    job.step.restart();
    auto exchange_spec = parse_exchange_spec(o.exchange);
    exchange_spec.fixed_device = o.device >= 0;
    exchange_spec.registration = parse_registration(o.nccl_register);
    if (o.exchange_pieces > 0) {
        exchange_spec.pieces = o.exchange_pieces;
    }
    const auto exchange = make_exchanger(exchange_spec, world, shard, job.model.exchange_width(),
                                         backend.context.get());
    if (!exchange->note().empty()) {
        job.say(exchange->note());
    }
    job.phase("exchange setup", job.step.seconds(), -1.0,
              job.size == 1
                  ? "single part"
                  : exchange->transport() + (exchange->registered() ? ", registered" : ""));
    // --resume: the layer to start at, every rank alike.
    Restart restart(o, job.rank, job.size);
    const auto first_layer = restart.begin(world.comm(), job.model, shard);
    job.resumed_after = restart.resumed_after();
    if (!o.resume.empty()) {
        job.say(first_layer > 0
                    ? fmt::format("resuming after layer {} of {} (checkpoint {})", first_layer,
                                  job.model.layers.size(), o.resume)
                    : fmt::format("checkpoint {} holds no layer every rank finished: starting "
                                  "at layer 1",
                                  o.resume));
    }
    LayerProgress progress(job, shard.num_owned);
    const auto eopt = make_engine_options(
        job, [&progress](std::size_t l) { progress.start(l); }, restart, shard);
    job.step.restart();
    Engine engine(*backend.backend, exchange->exchanger(), shard, job.model, eopt);
    const double setup_seconds = job.step.seconds();
    job.phases.add("operators", engine.operator_seconds(), -1.0,
                   "host: degrees, self-loops, normalized values where built");
    job.phase("plans", setup_seconds - engine.operator_seconds(), -1.0,
              job.cuda ? "operators to the device, kernel setup" : "kernel setup, on the host");
    // Sparse dataset features (bag-of-words rows): the first layer's transforms as an SpMM.
    if (o.input_transform != "dense" && !o.int8_features && info.feature_dim > 0 &&
        !engine.out_of_core()) {
        job.step.restart();
        const double density = o.input_transform == "sparse" ? 1.0 : kSparseInputDensity;
        const auto csr =
            sparse_rows(shard.features.data(), shard.num_owned, info.feature_dim, density);
        if (csr) {
            engine.set_sparse_input(*csr);  // its note says whether the SpMM is used
        }
        job.phase("sparse input", job.step.seconds(), -1.0,
                  csr ? engine.sparse_input_note()
                      : fmt::format("features denser than {:.0f}%: first-layer transforms dense",
                                    100.0 * density));
    }

    if (const auto storage = engine.activation_storage(); !storage.empty()) {
        job.say(storage);  // 16-bit activations: stored in 16 bits, or rounded and why
    }

    // tune and run, then write.
    auto runs = run_repeats(job, engine, shard, uploaded, progress, restart, first_layer);
    job.say(fmt::format("forward: {:.3f} s (median of {}, slowest rank), tuning {:.3f} s",
                        runs.forward_median_seconds, runs_note(o.repeat), engine.tuning_seconds()));
    const auto prediction = write_piece(job, engine, *backend.backend, shard, runs);

    return report_and_finish(job, engine, backend, *exchange, shard, prediction, runs,
                             read_seconds + check_seconds);
}

}  // namespace halo::job
