// Shard builder, halo plans, node data and reassembly (include/halo/core/shard.hpp).
//
// Every part's numbering depends on a few global facts: which nodes are boundary rows (a column
// owned elsewhere) and hence each node's local row on its owner. A Layout computes those once in
// O(nnz + num_nodes); a part is then built from its own rows, except for the send lists, which in a
// directed graph only the other parts' rows reveal.

#include "halo/core/shard.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <parallel/algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/partition/shard_builder.hpp"

namespace halo {
namespace {

constexpr local_id unmarked = -1;
constexpr local_id claimed = -2;

struct Layout {
    std::int64_t num_nodes = 0;
    int num_parts = 0;
    std::vector<std::int64_t> num_owned;             // per part
    std::vector<std::int64_t> num_interior;          // per part
    std::vector<local_id> local_row;                 // local_row[v]: v's row id on its owner
    std::vector<std::vector<global_id>> global_ids;  // per part, in local order (if asked for)
    bool rows_in_global_order = true;                // no order keys given
};

// Loops over a part's rows or nonzeros below these sizes run serially: cheaper than waking the
// team, whose barriers cost a scheduler time slice each when the cores are oversubscribed.
constexpr std::int64_t min_parallel_rows = 1 << 16;
constexpr std::int64_t min_parallel_nonzeros = 1 << 18;

void check_inputs(const Csr& global, const std::vector<std::int32_t>& owner, int num_parts)
{
    HALO_EXPECTS(global.num_rows == global.num_cols, "the global adjacency must be square, got ",
                 global.num_rows, " x ", global.num_cols);
    HALO_EXPECTS(static_cast<std::int64_t>(global.indptr.size()) == global.num_rows + 1,
                 "global indptr has ", global.indptr.size(), " entries for ", global.num_rows,
                 " rows");
    HALO_EXPECTS(global.indptr.back() == global.nnz(), "global indptr ends at ",
                 global.indptr.back(), " but there are ", global.nnz(), " indices");
    HALO_EXPECTS(!global.has_values() || global.values.size() == global.indices.size(),
                 "global CSR has ", global.values.size(), " values for ", global.nnz(),
                 " nonzeros");
    if (num_parts < 1) {
        HALO_THROW(InputError, "number of parts must be at least 1, got ", num_parts);
    }
    if (static_cast<std::int64_t>(owner.size()) != global.num_rows) {
        HALO_THROW(InputError, "owner has ", owner.size(), " entries for a graph of ",
                   global.num_rows, " nodes");
    }
}

// Classifies every node as interior or boundary on its owner and numbers it there: one parallel
// pass over all nonzeros (which also checks owners and columns), then two serial O(n) passes that
// also list the global ids of part `only_part` (-1: of every part). Few parallel regions on
// purpose: with more threads than free cores, each barrier can cost a scheduler time slice.
Layout make_layout(const Csr& global, const std::vector<std::int32_t>& owner, int num_parts,
                   int only_part, const std::vector<std::uint8_t>* given_boundary = nullptr,
                   const std::vector<std::int64_t>* order_keys = nullptr)
{
    check_inputs(global, owner, num_parts);
    const auto n = global.num_rows;
    const auto nnz = global.nnz();
    std::vector<std::uint8_t> boundary(n, 0);
    if (given_boundary != nullptr) {
        HALO_EXPECTS(static_cast<std::int64_t>(given_boundary->size()) == n, "boundary has ",
                     given_boundary->size(), " entries for ", n, " nodes");
        boundary = *given_boundary;
    }
    std::int64_t bad_owner = n;
    std::int64_t bad_column = nnz;
#pragma omp parallel for schedule(dynamic, 2048) reduction(min : bad_owner, bad_column)
    for (std::int64_t i = 0; i < n; ++i) {
        const auto p = owner[i];
        if (p < 0 || p >= num_parts) {
            bad_owner = std::min(bad_owner, i);
        }
        std::uint8_t is_boundary = boundary[i];
        for (auto k = global.indptr[i]; k < global.indptr[i + 1]; ++k) {
            const auto j = global.indices[k];
            if (j < 0 || j >= n) {
                bad_column = std::min(bad_column, k);
            } else if (owner[j] != p) {
                is_boundary = 1;
            }
        }
        boundary[i] = is_boundary;
    }
    if (bad_owner < n) {
        HALO_THROW(InputError, "owner[", bad_owner, "] = ", owner[bad_owner], " outside [0, ",
                   num_parts, ") (number of parts)");
    }
    if (bad_column < nnz) {
        HALO_THROW(InputError, "global CSR: indices[", bad_column,
                   "] = ", global.indices[bad_column], " outside [0, ", n, ")");
    }

    Layout layout;
    layout.num_nodes = n;
    layout.num_parts = num_parts;
    layout.num_owned.assign(num_parts, 0);
    layout.num_interior.assign(num_parts, 0);
    for (std::int64_t v = 0; v < n; ++v) {
        ++layout.num_owned[owner[v]];
        layout.num_interior[owner[v]] += boundary[v] == 0 ? 1 : 0;
    }
    for (int p = 0; p < num_parts; ++p) {
        if (layout.num_owned[p] == 0) {
            HALO_THROW(InputError, "part ", p, " of ", num_parts, " owns no node (", n,
                       " nodes): every part must own at least one; use fewer parts");
        }
    }
    layout.global_ids.resize(num_parts);
    for (int p = 0; p < num_parts; ++p) {
        if (only_part < 0 || p == only_part) {
            layout.global_ids[p].resize(layout.num_owned[p]);
        }
    }
    // Interior rows first, then boundary rows, each in ascending global id, or in ascending
    // order key (ties by global id) where keys are given.
    std::vector<std::int64_t> next_interior(num_parts, 0);
    std::vector<std::int64_t> next_boundary(layout.num_interior);
    layout.local_row.resize(n);
    auto place = [&](std::int64_t v) {
        const auto p = owner[v];
        const auto l = boundary[v] == 0 ? next_interior[p]++ : next_boundary[p]++;
        layout.local_row[v] = static_cast<local_id>(l);
        if (only_part < 0 || p == only_part) {
            layout.global_ids[p][l] = v;
        }
    };
    if (order_keys == nullptr) {
        for (std::int64_t v = 0; v < n; ++v) {
            place(v);
        }
        return layout;
    }
    HALO_EXPECTS(static_cast<std::int64_t>(order_keys->size()) == n, "row order keys: ",
                 order_keys->size(), " for ", n, " nodes");
    layout.rows_in_global_order = false;
    std::vector<global_id> by_key(static_cast<std::size_t>(n));
    for (std::int64_t v = 0; v < n; ++v) {
        by_key[static_cast<std::size_t>(v)] = v;
    }
    const auto& key = *order_keys;
    // A strict total order (key, then id): one result whatever the sort, so the parallel one
    // (libstdc++'s OpenMP multiway mergesort) where it pays.
    const auto by_key_then_id = [&key](global_id a, global_id b) {
        return key[a] != key[b] ? key[a] < key[b] : a < b;
    };
    if (n >= min_parallel_rows) {
        __gnu_parallel::sort(by_key.begin(), by_key.end(), by_key_then_id);
    } else {
        std::sort(by_key.begin(), by_key.end(), by_key_then_id);
    }
    for (const auto v : by_key) {
        place(v);
    }
    return layout;
}

// Builds the part's halo, local CSR and receive plan. `column_of` is num_nodes scratch, all
// `unmarked` on entry and on return; meanwhile it maps every owned and halo node to its local
// column, so that renumbering a nonzero takes one lookup.
Shard build_part(const Csr& global, const std::vector<std::int32_t>& owner, const Layout& layout,
                 int part, std::vector<global_id> global_ids, std::vector<local_id>& column_of)
{
    Shard shard;
    shard.part = part;
    shard.num_parts = layout.num_parts;
    shard.num_owned = layout.num_owned[part];
    shard.num_interior = layout.num_interior[part];
    shard.global_ids = std::move(global_ids);
    shard.rows_in_global_order = layout.rows_in_global_order;
    const auto num_owned = shard.num_owned;
    const auto& ids = shard.global_ids;
#pragma omp parallel for if (num_owned >= min_parallel_rows)
    for (std::int64_t l = 0; l < num_owned; ++l) {
        column_of[ids[l]] = static_cast<local_id>(l);
    }

    auto& csr = shard.csr;
    csr.num_rows = num_owned;
    csr.indptr.assign(num_owned + 1, 0);
    for (std::int64_t l = 0; l < num_owned; ++l) {
        csr.indptr[l + 1] = csr.indptr[l] + global.row_nnz(ids[l]);
    }
    const auto nnz = csr.indptr[num_owned];
    const bool parallel = nnz >= min_parallel_nonzeros;

    // Distinct off-part columns (the nodes still unmarked): the first thread to claim one records
    // it with its sort key, (owner, local row on the owner), the order the owner sends them in.
    std::vector<std::pair<std::int64_t, global_id>> halo;
#pragma omp parallel if (parallel)
    {
        std::vector<std::pair<std::int64_t, global_id>> mine;
#pragma omp for schedule(dynamic, 1024) nowait
        for (std::int64_t l = shard.num_interior; l < num_owned; ++l) {
            const auto i = ids[l];
            for (auto k = global.indptr[i]; k < global.indptr[i + 1]; ++k) {
                const auto j = global.indices[k];
                std::atomic_ref<local_id> slot(column_of[j]);
                local_id expected = unmarked;
                if (slot.load(std::memory_order_relaxed) == unmarked &&
                    slot.compare_exchange_strong(expected, claimed, std::memory_order_relaxed)) {
                    const auto key = (static_cast<std::int64_t>(owner[j]) << 32) |
                                     static_cast<std::int64_t>(layout.local_row[j]);
                    mine.emplace_back(key, j);
                }
            }
        }
#pragma omp critical(halo_shard_merge)
        halo.insert(halo.end(), mine.begin(), mine.end());
    }
    std::sort(halo.begin(), halo.end());
    shard.num_halo = static_cast<std::int64_t>(halo.size());
    shard.halo_global_ids.resize(shard.num_halo);
    for (std::int64_t h = 0; h < shard.num_halo; ++h) {
        shard.halo_global_ids[h] = halo[h].second;
        column_of[halo[h].second] = static_cast<local_id>(num_owned + h);
    }
    halo = {};
    const auto& halo_ids = shard.halo_global_ids;

    auto& plan = shard.plan;
    plan.recv_offsets.assign(1, 0);
    for (std::int64_t h = 0; h < shard.num_halo; ++h) {
        const auto q = owner[halo_ids[h]];
        if (h == 0 || q != plan.recv_ranks.back()) {
            if (h > 0) {
                plan.recv_offsets.push_back(h);
            }
            plan.recv_ranks.push_back(q);
        }
    }
    if (shard.num_halo > 0) {
        plan.recv_offsets.push_back(shard.num_halo);
    }
    plan.send_offsets.assign(1, 0);

    csr.num_cols = num_owned + shard.num_halo;
    const bool weighted = global.has_values();
    csr.indices.resize(nnz);
    csr.values.resize(weighted ? nnz : 0);
    // Each row keeps ascending *global* column order (not local order): a row's sum then visits
    // its nonzeros in the same order for every rank count, which makes distributed results
    // bit-identical to one rank's (engine.hpp, "Reduction order").
#pragma omp parallel if (parallel)
    {
        std::vector<std::pair<std::int64_t, float>> buffer;
#pragma omp for schedule(dynamic, 512)
        for (std::int64_t l = 0; l < num_owned; ++l) {
            const auto i = ids[l];
            const auto first = global.indptr[i];
            const auto last = global.indptr[i + 1];
            const auto out = csr.indptr[l];
            buffer.clear();
            for (auto k = first; k < last; ++k) {
                buffer.emplace_back(global.indices[k], weighted ? global.values[k] : 0.0f);
            }
            // build_csr leaves rows sorted; other sources (a binary CSR) may not.
            if (!std::is_sorted(buffer.begin(), buffer.end())) {
                std::sort(buffer.begin(), buffer.end());
            }
            for (std::size_t e = 0; e < buffer.size(); ++e) {
                csr.indices[out + e] = column_of[buffer[e].first];
                if (weighted) {
                    csr.values[out + e] = buffer[e].second;
                }
            }
        }
    }
#pragma omp parallel if (num_owned + shard.num_halo >= min_parallel_rows)
    {
#pragma omp for nowait
        for (std::int64_t l = 0; l < num_owned; ++l) {
            column_of[ids[l]] = unmarked;
        }
#pragma omp for nowait
        for (std::int64_t h = 0; h < shard.num_halo; ++h) {
            column_of[halo_ids[h]] = unmarked;
        }
    }
    return shard;
}

// Send lists of one part built alone: which of its rows the other parts' rows reference. Pairs
// (peer, local row) are collected per thread, then sorted into peer-major, row-minor order. A
// thread compacts its pairs whenever they double, so that a hub read by many rows costs memory
// per distinct pair, not per nonzero.
void build_send_plan(const Csr& global, const std::vector<std::int32_t>& owner,
                     const Layout& layout, Shard& shard)
{
    const auto part = shard.part;
    const auto num_owned = shard.num_owned;
    std::vector<std::int64_t> pairs;
#pragma omp parallel
    {
        std::vector<std::int64_t> mine;
        std::size_t compact_at = 1 << 16;
#pragma omp for schedule(dynamic, 2048) nowait
        for (std::int64_t i = 0; i < layout.num_nodes; ++i) {
            const auto q = owner[i];
            if (q == part) {
                continue;
            }
            for (auto k = global.indptr[i]; k < global.indptr[i + 1]; ++k) {
                const auto j = global.indices[k];
                if (owner[j] == part) {
                    mine.push_back(q * num_owned + layout.local_row[j]);
                }
            }
            if (mine.size() >= compact_at) {
                std::sort(mine.begin(), mine.end());
                mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
                compact_at = std::max(compact_at, 2 * mine.size());
            }
        }
#pragma omp critical(send_plan_merge)
        pairs.insert(pairs.end(), mine.begin(), mine.end());
    }
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());

