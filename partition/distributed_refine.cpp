// Distributed greedy k-way boundary refinement (include/halo/partition_mpi/distributed_refine.hpp).
#include "halo/partition_mpi/distributed_refine.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "halo/core/error.hpp"
#include "mpi_comm.hpp"

namespace halo {
namespace {

using detail::Comm;

// The labels of the ghost vertices (columns a rank references but does not own), fetched from
// their owners. The requests are exchanged once; every refresh sends only labels, in the same
// rounds of at most `chunk` ghosts per rank.
class GhostLabels {
public:
    // `ghosts`: sorted, distinct, none owned by this rank; `starts`: every rank's first row.
    GhostLabels(const Comm& c, const std::vector<global_id>& ghosts,
                const std::vector<std::int64_t>& starts, std::int64_t first_row, std::int64_t chunk)
        : c_(c), num_ghosts_(static_cast<std::int64_t>(ghosts.size()))
    {
        const auto count = num_ghosts_;
        const std::int64_t rounds = c.max((count + chunk - 1) / chunk);
        std::vector<int> counts(c.size);
        for (std::int64_t t = 0; t < rounds; ++t) {
            const auto begin = std::min(count, t * chunk);
            const auto end = std::min(count, begin + chunk);
            std::fill(counts.begin(), counts.end(), 0);
            for (auto g = begin; g < end; ++g) {
                const auto owner =
                    std::upper_bound(starts.begin(), starts.end(), ghosts[g]) - starts.begin() - 1;
                ++counts[owner];
            }
            const std::vector<global_id> ids(ghosts.begin() + begin, ghosts.begin() + end);
            Round round;
            std::vector<global_id> requested;
            round.send_counts = c.alltoallv_append(ids, counts, requested);
            round.rows.reserve(requested.size());
            for (const auto id : requested) {
                round.rows.push_back(static_cast<local_id>(id - first_row));
            }
            rounds_.push_back(std::move(round));
        }
    }

