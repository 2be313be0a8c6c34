// The sparse operators the layers aggregate with, built from a shard's stored adjacency
// (docs/ENGINE.md "Operators"): the gcn operator D^-1/2 (A + I) D^-1/2, the row mean, the plain
// sum, and the pattern with self-loops that attention layers attend over. Rows keep the shard's
// stored (ascending global column) order, so a row's reduction order is the same for every part
// count. Used by the engine and by halo-partition's offline kernel metadata.
#pragma once

#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/shard.hpp"

namespace halo {

/// The aggregation operator a layer type needs, derived from the dataset's adjacency.
enum class Aggregation {
    gcn,   // D^-1/2 (A + I) D^-1/2, remaining self-loops added
    mean,  // row mean over the stored neighbours
    sum,   // plain sum over the stored neighbours (edge weights if any)
};

/// "gcn", "mean" or "sum": the dataset normalization that stores exactly this operator.
const char* to_string(Aggregation kind);

/// The kernel-metadata operator name of the operator a layer of `kind` aggregates with:
/// kernel_operator_gcn for gcn, kernel_operator_adjacency for mean and sum (the stored pattern).
const char* kernel_operator_name(Aggregation kind);

/// Degrees of A + I with remaining self-loops added (row sums of the stored values, plus 1 for a
/// row without a diagonal entry) of the owned rows, rounded to float: the gcn operator's d_i.
std::vector<float> gcn_degrees(const Shard& shard);

/// The local operator for `kind` from the shard's CSR, rows in the stored (global column) order.
/// `degree` holds the gcn degrees of all num_owned + num_halo local columns (gcn only; owned from
/// gcn_degrees, halo ones exchanged). When the dataset is already normalized for `kind` its values
/// are used as stored; a dataset normalized for another kind is a halo::InputError naming both.
Csr make_aggregation(const Shard& shard, Aggregation kind, const std::string& dataset_normalization,
                     const std::vector<float>& degree);

/// The pattern of make_aggregation(shard, gcn, "none", ...) without values: the stored adjacency
/// plus the missing diagonal entries, in the same places (what a backend that makes the gcn
/// values from scalings takes; Backend::make_scaled_spmm_plan).
Csr gcn_pattern(const Shard& shard);

/// The pattern agnn and gat layers attend over: the stored adjacency plus the missing diagonal
/// entries (PyG's add_self_loops), in the shard's column order; values are all ones.
Csr self_loop_pattern(const Shard& shard);

}  // namespace halo