    auto& plan = shard.plan;
    plan.send_ranks.clear();
    plan.send_offsets.assign(1, 0);
    plan.send_rows.resize(pairs.size());
    for (std::size_t e = 0; e < pairs.size(); ++e) {
        const auto q = static_cast<std::int32_t>(pairs[e] / num_owned);
        if (plan.send_ranks.empty() || plan.send_ranks.back() != q) {
            if (!plan.send_ranks.empty()) {
                plan.send_offsets.push_back(static_cast<std::int64_t>(e));
            }
            plan.send_ranks.push_back(q);
        }
        plan.send_rows[e] = static_cast<local_id>(pairs[e] % num_owned);
    }
    if (!pairs.empty()) {
        plan.send_offsets.push_back(static_cast<std::int64_t>(pairs.size()));
    }
}

}  // namespace

Shard build_shard(const Csr& global, const std::vector<std::int32_t>& owner, int num_parts,
                  int part, const std::vector<std::int64_t>* order_keys)
{
    HALO_EXPECTS(part >= 0 && part < num_parts, "part ", part, " outside [0, ", num_parts, ")");
    auto layout = make_layout(global, owner, num_parts, part, nullptr, order_keys);
    std::vector<local_id> column_of(layout.num_nodes, unmarked);
    auto shard =
        build_part(global, owner, layout, part, std::move(layout.global_ids[part]), column_of);
    build_send_plan(global, owner, layout, shard);
    return shard;
}

