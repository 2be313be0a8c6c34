// The phases of a job after start (src/job/job_steps.hpp): read, check, plan, tune and run, write,
// report. Every rank runs them; rank 0 reports progress and writes the manifest last.
#include "job_steps.hpp"

#include <fmt/core.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <unordered_set>

#include "checkpoint.hpp"
#include "halo/detail/parallel_copy.hpp"
#include "halo/detail/resident_memory.hpp"
#include "halo/feature_type.hpp"
#include "halo/feature_upload.hpp"
#include "halo/io.hpp"
#include "halo/mpi_error.hpp"
#include "halo/mpi_exchanger.hpp"
#include "halo/progress.hpp"
#include "halo/result.hpp"
#include "job_state.hpp"

namespace halo::job {

namespace {

// --input-transform auto: the first layer's x W as an SpMM where at most this share of the
// dataset's features is nonzero. Measured on an H100 (docs/PERFORMANCE.md "Sparse input
// features: where the SpMM wins"): the SpMM of 50,000 x 1024 rows by a 1024 x 256 weight grows
// with the nonzeros and meets the dense GEMM at about 14%; 10% keeps a margin.
constexpr double kSparseInputDensity = 0.10;

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

std::string runs_note(int repeat)
{
    return fmt::format("{} run{}", repeat, repeat == 1 ? "" : "s");
}

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

// Progress of the first run, one line per layer as it ends (rank 0): the next layer's start
// ends the previous one; the run's end ends the last (and, out of core, every layer at once).
class LayerProgress {
public:
    LayerProgress(const State& job, std::int64_t rows) : job_(job), rows_(rows) {}
    void start(std::size_t layer)
    {
        if (active_) {
            finish_until(layer);
        }
    }
    void begin_run(std::size_t first_layer)
    {
        active_ = true;
        reported_ = first_layer;
        watch_.restart();
    }
    void end_run(const Engine& engine)
    {
        if (active_) {
            finish_until(job_.model.layers.size(), &engine);
        }
        active_ = false;
    }

private:
    void finish_until(std::size_t layer, const Engine* engine = nullptr)
    {
        for (; reported_ < layer; ++reported_) {
            const auto& l = job_.model.layers[reported_];
            const double seconds = engine != nullptr && !engine->replayed() && engine->out_of_core()
                                       ? engine->timings()[reported_].total
                                       : watch_.seconds();
            job_.say(fmt::format("layer {} of {} ({} {}->{}): {:.3f} s, {:.3g} rows/s on rank 0",
                                 reported_ + 1, job_.model.layers.size(), to_string(l.type),
                                 l.in_dim, l.out_dim, seconds,
                                 seconds > 0.0 ? double(rows_) / seconds : 0.0));
            watch_.restart();
        }
    }

