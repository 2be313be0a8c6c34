// Locality orders of a part's rows (halo-partition --row-order, halo-bench --row-order): which
// key orders each node among its part's rows, and a whole matrix renumbered by those keys.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "halo/core/csr.hpp"

namespace halo {

/// How the rows inside each group of a shard are ordered:
/// - `global`: ascending global id (the file's or the generator's numbering);
/// - `rcm`: reverse Cuthill-McKee within the part (a bandwidth-minimising BFS order), so that rows
///   with common neighbours sit close and an SpMM's reads of X rows gather from nearby memory;
/// - `rabbit`: Rabbit order within the part (Arai et al., IPDPS 2016): communities found by
///   incremental aggregation (modularity gain), numbered by a depth-first walk of the merge tree,
///   so that each community, and each community of communities, is a consecutive range of rows.
enum class RowOrder { global, rcm, rabbit };

/// "global" | "rcm" | "rabbit"; anything else is a halo::InputError naming it.
RowOrder parse_row_order(std::string_view text);

/// Per node, the key that orders it among its part's rows (build_shards' order_keys): its global
/// id for RowOrder::global; otherwise its position (0, 1, ...) in its part's order, computed over
/// the part's own stored edges (entries between two nodes of the part; self-loops and values
/// ignored; a directed graph's out-edges). Deterministic.
/// - rcm: each component from its node of least degree, neighbours queued by increasing degree,
///   ties by id, then reversed. O(num_nodes log num_nodes + nnz log max degree), serial BFS.
/// - rabbit: nodes visited once by increasing degree (ties by id); a visited node's community
///   (itself and the communities merged into it) joins the neighbouring community of largest
///   modularity gain, if that gain is positive (2m * w(u, c) > d(u) * d(c), m the part's edges);
///   the order is a pre-order depth-first walk of the merge tree, children in merge order, roots
///   in visiting order. O(nnz alpha(n)) plus the sort, serial within a part, the parts in
///   parallel (the same keys for any thread count); scratch O(num_nodes) plus the merged
///   communities' edge lists (at most the part's edges).
/// Throws halo::InputError for an owner outside [0, num_parts) or an owner array of another size.
std::vector<std::int64_t> row_order_keys(const Csr& global, const std::vector<std::int32_t>& owner,
                                         int num_parts, RowOrder order);

/// The square matrix renumbered by `keys` (one per row): P A P^T, where new row i is the row of
/// the i-th smallest key (ties by id) and every column is renumbered alike; each row's columns in
/// ascending new order, values (if any) carried along. Throws halo::InputError if `a` is not
/// square or `keys` has another length.
Csr permute_by_keys(const Csr& a, const std::vector<std::int64_t>& keys);

}  // namespace halo
