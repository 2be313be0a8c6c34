// write and report (src/job/job_steps.hpp): each rank writes its rows; the reductions over ranks,
// the tuning write-back, the job's last collective, and rank 0's manifest last.
#include <fmt/core.h>
#include <sys/stat.h>

#include <array>
#include <unordered_set>

#include "halo/core/detail/parallel_copy.hpp"
#include "halo/core/detail/resident_memory.hpp"
#include "halo/core/io.hpp"
#include "halo/core/progress.hpp"
#include "halo/core/result.hpp"
#include "halo/mpi/mpi_error.hpp"
#include "job_steps.hpp"

namespace halo::job {

namespace {

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

}  // namespace

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
    // The last collective: no rank waits for another from here, so none announces a failure.
    job.peers_finished = true;
    if (job.watch) {
        job.watch->stop();
    }
    if (job.rank == 0) {
        write_manifest(job, exchange, engine, runs, reports);
    }
    JobSummary summary;
    summary.forward_seconds = runs.forward_median_seconds;
    summary.run_seconds = runs.median_seconds;
    summary.runs = runs.times;
    summary.memory_line = reports.memory_line;
    return summary;
}

}  // namespace halo::job