    const State& job_;
    std::int64_t rows_;  // this rank's
    Stopwatch watch_;
    bool active_ = false;
    std::size_t reported_ = 0;
};

// run: the whole call, features uploaded and outputs downloaded; forward: the layers only (sum
// of the per-layer wall times), the slowest rank's. `uploaded`: the features already on the
// device (FeatureUpload), used by the first run and then dropped.
Runs run_repeats(State& job, Engine& engine, const Shard& shard, std::optional<Matrix>& uploaded,
                 LayerProgress& progress, Restart& restart, std::size_t first_layer)
{
    const auto& o = job.o;
    const auto& info = job.info;
    auto& phases = job.phases;
    Runs runs;
    std::vector<double> run_seconds;
    std::vector<double> forward_seconds;
    const auto out_bytes = static_cast<double>(shard.num_owned * job.model.output_dim()) * 4.0;
    double input_bytes = 0.0;
    std::string input_note;
    if (restart.input() != nullptr) {
        input_bytes = static_cast<double>(restart.input()->size()) * 4.0;
        input_note = fmt::format("layer {}'s rows from the checkpoint (--resume)", first_layer);
    } else if (o.int8_features) {
        input_bytes = static_cast<double>(shard.features_int8.size());
        input_note = "int8 features from the dataset, uploaded";
    } else if (info.feature_dim > 0) {
        input_bytes = static_cast<double>(shard.features.size()) * 4.0;
        input_note = uploaded ? "features from the dataset, uploaded during the read (the first "
                                "run copies them on the device)"
                              : "features from the dataset, uploaded";
    } else {
        input_bytes = static_cast<double>(shard.num_owned) * 8.0;
        input_note = job.cuda ? "random from the seed (--random-features), generated on the "
                                "device (ids uploaded)"
                              : "random from the seed (--random-features), generated in place";
    }
    phases.add("input features", 0.0, 0.0, input_note + ", " + runs_note(o.repeat));
    phases.add("tuning", 0.0, -1.0, "autotuner trials in the first run");
    phases.add("layers", 0.0, -1.0, runs_note(o.repeat));
    phases.add("download", 0.0, 0.0, runs_note(o.repeat));
    for (int r = 0; r < o.repeat; ++r) {
        HALO_MPI_TRY(MPI_Barrier(job.world.comm()));
        // The last run's output is downloaded while it is written (write_piece).
        runs.deferred = r + 1 == o.repeat;
        if (runs.deferred) {
            engine.defer_download();
        }
        if (r == 0) {
            progress.begin_run(first_layer);
        }
        Stopwatch watch;
        if (restart.input() != nullptr) {
            runs.output = engine.forward_from(first_layer, *restart.input());
        } else if (o.int8_features) {
            const QuantizedView q{shard.features_int8.data(), shard.num_owned,
                                  info.feature_dim,           info.feature_dim,
                                  shard.feature_scale.data(), shard.feature_zero_point.data()};
            runs.output = engine.forward(q);
        } else if (uploaded) {
            runs.output = engine.forward(*uploaded);
            uploaded.reset();
        } else if (info.feature_dim > 0) {
            runs.output = engine.forward(shard.features);
        } else {
            runs.output = engine.forward_random(o.seed);
        }
        if (r == 0) {
            progress.end_run(engine);
            restart.first_run_done();
        }
        HALO_MPI_TRY(MPI_Barrier(job.world.comm()));
        run_seconds.push_back(watch.seconds());
        phases.accumulate("input features", engine.input_seconds(), input_bytes);
        phases.accumulate("layers", engine.forward_seconds());
        phases.accumulate("download", engine.download_seconds(), out_bytes);
        double forward = engine.forward_seconds();
        double slowest = 0.0;
        HALO_MPI_TRY(MPI_Allreduce(&forward, &slowest, 1, MPI_DOUBLE, MPI_MAX, job.world.comm()));
        forward_seconds.push_back(slowest);
        if (o.repeat > 1) {
            job.say(fmt::format("run {} of {}: {:.3f} s, forward {:.3f} s (slowest rank)", r + 1,
                                o.repeat, run_seconds.back(), slowest));
        }
    }
    // Out of core the output is in host memory whatever was asked.
    runs.deferred = runs.deferred && runs.output.empty();
    runs.run_seconds = run_seconds;
    runs.median_seconds = median(run_seconds);
    runs.forward_median_seconds = median(forward_seconds);
    // Tuning ran inside the first run's layers: its own row, out of the layers' time.
    const double tuning_seconds = engine.tuning_seconds();
    phases.accumulate("tuning", tuning_seconds);
    phases.accumulate("layers", -tuning_seconds);
    return runs;
}

// The output rows of a deferred run (Engine::defer_download) as write_result_piece asks for
// them: each batch downloaded into one of three page-locked buffers (a batch stays readable
// until the call after next), on the writer's threads while earlier batches are written.
class DeferredRows {
public:
    DeferredRows(const Engine& engine, Backend& backend, std::int64_t width)
        : engine_(engine), backend_(backend), width_(width)
    {
    }

    const float* operator()(std::int64_t first, std::int64_t count)
    {
        backend_.bind_thread();
        auto& buffer = buffers_[next_];
        next_ = (next_ + 1) % buffers_.size();
        if (buffer.rows() < count) {
            buffer = backend_.allocate_host(count, width_);
        }
        const Stopwatch watch;
        engine_.download_rows(first, count, buffer.data());
        seconds_ += watch.seconds();
        return buffer.data();
    }

