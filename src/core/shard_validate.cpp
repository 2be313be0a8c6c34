// Shard and halo-plan checks (include/halo/core/shard.hpp). Readers run them on every part they
// load: a plan whose counts disagree across ranks hangs the first NCCL exchange instead of failing,
// so it must be caught here, with the dataset and value named.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <parallel/algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/shard.hpp"

// Every message starts with `where` (the file and part) and names the dataset as FORMAT.md does.
#define HALO_SHARD_FAIL(...) HALO_THROW(::halo::InputError, where, ": ", __VA_ARGS__)

namespace halo {
namespace {

// Shards smaller than this are checked on the calling thread: a team costs more than it saves
// there, and a small check then runs no OpenMP region (safe in a forked child, as tests do).
constexpr std::int64_t parallel_min_rows = 1 << 16;

// Offsets of a plan: peers + 1 entries, from 0, strictly ascending (no empty block), ending at
// `total`; peers in [0, num_parts), not the part itself, strictly ascending.
void check_blocks(const Shard& s, const std::string& where, const char* ranks_name,
                  const std::vector<std::int32_t>& ranks, const char* offsets_name,
                  const std::vector<std::int64_t>& offsets, const char* total_name,
                  std::int64_t total)
{
    if (offsets.size() != ranks.size() + 1) {
        HALO_SHARD_FAIL(offsets_name, " has ", offsets.size(), " entries, expected ", ranks_name,
                        " size + 1 = ", ranks.size() + 1);
    }
    if (offsets.front() != 0) {
        HALO_SHARD_FAIL(offsets_name, "[0] = ", offsets.front(), ", expected 0");
    }
    for (std::size_t b = 0; b < ranks.size(); ++b) {
        const auto q = ranks[b];
        if (q < 0 || q >= s.num_parts) {
            HALO_SHARD_FAIL(ranks_name, "[", b, "] = ", q, " outside [0, ", s.num_parts, ")");
        }
        if (q == s.part) {
            HALO_SHARD_FAIL(ranks_name, "[", b, "] = ", q, " is the part itself");
        }
        if (b > 0 && q <= ranks[b - 1]) {
            HALO_SHARD_FAIL(ranks_name, "[", b, "] = ", q, " not above ", ranks_name, "[", b - 1,
                            "] = ", ranks[b - 1], " (peers must ascend)");
        }
        if (offsets[b + 1] <= offsets[b]) {
            HALO_SHARD_FAIL(offsets_name, "[", b + 1, "] = ", offsets[b + 1], " not above ",
                            offsets_name, "[", b, "] = ", offsets[b],
                            " (offsets must ascend; every listed peer has a row)");
        }
    }
    if (offsets.back() != total) {
        HALO_SHARD_FAIL(offsets_name, "[", ranks.size(), "] = ", offsets.back(), " but ",
                        total_name, " = ", total);
    }
}

// The column checks of check_csr for a shard whose local order is global order, as a screen
// that only says whether every row passes: columns ascend in every row exactly when each descent
// of the whole array (k with indices[k] <= indices[k - 1]) is at the start of a row, and an
// ascending row's columns are in range, and use a halo column, exactly when its first and last
// do. Two streaming passes on every core, no per-row loops; a shard that fails is checked again
// row by row, which names the first failure.
bool csr_screen_passes(const Shard& s)
{
    const auto& a = s.csr;
    const local_id* c = a.indices.data();
    const auto nnz = a.nnz();
    std::int64_t descents = 0;
#pragma omp parallel for schedule(static) reduction(+ : descents) if (nnz > parallel_min_rows)
    for (std::int64_t k = 1; k < nnz; ++k) {
        descents += c[k] <= c[k - 1] ? 1 : 0;
    }
    std::int64_t descents_at_row_starts = 0;
    std::int64_t failing_rows = 0;
#pragma omp parallel for schedule(static) reduction(+ : descents_at_row_starts, failing_rows) \
    if (a.num_rows > parallel_min_rows)
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        const auto begin = a.indptr[i];
        const auto end = a.indptr[i + 1];
        const bool interior = i < s.num_interior;
        if (begin == end) {
            failing_rows += interior ? 0 : 1;  // a boundary row needs a halo column
            continue;
        }
        descents_at_row_starts += begin > 0 && c[begin] <= c[begin - 1] ? 1 : 0;
        const bool ok = c[begin] >= 0 && c[end - 1] < a.num_cols &&
                        (interior ? c[end - 1] < s.num_owned : c[end - 1] >= s.num_owned);
        failing_rows += ok ? 0 : 1;
    }
    return failing_rows == 0 && descents == descents_at_row_starts;
}

void check_csr(const Shard& s, const std::string& where)
{
    const auto& a = s.csr;
    // Callers check the id arrays' sizes first; a column is in range before it is mapped.
    auto global_of = [&s](local_id c) {
        return c < s.num_owned ? s.global_ids[c] : s.halo_global_ids[c - s.num_owned];
    };
    if (a.num_rows != s.num_owned || a.num_cols != s.num_owned + s.num_halo) {
        const auto expected = " expected num_owned x (num_owned + num_halo) = ";
        HALO_SHARD_FAIL("csr is ", a.num_rows, " x ", a.num_cols, ",", expected, s.num_owned, " x ",
                        s.num_owned + s.num_halo);
    }
    if (static_cast<std::int64_t>(a.indptr.size()) != a.num_rows + 1) {
        HALO_SHARD_FAIL("csr/indptr has ", a.indptr.size(),
                        " entries, expected num_owned + 1 = ", a.num_rows + 1);
    }
    if (a.indptr.front() != 0) {
        HALO_SHARD_FAIL("csr/indptr[0] = ", a.indptr.front(), ", expected 0");
    }
    // The per-row checks below run on every core: a row's checks read only that row. Each thread
    // notes the first row that fails; that row is then checked again here, alone, to throw its
    // message, so the error is the one a serial scan would give.
    const auto first_failing = [n = a.num_rows](auto&& check) {
        std::int64_t first = n;
#pragma omp parallel for schedule(dynamic, 4096) reduction(min : first) if (n > parallel_min_rows)
        for (std::int64_t i = 0; i < n; ++i) {
            if (i < first) {
                try {
                    check(i);
                } catch (const InputError&) {
                    first = i;
                }
            }
        }
        if (first < n) {
            check(first);
        }
    };
    first_failing([&](std::int64_t i) {
        if (a.indptr[i + 1] < a.indptr[i]) {
            HALO_SHARD_FAIL("csr/indptr[", i + 1, "] = ", a.indptr[i + 1], " below csr/indptr[", i,
                            "] = ", a.indptr[i]);
        }
    });
    if (a.indptr.back() != a.nnz()) {
        HALO_SHARD_FAIL("csr/indptr[", a.num_rows, "] = ", a.indptr.back(), " but csr/indices has ",
                        a.nnz(), " entries");
    }
    if (a.has_values() && a.values.size() != a.indices.size()) {
        HALO_SHARD_FAIL("csr/values has ", a.values.size(), " entries for ", a.nnz(), " nonzeros");
    }
    // When local column ids run in global id order (one part: all rows interior, ids ascending),
    // "ascending global ids" is "ascending local ids": no lookup of two ids per nonzero, which
    // costs more than the rest of the check on large shards (random reads of the id arrays).
    const bool local_order = local_order_is_global(s);
    if (local_order && csr_screen_passes(s)) {
        return;
    }
    first_failing([&](std::int64_t i) {
        bool uses_halo = false;
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            const auto c = a.indices[k];
            if (c < 0 || c >= a.num_cols) {
                HALO_SHARD_FAIL("csr/indices[", k, "] = ", c, " outside [0, ", a.num_cols, ")");
            }
            const bool ascends =
                k == a.indptr[i] ||
                (local_order ? c > a.indices[k - 1] : global_of(c) > global_of(a.indices[k - 1]));
            if (!ascends) {
                HALO_SHARD_FAIL("csr/indices[", k, "] = ", c, " (node ", global_of(c),
                                ") not above csr/indices[", k - 1, "] = ", a.indices[k - 1],
                                " (node ", global_of(a.indices[k - 1]), ") (row ", i,
                                "'s columns must ascend by global id without duplicates)");
            }
            if (c >= s.num_owned) {
                uses_halo = true;
                if (i < s.num_interior) {
                    HALO_SHARD_FAIL("csr/indices[", k, "] = ", c,
                                    " is a halo column (>= num_owned = ", s.num_owned, ") in row ",
                                    i, ", an interior row (< num_interior = ", s.num_interior, ")");
                }
            }
        }
        if (i >= s.num_interior && !uses_halo) {
            HALO_SHARD_FAIL("row ", i, " is a boundary row (>= num_interior = ", s.num_interior,
                            ") but has no halo column; it belongs among the interior rows");
        }
    });
}