    // Labels of the ghosts, in the order of `ghosts`, from the owners' current `parts`.
    void refresh(const std::vector<std::int32_t>& parts, std::vector<std::int32_t>& out) const
    {
        out.clear();
        out.reserve(static_cast<std::size_t>(num_ghosts_));
        std::vector<std::int32_t> labels;
        for (const auto& round : rounds_) {
            labels.resize(round.rows.size());
            for (std::size_t k = 0; k < round.rows.size(); ++k) {
                labels[k] = parts[round.rows[k]];
            }
            // Replies come back in owner-rank order, which is the (sorted) order of the ghosts.
            c_.alltoallv_append(labels, round.send_counts, out);
        }
    }

private:
    struct Round {
        std::vector<int> send_counts;  // labels this rank sends to each requester
        std::vector<local_id> rows;    // which of its rows, grouped by requester
    };
    const Comm& c_;
    std::int64_t num_ghosts_;
    std::vector<Round> rounds_;
};

// Largest integer at most a / b, for b > 0.
std::int64_t floor_div(std::int64_t a, std::int64_t b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// The rows' adjacency with local indices: [0, n_local) the own rows, n_local + g the g-th ghost
// (the ghosts sorted and distinct; self-loops dropped), and each row's weight (1 + degree with
// `weight_by_degree`, else 1).
struct LocalGraph {
    std::vector<global_id> ghosts;
    std::vector<offset_t> adj_ptr;
    std::vector<local_id> adj;
    std::vector<std::int64_t> weight;
};

LocalGraph local_graph(const Csr& pattern, std::int64_t first_row, bool weight_by_degree)
{
    const auto n_local = pattern.num_rows;
    std::vector<global_id> ghosts;
    for (const auto j : pattern.indices) {
        if (j < first_row || j >= first_row + n_local) {
            ghosts.push_back(j);
        }
    }
    std::sort(ghosts.begin(), ghosts.end());
    ghosts.erase(std::unique(ghosts.begin(), ghosts.end()), ghosts.end());
    std::vector<offset_t> adj_ptr(n_local + 1, 0);
    std::vector<local_id> adj;
    adj.reserve(pattern.indices.size());
    std::vector<std::int64_t> weight(n_local);
    for (std::int64_t i = 0; i < n_local; ++i) {
        for (auto k = pattern.indptr[i]; k < pattern.indptr[i + 1]; ++k) {
            const global_id j = pattern.indices[k];
            if (j == first_row + i) {
                continue;
            }
            if (j >= first_row && j < first_row + n_local) {
                adj.push_back(static_cast<local_id>(j - first_row));
            } else {
                const auto g = std::lower_bound(ghosts.begin(), ghosts.end(), j) - ghosts.begin();
                adj.push_back(static_cast<local_id>(n_local + g));
            }
        }
        adj_ptr[i + 1] = static_cast<offset_t>(adj.size());
        weight[i] = weight_by_degree ? 1 + (adj_ptr[i + 1] - adj_ptr[i]) : 1;
    }
    return {std::move(ghosts), std::move(adj_ptr), std::move(adj), std::move(weight)};
}

// The part that a row of part `from` and weight `w_i` moves to in an upward (or downward)
// sub-phase, or -1: among the parts its neighbours are in (`touched`, with `conn` edges to each),
// the largest gain that keeps the target within its share of the balance bound, a move without
// gain only where it evens out the two parts; ties to the lighter part, then the lower id.
std::int32_t best_target(const std::vector<std::int32_t>& touched,
                         const std::vector<std::int64_t>& conn, std::int32_t from,
                         std::int64_t w_i, bool upward,
                         const std::vector<std::int64_t>& part_weight,
                         const std::vector<std::int64_t>& share,
                         const std::vector<std::int64_t>& inflow,
                         const std::vector<std::int64_t>& outflow)
{
    const auto internal = conn[from];
    std::int32_t best = -1;
    std::int64_t best_gain = 0;
    std::int64_t best_weight = 0;
    for (const auto q : touched) {
        if (upward ? q <= from : q >= from) {
            continue;
        }
        const auto gain = conn[q] - internal;
        if (gain < 0 || inflow[q] + w_i > share[q] + outflow[q]) {
            continue;
        }
        const auto w = part_weight[q] + inflow[q] - outflow[q];
        // A move without gain only when it evens out the two parts (it makes room in the heavier
        // one for moves with gain, as in METIS).
        if (gain == 0 && w + w_i > part_weight[from] + inflow[from] - outflow[from] - w_i) {
            continue;
        }
        if (best < 0 || gain > best_gain ||
            (gain == best_gain && (w < best_weight || (w == best_weight && q < best)))) {
            best = q;
            best_gain = gain;
            best_weight = w;
        }
    }
    return best;
}

}  // namespace

RefineStats refine_partition(MPI_Comm comm, const Csr& pattern, std::int64_t first_row,
                             std::vector<std::int32_t>& parts, const RefineOptions& o)
{
    const Comm c(comm);
    const auto n_local = pattern.num_rows;
    const int num_parts = o.num_parts;
    HALO_EXPECTS(static_cast<std::int64_t>(parts.size()) == n_local,
                 "refine_partition: ", parts.size(), " labels for ", n_local, " rows");
    HALO_EXPECTS(num_parts >= 1, "refine_partition: ", num_parts, " parts");
    for (const auto p : parts) {
        HALO_EXPECTS(p >= 0 && p < num_parts, "refine_partition: label ", p, " outside [0, ",
                     num_parts, ")");
    }

    auto graph = local_graph(pattern, first_row, o.weight_by_degree);
    auto& ghosts = graph.ghosts;
    const auto& adj_ptr = graph.adj_ptr;
    const auto& adj = graph.adj;
    const auto& weight = graph.weight;
    const auto starts = c.allgatherv(std::vector<std::int64_t>{first_row});
    const GhostLabels ghost_labels(c, ghosts, starts, first_row,
                                   std::max<std::int64_t>(1, o.chunk_entries));
    ghosts = {};
    std::vector<std::int32_t> ghost_parts;
    ghost_labels.refresh(parts, ghost_parts);
    const auto label = [&](local_id j) {
        return j < n_local ? parts[j] : ghost_parts[j - n_local];
    };
    // Each cut edge is seen from both ends (the pattern is symmetric).
    const auto global_cut = [&] {
        std::int64_t cut_entries = 0;
        for (std::int64_t i = 0; i < n_local; ++i) {
            for (auto k = adj_ptr[i]; k < adj_ptr[i + 1]; ++k) {
                cut_entries += label(adj[k]) != parts[i] ? 1 : 0;
            }
        }
        return c.sum(cut_entries) / 2;
    };

    std::vector<std::int64_t> part_weight(num_parts, 0);
    for (std::int64_t i = 0; i < n_local; ++i) {
        part_weight[parts[i]] += weight[i];
    }
    c.sum(part_weight);
    std::int64_t total = 0;
    for (const auto w : part_weight) {
        total += w;
    }
    const auto bound = static_cast<std::int64_t>(std::floor(
        static_cast<long double>(o.imbalance) * static_cast<long double>(total) / num_parts));

    RefineStats stats;
    stats.cut_before = global_cut();
    auto cut = stats.cut_before;
    std::vector<std::int64_t> conn(num_parts, 0);
    std::vector<std::int32_t> touched;
    std::vector<std::int64_t> share(num_parts);
    std::vector<std::int64_t> keep(num_parts);
    std::vector<std::int64_t> inflow(num_parts);
    std::vector<std::int64_t> outflow(num_parts);
    std::vector<std::int32_t> saved;
    for (int pass = 0; pass < o.passes && num_parts > 1; ++pass) {
        ++stats.passes;
        std::int64_t pass_moves = 0;
        for (const bool upward : {true, false}) {
            for (int q = 0; q < num_parts; ++q) {
                share[q] = floor_div(bound - part_weight[q], c.size);
                keep[q] = floor_div(part_weight[q] - 1, c.size);
            }
            std::fill(inflow.begin(), inflow.end(), 0);
            std::fill(outflow.begin(), outflow.end(), 0);
            saved = parts;
            std::int64_t moves = 0;
            for (std::int64_t i = 0; i < n_local; ++i) {
                const auto from = parts[i];
                for (auto k = adj_ptr[i]; k < adj_ptr[i + 1]; ++k) {
                    const auto q = label(adj[k]);
                    if (conn[q]++ == 0) {
                        touched.push_back(q);
                    }
                }
                // No part may empty: a rank takes at most its share of the part's weight less 1.
                if (outflow[from] + weight[i] > keep[from]) {
                    for (const auto q : touched) {
                        conn[q] = 0;
                    }
                    touched.clear();
                    continue;
                }
                const auto best = best_target(touched, conn, from, weight[i], upward, part_weight,
                                              share, inflow, outflow);
                for (const auto q : touched) {
                    conn[q] = 0;
                }
                touched.clear();
                if (best >= 0) {
                    parts[i] = best;
                    inflow[best] += weight[i];
                    outflow[from] += weight[i];
                    ++moves;
                }
            }
            moves = c.sum(moves);
            if (moves == 0) {
                continue;
            }
            ghost_labels.refresh(parts, ghost_parts);
            const auto new_cut = global_cut();
            if (new_cut > cut) {
                // Moves decided on stale ghost labels made it worse: undo the sub-phase.
                parts = saved;
                ghost_labels.refresh(parts, ghost_parts);
                continue;
            }
            cut = new_cut;
            for (int q = 0; q < num_parts; ++q) {
                inflow[q] -= outflow[q];
            }
            c.sum(inflow);
            for (int q = 0; q < num_parts; ++q) {
                part_weight[q] += inflow[q];
            }
            pass_moves += moves;
        }
        stats.moves += pass_moves;
        if (pass_moves == 0) {
            break;
        }
    }
    stats.cut_after = cut;
    return stats;
}

}  // namespace halo
