// A shard: the rows one rank owns, its local CSR and its halo plan (DESIGN.md, "Core types").
//
// Local numbering. Owned rows come first, [0, num_owned), ordered interior first (rows that
// reference no halo column) then boundary, each group in ascending global id. Halo columns follow,
// [num_owned, num_owned + num_halo), grouped by owning rank in ascending rank order, and inside a
// group in the order that rank sends them (ascending local row id on the owner). A received block
// therefore lands directly in the halo region of the feature matrix: no unpack copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halo/csr.hpp"

namespace halo {

/// Who sends what to whom, for one part. Peers are listed in ascending rank order.
struct HaloPlan {
    std::vector<std::int32_t> recv_ranks;    // parts this part receives halo rows from
    std::vector<std::int64_t> recv_offsets;  // recv_ranks.size() + 1; block b is halo rows
                                             // [recv_offsets[b], recv_offsets[b + 1]) (0 = first
                                             // halo row, local column num_owned)
    std::vector<std::int32_t> send_ranks;    // parts this part sends owned rows to
    std::vector<std::int64_t> send_offsets;  // send_ranks.size() + 1, into send_rows
    std::vector<std::int32_t> send_rows;     // owned local row ids, grouped by peer, each group
                                             // in the order the peer stores them

    std::int64_t num_recv() const { return recv_offsets.empty() ? 0 : recv_offsets.back(); }
    std::int64_t num_send() const { return send_offsets.empty() ? 0 : send_offsets.back(); }
};

struct Shard {
    std::int32_t part = 0;
    std::int32_t num_parts = 1;
    std::int64_t num_owned = 0;
    std::int64_t num_halo = 0;
    std::int64_t num_interior = 0;               // rows [0, num_interior) use no halo column
    std::vector<global_id> global_ids;           // num_owned: global id of each owned row
    std::vector<global_id> halo_global_ids;      // num_halo: global id of each halo column
    Csr csr;                                     // num_owned x (num_owned + num_halo)
    HaloPlan plan;
    std::int64_t feature_dim = 0;                // 0: no features stored
    std::vector<float> features;                 // num_owned x feature_dim, row-major, local order
    std::vector<std::int32_t> labels;            // num_owned, local order; empty: none (-1: none)

    RowRange interior_rows() const { return {0, num_interior}; }
    RowRange boundary_rows() const { return {num_interior, num_owned}; }
};

/// Splits the global adjacency into one shard per part. `owner[v]` is v's part; every part must
/// own at least one node (halo::InputError names the empty part otherwise).
std::vector<Shard> build_shards(const Csr& global, const std::vector<std::int32_t>& owner,
                                int num_parts);

/// Builds the shard of one part only (same result as build_shards(...)[part]); lets a writer
/// stream parts without holding all of them.
Shard build_shard(const Csr& global, const std::vector<std::int32_t>& owner, int num_parts,
                  int part);

/// Copies each owned row's features (global row-major [num_nodes, dim]) and labels (num_nodes
/// entries, may be empty) into the shard, in local order.
void attach_node_data(Shard& shard, const std::vector<float>& features, std::int64_t dim,
                      const std::vector<std::int32_t>& labels);

/// Checks one shard's internal invariants (sizes, CSR structure, interior rows without halo
/// columns, halo ids grouped as the plan says, send rows in range). Throws halo::InputError with
/// `where` (e.g. "data.h5 part 3") and the violated invariant.
void validate_shard(const Shard& shard, const std::string& where);

/// Checks that the plans of all parts agree pairwise: part p sends to q exactly as many rows as q
/// expects from p, and in the same global ids. Throws halo::InputError naming both parts.
void validate_halo_plans(const std::vector<Shard>& shards, const std::string& where);

/// Reassembles the global CSR (rows and columns in global ids) from all shards: the exact inverse
/// of build_shards, used by tests and halo-inspect --check.
Csr reassemble(const std::vector<Shard>& shards, std::int64_t num_nodes);

}  // namespace halo