// Whether two ascending id arrays have no id in common.
bool disjoint(std::span<const global_id> a, std::span<const global_id> b)
{
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < a.size() && j < b.size()) {
        if (a[i] == b[j]) {
            return false;
        }
        if (a[i] < b[j]) {
            ++i;
        } else {
            ++j;
        }
    }
    return true;
}

void check_ids(const Shard& s, const std::string& where)
{
    if (static_cast<std::int64_t>(s.global_ids.size()) != s.num_owned) {
        HALO_SHARD_FAIL("global_ids has ", s.global_ids.size(),
                        " entries, expected num_owned = ", s.num_owned);
    }
    if (static_cast<std::int64_t>(s.halo_global_ids.size()) != s.num_halo) {
        HALO_SHARD_FAIL("halo/global_ids has ", s.halo_global_ids.size(),
                        " entries, expected num_halo = ", s.num_halo);
    }
    for (std::int64_t l = 0; l < s.num_owned; ++l) {
        const auto g = s.global_ids[l];
        if (g < 0) {
            HALO_SHARD_FAIL("global_ids[", l, "] = ", g, " is negative");
        }
        if (s.rows_in_global_order && l > 0 && l != s.num_interior && g <= s.global_ids[l - 1]) {
            HALO_SHARD_FAIL("global_ids[", l, "] = ", g, " not above global_ids[", l - 1,
                            "] = ", s.global_ids[l - 1], " (",
                            l < s.num_interior ? "interior" : "boundary",
                            " rows must ascend where the rows are in global order)");
        }
    }
    for (std::int64_t h = 0; h < s.num_halo; ++h) {
        if (s.halo_global_ids[h] < 0) {
            HALO_SHARD_FAIL("halo/global_ids[", h, "] = ", s.halo_global_ids[h], " is negative");
        }
    }
    // Owned and halo ids must all differ: a halo copy of an owned row, or a node received twice,
    // would be a second, stale copy of one row. Where the interior, the boundary and the halo ids
    // each ascend (rows in global order, the default), the three runs are compared pairwise by
    // merge walks (one part: a single run, nothing to compare). Otherwise (rows in a locality
    // order, halo-partition --row-order rcm) the ids alone are sorted on every core. Only when
    // two are equal are they sorted again with their positions, to name both.
    const std::span<const global_id> interior(s.global_ids.data(), s.num_interior);
    const std::span<const global_id> boundary(s.global_ids.data() + s.num_interior,
                                              s.num_owned - s.num_interior);
    const std::span<const global_id> halo(s.halo_global_ids);
    auto ascends = [](std::span<const global_id> run) {
        return std::adjacent_find(run.begin(), run.end(), std::greater_equal<>()) == run.end();
    };
    if (ascends(interior) && ascends(boundary) && ascends(halo)) {
        if (disjoint(interior, boundary) && disjoint(interior, halo) && disjoint(boundary, halo)) {
            return;
        }
    } else {
        std::vector<global_id> ids;
        ids.reserve(static_cast<std::size_t>(s.num_owned + s.num_halo));
        ids.insert(ids.end(), s.global_ids.begin(), s.global_ids.end());
        ids.insert(ids.end(), s.halo_global_ids.begin(), s.halo_global_ids.end());
        if (ids.size() > parallel_min_rows) {
            __gnu_parallel::sort(ids.begin(), ids.end());
        } else {
            std::sort(ids.begin(), ids.end());
        }
        if (std::adjacent_find(ids.begin(), ids.end()) == ids.end()) {
            return;
        }
    }
    std::vector<std::pair<global_id, std::int64_t>> all;
    all.reserve(s.num_owned + s.num_halo);
    for (std::int64_t l = 0; l < s.num_owned; ++l) {
        all.emplace_back(s.global_ids[l], l);
    }
    for (std::int64_t h = 0; h < s.num_halo; ++h) {
        all.emplace_back(s.halo_global_ids[h], s.num_owned + h);
    }
    std::sort(all.begin(), all.end());
    auto name = [&](std::int64_t position) {
        return position < s.num_owned
                   ? detail::concat("global_ids[", position, "]")
                   : detail::concat("halo/global_ids[", position - s.num_owned, "]");
    };
    for (std::size_t e = 1; e < all.size(); ++e) {
        if (all[e].first == all[e - 1].first) {
            HALO_SHARD_FAIL(name(all[e].second), " = ", all[e].first, " repeats ",
                            name(all[e - 1].second));
        }
    }
}

