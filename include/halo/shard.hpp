// A shard: the rows one rank owns, its local CSR and its halo plan (DESIGN.md, "Core types").
//
// Local numbering. Owned rows come first, [0, num_owned), ordered interior first (rows that
// reference no halo column) then boundary, each group in ascending global id. Halo columns follow,
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

#include "halo/csr.hpp"

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
    std::int64_t feature_dim = 0;      // 0: no features stored
    std::vector<float> features;       // num_owned x feature_dim, row-major, local order
    /// INT8 features (docs/FORMAT.md, "Features"): when feature_scale is not empty, the dataset
    /// stores features_int8 (num_owned x feature_dim) with one scale and zero point per column
    /// (the same in every part), and `features` holds their dequantized values.
    std::vector<std::int8_t> features_int8;
    std::vector<float> feature_scale;             // feature_dim entries when int8
    std::vector<std::int32_t> feature_zero_point;  // feature_dim entries when int8
    std::vector<std::int32_t> labels;  // num_owned, local order; empty: none (-1: none)

    RowRange interior_rows() const { return {0, num_interior}; }
    RowRange boundary_rows() const { return {num_interior, num_owned}; }
};

/// Splits the global adjacency (square, any pattern: it need not be symmetric) into one shard
/// per part. `owner[v]` is v's part; every part must own at least one node (halo::InputError names
/// the empty part otherwise), and an owner outside [0, num_parts) or a column outside the graph is
/// an InputError too. Local CSR values are the global ones (a pattern matrix stays a pattern).
/// Time O(nnz log(max degree) + num_nodes + H log H), H the total halo size (rows keep global
/// column order); the send lists are derived from the peers' receive blocks, so the two agree
/// by construction.
std::vector<Shard> build_shards(const Csr& global, const std::vector<std::int32_t>& owner,
                                int num_parts);

/// Builds the shard of one part only (same result as build_shards(...)[part]); lets a writer
/// stream parts without holding all of them. Two OpenMP-parallel passes over the global CSR (one
/// classifies every row as interior or boundary, which fixes every part's local order; one finds
/// the rows other parts read from this one: in a directed graph these are not this part's halo),
/// O(num_nodes) scratch and otherwise memory proportional to the part.
Shard build_shard(const Csr& global, const std::vector<std::int32_t>& owner, int num_parts,
                  int part);

/// Builds part `part` from `rows`, a num_nodes-square CSR indexed by global id that holds at least
/// that part's rows (other rows may be empty), and `boundary`, num_nodes flags computed from the
/// whole graph (1: the node's row has a column owned by another part). The result equals
/// build_shard(global, owner, num_parts, part) except for the send plan, which is left empty: a
/// distributed builder fills it from the peers' receive blocks (halo/distributed_partition.hpp).
Shard build_shard_rows(const Csr& rows, const std::vector<std::int32_t>& owner, int num_parts,
                       int part, const std::vector<std::uint8_t>& boundary);

/// Copies each owned row's features (global row-major [num_nodes, dim]) and labels (num_nodes
/// entries, may be empty) into the shard, in local order. dim == 0 with empty features stores no
/// features. Throws halo::InputError when the arrays are too short for an owned global id or the
/// feature array is not a whole number of rows.
void attach_node_data(Shard& shard, const std::vector<float>& features, std::int64_t dim,
                      const std::vector<std::int32_t>& labels);

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

/// Reassembles the global CSR (rows and columns in global ids, columns sorted per row) from all
/// shards: the exact inverse of build_shards, used by tests and halo-inspect --check. Throws
/// halo::InputError when a global id is outside [0, num_nodes), a node is owned twice or by no
/// shard, or some shards carry values and others do not.
Csr reassemble(const std::vector<Shard>& shards, std::int64_t num_nodes);

}  // namespace halo
