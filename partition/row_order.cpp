// Locality orders of a part's rows (include/halo/partition/row_order.hpp): reverse Cuthill-McKee,
// Rabbit order, and a square matrix renumbered by keys.

#include "halo/partition/row_order.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "halo/core/error.hpp"

namespace halo {
namespace {

void check_owner(const Csr& g, const std::vector<std::int32_t>& owner, int num_parts)
{
    HALO_EXPECTS(g.num_rows == g.num_cols, "a row order needs a square adjacency, got ", g.num_rows,
                 " x ", g.num_cols);
    if (num_parts < 1) {
        HALO_THROW(InputError, "number of parts must be at least 1, got ", num_parts);
    }
    if (static_cast<std::int64_t>(owner.size()) != g.num_rows) {
        HALO_THROW(InputError, "owner has ", owner.size(), " entries for a graph of ", g.num_rows,
                   " nodes");
    }
    std::int64_t bad = g.num_rows;
#pragma omp parallel for reduction(min : bad)
    for (std::int64_t v = 0; v < g.num_rows; ++v) {
        if (owner[v] < 0 || owner[v] >= num_parts) {
            bad = std::min(bad, v);
        }
    }
    if (bad < g.num_rows) {
        HALO_THROW(InputError, "node ", bad, " has owner ", owner[bad], ", outside [0, ", num_parts,
                   ")");
    }
}

// Each node's number of stored entries to other nodes of its own part.
std::vector<std::int64_t> part_degrees(const Csr& g, const std::vector<std::int32_t>& owner)
{
    std::vector<std::int64_t> degree(static_cast<std::size_t>(g.num_rows), 0);
#pragma omp parallel for schedule(dynamic, 2048)
    for (std::int64_t v = 0; v < g.num_rows; ++v) {
        std::int64_t d = 0;
        for (auto k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
            const auto u = g.indices[k];
            d += (u != v && owner[u] == owner[v]) ? 1 : 0;
        }
        degree[static_cast<std::size_t>(v)] = d;
    }
    return degree;
}

// Reverse Cuthill-McKee (Cuthill and McKee 1969; reversed as George 1971 proposed) on each part's
// own edges. Each component starts at its node of least degree; a visited node's unvisited
// neighbours join the queue by increasing degree, ties by id.
std::vector<std::int64_t> rcm_keys(const Csr& g, const std::vector<std::int32_t>& owner,
                                   int num_parts)
{
    const auto n = g.num_rows;
    std::vector<std::int64_t> key(static_cast<std::size_t>(n));
    const auto degree = part_degrees(g, owner);
    auto before = [&](global_id a, global_id b) {
        return degree[a] != degree[b] ? degree[a] < degree[b] : a < b;
    };
    std::vector<global_id> starts(static_cast<std::size_t>(n));
    for (std::int64_t v = 0; v < n; ++v) {
        starts[static_cast<std::size_t>(v)] = v;
    }
    std::sort(starts.begin(), starts.end(), [&](global_id a, global_id b) {
        return owner[a] != owner[b] ? owner[a] < owner[b] : before(a, b);
    });
    std::vector<std::uint8_t> visited(static_cast<std::size_t>(n), 0);
    std::vector<std::int64_t> position(num_parts, 0);  // Cuthill-McKee positions handed out
    std::vector<global_id> queue;
    std::vector<global_id> next;
    for (const auto s : starts) {
        if (visited[s] != 0) {
            continue;
        }
        const auto p = owner[s];
        visited[s] = 1;
        queue.assign(1, s);
        for (std::size_t head = 0; head < queue.size(); ++head) {
            const auto v = queue[head];
            key[static_cast<std::size_t>(v)] = position[p]++;
            next.clear();
            for (auto k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
                const auto u = g.indices[k];
                if (owner[u] == p && visited[u] == 0) {
                    visited[u] = 1;
                    next.push_back(u);
                }
            }
            std::sort(next.begin(), next.end(), before);
            queue.insert(queue.end(), next.begin(), next.end());
        }
    }
    // Reversed within each part: the last node Cuthill-McKee placed comes first.
#pragma omp parallel for schedule(static)
    for (std::int64_t v = 0; v < n; ++v) {
        key[static_cast<std::size_t>(v)] =
            position[owner[v]] - 1 - key[static_cast<std::size_t>(v)];
    }
    return key;
}

// Rabbit order (J. Arai, H. Shiokawa, T. Yamamuro, M. Onizuka, S. Kawanaka: "Rabbit Order:
// Just-in-Time Parallel Reordering for Fast Graph Analysis", IPDPS 2016) on each part's own
// edges, serial within a part (the parts on separate threads). Community detection by
// incremental aggregation: every node is visited once, by increasing degree; at its visit a node
// u is still the root of its community (nodes merge only when visited), whose edges are u's own
// plus the aggregated edge lists its merged children left. The neighbouring community c of
// largest modularity gain takes u's community if the gain 2m * w(u, c) - d(u) * d(c) (dQ scaled
// by (2m)^2) is positive; otherwise u stays a root of the merge tree. A node merged into a
// community not yet visited leaves its aggregated edges for that community's visit; one merged
// into a visited root leaves none (nobody reads them). Ordering: a pre-order depth-first walk of
// the merge tree, children in merge order, roots in visiting order, so every community and every
// community of communities is one consecutive range.
class RabbitOrder {
public:
    RabbitOrder(const Csr& g, const std::vector<std::int32_t>& owner, int num_parts)
        : g_(g),
          owner_(owner),
          n_(g.num_rows),
          degree_(part_degrees(g, owner)),
          root_(static_cast<std::size_t>(n_)),
          volume_(static_cast<std::size_t>(n_)),
          weight_(static_cast<std::size_t>(n_), 0),
          first_child_(static_cast<std::size_t>(n_), -1),
          last_child_(static_cast<std::size_t>(n_), -1),
          next_sibling_(static_cast<std::size_t>(n_), -1),
          visited_(static_cast<std::size_t>(n_), 0),
          left_(static_cast<std::size_t>(n_)),
          part_volume_(num_parts, 0.0)
    {
        for (std::int64_t v = 0; v < n_; ++v) {
            root_[v] = v;
            volume_[v] = static_cast<double>(degree_[v]);
            part_volume_[owner_[v]] += volume_[v];
        }
    }

