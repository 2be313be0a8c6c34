// Uniform random edges G(n, m), drawn with replacement from the counter-based generator.
#include "halo/core/detail/resident_memory.hpp"
#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "random.hpp"

namespace halo {
namespace {

constexpr std::uint64_t kErdosRenyiDomain = 0x45522d6564676573ULL;  // "ER-edges"

}  // namespace

void validate(const ErdosRenyiOptions& o)
{
    if (o.num_nodes < 1) {
        HALO_THROW(InputError, "Erdos-Renyi node count ", o.num_nodes, " must be >= 1");
    }
    if (o.num_edges < 0) {
        HALO_THROW(InputError, "Erdos-Renyi edge count ", o.num_edges, " must be >= 0");
    }
    if (static_cast<std::uint64_t>(o.num_edges) > detail::kMaxStreams) {
        HALO_THROW(InputError, "Erdos-Renyi edge count ", o.num_edges,
                   " is more than the generator's 2^", 64 - detail::kStreamBits);
    }
}

EdgeList generate_erdos_renyi(const ErdosRenyiOptions& options)
{
    validate(options);
    return generate_erdos_renyi(options, 0, options.num_edges);
}

EdgeList generate_erdos_renyi(const ErdosRenyiOptions& options, std::int64_t first_edge,
                              std::int64_t last_edge)
{
    validate(options);
    HALO_EXPECTS(0 <= first_edge && first_edge <= last_edge && last_edge <= options.num_edges,
                 "edge range [", first_edge, ", ", last_edge, ") outside [0, ", options.num_edges,
                 ")");
    const std::int64_t m = last_edge - first_edge;
    const auto n = static_cast<std::uint64_t>(options.num_nodes);
    const detail::RngKey key(options.seed, kErdosRenyiDomain);

    EdgeList edges;
    edges.num_nodes = options.num_nodes;
    // Resident on every core first: zero-filling 16 bytes per edge page fault by page fault on
    // one thread costs seconds at R-MAT 26 (detail::populate_pages).
    edges.src = detail::resident_vector<global_id>(static_cast<std::size_t>(m));
    edges.dst = detail::resident_vector<global_id>(static_cast<std::size_t>(m));
#pragma omp parallel for schedule(static)
    for (std::int64_t e = 0; e < m; ++e) {
        detail::CounterStream rng(key, static_cast<std::uint64_t>(first_edge + e));
        edges.src[e] = static_cast<global_id>(detail::bounded(rng, n));
        edges.dst[e] = static_cast<global_id>(detail::bounded(rng, n));
    }
    return edges;
}

}  // namespace halo
