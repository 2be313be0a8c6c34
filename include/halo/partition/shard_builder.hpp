// Building shards from a global adjacency and an owner array (halo_partition): the local
// numbering and halo plans of halo/core/shard.hpp, node data in local order, and the inverse that
// reassembles the global CSR.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/shard.hpp"
#include "halo/partition/row_order.hpp"

namespace halo {

/// Splits the global adjacency (square, any pattern: it need not be symmetric) into one shard
/// per part. `owner[v]` is v's part; every part must own at least one node (halo::InputError names
/// the empty part otherwise), and an owner outside [0, num_parts) or a column outside the graph is
/// an InputError too. Local CSR values are the global ones (a pattern matrix stays a pattern).
/// Time O(nnz log(max degree) + num_nodes + H log H), H the total halo size (rows keep global
/// column order); the send lists are derived from the peers' receive blocks, so the two agree
/// by construction.
/// `order_keys` (row_order_keys; null: ascending global id) orders the rows inside each group
/// (interior, boundary) of every part by ascending key, ties by global id; halo columns and send
/// lists follow the owners' local rows as always.
std::vector<Shard> build_shards(const Csr& global, const std::vector<std::int32_t>& owner,
                                int num_parts,
                                const std::vector<std::int64_t>* order_keys = nullptr);

/// Builds the shard of one part only (same result as build_shards(...)[part]); lets a writer
/// stream parts without holding all of them. Two OpenMP-parallel passes over the global CSR (one
/// classifies every row as interior or boundary, which fixes every part's local order; one finds
/// the rows other parts read from this one: in a directed graph these are not this part's halo),
/// O(num_nodes) scratch and otherwise memory proportional to the part.
Shard build_shard(const Csr& global, const std::vector<std::int32_t>& owner, int num_parts,
                  int part, const std::vector<std::int64_t>* order_keys = nullptr);

/// Builds the shards of one partition one at a time, as build_shard does, with what every part
/// needs computed once: the classification pass over the global CSR and the rows' order (with
/// order keys, a sort of all nodes), which build_shard repeats per call. Then each build(part)
/// costs that part's rows and one pass for its send lists. `global`, `owner` and `order_keys`
/// must outlive the builder. build(part) equals build_shards(...)[part]; it may be called for
/// the parts in any order, each any number of times (one thread at a time). Holds
/// O(num_nodes) ids and scratch.
class ShardBuilder {
public:
    ShardBuilder(const Csr& global, const std::vector<std::int32_t>& owner, int num_parts,
                 const std::vector<std::int64_t>* order_keys = nullptr);
    ~ShardBuilder();
    ShardBuilder(const ShardBuilder&) = delete;
    ShardBuilder& operator=(const ShardBuilder&) = delete;

    Shard build(int part);

private:
    struct State;
    std::unique_ptr<State> state_;
};

// RowOrder, parse_row_order and row_order_keys (the order_keys above):
// halo/partition/row_order.hpp.

/// Builds part `part` from `rows`, a num_nodes-square CSR indexed by global id that holds at least
/// that part's rows (other rows may be empty), and `boundary`, num_nodes flags computed from the
/// whole graph (1: the node's row has a column owned by another part). The result equals
/// build_shard(global, owner, num_parts, part) except for the send plan, which is left empty: a
/// distributed builder fills it from the peers' receive blocks
/// (halo/partition_mpi/distributed_partition.hpp).
Shard build_shard_rows(const Csr& rows, const std::vector<std::int32_t>& owner, int num_parts,
                       int part, const std::vector<std::uint8_t>& boundary);

/// Copies each owned row's features (global row-major [num_nodes, dim]) and labels (num_nodes
/// entries, may be empty) into the shard, in local order. dim == 0 with empty features stores no
/// features. Throws halo::InputError when the arrays are too short for an owned global id or the
/// feature array is not a whole number of rows.
void attach_node_data(Shard& shard, const std::vector<float>& features, std::int64_t dim,
                      const std::vector<std::int32_t>& labels);

/// Reassembles the global CSR (rows and columns in global ids, columns sorted per row) from all
/// shards: the exact inverse of build_shards, used by tests and halo-inspect --check. Throws
/// halo::InputError when a global id is outside [0, num_nodes), a node is owned twice or by no
/// shard, or some shards carry values and others do not.
Csr reassemble(const std::vector<Shard>& shards, std::int64_t num_nodes);

}  // namespace halo