struct ShardBuilder::State {
    const Csr& global;
    const std::vector<std::int32_t>& owner;
    Layout layout;
    std::vector<local_id> column_of;
};

ShardBuilder::ShardBuilder(const Csr& global, const std::vector<std::int32_t>& owner, int num_parts,
                           const std::vector<std::int64_t>* order_keys)
    : state_(new State{
          global, owner, make_layout(global, owner, num_parts, -1, nullptr, order_keys), {}})
{
    state_->column_of.assign(static_cast<std::size_t>(state_->layout.num_nodes), unmarked);
}

ShardBuilder::~ShardBuilder() = default;

Shard ShardBuilder::build(int part)
{
    auto& s = *state_;
    HALO_EXPECTS(part >= 0 && part < s.layout.num_parts, "part ", part, " outside [0, ",
                 s.layout.num_parts, ")");
    auto shard =
        build_part(s.global, s.owner, s.layout, part, s.layout.global_ids[part], s.column_of);
    build_send_plan(s.global, s.owner, s.layout, shard);
    return shard;
}

Shard build_shard_rows(const Csr& rows, const std::vector<std::int32_t>& owner, int num_parts,
                       int part, const std::vector<std::uint8_t>& boundary)
{
    HALO_EXPECTS(part >= 0 && part < num_parts, "part ", part, " outside [0, ", num_parts, ")");
    auto layout = make_layout(rows, owner, num_parts, part, &boundary);
    std::vector<local_id> column_of(layout.num_nodes, unmarked);
    return build_part(rows, owner, layout, part, std::move(layout.global_ids[part]), column_of);
}