    std::vector<std::int64_t> keys(int num_parts)
    {
        // Parts share no edge here and every array is indexed by node: the parts aggregate on
        // separate threads, each over its own nodes by increasing degree, ties by id.
        std::vector<std::vector<global_id>> visit(static_cast<std::size_t>(num_parts));
        for (std::int64_t v = 0; v < n_; ++v) {
            visit[owner_[v]].push_back(v);
        }
        std::vector<std::vector<global_id>> tops(static_cast<std::size_t>(num_parts));
#pragma omp parallel
        {
            std::vector<global_id> touched;
#pragma omp for schedule(dynamic, 1)
            for (int p = 0; p < num_parts; ++p) {
                auto& order = visit[p];
                std::sort(order.begin(), order.end(), [&](global_id a, global_id b) {
                    return degree_[a] != degree_[b] ? degree_[a] < degree_[b] : a < b;
                });
                for (const auto u : order) {
                    if (!aggregate(u, touched)) {
                        tops[p].push_back(u);
                    }
                }
                std::vector<global_id>().swap(order);
            }
        }
        // Pre-order walk of each root's tree: a node, then its children's trees in merge order.
        std::vector<std::int64_t> key(static_cast<std::size_t>(n_));
        std::vector<global_id> stack;
        for (int p = 0; p < num_parts; ++p) {
            std::int64_t next = 0;
            for (const auto t : tops[p]) {
                stack.assign(1, t);
                while (!stack.empty()) {
                    const auto v = stack.back();
                    stack.pop_back();
                    key[v] = next++;
                    // Children pushed last-first, so that the first merged is walked first.
                    const auto from = stack.size();
                    for (auto c = first_child_[v]; c >= 0; c = next_sibling_[c]) {
                        stack.push_back(c);
                    }
                    std::reverse(stack.begin() + static_cast<std::ptrdiff_t>(from), stack.end());
                }
            }
        }
        return key;
    }

private:
    global_id find(global_id v)
    {
        while (root_[v] != v) {
            root_[v] = root_[root_[v]];  // path halving
            v = root_[v];
        }
        return v;
    }

    void add(global_id u, global_id x, std::int64_t w, std::vector<global_id>& touched)
    {
        const auto c = find(x);
        if (c == u) {
            return;  // inside u's own community
        }
        if (weight_[c] == 0) {
            touched.push_back(c);
        }
        weight_[c] += w;
    }

    // Visits u: gathers its community's edges by neighbouring community, merges it into the best
    // neighbour if the gain is positive. Returns whether u merged.
    bool aggregate(global_id u, std::vector<global_id>& touched)
    {
        const auto p = owner_[u];
        touched.clear();
        for (auto k = g_.indptr[u]; k < g_.indptr[u + 1]; ++k) {
            const auto x = g_.indices[k];
            if (x != u && owner_[x] == p) {
                add(u, x, 1, touched);
            }
        }
        for (auto c = first_child_[u]; c >= 0; c = next_sibling_[c]) {
            for (const auto& [x, w] : left_[c]) {
                add(u, x, w, touched);
            }
            std::vector<std::pair<global_id, std::int64_t>>().swap(left_[c]);
        }
        const double two_m = part_volume_[p];
        global_id best = -1;
        double best_gain = 0.0;
        for (const auto c : touched) {
            const double gain = two_m * static_cast<double>(weight_[c]) - volume_[u] * volume_[c];
            if (gain > best_gain) {
                best_gain = gain;
                best = c;
            }
        }
        if (best >= 0) {
            root_[u] = best;
            volume_[best] += volume_[u];
            if (first_child_[best] < 0) {
                first_child_[best] = u;
            } else {
                next_sibling_[last_child_[best]] = u;
            }
            last_child_[best] = u;
            if (visited_[best] == 0) {
                auto& left = left_[u];
                left.reserve(touched.size() - 1);
                for (const auto c : touched) {
                    if (c != best) {
                        left.emplace_back(c, weight_[c]);
                    }
                }
            }
        }
        for (const auto c : touched) {
            weight_[c] = 0;
        }
        visited_[u] = 1;
        return best >= 0;
    }

