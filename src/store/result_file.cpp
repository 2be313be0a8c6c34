// Per-rank result pieces and their manifest (docs/FORMAT.md, "Results").
#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <parallel/algorithm>
#include <span>
#include <sstream>

#include "halo/core/detail/argmax.hpp"
#include "halo/core/error.hpp"
#include "halo/core/result.hpp"
#include "hdf5_util.hpp"

namespace halo {
namespace {

constexpr const char* piece_format_name = "halo-result";

template <typename T>
std::span<const T> span_of(const std::vector<T>& v)
{
    return {v.data(), v.size()};
}

// Rows of every piece in ascending global id order, into `set`; a node in two pieces is an
// InputError naming both. A result of one piece whose ids already ascend (one rank, as
// halo-partition numbers a single part) is moved, not copied. When the ids are exactly
// 0 .. total - 1 (every node once: any complete halo-infer result) each row goes straight to
// the position of its id, on every core. Anything else, and a repeated id (to name both parts),
// sorts (id, part, row) triples.
void assemble_by_global_id(std::vector<ResultPiece>& pieces, std::int64_t total,
                           const std::filesystem::path& dir, ResultSet& set)
{
    const auto dim = set.output_dim;
    if (pieces.size() == 1 &&
        std::adjacent_find(pieces[0].global_ids.begin(), pieces[0].global_ids.end(),
                           std::greater_equal<>()) == pieces[0].global_ids.end()) {
        set.global_ids = std::move(pieces[0].global_ids);
        set.output = std::move(pieces[0].output);
        set.prediction = std::move(pieces[0].prediction);
        return;
    }
    // Each id in [0, total) marks its bit; a bit already set is a repeated id.
    std::vector<std::atomic<std::uint64_t>> seen(static_cast<std::size_t>((total + 63) / 64));
    bool dense = true;
    for (const auto& piece : pieces) {
        const auto n = static_cast<std::int64_t>(piece.global_ids.size());
        bool ok = true;
#pragma omp parallel for schedule(static) reduction(&& : ok) if (n > (1 << 16))
        for (std::int64_t r = 0; r < n; ++r) {
            const auto g = piece.global_ids[r];
            if (g < 0 || g >= total) {
                ok = false;
                continue;
            }
            const auto bit = std::uint64_t{1} << (g % 64);
            ok = ok && (seen[g / 64].fetch_or(bit, std::memory_order_relaxed) & bit) == 0;
        }
        dense = dense && ok;
    }
    if (dense) {
        set.global_ids = store::resident_vector<global_id>(static_cast<std::size_t>(total));
        set.output = store::resident_vector<float>(static_cast<std::size_t>(total * dim));
        set.prediction = store::resident_vector<std::int32_t>(static_cast<std::size_t>(total));
        for (const auto& piece : pieces) {
            const auto n = static_cast<std::int64_t>(piece.global_ids.size());
#pragma omp parallel for schedule(static) if (n > (1 << 16))
            for (std::int64_t r = 0; r < n; ++r) {
                const auto g = piece.global_ids[r];
                set.global_ids[g] = g;
                std::copy_n(piece.output.begin() + r * dim, dim, set.output.begin() + g * dim);
                set.prediction[g] = piece.prediction[r];
            }
        }
        return;
    }
    std::vector<std::pair<global_id, std::pair<int, std::int64_t>>> order;
    order.reserve(total);
    for (std::size_t p = 0; p < pieces.size(); ++p) {
        for (std::size_t r = 0; r < pieces[p].global_ids.size(); ++r) {
            order.push_back(
                {pieces[p].global_ids[r], {static_cast<int>(p), static_cast<std::int64_t>(r)}});
        }
    }
    if (order.size() > (1 << 16)) {
        __gnu_parallel::sort(order.begin(), order.end());
    } else {
        std::sort(order.begin(), order.end());
    }
    for (std::size_t k = 1; k < order.size(); ++k) {
        if (order[k].first == order[k - 1].first) {
            HALO_THROW(InputError, dir.string(), ": node ", order[k].first, " appears in parts ",
                       order[k - 1].second.first, " and ", order[k].second.first);
        }
    }
    set.global_ids.resize(total);
    set.output.resize(static_cast<std::size_t>(total * dim));
    set.prediction.resize(total);
#pragma omp parallel for schedule(static) if (total > (1 << 16))
    for (std::int64_t k = 0; k < total; ++k) {
        const auto [p, r] = order[k].second;
        set.global_ids[k] = order[k].first;
        std::copy_n(pieces[p].output.begin() + r * dim, dim, set.output.begin() + k * dim);
        set.prediction[k] = pieces[p].prediction[r];
    }
}

}  // namespace

std::filesystem::path result_piece_path(const std::filesystem::path& dir, int part)
{
    return dir / ("part-" + std::to_string(part) + ".h5");
}

std::filesystem::path result_manifest_path(const std::filesystem::path& dir)
{
    return dir / "manifest.json";
}

std::vector<std::int32_t> argmax_rows(std::span<const float> output, std::int64_t dim)
{
    HALO_EXPECTS(dim > 0 && static_cast<std::int64_t>(output.size()) % dim == 0, "output of ",
                 output.size(), " values is not a multiple of width ", dim);
    const auto rows = static_cast<std::int64_t>(output.size()) / dim;
    auto best = store::resident_vector<std::int32_t>(static_cast<std::size_t>(rows));
#pragma omp parallel for schedule(static) if (rows > (1 << 14))
    for (std::int64_t i = 0; i < rows; ++i) {
        const float* row = output.data() + i * dim;
        best[i] = detail::argmax_row(row, dim);
    }
    return best;
}

void write_result_piece(const std::filesystem::path& dir, const ResultPiece& piece,
                        const ResultWriteOptions& options)
{
    write_result_piece(dir, piece, span_of(piece.output), options);
}

void write_result_piece(const std::filesystem::path& dir, const ResultPiece& piece,
                        std::span<const float> output, const ResultWriteOptions& options)
{
    const auto rows = static_cast<std::int64_t>(piece.global_ids.size());
    HALO_EXPECTS(static_cast<std::int64_t>(output.size()) == rows * piece.output_dim,
                 "result piece ", piece.part, ": ", output.size(), " outputs for ", rows,
                 " rows of width ", piece.output_dim);
    write_result_piece(
        dir, piece,
        [&output, &piece](std::int64_t first, std::int64_t) {
            return output.data() + first * piece.output_dim;
        },
        options);
}

void write_result_piece(const std::filesystem::path& dir, const ResultPiece& piece,
                        const OutputRows& output, const ResultWriteOptions& options)
{
    const auto rows = static_cast<std::int64_t>(piece.global_ids.size());
    HALO_EXPECTS(piece.output_dim > 0, "result piece ", piece.part, ": output width ",
                 piece.output_dim);
    HALO_EXPECTS(static_cast<std::int64_t>(piece.prediction.size()) == rows, "result piece ",
                 piece.part, ": ", piece.prediction.size(), " predictions for ", rows, " rows");
    HALO_EXPECTS(piece.layers.size() == piece.layer_dims.size(), "result piece ", piece.part, ": ",
                 piece.layers.size(), " layers but ", piece.layer_dims.size(), " widths");
    const store::QuietErrors quiet;
    store::AtomicH5File out(result_piece_path(dir, piece.part),
                            options.sync ? store::Durability::synced : store::Durability::unsynced);
    const store::Where root{out.name(), "/"};
    const auto h = out.get();
    store::write_attribute<std::int32_t>(h, root, "version", result_format_version);
    store::write_attribute<std::int32_t>(h, root, "part", piece.part);
    store::write_attribute<std::int32_t>(h, root, "num_parts", piece.num_parts);
    store::write_attribute<std::int64_t>(h, root, "num_rows", rows);
    store::write_attribute<std::int64_t>(h, root, "output_dim", piece.output_dim);
    store::write_attribute<std::int32_t>(h, root, "num_layers",
                                         static_cast<std::int32_t>(piece.layers.size()));
    store::write_array<std::int64_t>(h, root, "global_ids", span_of(piece.global_ids));
    const hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(piece.output_dim)};
    store::write_dataset_rows(
        h, root, "output", store::H5Type<float>::file(), store::H5Type<float>::memory(),
        sizeof(float), dims, [&output](std::uint64_t first, std::uint64_t count) {
            return static_cast<const void*>(
                output(static_cast<std::int64_t>(first), static_cast<std::int64_t>(count)));
        });
    store::write_array<std::int32_t>(h, root, "prediction", span_of(piece.prediction));
    if (!piece.layers.empty()) {
        const auto layers = store::create_group(h, root, "layers");
        for (std::size_t l = 0; l < piece.layers.size(); ++l) {
            HALO_EXPECTS(
                static_cast<std::int64_t>(piece.layers[l].size()) == rows * piece.layer_dims[l],
                "result piece ", piece.part, ": layer ", l, " has ", piece.layers[l].size(),
                " values for ", rows, " x ", piece.layer_dims[l]);
            const auto name = std::to_string(l);
            store::write_matrix<float>(layers.get(), root.child("layers"), name.c_str(),
                                       span_of(piece.layers[l]), rows, piece.layer_dims[l]);
        }
    }
    out.commit_as(piece_format_name);
}

