// Restart from the last finished layer (halo-infer --checkpoint DIR, --resume DIR). DIR holds
// checkpoint.json, the identity of the job it belongs to (dataset, model, seed, rank count), and
// layer-<l>/part-<r>.h5, rank r's output rows of layer l with their global ids, each written
// atomically (a result piece: temporary name, then rename) as the layer ends in the first run.
// A resumed job starts after the last layer that every rank finished.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "halo/core/model.hpp"
#include "halo/core/shard.hpp"
#include "halo/job/infer_options.hpp"
#include "halo/store/store.hpp"

namespace halo::job {

/// What a checkpoint is valid for, as "name: value" pairs compared one by one.
struct CheckpointIdentity {
    std::vector<std::pair<std::string, std::string>> fields;
};
CheckpointIdentity checkpoint_identity(const InferOptions& options, const DatasetInfo& info,
                                       const Model& model, int ranks);

/// --resume DIR on every rank: DIR/checkpoint.json must exist and name this job; an InputError
/// names the first field that differs (another dataset, model, seed or rank count).
void check_checkpoint(const std::filesystem::path& dir, const CheckpointIdentity& identity);
/// --checkpoint DIR on rank 0 at start: creates DIR and its checkpoint.json, or checks the one
/// there (a checkpoint of another job is refused as check_checkpoint refuses it).
void open_checkpoint(const std::filesystem::path& dir, const CheckpointIdentity& identity);

/// The last layer l such that rank `rank` wrote layers 0 .. l (-1: none).
int last_layer_written(const std::filesystem::path& dir, int rank, std::size_t layers);
/// Rank `rank`'s output rows of `layer` (rows x width, row-major), atomically.
void write_layer(const std::filesystem::path& dir, int rank, int ranks, std::size_t layer,
                 const std::vector<global_id>& global_ids, std::span<const float> rows,
                 std::int64_t width, bool sync);
/// Reads them back, checking that they are this part's rows (its global ids) of that width.
std::vector<float> read_layer(const std::filesystem::path& dir, int rank, std::size_t layer,
                              const std::vector<global_id>& global_ids, std::int64_t width);

/// The restart of one job on one rank: where its run starts, and what each finished layer leaves.
class Restart {
public:
    Restart(const InferOptions& options, int rank, int ranks)
        : o_(options), rank_(rank), ranks_(ranks)
    {
    }
    /// Collective. With --resume: the last layer every rank finished (a MIN over ranks), this
    /// rank's rows of it read back; the run then starts at the next layer. Returns that layer
    /// (0 without --resume, or where no rank finished one).
    std::size_t begin(MPI_Comm comm, const Model& model, const Shard& shard);
    /// The rows the run starts from (the output of layer begin() - 1), or null.
    const std::vector<float>* input() const { return input_ ? &*input_ : nullptr; }
    /// The last layer finished before this job (-1: none).
    int resumed_after() const { return resumed_after_; }
    /// EngineOptions::after_layer for --checkpoint (empty without): writes each layer of the
    /// first run; first_run_done() stops it.
    std::function<void(std::size_t, std::span<const float>)> hook(const Shard& shard,
                                                                  const Model& model);
    void first_run_done() { writing_ = false; }

private:
    const InferOptions& o_;
    int rank_;
    int ranks_;
    int resumed_after_ = -1;
    bool writing_ = true;
    std::optional<std::vector<float>> input_;
};

}  // namespace halo::job