void check_plan(const Shard& s, const std::string& where)
{
    const auto& plan = s.plan;
    check_blocks(s, where, "halo/recv_ranks", plan.recv_ranks, "halo/recv_offsets",
                 plan.recv_offsets, "num_halo", s.num_halo);
    check_blocks(s, where, "halo/send_ranks", plan.send_ranks, "halo/send_offsets",
                 plan.send_offsets, "halo/send_rows size",
                 static_cast<std::int64_t>(plan.send_rows.size()));
    for (std::size_t b = 0; b < plan.send_ranks.size(); ++b) {
        for (auto k = plan.send_offsets[b]; k < plan.send_offsets[b + 1]; ++k) {
            const auto r = plan.send_rows[k];
            if (r < 0 || r >= s.num_owned) {
                HALO_SHARD_FAIL("halo/send_rows[", k, "] = ", r, " outside [0, ", s.num_owned,
                                ") (owned rows)");
            }
            if (k > plan.send_offsets[b] && r <= plan.send_rows[k - 1]) {
                HALO_SHARD_FAIL("halo/send_rows[", k, "] = ", r, " not above halo/send_rows[",
                                k - 1, "] = ", plan.send_rows[k - 1], " (rows sent to part ",
                                plan.send_ranks[b], " must ascend)");
            }
        }
    }
}

