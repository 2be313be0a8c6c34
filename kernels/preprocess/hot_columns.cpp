// MergePath's hot columns (kernels/preprocess/hot_columns.hpp).
#include "preprocess/hot_columns.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "halo/error.hpp"

namespace halo::mergepath {

HotSet hot_set(const std::vector<std::uint32_t>& reads, std::int64_t hot)
{
    const auto cols = reads.size();
    HotSet out;
    out.hot = std::clamp<std::int64_t>(hot, 0, static_cast<std::int64_t>(cols));
    std::vector<std::int32_t> order(cols);
    std::iota(order.begin(), order.end(), 0);
    std::nth_element(order.begin(), order.begin() + out.hot, order.end(),
                     [&](std::int32_t l, std::int32_t r) {
                         const auto rl = reads[static_cast<std::size_t>(l)];
                         const auto rr = reads[static_cast<std::size_t>(r)];
                         return rl != rr ? rl > rr : l < r;
                     });
    out.is_hot.assign(cols, 0);
    for (std::int64_t i = 0; i < out.hot; ++i) {
        const auto c = static_cast<std::size_t>(order[static_cast<std::size_t>(i)]);
        out.is_hot[c] = 1;
        out.hot_reads += reads[c];
    }
    return out;
}

HotColumns mark_cold_columns(const CsrView& a, std::int64_t hot)
{
    if (a.num_cols > std::numeric_limits<std::int32_t>::max()) {
        HALO_THROW(InputError, "L2 hints: ", a.num_cols,
                   " columns, past the 2^31 - 1 that a marked int32 index holds");
    }
    const auto cols = static_cast<std::size_t>(a.num_cols);
    const std::int64_t nnz = a.nnz();
    const std::int32_t* const idx = a.indices;
    // Reads per column: relaxed atomic increments (contended on the hub columns only).
    std::vector<std::uint32_t> reads(cols, 0);
#pragma omp parallel for schedule(static) if (nnz > (1 << 16))
    for (std::int64_t k = 0; k < nnz; ++k) {
        std::atomic_ref<std::uint32_t>(reads[static_cast<std::size_t>(idx[k])])
            .fetch_add(1, std::memory_order_relaxed);
    }
    const auto set = hot_set(reads, hot);
    HotColumns out;
    out.hot = set.hot;
    out.hot_reads = set.hot_reads;
    out.indices.resize(static_cast<std::size_t>(nnz));
    std::int32_t* const marked = out.indices.data();
#pragma omp parallel for schedule(static) if (nnz > (1 << 16))
    for (std::int64_t k = 0; k < nnz; ++k) {
        const std::int32_t c = idx[k];
        marked[k] = set.is_hot[static_cast<std::size_t>(c)] != 0
                        ? c
                        : static_cast<std::int32_t>(static_cast<std::uint32_t>(c) | kColdMark);
    }
    return out;
}

}  // namespace halo::mergepath