    double seconds() const { return seconds_; }

private:
    const Engine& engine_;
    Backend& backend_;
    std::int64_t width_;
    std::array<Matrix, 3> buffers_;
    std::size_t next_ = 0;
    double seconds_ = 0.0;
};

// Each rank writes its own rows (with the argmax of each, and every layer's with --save-layers);
// returns the predictions. A deferred last run is downloaded batch by batch while it is written.
std::vector<std::int32_t> write_piece(State& job, const Engine& engine, Backend& backend,
                                      const Shard& shard, Runs& runs)
{
    const auto& model = job.model;
    job.step.restart();
    ResultPiece piece;
    piece.part = job.rank;
    piece.num_parts = job.size;
    piece.global_ids = detail::resident_vector<global_id>(shard.global_ids.size());
    detail::parallel_copy(shard.global_ids.data(),
                          static_cast<std::int64_t>(shard.global_ids.size()),
                          piece.global_ids.data());
    piece.output_dim = model.output_dim();
    if (!runs.deferred) {
        piece.prediction = argmax_rows(runs.output, model.output_dim());
    } else {
        piece.prediction = detail::resident_vector<std::int32_t>(shard.global_ids.size());
        engine.deferred_predictions(piece.prediction.data());
    }
    if (job.o.save_layers) {
        piece.layers = engine.layer_outputs();
        for (const auto& layer : model.layers) {
            piece.layer_dims.push_back(layer.out_dim);
        }
    }
    const double prepare_seconds = job.step.seconds();
    job.phases.add("predictions", prepare_seconds, -1.0,
                   runs.deferred && job.cuda ? "argmax of every output row, on the device"
                                             : "argmax of every output row");
    job.step.restart();
    const auto write_options = ResultWriteOptions{.sync = !job.o.no_sync};
    const double row_bytes = static_cast<double>(model.output_dim()) * 4.0;
    ProgressLine sink;
    if (job.progress) {
        sink = [&job](const std::string& line) { job.say(line); };
    }
    ProgressMeter meter(sink, "write part 0",
                        static_cast<double>(shard.num_owned) * row_bytes / 1e9);
    double download_seconds = 0.0;
    std::optional<DeferredRows> deferred;
    if (runs.deferred) {
        deferred.emplace(engine, backend, model.output_dim());
    }
    const OutputRows rows = [&](std::int64_t first, std::int64_t count) {
        meter.set(static_cast<double>(first) * row_bytes);
        return deferred ? (*deferred)(first, count)
                        : runs.output.data() + first * model.output_dim();
    };
    write_result_piece(job.o.out, piece, rows, write_options);
    if (deferred) {
        download_seconds = deferred->seconds();
        job.phases.accumulate("download", download_seconds, -1.0,
                              fmt::format("{}, the last one batch by batch during the result "
                                          "write",
                                          runs_note(job.o.repeat)));
        runs.run_seconds.back() += download_seconds;
        runs.median_seconds = median(runs.run_seconds);
    }
    const double write_seconds = job.step.seconds() - download_seconds;
    double written = static_cast<double>(shard.num_owned) * row_bytes +
                     static_cast<double>(piece.global_ids.size()) * 8.0 +
                     static_cast<double>(piece.prediction.size()) * 4.0;
    for (const auto& layer : piece.layers) {
        written += static_cast<double>(layer.size()) * 4.0;
    }
    std::string note =
        job.o.no_sync ? "own rows, not synced (--no-sync)" : "own rows, synced to disk";
    if (runs.deferred) {
        note += "; the last run downloaded batch by batch meanwhile (its time in download)";
    }
    job.phase("result write", write_seconds, written, note);
    return std::move(piece.prediction);
}

// Accuracy over the evaluation nodes each rank owns: {correct, evaluated} summed over ranks.
std::array<std::int64_t, 2> accuracy(State& job, const Shard& shard,
                                     const std::vector<std::int32_t>& prediction)
{
    std::array<std::int64_t, 2> counts{0, 0};
    if (!job.o.eval_nodes.empty()) {
        HALO_EXPECTS(!shard.labels.empty(), job.o.dataset, ": part ", job.rank,
                     " has no labels although the dataset's attributes say it has");
        const auto ids = read_index_list(job.o.eval_nodes, job.info.num_nodes);
        const std::unordered_set<global_id> wanted(ids.begin(), ids.end());
        for (std::int64_t i = 0; i < shard.num_owned; ++i) {
            if (wanted.count(shard.global_ids[i]) != 0 && shard.labels[i] >= 0) {
                ++counts[1];
                counts[0] += prediction[i] == shard.labels[i] ? 1 : 0;
            }
        }
    }
    std::array<std::int64_t, 2> totals{0, 0};
    HALO_MPI_TRY(
        MPI_Allreduce(counts.data(), totals.data(), 2, MPI_INT64_T, MPI_SUM, job.world.comm()));
    return totals;
}

// Stores every rank's new autotune choices in its part of the dataset. HDF5 locks a file that
// one process writes, so the ranks take turns (a barrier between turns); every rank has closed
// the dataset since it read its part. With --save-tuning a failed write is this rank's error;
// by default (the choices are stored unasked) it is a warning: a read-only dataset still runs.
void store_tuning(State& job, const Engine& engine)
{
    job.step.restart();
    const auto& o = job.o;
    const auto tuned = engine.tuning_metadata();
    const bool store = job.cuda && !o.no_save_tuning && (o.save_tuning || !tuned.empty());
    int store_any = store && !tuned.empty() ? 1 : 0;
    HALO_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &store_any, 1, MPI_INT, MPI_MAX, job.world.comm()));
    std::int64_t written = 0;
    for (int turn = 0; store_any == 1 && turn < job.size; ++turn) {
        if (turn == job.rank && store) {
            for (const auto& md : tuned) {
                try {
                    store_kernel_metadata(o.dataset, job.rank, md);
                    ++written;
                } catch (const Error& e) {
                    if (o.save_tuning) {
                        throw;
                    }
                    fmt::print(stderr,
                               "halo-infer: warning: rank {}: autotune choices not stored ({}); "
                               "the next run times again\n",
                               job.rank, e.message());
                    break;
                }
            }
        }
        HALO_MPI_TRY(MPI_Barrier(job.world.comm()));
    }
    std::int64_t total = 0;
    HALO_MPI_TRY(MPI_Allreduce(&written, &total, 1, MPI_INT64_T, MPI_SUM, job.world.comm()));
    job.phase("tuning store", job.step.seconds(), -1.0,
              store_any == 1 ? fmt::format("{} autotune group(s) into the dataset", total)
                             : "nothing to store");
}

