// Synthetic graphs: R-MAT / Kronecker (skewed, Graph500) and uniform Erdős–Rényi G(n, m).
//
// They stand in for real graphs in tests and benchmarks at any size, so they must be cheap to
// regenerate and identical everywhere: edge e is drawn from a counter-based generator keyed by
// (seed, e), so the edge list depends only on the options, never on the OpenMP thread count or
// schedule, and the loop over edges runs in parallel. Ids are int64 throughout. Edges are drawn
// with replacement: the lists may hold duplicates, which build_csr merges, and self-loops, which
// it keeps or drops by its options (as the Graph500 kernels do). Graphs beyond 2^31 nodes can be
// generated, but build_csr (int32 column ids) accepts at most 2^31 - 1 nodes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "halo/core/graph.hpp"

namespace halo {

/// R-MAT: each edge descends `scale` levels of the adjacency matrix, picking at each level the
/// quadrant (src bit, dst bit) = (0, 0), (0, 1), (1, 0), (1, 1) with probability a, b, c and
/// d = 1 - a - b - c. Defaults are Graph500's. num_nodes = 2^scale and
/// num_edges = round(edge_factor * 2^scale).
struct RmatOptions {
    int scale = 0;            // 1 .. 40
    double edge_factor = 16;  // > 0
    double a = 0.57;
    double b = 0.19;
    double c = 0.19;
    std::uint64_t seed = 1;
    // Relabel nodes by a seeded bijection of [0, 2^scale), so that the high-degree nodes are not
    // all at small ids (unscrambled, node 0 has the largest expected degree).
    bool scramble = true;
};

/// Uniform random multigraph G(n, m): m edges whose src and dst are independent and uniform in
/// [0, n) (sampled with replacement).
struct ErdosRenyiOptions {
    std::int64_t num_nodes = 0;  // >= 1
    std::int64_t num_edges = 0;  // >= 0
    std::uint64_t seed = 1;
};

/// Throws halo::InputError naming the offending option and value: scale outside 1..40, a, b or c
/// outside (0, 1), a + b + c >= 1, edge_factor not finite and > 0, num_nodes < 1, num_edges < 0,
/// or more than 2^58 edges (the counter space of the generator).
void validate(const RmatOptions& options);
void validate(const ErdosRenyiOptions& options);

/// round(edge_factor * 2^scale) after validate(options).
std::int64_t rmat_num_edges(const RmatOptions& options);

EdgeList generate_rmat(const RmatOptions& options);
EdgeList generate_erdos_renyi(const ErdosRenyiOptions& options);
/// Edges [first_edge, last_edge) of the full graph only (each edge is drawn from its own counter
/// stream, so ranks that generate disjoint ranges together produce exactly generate(...)'s edges).
EdgeList generate_rmat(const RmatOptions& options, std::int64_t first_edge, std::int64_t last_edge);
EdgeList generate_erdos_renyi(const ErdosRenyiOptions& options, std::int64_t first_edge,
                              std::int64_t last_edge);

/// Which generator a command line asked for, with its options.
using GraphSpec = std::variant<RmatOptions, ErdosRenyiOptions>;

/// Seed used when a spec names none.
inline constexpr std::uint64_t kDefaultGraphSeed = 1;

/// Parses "rmat:SCALE:EF[:SEED]" (Graph500 a, b, c, scrambled) or "er:N:M[:SEED]". SCALE, N, M
/// and SEED are decimal integers, EF a decimal number. Throws halo::InputError naming the spec and
/// the offending field on malformed or out-of-range input.
GraphSpec parse_graph_spec(std::string_view text);

/// The spec string that parse_graph_spec reads back to `spec`. Options that the syntax cannot
/// express (a, b, c, scramble) follow in parentheses when they differ from the defaults, so the
/// text still describes the graph exactly, e.g. for a dataset's created_by attribute.
std::string to_string(const GraphSpec& spec);

/// Runs the generator that `spec` names.
EdgeList generate(const GraphSpec& spec);
/// Edge count of the graph `spec` describes, and its edges [first_edge, last_edge).
std::int64_t num_edges(const GraphSpec& spec);
EdgeList generate(const GraphSpec& spec, std::int64_t first_edge, std::int64_t last_edge);

}  // namespace halo
