// MergePath's hot columns (kernels/preprocess/hot_columns.hpp).
#include "preprocess/hot_columns.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "halo/core/error.hpp"

namespace halo::mergepath {

HotSet hot_set(const std::vector<std::uint32_t>& reads, std::int64_t hot)
{
    const auto cols = static_cast<std::int64_t>(reads.size());
    HotSet out;
    out.hot = std::clamp<std::int64_t>(hot, 0, cols);
    out.is_hot.assign(reads.size(), 0);
    if (out.hot == 0) {
        return out;
    }
    // The hot-th largest count t (a selection over plain counts, linear on average): every column
    // read more than t is hot, and the lowest ids among those read exactly t fill the rest.
    std::vector<std::uint32_t> counts(reads);
    std::nth_element(counts.begin(), counts.begin() + (out.hot - 1), counts.end(),
                     std::greater<>());
    const std::uint32_t t = counts[static_cast<std::size_t>(out.hot - 1)];
    std::int64_t ties = out.hot;
    for (const std::uint32_t r : reads) {
        ties -= r > t ? 1 : 0;
    }
    for (std::size_t c = 0; c < reads.size(); ++c) {
        const bool tie = reads[c] == t && ties > 0;
        if (reads[c] > t || tie) {
            out.is_hot[c] = 1;
            out.hot_reads += reads[c];
            ties -= tie ? 1 : 0;
        }
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
