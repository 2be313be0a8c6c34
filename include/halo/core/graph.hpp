// Edge lists and the CSR builder that turns them into the adjacency every later stage uses.
//
// build_csr applies, in this order: optional transpose (row = destination), symmetrization
// (A | A^T), duplicate removal, the self-loop policy, and normalization. Duplicate entries of a
// weighted list, including the two directions of a symmetrized edge, merge by taking the larger
// weight, so "A | A^T" stays idempotent on lists that already hold both directions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/progress.hpp"

namespace halo {

/// A list of directed edges src -> dst over nodes [0, num_nodes).
struct EdgeList {
    std::int64_t num_nodes = 0;
    std::vector<global_id> src;
    std::vector<global_id> dst;
    std::vector<float> weights;  // empty: unweighted (all 1)

    std::int64_t num_edges() const noexcept { return static_cast<std::int64_t>(src.size()); }
    bool has_weights() const noexcept { return !weights.empty(); }
};

/// What build_csr does with diagonal entries (i, i).
enum class SelfLoops {
    keep,  // as the input has them
    drop,  // remove every diagonal entry
    add,   // give every row a diagonal entry: existing ones keep their weight, new ones get 1
           // (PyG's add_remaining_self_loops)
};

/// How build_csr scales the values; d_i is the sum of row i's values (its degree when unweighted)
/// after the self-loop policy. Rows with d_i == 0 stay zero.
enum class Normalization {
    none,  // values as built (pattern matrix when unweighted)
    gcn,   // a_ij / sqrt(d_i * d_j): D^-1/2 A D^-1/2 (with --self-loops add: D^-1/2 (A+I) D^-1/2)
    mean,  // a_ij / d_i: the row mean
};

struct BuildOptions {
    bool symmetrize = true;  // A | A^T
    SelfLoops self_loops = SelfLoops::keep;
    Normalization normalization = Normalization::none;
    bool use_weights = true;  // false: ignore the edge list's weights
    bool transpose = false;   // row = destination (PyG's source_to_target aggregation)
    /// Where an unweighted build reports its progress (ProgressMeter over its three passes: every
    /// ~10% once it has run a few seconds); empty: nowhere. A weighted build reports none.
    ProgressLine progress;
};

/// Builds the CSR adjacency: sorted columns in every row, no duplicates. Throws halo::InputError
/// when an id is outside [0, num_nodes) or num_nodes exceeds the int32 column range.
Csr build_csr(const EdgeList& edges, const BuildOptions& options);

namespace detail {
/// The pattern part of build_csr for an unweighted build (the CSR of rows[e] -> cols[e], and
/// cols[e] -> rows[e] too when `symmetrize`, sorted, no duplicates, self-loops as drawn), by a
/// two-level partition instead of atomic row cursors: each thread counts its slice of the edges
/// per block of 2^block_shift rows and scatters them into the blocks' regions of a temporary
/// array (2 + 4 bytes an entry: the row inside its block, the column), then each block is
/// placed, sorted and deduplicated with its rows' cursors in cache, and copied to its final
/// place. The same CSR for any thread count and block size. Ids must be checked already.
Csr build_pattern_by_row_blocks(std::int64_t num_nodes, const std::vector<global_id>& rows,
                                const std::vector<global_id>& cols, bool symmetrize,
                                int block_shift = 14, const ProgressLine& progress = {});
}  // namespace detail

/// Rows [first_row, first_row + num_rows) of a larger matrix as a num_rows-by-num_cols block, from
/// the entries (first_row + rows[k], cols[k], weights[k]) that fall into them (rows[k] is the row
/// inside the block) (already oriented, transposed and
/// symmetrized by the caller; any order): sorted, duplicates merged by max weight and self-loops
/// handled exactly as build_csr does, so that the blocks of all ranks stacked are build_csr's CSR
/// (before normalization, which needs global degrees). Empty `weights`: a pattern matrix.
Csr build_csr_rows(std::int64_t first_row, std::int64_t num_rows, std::int64_t num_cols,
                   const std::vector<local_id>& rows, const std::vector<local_id>& cols,
                   const std::vector<float>& weights, SelfLoops self_loops);

/// Scales `csr` in place (materializing ones for a pattern matrix unless `kind` is none).
void normalize(Csr& csr, Normalization kind);

/// normalize()'s two steps, for matrices stored in row blocks. First the rows' degrees: the sums
/// of their values in double, after materializing ones for a pattern matrix.
std::vector<double> normalization_degrees(Csr& csr);

/// Then the scaling of `rows`, rows [first_row, first_row + rows.num_rows) of a larger matrix with
/// `degree` the block's row degrees and `all_degrees` every row's (read by gcn only), in the same
/// operations and order as normalize(): the blocks stacked are normalize()'s matrix.
void normalize_rows(Csr& rows, std::int64_t first_row, Normalization kind,
                    const std::vector<double>& degree, const std::vector<double>& all_degrees);

/// Adds the missing diagonal entries (value 1) or drops all of them; keeps rows sorted.
void apply_self_loops(Csr& csr, SelfLoops policy);

/// Parses "keep" | "drop" | "add" and "none" | "gcn" | "mean"; throws halo::InputError otherwise.
SelfLoops parse_self_loops(std::string_view text);
Normalization parse_normalization(std::string_view text);
std::string to_string(SelfLoops policy);
std::string to_string(Normalization kind);

}  // namespace halo
