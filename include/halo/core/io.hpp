// Readers for the graph and node-data inputs of halo-partition, and the project's binary CSR.
//
// Graphs arrive as SNAP-style edge lists or Matrix Market coordinate files (plain or gzip, detected
// by content, not by extension) and become an EdgeList for build_csr. A built CSR can be saved as
// a ".hcsr" file that reloads without parsing. Node data is dense float32 features (.npy, raw
// float32, sparse COO text) and integer labels / index lists. docs/INPUT.md states exactly what
// each reader accepts.
//
// Errors: malformed content throws halo::InputError whose message starts with "<file>:<line>: "
// (or "<file>: " where no line applies) and quotes the offending token or value; a missing or
// unreadable file throws halo::IoError naming it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/progress.hpp"

namespace halo {

enum class GraphFormat {
    edge_list,      // text: "src dst [weight]" per line
    matrix_market,  // text: "%%MatrixMarket matrix coordinate ..." banner
    binary_csr,     // ".hcsr": starts with the magic "HALOCSR\0"
};

std::string to_string(GraphFormat format);

/// Detects the format from the first bytes of the file, looking through gzip compression: the
/// binary CSR magic, else a Matrix Market banner (case-insensitive), else an edge list. Throws
/// halo::IoError when the file cannot be read.
GraphFormat detect_graph_format(const std::filesystem::path& path);

struct GraphReadOptions {
    /// Number of nodes; every id must lie below it. -1: from a SNAP "# Nodes: N" header comment
    /// if the file has one, else the largest id + 1 (Matrix Market and binary CSR carry their own
    /// size, which must then equal this value when it is given).
    std::int64_t num_nodes = -1;
    /// Where an edge list's parse reports its progress (ProgressMeter: every ~10% once it has run
    /// a few seconds); empty: nowhere. The file's read (and a gzip file's inflation) before the
    /// parse reports none.
    ProgressLine progress;
};

/// Reads a SNAP-style edge list: 0-based ids, two columns "src dst" or three "src dst weight" on
/// every line; '#' and '%' comment lines and blank lines are skipped.
EdgeList read_edge_list(const std::filesystem::path& path, const GraphReadOptions& options = {});

/// Reads a Matrix Market coordinate matrix (pattern, real or integer; general or symmetric) as a
/// square adjacency; a symmetric file's off-diagonal entries produce both directions.
EdgeList read_matrix_market(const std::filesystem::path& path,
                            const GraphReadOptions& options = {});

/// Reads any GraphFormat (detected by content) as an edge list; a binary CSR becomes one edge per
/// nonzero (row -> column, with its value as weight).
EdgeList read_graph(const std::filesystem::path& path, const GraphReadOptions& options = {});

/// Slice `slice` of `num_slices` of an edge list, for ranks that read one file together: the
/// (decompressed) text is cut into equal byte ranges and a slice holds the lines that start in its
/// range, so a line crossing a boundary belongs to the slice where it starts and every line to
/// exactly one slice. A plain file is read from its slice's offset; a gzip file is inflated whole
/// by every reader. A slice may be empty (more slices than lines). num_nodes is the given count,
/// else the SNAP header's (read from the file's first lines), else the slice's largest id + 1
/// (0 for an empty slice): callers take the maximum over the slices.
EdgeList read_edge_list_slice(const std::filesystem::path& path, int slice, int num_slices,
                              const GraphReadOptions& options = {});

/// Writes `csr` as a binary CSR file (docs/INPUT.md gives the layout). The bytes go to a temporary
/// file in the same directory, which is renamed to `path` only once complete and flushed, so a
/// crash never leaves a file that looks valid. Throws halo::InputError if `csr` breaks a CSR
/// invariant and halo::IoError if writing fails.
void write_binary_csr(const std::filesystem::path& path, const Csr& csr);

/// Reads a binary CSR file, checking magic, version, flags, the sizes against the file length,
/// the checksum and the CSR invariants (halo::validate).
Csr read_binary_csr(const std::filesystem::path& path);

/// A dense row-major float32 matrix: element (i, j) is values[i * cols + j].
struct DenseMatrix {
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::vector<float> values;

    DenseView<const float> view() const noexcept { return dense_view(values.data(), rows, cols); }
    DenseView<float> view() noexcept { return dense_view(values.data(), rows, cols); }
};

/// Reads a 2-D NumPy .npy array of dtype '<f4' (or '<f8', converted to float32) in C order.
DenseMatrix read_npy(const std::filesystem::path& path);

/// Writes `matrix` as a version 1.0 .npy file ('<f4', C order), through a temporary file.
void write_npy(const std::filesystem::path& path, const DenseMatrix& matrix);

/// Reads raw little-endian float32 values, `width` per row; the file size must be a multiple of
/// 4 * width.
DenseMatrix read_raw_features(const std::filesystem::path& path, std::int64_t width);

/// Reads sparse COO text features (plain or gzip): a first line "# N F NNZ", then NNZ lines
/// "row col value" with 0-based row < N and col < F. Returns the dense N x F matrix; duplicate
/// entries add up.
DenseMatrix read_coo_features(const std::filesystem::path& path);

/// Reads node features choosing the reader by extension: .npy; .bin or .f32 (raw float32, needs
/// `raw_width`); .txt or .txt.gz (COO text, e.g. .coo.txt.gz). Every reader rejects NaN and
/// infinite values, naming the row and column.
DenseMatrix read_features(const std::filesystem::path& path, std::int64_t raw_width = 0);

/// Label value that marks a node without a label.
inline constexpr std::int32_t no_label = -1;

/// Reads one integer label per line, in node order (plain or gzip); -1 means no label.
std::vector<std::int32_t> read_labels(const std::filesystem::path& path);

/// Reads one non-negative node id per line (plain or gzip), e.g. a test split. With
/// num_nodes >= 0 every id must also lie below it.
std::vector<global_id> read_index_list(const std::filesystem::path& path,
                                       std::int64_t num_nodes = -1);

/// Reads a partition vector as METIS's gpmetis writes it (`graph.part.P`): one part id per line in
/// node order (plain or gzip; blank and '#'/'%' comment lines skipped). There must be exactly
/// num_nodes ids, each in [0, num_parts), and every part must own a node; otherwise
/// halo::InputError names the file, line and value.
std::vector<std::int32_t> read_part_file(const std::filesystem::path& path, std::int64_t num_nodes,
                                         int num_parts);

/// Writes `owner` in the format read_part_file reads, atomically.
void write_part_file(const std::filesystem::path& path, std::span<const std::int32_t> owner);

/// Writes `contents` to `path` atomically: a temporary file in the same directory, flushed and
/// renamed over the target (manifests, small text outputs). Throws halo::IoError naming the file.
void write_file_atomic(const std::filesystem::path& path, std::string_view contents);

}  // namespace halo