ResultPiece read_result_piece(const std::filesystem::path& path)
{
    const store::QuietErrors quiet;
    const auto in = store::open_format_file(path.string());
    if (in.format != piece_format_name) {
        HALO_THROW(InputError, path.string(), ": not a HaloGNN result piece (format '", in.format,
                   "'; an interrupted write?)");
    }
    store::expect_format_version(in, "result", result_format_version);
    const auto& root = in.root;
    const auto h = in.file.get();
    ResultPiece piece;
    piece.part = static_cast<std::int32_t>(store::read_int_attribute(h, root, "part"));
    piece.num_parts = static_cast<std::int32_t>(store::read_int_attribute(h, root, "num_parts"));
    const auto rows = store::read_int_attribute(h, root, "num_rows");
    piece.output_dim = store::read_int_attribute(h, root, "output_dim");
    if (rows < 0 || piece.output_dim < 1) {
        HALO_THROW(InputError, path.string(), ": num_rows ", rows, ", output_dim ",
                   piece.output_dim);
    }
    piece.global_ids =
        store::read_array<std::int64_t>(h, root, "global_ids", {rows, "attribute num_rows"});
    piece.output = store::read_matrix<float>(h, root, "output", rows, piece.output_dim,
                                             "[num_rows, output_dim]");
    piece.prediction =
        store::read_array<std::int32_t>(h, root, "prediction", {rows, "attribute num_rows"});
    return piece;
}

