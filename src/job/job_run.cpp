// tune and run (src/job/job_steps.hpp): the repeated forward passes and their times; the
// progress of the first run's layers.
#include <fmt/core.h>

#include <algorithm>

#include "halo/mpi/mpi_error.hpp"
#include "job_steps.hpp"

namespace halo::job {

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

std::string runs_note(int repeat)
{
    return fmt::format("{} run{}", repeat, repeat == 1 ? "" : "s");
}

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
        runs.times.push_back({slowest, engine.replayed(),
                              engine.replayed() ? std::vector<LayerTiming>() : engine.timings()});
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

}  // namespace halo::job
