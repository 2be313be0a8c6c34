// Graphs and shards shared by the halo-exchange tests (MPI, device and int8 exchangers).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/shard.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition/shard_builder.hpp"

namespace halo::testing {

/// A random graph of uniform edges (seeded): random and block partitions get many peers.
inline Csr random_graph(std::int64_t num_nodes, std::int64_t num_edges, std::uint64_t seed)
{
    EdgeList e;
    e.num_nodes = num_nodes;
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int64_t> node(0, num_nodes - 1);
    for (std::int64_t k = 0; k < num_edges; ++k) {
        e.src.push_back(node(rng));
        e.dst.push_back(node(rng));
    }
    return build_csr(e, {});
}

/// Every part's shard of `graph` partitioned by `method` (seed 7).
inline std::vector<Shard> shards_for(const Csr& graph, Partitioner method, int num_parts)
{
    PartitionOptions options;
    options.method = method;
    options.num_parts = num_parts;
    options.seed = 7;
    return build_shards(graph, partition_graph(graph.view(), options), num_parts);
}

}  // namespace halo::testing