void check_node_data(const Shard& s, const std::string& where)
{
    if (s.feature_dim < 0) {
        HALO_SHARD_FAIL("feature_dim = ", s.feature_dim, " is negative");
    }
    if (static_cast<std::int64_t>(s.features.size()) != s.num_owned * s.feature_dim) {
        HALO_SHARD_FAIL("features/values has ", s.features.size(),
                        " values, expected num_owned * feature_dim = ", s.num_owned, " * ",
                        s.feature_dim);
    }
    if (!s.labels.empty() && static_cast<std::int64_t>(s.labels.size()) != s.num_owned) {
        HALO_SHARD_FAIL("labels has ", s.labels.size(),
                        " entries, expected num_owned = ", s.num_owned, " (or none)");
    }
    for (std::size_t l = 0; l < s.labels.size(); ++l) {
        if (s.labels[l] < -1) {
            HALO_SHARD_FAIL("labels[", l, "] = ", s.labels[l], " below -1 (-1: no label)");
        }
    }
}

// Position of `rank` in the ascending `ranks`, or -1.
std::int64_t find_peer(const std::vector<std::int32_t>& ranks, std::int32_t rank)
{
    const auto it = std::lower_bound(ranks.begin(), ranks.end(), rank);
    return it != ranks.end() && *it == rank ? it - ranks.begin() : -1;
}

}  // namespace

bool local_order_is_global(const Shard& s)
{
    return std::is_sorted(s.global_ids.begin(), s.global_ids.end()) &&
           std::is_sorted(s.halo_global_ids.begin(), s.halo_global_ids.end()) &&
           (s.global_ids.empty() || s.halo_global_ids.empty() ||
            s.global_ids.back() < s.halo_global_ids.front());
}

void validate_shard(const Shard& s, const std::string& where)
{
    if (s.num_parts < 1 || s.part < 0 || s.part >= s.num_parts) {
        HALO_SHARD_FAIL("part = ", s.part, " outside [0, num_parts = ", s.num_parts, ")");
    }
    if (s.num_owned < 1) {
        HALO_SHARD_FAIL("num_owned = ", s.num_owned, ": a part owns at least one node");
    }
    if (s.num_halo < 0) {
        HALO_SHARD_FAIL("num_halo = ", s.num_halo, " is negative");
    }
    if (s.num_interior < 0 || s.num_interior > s.num_owned) {
        HALO_SHARD_FAIL("num_interior = ", s.num_interior, " outside [0, num_owned = ", s.num_owned,
                        "]");
    }
    check_ids(s, where);
    check_csr(s, where);
    check_plan(s, where);
    check_node_data(s, where);
}