std::vector<Shard> build_shards(const Csr& global, const std::vector<std::int32_t>& owner,
                                int num_parts, const std::vector<std::int64_t>* order_keys)
{
    auto layout = make_layout(global, owner, num_parts, -1, nullptr, order_keys);
    std::vector<local_id> column_of(layout.num_nodes, unmarked);
    std::vector<Shard> shards;
    shards.reserve(num_parts);
    for (int p = 0; p < num_parts; ++p) {
        shards.push_back(
            build_part(global, owner, layout, p, std::move(layout.global_ids[p]), column_of));
    }
    // q's send list to p is p's receive block from q, in local rows of q; visiting p in ascending
    // order keeps each send plan's peers ascending.
    for (int p = 0; p < num_parts; ++p) {
        const auto& recv = shards[p].plan;
        for (std::size_t b = 0; b < recv.recv_ranks.size(); ++b) {
            auto& send = shards[recv.recv_ranks[b]].plan;
            send.send_ranks.push_back(p);
            for (auto h = recv.recv_offsets[b]; h < recv.recv_offsets[b + 1]; ++h) {
                send.send_rows.push_back(layout.local_row[shards[p].halo_global_ids[h]]);
            }
            send.send_offsets.push_back(static_cast<std::int64_t>(send.send_rows.size()));
        }
    }
    return shards;
}

