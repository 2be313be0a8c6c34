// A shard: the rows one rank owns, its local CSR and its halo plan (docs/ARCHITECTURE.md, "Core
// types"), with the checks every reader and writer runs (halo_core). The partitioner builds shards
// (halo/partition/shard_builder.hpp).
//
// Local numbering. Owned rows come first, [0, num_owned), ordered interior first (rows that
// reference no halo column) then boundary, each group in ascending global id (or in a locality
// order: rows_in_global_order false). Halo columns follow,
// [num_owned, num_owned + num_halo), grouped by owning rank in ascending rank order, and inside a
// group in the order that rank sends them (ascending local row id on the owner). A received block
// therefore lands directly in the halo region of the feature matrix: no unpack copy.
//
// Column order inside a row: ascending global id of the column (not local id), so that a row's
// reduction visits its nonzeros in the same order for every part count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"

namespace halo {

/// Who sends what to whom, for one part. Peers are listed in strictly ascending rank order and
/// only when at least one row moves, so every block is non-empty. Both offset arrays always hold
/// peers + 1 entries starting at 0 (a single 0 when there is no peer), as build_shard makes them.
struct HaloPlan {
    std::vector<std::int32_t> recv_ranks;    // parts this part receives halo rows from
    std::vector<std::int64_t> recv_offsets;  // recv_ranks.size() + 1; block b is halo rows
                                             // [recv_offsets[b], recv_offsets[b + 1]) (0 = first
                                             // halo row, local column num_owned)
    std::vector<std::int32_t> send_ranks;    // parts this part sends owned rows to
    std::vector<std::int64_t> send_offsets;  // send_ranks.size() + 1, into send_rows
    std::vector<std::int32_t> send_rows;     // owned local row ids, grouped by peer, each group
                                             // in the order the peer stores them (strictly
                                             // ascending: the peer orders its halo block by our
                                             // local row id)

    std::int64_t num_recv() const { return recv_offsets.empty() ? 0 : recv_offsets.back(); }
    std::int64_t num_send() const { return send_offsets.empty() ? 0 : send_offsets.back(); }
};

struct Shard {
    std::int32_t part = 0;
    std::int32_t num_parts = 1;
    std::int64_t num_owned = 0;
    std::int64_t num_halo = 0;
    std::int64_t num_interior = 0;           // rows [0, num_interior) use no halo column
    std::vector<global_id> global_ids;       // num_owned: global id of each owned row
    std::vector<global_id> halo_global_ids;  // num_halo: global id of each halo column
    Csr csr;                                 // num_owned x (num_owned + num_halo)
    HaloPlan plan;
    std::int64_t feature_dim = 0;  // 0: no features stored
    std::vector<float> features;   // num_owned x feature_dim, row-major, local order
    /// INT8 features (docs/FORMAT.md, "Features"): when feature_scale is not empty, the dataset
    /// stores features_int8 (num_owned x feature_dim) with one scale and zero point per column
    /// (the same in every part), and `features` holds their dequantized values.
    std::vector<std::int8_t> features_int8;
    std::vector<float> feature_scale;              // feature_dim entries when int8
    std::vector<std::int32_t> feature_zero_point;  // feature_dim entries when int8
    std::vector<std::int32_t> labels;              // num_owned, local order; empty: none (-1: none)
    /// Rows of each group (interior, boundary) in ascending global id, as validate_shard then
    /// checks; false for a locality order (halo-partition --row-order rcm, the dataset's root
    /// attribute row_order), where only distinct ids are required.
    bool rows_in_global_order = true;

    RowRange interior_rows() const { return {0, num_interior}; }
    RowRange boundary_rows() const { return {num_interior, num_owned}; }
};

/// Whether the shard's local column ids run in global id order (owned ids ascending, halo ids
/// ascending and above them; one part always): then comparing local ids compares global ids.
bool local_order_is_global(const Shard& shard);

/// Checks one shard's internal invariants: sizes of every array; owned global ids ascending inside
/// the interior and the boundary group, all owned and halo ids distinct; CSR structure (indptr
/// from 0, monotone, ending at nnz; columns in range and strictly ascending by global id per row;
/// values empty or nnz long); interior rows without halo column and boundary rows with one; the
/// plan's offsets (from 0, strictly ascending, ending at num_halo / send_rows.size()), peers
/// ascending, in range and not the part itself; send rows in range and strictly ascending per peer;
/// features and labels (>= -1) sized num_owned. Throws halo::InputError reading
/// "<where>: <dataset>[<index>] = <value> <what is wrong>", e.g.
/// "data.h5 part 3: csr/indices[17] = 900 outside [0, 812)"; dataset names are FORMAT.md's.
void validate_shard(const Shard& shard, const std::string& where);

/// Checks a shard against the global owner array: every owned global id is owned by the part,
/// the part owns no other node, and every halo id is owned by the peer of its receive block.
/// Throws halo::InputError naming `where`, the dataset, the index and both parts.
void validate_shard_owner(const Shard& shard, const std::vector<std::int32_t>& owner,
                          const std::string& where);

/// Checks that the plans of all parts agree pairwise: part p sends to q exactly as many rows as q
/// expects from p, and in the same global ids. Validates each shard first (validate_shard, with
/// "<where> part <p>"), and that shards[p].part == p and all agree on num_parts. Throws
/// halo::InputError naming both parts.
void validate_halo_plans(const std::vector<Shard>& shards, const std::string& where);

}  // namespace halo
