#include "checkpoint.hpp"

#include <fmt/core.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "halo/core/error.hpp"
#include "halo/core/io.hpp"
#include "halo/core/result.hpp"
#include "halo/mpi/mpi_error.hpp"

namespace halo::job {

namespace {

constexpr const char* kIdentityFile = "checkpoint.json";

// FNV-1a over the model's weights and attributes: a model file changed in place is another model.
class Fnv {
public:
    void add(const void* data, std::size_t bytes)
    {
        const auto* p = static_cast<const unsigned char*>(data);
        for (std::size_t i = 0; i < bytes; ++i) {
            hash_ = (hash_ ^ p[i]) * 1099511628211ULL;
        }
    }
    void add(const std::vector<float>& v) { add(v.data(), v.size() * sizeof(float)); }
    template <typename T>
    void value(T v)
    {
        add(&v, sizeof v);
    }
    std::uint64_t hash() const { return hash_; }

private:
    std::uint64_t hash_ = 14695981039346656037ULL;
};

std::string model_fingerprint(const Model& model)
{
    Fnv f;
    for (const auto& l : model.layers) {
        f.value(static_cast<int>(l.type));
        f.value(l.in_dim);
        f.value(l.out_dim);
        f.value(static_cast<int>(l.activation));
        f.value(l.eps);
        f.value(l.hidden_dim);
        f.value(l.k);
        f.value(l.beta);
        f.value(l.heads);
        f.value(l.negative_slope);
        for (const auto* v : {&l.weight, &l.bias, &l.root_weight, &l.weight2, &l.bias2, &l.att_src,
                              &l.att_dst, &l.query_weight, &l.query_bias, &l.key_weight,
                              &l.key_bias, &l.value_weight, &l.value_bias}) {
            f.value(v->size());
            f.add(*v);
        }
    }
    return fmt::format("{:016x}", f.hash());
}

std::filesystem::path layer_dir(const std::filesystem::path& dir, std::size_t layer)
{
    return dir / fmt::format("layer-{}", layer);
}

nlohmann::json to_json(const CheckpointIdentity& identity)
{
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [name, value] : identity.fields) {
        j[name] = value;
    }
    return j;
}

}  // namespace

CheckpointIdentity checkpoint_identity(const InferOptions& o, const DatasetInfo& info,
                                       const Model& model, int ranks)
{
    std::string shape;
    for (const auto& l : model.layers) {
        shape += fmt::format("{}{}:{}->{}", shape.empty() ? "" : ",", to_string(l.type), l.in_dim,
                             l.out_dim);
    }
    CheckpointIdentity id;
    id.fields = {
        {"rank count", std::to_string(ranks)},
        {"model", o.model_name()},
        {"model layers", shape},
        {"model weights (FNV-1a)", model_fingerprint(model)},
        {"seed of random features",
         info.feature_dim == 0 ? std::to_string(o.seed) : std::string("none (stored features)")},
        {"dataset", std::filesystem::absolute(o.dataset).lexically_normal().string()},
        {"dataset nodes, nonzeros, features",
         fmt::format("{}, {}, {} {}", info.num_nodes, info.num_nonzeros, info.feature_dim,
                     info.feature_type)},
        {"dataset created by", info.created_by},
    };
    return id;
}

void check_checkpoint(const std::filesystem::path& dir, const CheckpointIdentity& identity)
{
    const auto path = dir / kIdentityFile;
    std::ifstream in(path);
    if (!in) {
        HALO_THROW(InputError, "--resume ", dir.string(), ": no ", kIdentityFile,
                   " (not a checkpoint directory of halo-infer --checkpoint)");
    }
    nlohmann::json stored;
    try {
        in >> stored;
    } catch (const nlohmann::json::exception& e) {
        HALO_THROW(InputError, path.string(), ": not valid JSON: ", e.what());
    }
    for (const auto& [name, value] : identity.fields) {
        const auto it = stored.find(name);
        const auto theirs = it != stored.end() && it->is_string() ? it->get<std::string>()
                                                                  : std::string("(missing)");
        if (theirs != value) {
            HALO_THROW(InputError, dir.string(), ": a checkpoint of another job: its ", name,
                       " is '", theirs, "', this job's '", value,
                       "'; resume with the same dataset, model and rank count, or choose "
                       "another checkpoint directory");
        }
    }
}

void open_checkpoint(const std::filesystem::path& dir, const CheckpointIdentity& identity)
{
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
        HALO_THROW(IoError, "--checkpoint ", dir.string(),
                   ": cannot create the directory: ", ec.message());
    }
    if (std::filesystem::exists(dir / kIdentityFile)) {
        check_checkpoint(dir, identity);
        return;
    }
    write_file_atomic(dir / kIdentityFile, to_json(identity).dump(2) + "\n");
}

int last_layer_written(const std::filesystem::path& dir, int rank, std::size_t layers)
{
    int last = -1;
    for (std::size_t l = 0; l < layers; ++l) {
        if (!std::filesystem::exists(result_piece_path(layer_dir(dir, l), rank))) {
            break;
        }
        last = static_cast<int>(l);
    }
    return last;
}

void write_layer(const std::filesystem::path& dir, int rank, int ranks, std::size_t layer,
                 const std::vector<global_id>& global_ids, std::span<const float> rows,
                 std::int64_t width, bool sync)
{
    const auto where = layer_dir(dir, layer);
    std::error_code ec;
    std::filesystem::create_directories(where, ec);
    if (ec) {
        HALO_THROW(IoError, where.string(), ": cannot create the directory: ", ec.message());
    }
    ResultPiece piece;
    piece.part = rank;
    piece.num_parts = ranks;
    piece.global_ids = global_ids;
    piece.output_dim = width;
    piece.prediction = argmax_rows(rows, width);
    write_result_piece(where, piece, rows, ResultWriteOptions{.sync = sync});
}

std::vector<float> read_layer(const std::filesystem::path& dir, int rank, std::size_t layer,
                              const std::vector<global_id>& global_ids, std::int64_t width)
{
    const auto path = result_piece_path(layer_dir(dir, layer), rank);
    auto piece = read_result_piece(path);
    if (piece.global_ids != global_ids || piece.output_dim != width) {
        HALO_THROW(InputError, path.string(), ": holds ", piece.global_ids.size(),
                   " rows of width ", piece.output_dim, ", not part ", rank, "'s ",
                   global_ids.size(), " rows of width ", width,
                   " (a checkpoint of another partition?)");
    }
    return std::move(piece.output);
}

std::size_t Restart::begin(MPI_Comm comm, const Model& model, const Shard& shard)
{
    if (o_.resume.empty()) {
        return 0;
    }
    int last = last_layer_written(o_.resume, rank_, model.layers.size());
    HALO_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &last, 1, MPI_INT, MPI_MIN, comm));
    resumed_after_ = last;
    if (last < 0) {
        return 0;
    }
    const auto layer = static_cast<std::size_t>(last);
    input_ = read_layer(o_.resume, rank_, layer, shard.global_ids, model.layers[layer].out_dim);
    return layer + 1;
}

std::function<void(std::size_t, std::span<const float>)> Restart::hook(const Shard& shard,
                                                                       const Model& model)
{
    if (o_.checkpoint.empty()) {
        return {};
    }
    return [this, &shard, &model](std::size_t layer, std::span<const float> rows) {
        if (writing_) {
            write_layer(o_.checkpoint, rank_, ranks_, layer, shard.global_ids, rows,
                        model.layers[layer].out_dim, !o_.no_sync);
        }
    };
}

}  // namespace halo::job