void attach_node_data(Shard& shard, const std::vector<float>& features, std::int64_t dim,
                      const std::vector<std::int32_t>& labels)
{
    if (dim < 0) {
        HALO_THROW(InputError, "feature dimension ", dim, " is negative");
    }
    if (dim == 0 && !features.empty()) {
        HALO_THROW(InputError, "feature dimension 0 with ", features.size(), " feature values");
    }
    const auto num_values = static_cast<std::int64_t>(features.size());
    if (dim > 0 && num_values % dim != 0) {
        HALO_THROW(InputError, "feature array of ", num_values, " values is not a whole number of ",
                   dim, "-wide rows");
    }
    const auto feature_rows = dim > 0 ? num_values / dim : 0;
    const auto num_labels = static_cast<std::int64_t>(labels.size());
    const auto n = shard.num_owned;
    HALO_EXPECTS(static_cast<std::int64_t>(shard.global_ids.size()) == n, "shard of part ",
                 shard.part, " has ", shard.global_ids.size(), " global ids for ", n, " rows");
    for (std::int64_t l = 0; l < n; ++l) {
        const auto g = shard.global_ids[l];
        if (dim > 0 && (g < 0 || g >= feature_rows)) {
            HALO_THROW(InputError, "part ", shard.part, ": owned node ", g,
                       " has no feature row (features hold ", feature_rows, " rows of ", dim, ")");
        }
        if (num_labels > 0 && (g < 0 || g >= num_labels)) {
            HALO_THROW(InputError, "part ", shard.part, ": owned node ", g,
                       " has no label (labels hold ", num_labels, " entries)");
        }
    }
    shard.feature_dim = dim;
    shard.features.resize(n * dim);
    shard.labels.resize(num_labels > 0 ? n : 0);
#pragma omp parallel for
    for (std::int64_t l = 0; l < n; ++l) {
        const auto g = shard.global_ids[l];
        std::copy_n(features.begin() + g * dim, dim, shard.features.begin() + l * dim);
        if (num_labels > 0) {
            shard.labels[l] = labels[g];
        }
    }
}