// Thrown before the manifest: the dataset at the path is no longer the file this rank read at the
// start, so the ranks may have read parts of two different datasets.
void check_dataset_unchanged(const State& job)
{
    struct stat st {};
    const bool same = ::stat(job.o.dataset.c_str(), &st) == 0 &&
                      std::pair<dev_t, ino_t>{st.st_dev, st.st_ino} == job.dataset_identity;
    if (!same) {
        HALO_THROW(InputError, job.o.dataset,
                   ": the dataset was replaced (or removed) while the job ran; its ranks may have "
                   "read parts of two different datasets, so no manifest is written. Run again.");
    }
}

// report: the reductions over ranks, the tuning write-back, rank 0's tables, and the manifest
// last, once every rank has written its piece.
JobSummary report_and_finish(State& job, Engine& engine, const BackendInstance& backend,
                             const Exchange& exchange, const Shard& shard,
                             const std::vector<std::int32_t>& prediction, const Runs& runs,
                             double load_seconds)
{
    const auto& o = job.o;
    auto& world = job.world;
    job.step.restart();
    Reports reports;
    reports.totals = accuracy(job, shard, prediction);
    reports.layers = report_layers(job, engine, reports);
    if (engine.replayed()) {
        job.report += fmt::format(
            "(the forward pass was replayed as one CUDA graph: {:.3f} ms for all layers, not "
            "measured per layer; --no-cuda-graph measures each layer)\n",
            runs.forward_median_seconds * 1e3);
    } else if (!o.step_timing) {
        job.report +=
            "(one synchronization per layer: compute, exchange and waiting are not split; "
            "--step-timing splits them)\n";
    }
    reports.load = reduce_stat(world.comm(), load_seconds, job.size);
    reports.memory_line = device_memory_line(job, backend, exchange.exchanger());
    reports.memory = report_memory(job, engine);
    job.phases.add("reports", job.step.seconds(), -1.0,
                   "accuracy, per-layer and memory reductions");
    store_tuning(job, engine);
    std::string table;
    reports.phases = report_phases(world.comm(), job.phases, job.process.seconds(), table);
    job.report += "\n" + table;
    summarize(job, engine, reports);
    if (job.rank != 0) {
        job.report.clear();
    }

    check_dataset_unchanged(job);
    // Every piece is written once this collective returns on rank 0 (each rank wrote before it).
    HALO_MPI_TRY(MPI_Barrier(world.comm()));
    if (job.rank == 0) {
        write_manifest(job, exchange, engine, runs, reports);
    }
    JobSummary summary;
    summary.forward_seconds = runs.forward_median_seconds;
    summary.run_seconds = runs.median_seconds;
    return summary;
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

    // tune and run, then write.
    auto runs = run_repeats(job, engine, shard, uploaded, progress, restart, first_layer);
    job.say(fmt::format("forward: {:.3f} s (median of {}, slowest rank), tuning {:.3f} s",
                        runs.forward_median_seconds, runs_note(o.repeat), engine.tuning_seconds()));
    const auto prediction = write_piece(job, engine, *backend.backend, shard, runs);

    return report_and_finish(job, engine, backend, *exchange, shard, prediction, runs,
                             read_seconds + check_seconds);
}

}  // namespace halo::job
