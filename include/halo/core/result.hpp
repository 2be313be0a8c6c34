// Inference results (docs/FORMAT.md, "Results"): each rank writes its own rows to
// <dir>/part-<p>.h5 (global ids, outputs, predicted class, optionally every layer's output), and
// rank 0 writes <dir>/manifest.json last, once every piece is in place. A directory without a
// manifest is an incomplete run. No rank ever holds every row's result; readers that do (tests,
// halo-inspect --compare on graphs that fit one machine) assemble them by global id.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"

namespace halo {

inline constexpr const char* result_manifest_format = "halo-result-manifest";
inline constexpr int result_format_version = 1;

struct ResultPiece {
    std::int32_t part = 0;
    std::int32_t num_parts = 1;
    std::vector<global_id> global_ids;  // rows in this piece
    std::int64_t output_dim = 0;
    std::vector<float> output;               // rows x output_dim
    std::vector<std::int32_t> prediction;    // argmax of each output row (lowest index on ties)
    std::vector<std::vector<float>> layers;  // optional: each layer's output (rows x width)
    std::vector<std::int64_t> layer_dims;    // widths of `layers`
};

/// <dir>/part-<part>.h5
std::filesystem::path result_piece_path(const std::filesystem::path& dir, int part);
/// <dir>/manifest.json
std::filesystem::path result_manifest_path(const std::filesystem::path& dir);

/// Argmax of each row (the lowest index among equal maxima).
std::vector<std::int32_t> argmax_rows(std::span<const float> output, std::int64_t dim);

/// How a result piece is written.
struct ResultWriteOptions {
    /// Flush the piece to stable storage before its rename (the default). Without: the piece is
    /// complete for every process once written, and writing it costs the page cache's time, not
    /// the disk's; a power loss or kernel crash soon after may lose or damage it (docs/FORMAT.md,
    /// "Results": the manifest, written last, is synced either way).
    bool sync = true;
};

/// Rows of the outputs that are produced while the piece is written (a download from the
/// device batch by batch): rows(first, count) returns rows [first, first + count) (count x
/// output_dim floats) in host memory that stays readable until the call after next. Called on
/// one thread at a time, in row order, while earlier rows are written; after the first call,
/// on one of the writer's OpenMP threads (a CUDA caller selects its device there); may throw.
using OutputRows = std::function<const float*(std::int64_t first, std::int64_t count)>;

/// Writes one piece atomically (temporary name, then rename).
void write_result_piece(const std::filesystem::path& dir, const ResultPiece& piece,
                        const ResultWriteOptions& options = {});
/// The same with the outputs given apart (piece.output is ignored): written straight from a
/// buffer the caller owns, such as Engine::forward's.
void write_result_piece(const std::filesystem::path& dir, const ResultPiece& piece,
                        std::span<const float> output, const ResultWriteOptions& options = {});
/// The same with the outputs fetched batch by batch while earlier ones are written
/// (piece.output is ignored). piece.prediction is written after the outputs: it must have its
/// size from the start, and `output` may fill it as the rows pass (the argmax of each batch).
void write_result_piece(const std::filesystem::path& dir, const ResultPiece& piece,
                        const OutputRows& output, const ResultWriteOptions& options = {});
ResultPiece read_result_piece(const std::filesystem::path& file);

/// A complete result, rows sorted by global id.
struct ResultSet {
    std::int32_t num_parts = 0;
    std::int64_t output_dim = 0;
    std::vector<global_id> global_ids;
    std::vector<float> output;
    std::vector<std::int32_t> prediction;
};

/// Reads the manifest (missing: the run is incomplete, an error saying so) and every piece it
/// names, checking that they agree (part numbers, widths, no id twice).
ResultSet read_results(const std::filesystem::path& dir);

/// Writes a whole result as one HDF5 file (written under a temporary name, then renamed):
/// /global_ids int64[n], /output float32[n, output_dim], /prediction int32[n], rows in the set's
/// order (ascending global id), root attributes format = "halo-result-export", num_rows,
/// output_dim, num_parts (of the run). h5py: f["output"][i] is the row of node f["global_ids"][i].
void write_result_export(const std::filesystem::path& path, const ResultSet& set);

}  // namespace halo