Csr reassemble(const std::vector<Shard>& shards, std::int64_t num_nodes)
{
    if (num_nodes < 0 || num_nodes > std::numeric_limits<local_id>::max()) {
        HALO_THROW(InputError, "cannot reassemble ", num_nodes,
                   " nodes: supported are 0 to 2^31-1 (int32 column ids)");
    }
    for (std::size_t p = 0; p < shards.size(); ++p) {
        validate_shard(shards[p], detail::concat("reassemble: part ", p));
    }
    const bool weighted = !shards.empty() && shards.front().csr.has_values();
    std::vector<std::int32_t> part_of(num_nodes, -1);
    std::vector<local_id> row_of(num_nodes, -1);
    for (std::size_t p = 0; p < shards.size(); ++p) {
        const auto& s = shards[p];
        if (s.csr.has_values() != weighted) {
            HALO_THROW(InputError, "reassemble: part ", p,
                       s.csr.has_values() ? " has csr/values" : " has no csr/values",
                       " but part 0 ", weighted ? "has" : "has not");
        }
        for (std::int64_t l = 0; l < s.num_owned; ++l) {
            const auto g = s.global_ids[l];
            if (g < 0 || g >= num_nodes) {
                HALO_THROW(InputError, "reassemble: part ", p, ": global_ids[", l, "] = ", g,
                           " outside [0, ", num_nodes, ")");
            }
            if (part_of[g] >= 0) {
                HALO_THROW(InputError, "reassemble: node ", g, " is owned by part ", part_of[g],
                           " and by part ", p, " (global_ids[", l, "])");
            }
            part_of[g] = static_cast<std::int32_t>(p);
            row_of[g] = static_cast<local_id>(l);
        }
        for (std::int64_t h = 0; h < s.num_halo; ++h) {
            const auto g = s.halo_global_ids[h];
            if (g < 0 || g >= num_nodes) {
                HALO_THROW(InputError, "reassemble: part ", p, ": halo/global_ids[", h, "] = ", g,
                           " outside [0, ", num_nodes, ")");
            }
        }
    }
    const auto missing = std::find(part_of.begin(), part_of.end(), -1);
    if (missing != part_of.end()) {
        HALO_THROW(InputError, "reassemble: node ", missing - part_of.begin(), " of ", num_nodes,
                   " is owned by no part");
    }

    Csr out;
    out.num_rows = num_nodes;
    out.num_cols = num_nodes;
    out.indptr.assign(num_nodes + 1, 0);
    for (std::int64_t g = 0; g < num_nodes; ++g) {
        out.indptr[g + 1] = out.indptr[g] + shards[part_of[g]].csr.row_nnz(row_of[g]);
    }
    const auto nnz = out.indptr[num_nodes];
    out.indices.resize(nnz);
    out.values.resize(weighted ? nnz : 0);
#pragma omp parallel
    {
        std::vector<std::pair<local_id, float>> buffer;
#pragma omp for schedule(dynamic, 1024)
        for (std::int64_t g = 0; g < num_nodes; ++g) {
            const auto& s = shards[part_of[g]];
            const auto l = row_of[g];
            const auto first = s.csr.indptr[l];
            const auto last = s.csr.indptr[l + 1];
            auto global_column = [&](local_id c) {
                return static_cast<local_id>(c < s.num_owned ? s.global_ids[c]
                                                             : s.halo_global_ids[c - s.num_owned]);
            };
            buffer.clear();
            for (auto k = first; k < last; ++k) {
                buffer.emplace_back(global_column(s.csr.indices[k]),
                                    weighted ? s.csr.values[k] : 0.0f);
            }
            std::sort(buffer.begin(), buffer.end());
            const auto at = out.indptr[g];
            for (std::size_t e = 0; e < buffer.size(); ++e) {
                out.indices[at + e] = buffer[e].first;
                if (weighted) {
                    out.values[at + e] = buffer[e].second;
                }
            }
        }
    }
    return out;
}

}  // namespace halo
