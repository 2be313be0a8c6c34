// The steps of the distributed path (include/halo/partition_mpi/distributed_partition.hpp), one
// file each: distributed_partition.cpp (read, block rows, the pipeline), distributed_scotch.cpp
// (step 3: PT-Scotch or dKaMinPar), distributed_shards.cpp (steps 5 and 6: rows to their part's
// rank, shards, send plans, quality; the joined dataset). Internal to halo_partition_mpi.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halo/core/graph.hpp"
#include "halo/core/shard.hpp"
#include "halo/partition_mpi/distributed_partition.hpp"
#include "mpi_comm.hpp"

namespace halo::detail {

/// PT-Scotch's flags for a strategy name; throws InputError naming an unknown one.
std::int64_t strategy_flags(const std::string& name);

/// Step 3 for either partitioner, on a symmetric pattern of the block rows: the part of each of
/// this rank's rows. Adds the refinement's seconds to `refine_seconds`. Collective.
std::vector<std::int32_t> partition_pattern(const Comm& c, const Csr& pattern,
                                            std::int64_t first_row, const DistributedOptions& o,
                                            double& refine_seconds);

/// Rows received by the rank that handles their part (step 5): global id, length, columns and
/// values (empty without values) of each, in the order received.
struct ReceivedRows {
    std::vector<local_id> ids;
    std::vector<std::int64_t> lengths;
    std::vector<local_id> cols;
    std::vector<float> values;
};

/// Step 5: sends the block rows (from `first_row` on) to the rank handling their part
/// (part_rank of `owner`), in rounds of about `chunk` nonzeros. `has_values`: whether any rank's
/// block has values (a block without them then sends ones). Collective.
ReceivedRows send_rows_to_parts(const Comm& c, const Csr& block, std::int64_t first_row,
                                const std::vector<std::int32_t>& owner, std::int64_t chunk,
                                bool has_values);

/// Step 6: the shards of the parts this rank handles (p with part_rank(p) == rank) from the rows
/// it received, with their send plans (from the peers' receive blocks) and checked. Collective.
std::vector<Shard> build_rank_shards(const Comm& c, ReceivedRows rows, std::int64_t num_nodes,
                                     const std::vector<std::int32_t>& owner, int num_parts,
                                     const std::vector<std::uint8_t>& boundary);

/// Every part's rows, nonzeros, halo rows and neighbours, the halo volume and the imbalances, as
/// partition_quality reports them (the edge cut is left as it is). Collective.
void part_quality(const Comm& c, const std::vector<Shard>& shards, int num_parts,
                  std::int64_t num_nodes, std::int64_t num_nonzeros, PartitionQuality& q);

}  // namespace halo::detail