ResultSet read_results(const std::filesystem::path& dir)
{
    const auto manifest_path = result_manifest_path(dir);
    std::ifstream in(manifest_path);
    if (!in) {
        HALO_THROW(InputError, dir.string(),
                   ": no manifest.json: the run did not complete (or "
                   "this is not a halo-infer output directory)");
    }
    nlohmann::json manifest;
    try {
        in >> manifest;
    } catch (const nlohmann::json::exception& e) {
        HALO_THROW(InputError, manifest_path.string(), ": not valid JSON: ", e.what());
    }
    if (!manifest.is_object() || !manifest.contains("format") || !manifest["format"].is_string() ||
        manifest["format"].get<std::string>() != result_manifest_format) {
        HALO_THROW(InputError, manifest_path.string(), ": format is not '", result_manifest_format,
                   "'");
    }
    ResultSet set;
    set.num_parts = manifest.value("num_parts", 0);
    set.output_dim = manifest.value("output_dim", std::int64_t{0});
    if (set.num_parts < 1 || !manifest.contains("pieces") ||
        static_cast<int>(manifest["pieces"].size()) != set.num_parts) {
        HALO_THROW(InputError, manifest_path.string(), ": num_parts ", set.num_parts,
                   " does not match its list of pieces");
    }
    std::vector<ResultPiece> pieces;
    std::int64_t total = 0;
    for (int p = 0; p < set.num_parts; ++p) {
        const auto file = dir / manifest["pieces"][p].value("file", std::string());
        auto piece = read_result_piece(file);
        if (piece.part != p || piece.num_parts != set.num_parts ||
            piece.output_dim != set.output_dim) {
            HALO_THROW(InputError, file.string(), ": part ", piece.part, " of ", piece.num_parts,
                       ", width ", piece.output_dim, "; the manifest expects part ", p, " of ",
                       set.num_parts, ", width ", set.output_dim);
        }
        total += static_cast<std::int64_t>(piece.global_ids.size());
        pieces.push_back(std::move(piece));
    }
    assemble_by_global_id(pieces, total, dir, set);
    return set;
}

void write_result_export(const std::filesystem::path& path, const ResultSet& set)
{
    const auto rows = static_cast<std::int64_t>(set.global_ids.size());
    HALO_EXPECTS(static_cast<std::int64_t>(set.output.size()) == rows * set.output_dim &&
                     static_cast<std::int64_t>(set.prediction.size()) == rows,
                 "result export: ", set.output.size(), " outputs and ", set.prediction.size(),
                 " predictions for ", rows, " rows of width ", set.output_dim);
    const store::QuietErrors quiet;
    store::AtomicH5File out(path);
    const store::Where root{out.name(), "/"};
    const auto h = out.get();
    store::write_attribute<std::int64_t>(h, root, "num_rows", rows);
    store::write_attribute<std::int64_t>(h, root, "output_dim", set.output_dim);
    store::write_attribute<std::int32_t>(h, root, "num_parts", set.num_parts);
    store::write_array<std::int64_t>(h, root, "global_ids", span_of(set.global_ids));
    store::write_matrix<float>(h, root, "output", span_of(set.output), rows, set.output_dim);
    store::write_array<std::int32_t>(h, root, "prediction", span_of(set.prediction));
    out.commit_as("halo-result-export");
}

}  // namespace halo
