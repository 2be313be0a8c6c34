// The gather model of SpMM (include/halo/kernels_host/gather_model.hpp): Belady's MIN and LRU over
// the X rows that A's nonzeros read in CSR order. Host only, built with or without CUDA.
#include "halo/kernels_host/gather_model.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "halo/core/error.hpp"

namespace halo {
namespace {

// next[t]: the position of the next read of column indices[t] after t, or m (never again).
// Pos is 32-bit below 2^32 - 1 nonzeros, which halves the largest array of the model.
template <typename Pos>
struct NextUses {
    std::vector<Pos> next;
    std::int64_t distinct = 0;
};

template <typename Pos>
NextUses<Pos> next_uses(const CsrView& a)
{
    const auto m = a.nnz();
    const auto never = static_cast<Pos>(m);
    NextUses<Pos> out;
    out.next.resize(static_cast<std::size_t>(m));
    std::vector<Pos> last(static_cast<std::size_t>(a.num_cols), never);
    for (std::int64_t t = m - 1; t >= 0; --t) {
        const auto k = a.indices[t];
        out.next[t] = last[k];
        last[k] = static_cast<Pos>(t);
    }
    out.distinct = static_cast<std::int64_t>(
        std::count_if(last.begin(), last.end(), [never](Pos p) { return p != never; }));
    return out;
}

// Belady's MIN with bypass: a max-heap of (next use, column) with lazy deletion; an entry is live
// while cached_next[column] equals its next use (a column's next uses only grow, so no two entries
// of one column share one). A cached row's next use is always below `never`: a row read for the
// last time leaves the cache on that read.
template <typename Pos>
std::int64_t min_misses(const CsrView& a, const std::vector<Pos>& next, std::int64_t capacity)
{
    struct Entry {
        Pos next;
        local_id col;
        bool operator<(const Entry& o) const { return next < o.next; }
    };
    const auto m = a.nnz();
    const auto never = static_cast<Pos>(m);
    std::vector<Pos> cached_next(static_cast<std::size_t>(a.num_cols), never);
    std::vector<Entry> heap;
    const auto compact_at = static_cast<std::size_t>(2 * capacity + 1024);
    heap.reserve(compact_at + 1);
    auto live = [&](const Entry& e) { return cached_next[e.col] == e.next; };
    auto push = [&](Pos nx, local_id k) {
        heap.push_back({nx, k});
        std::push_heap(heap.begin(), heap.end());
        if (heap.size() > compact_at) {
            std::erase_if(heap, [&](const Entry& e) { return !live(e); });
            std::make_heap(heap.begin(), heap.end());
        }
    };
    std::int64_t size = 0;
    std::int64_t misses = 0;
    for (std::int64_t t = 0; t < m; ++t) {
        const auto k = a.indices[t];
        const auto nx = next[t];
        if (cached_next[k] != never) {  // a hit
            cached_next[k] = nx;
            if (nx == never) {
                --size;
            } else {
                push(nx, k);
            }
            continue;
        }
        ++misses;
        if (nx == never) {
            continue;  // never read again: not kept
        }
        if (size < capacity) {
            cached_next[k] = nx;
            push(nx, k);
            ++size;
            continue;
        }
        while (!live(heap.front())) {
            std::pop_heap(heap.begin(), heap.end());
            heap.pop_back();
        }
        if (heap.front().next > nx) {  // evict the row used farthest ahead; else bypass this one
            cached_next[heap.front().col] = never;
            std::pop_heap(heap.begin(), heap.end());
            heap.pop_back();
            cached_next[k] = nx;
            push(nx, k);
        }
    }
    return misses;
}

// LRU: a doubly linked list threaded through per-column arrays, most recent at the head.
std::int64_t lru_misses(const CsrView& a, std::int64_t capacity)
{
    constexpr local_id none = -1;
    const auto n = static_cast<std::size_t>(a.num_cols);
    std::vector<local_id> prev(n, none);
    std::vector<local_id> next(n, none);
    std::vector<std::uint8_t> cached(n, 0);
    local_id head = none;
    local_id tail = none;
    auto unlink = [&](local_id k) {
        (prev[k] == none ? head : next[prev[k]]) = next[k];
        (next[k] == none ? tail : prev[next[k]]) = prev[k];
    };
    auto push_front = [&](local_id k) {
        prev[k] = none;
        next[k] = head;
        (head == none ? tail : prev[head]) = k;
        head = k;
    };
    std::int64_t size = 0;
    std::int64_t misses = 0;
    const auto m = a.nnz();
    for (std::int64_t t = 0; t < m; ++t) {
        const auto k = a.indices[t];
        if (cached[k] != 0) {
            if (k != head) {
                unlink(k);
                push_front(k);
            }
            continue;
        }
        ++misses;
        cached[k] = 1;
        push_front(k);
        if (++size > capacity) {
            const auto victim = tail;
            unlink(victim);
            cached[victim] = 0;
            --size;
        }
    }
    return misses;
}

template <typename Pos>
std::vector<GatherTraffic> simulate(const CsrView& a, std::span<const std::int64_t> capacities)
{
    const auto uses = next_uses<Pos>(a);
    const auto count = static_cast<std::int64_t>(capacities.size());
    std::vector<GatherTraffic> out(capacities.size());
    for (std::int64_t c = 0; c < count; ++c) {
        out[c] = {capacities[c], a.nnz(), uses.distinct, uses.distinct, uses.distinct};
    }
    // One task per (capacity, policy); a capacity that holds every distinct row misses only cold.
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t task = 0; task < 2 * count; ++task) {
        auto& r = out[task / 2];
        if (r.capacity_rows >= r.distinct) {
            continue;
        }
        if (task % 2 == 0) {
            r.min_misses = min_misses(a, uses.next, r.capacity_rows);
        } else {
            r.lru_misses = lru_misses(a, r.capacity_rows);
        }
    }
    return out;
}

}  // namespace

std::vector<GatherTraffic> gather_traffic(const CsrView& a,
                                          std::span<const std::int64_t> capacities_rows)
{
    for (const auto c : capacities_rows) {
        HALO_EXPECTS(c >= 1, "gather model: a cache of ", c, " rows");
    }
    HALO_EXPECTS(a.num_rows >= 0 && a.num_cols >= 0 &&
                     a.num_cols <= std::int64_t{std::numeric_limits<local_id>::max()},
                 "gather model: ", a.num_rows, " x ", a.num_cols, " matrix");
    const auto m = a.nnz();
    for (std::int64_t t = 0; t < m; ++t) {
        const auto k = a.indices[t];
        HALO_EXPECTS(k >= 0 && k < a.num_cols, "gather model: column index ", k, " at nonzero ", t,
                     " outside [0, ", a.num_cols, ")");
    }
    if (m < std::int64_t{std::numeric_limits<std::uint32_t>::max()}) {
        return simulate<std::uint32_t>(a, capacities_rows);
    }
    return simulate<std::uint64_t>(a, capacities_rows);
}

std::int64_t cache_capacity_rows(std::int64_t cache_bytes, std::int64_t row_bytes)
{
    HALO_EXPECTS(cache_bytes >= 0 && row_bytes >= 1, "cache of ", cache_bytes, " bytes, rows of ",
                 row_bytes, " bytes");
    return std::max<std::int64_t>(1, cache_bytes / row_bytes);
}

}  // namespace halo