void validate_shard_owner(const Shard& s, const std::vector<std::int32_t>& owner,
                          const std::string& where)
{
    const auto n = static_cast<std::int64_t>(owner.size());
    auto owner_of = [&](const char* dataset, std::int64_t index, global_id g) {
        if (g < 0 || g >= n) {
            HALO_SHARD_FAIL(dataset, "[", index, "] = ", g, " outside [0, ", n,
                            ") (partition/owner)");
        }
        return owner[g];
    };
    for (std::int64_t l = 0; l < static_cast<std::int64_t>(s.global_ids.size()); ++l) {
        const auto q = owner_of("global_ids", l, s.global_ids[l]);
        if (q != s.part) {
            HALO_SHARD_FAIL("global_ids[", l, "] = ", s.global_ids[l], " is owned by part ", q,
                            " in partition/owner, not by part ", s.part);
        }
    }
    const auto owned = std::count(owner.begin(), owner.end(), s.part);
    if (owned != s.num_owned) {
        HALO_SHARD_FAIL("partition/owner gives part ", s.part, " ", owned,
                        " nodes, but num_owned = ", s.num_owned);
    }
    const auto& plan = s.plan;
    HALO_EXPECTS(plan.recv_offsets.size() == plan.recv_ranks.size() + 1 &&
                     plan.num_recv() == static_cast<std::int64_t>(s.halo_global_ids.size()),
                 "validate_shard_owner needs a shard that passed validate_shard (", where, ")");
    for (std::size_t b = 0; b < plan.recv_ranks.size(); ++b) {
        for (auto h = plan.recv_offsets[b]; h < plan.recv_offsets[b + 1]; ++h) {
            const auto q = owner_of("halo/global_ids", h, s.halo_global_ids[h]);
            if (q != plan.recv_ranks[b]) {
                HALO_SHARD_FAIL("halo/global_ids[", h, "] = ", s.halo_global_ids[h],
                                " is owned by part ", q,
                                " in partition/owner, but its receive block comes from part ",
                                plan.recv_ranks[b]);
            }
        }
    }
}

void validate_halo_plans(const std::vector<Shard>& shards, const std::string& where)
{
    const auto num_parts = static_cast<std::int64_t>(shards.size());
    for (std::int64_t p = 0; p < num_parts; ++p) {
        if (shards[p].part != p) {
            HALO_SHARD_FAIL("shard ", p, " holds part ", shards[p].part);
        }
        if (shards[p].num_parts != num_parts) {
            HALO_SHARD_FAIL("part ", p, " has num_parts = ", shards[p].num_parts, " but there are ",
                            num_parts, " shards");
        }
        validate_shard(shards[p], detail::concat(where, " part ", p));
    }
    for (std::int32_t p = 0; p < num_parts; ++p) {
        const auto& plan = shards[p].plan;
        // Every receive block of p has a send block on its peer, with the same ids in order.
        for (std::size_t b = 0; b < plan.recv_ranks.size(); ++b) {
            const auto q = plan.recv_ranks[b];
            const auto expected = plan.recv_offsets[b + 1] - plan.recv_offsets[b];
            const auto& send = shards[q].plan;
            const auto c = find_peer(send.send_ranks, p);
            if (c < 0) {
                HALO_SHARD_FAIL("part ", p, " expects ", expected, " rows from part ", q,
                                ", but part ", q, " sends none to part ", p);
            }
            const auto sent = send.send_offsets[c + 1] - send.send_offsets[c];
            if (sent != expected) {
                HALO_SHARD_FAIL("part ", q, " sends ", sent, " rows to part ", p, ", but part ", p,
                                " expects ", expected, " from part ", q);
            }
            for (std::int64_t k = 0; k < sent; ++k) {
                const auto r = send.send_rows[send.send_offsets[c] + k];
                const auto g_sent = shards[q].global_ids[r];
                const auto h = plan.recv_offsets[b] + k;
                const auto g_expected = shards[p].halo_global_ids[h];
                if (g_sent != g_expected) {
                    HALO_SHARD_FAIL("part ", q, " sends node ", g_sent, " (halo/send_rows[",
                                    send.send_offsets[c] + k, "] = ", r, ") as row ", k,
                                    " of its block to part ", p, ", but part ", p, " expects node ",
                                    g_expected, " there (halo/global_ids[", h, "])");
                }
            }
        }
        // And every send block of p has a receive block on its peer.
        for (std::size_t c = 0; c < plan.send_ranks.size(); ++c) {
            const auto q = plan.send_ranks[c];
            if (find_peer(shards[q].plan.recv_ranks, p) < 0) {
                const auto sent = plan.send_offsets[c + 1] - plan.send_offsets[c];
                HALO_SHARD_FAIL("part ", p, " sends ", sent, " rows to part ", q, ", but part ", q,
                                " expects none from part ", p);
            }
        }
    }
}

}  // namespace halo

#undef HALO_SHARD_FAIL