    const Csr& g_;
    const std::vector<std::int32_t>& owner_;
    std::int64_t n_;
    std::vector<std::int64_t> degree_;
    std::vector<global_id> root_;         // union-find: the community a merged node went into
    std::vector<double> volume_;          // a root's community: the sum of its nodes' degrees
    std::vector<std::int64_t> weight_;    // scratch: edges from u's community to each community
    std::vector<global_id> first_child_;  // merge tree, children in merge order
    std::vector<global_id> last_child_;
    std::vector<global_id> next_sibling_;
    std::vector<std::uint8_t> visited_;
    std::vector<std::vector<std::pair<global_id, std::int64_t>>> left_;  // edges for the parent
    std::vector<double> part_volume_;                                    // 2m of each part
};

}  // namespace

RowOrder parse_row_order(std::string_view text)
{
    if (text == "global") {
        return RowOrder::global;
    }
    if (text == "rcm") {
        return RowOrder::rcm;
    }
    if (text == "rabbit") {
        return RowOrder::rabbit;
    }
    HALO_THROW(InputError, "row order '", std::string(text), "' is not global, rcm or rabbit");
}

std::vector<std::int64_t> row_order_keys(const Csr& global, const std::vector<std::int32_t>& owner,
                                         int num_parts, RowOrder order)
{
    check_owner(global, owner, num_parts);
    switch (order) {
        case RowOrder::rcm:
            return rcm_keys(global, owner, num_parts);
        case RowOrder::rabbit:
            return RabbitOrder(global, owner, num_parts).keys(num_parts);
        case RowOrder::global:
            break;
    }
    std::vector<std::int64_t> key(static_cast<std::size_t>(global.num_rows));
    for (std::int64_t v = 0; v < global.num_rows; ++v) {
        key[static_cast<std::size_t>(v)] = v;
    }
    return key;
}

Csr permute_by_keys(const Csr& a, const std::vector<std::int64_t>& keys)
{
    if (a.num_rows != a.num_cols) {
        HALO_THROW(InputError, "renumbering needs a square matrix, got ", a.num_rows, " x ",
                   a.num_cols);
    }
    const auto n = a.num_rows;
    if (static_cast<std::int64_t>(keys.size()) != n) {
        HALO_THROW(InputError, keys.size(), " order keys for a matrix of ", n, " rows");
    }
    std::vector<global_id> old_of(static_cast<std::size_t>(n));  // new row -> old row
    for (std::int64_t v = 0; v < n; ++v) {
        old_of[v] = v;
    }
    std::sort(old_of.begin(), old_of.end(), [&](global_id x, global_id y) {
        return keys[x] != keys[y] ? keys[x] < keys[y] : x < y;
    });
    std::vector<local_id> new_of(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
        new_of[old_of[i]] = static_cast<local_id>(i);
    }
    Csr b;
    b.num_rows = n;
    b.num_cols = n;
    b.indptr.assign(static_cast<std::size_t>(n) + 1, 0);
    for (std::int64_t i = 0; i < n; ++i) {
        b.indptr[i + 1] = b.indptr[i] + a.row_nnz(old_of[i]);
    }
    b.indices.resize(a.indices.size());
    b.values.resize(a.values.size());
    const bool values = a.has_values();
#pragma omp parallel
    {
        std::vector<std::pair<local_id, float>> row;
#pragma omp for schedule(dynamic, 1024)
        for (std::int64_t i = 0; i < n; ++i) {
            const auto o = old_of[i];
            row.clear();
            for (auto k = a.indptr[o]; k < a.indptr[o + 1]; ++k) {
                row.emplace_back(new_of[a.indices[k]], values ? a.values[k] : 0.0f);
            }
            std::sort(row.begin(), row.end(),
                      [](const auto& x, const auto& y) { return x.first < y.first; });
            auto k = b.indptr[i];
            for (const auto& [c, w] : row) {
                b.indices[k] = c;
                if (values) {
                    b.values[k] = w;
                }
                ++k;
            }
        }
    }
    return b;
}

}  // namespace halo
