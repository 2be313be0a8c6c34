// Merge-path schedule (Merrill & Garland's partition, as Algorithm 1 of paper 003 uses it) and the
// CPU emulation of the MergePath-SpMM walk. See mergepath_schedule.hpp.
#include "preprocess/mergepath_schedule.hpp"

#include <algorithm>

#include "halo/core/error.hpp"

namespace halo::mergepath {

Coordinate merge_path_search(const offset_t* indptr, RowRange range, std::int64_t diagonal)
{
    const std::int64_t base = indptr[range.begin];
    const std::int64_t num_rows = range.size();
    const std::int64_t nnz = indptr[range.end] - base;
    // Row end i sits at a[i] = indptr[begin + i + 1] - base on the nonzero axis; it is consumed
    // before nonzero j when a[i] <= j (its nonzeros all precede j).
    std::int64_t lo = std::max<std::int64_t>(diagonal - nnz, 0);
    std::int64_t hi = std::min(diagonal, num_rows);
    while (lo < hi) {
        const std::int64_t pivot = lo + (hi - lo) / 2;
        if (indptr[range.begin + pivot + 1] - base <= diagonal - pivot - 1) {
            lo = pivot + 1;
        } else {
            hi = pivot;
        }
    }
    return {range.begin + lo, base + diagonal - lo};
}

std::int64_t default_cost(std::int64_t width)
{
    if (width <= 2) {
        return 50;
    }
    if (width <= 8) {
        return 15;
    }
    if (width <= 16) {
        return 20;
    }
    if (width <= 32) {
        return 30;
    }
    if (width <= 64) {
        return 35;
    }
    return 50;
}

std::int64_t effective_cost(std::int64_t items, std::int64_t cost, std::int64_t min_segments)
{
    HALO_EXPECTS(cost >= 1, "merge-path cost ", cost, " must be at least 1");
    if (min_segments < 1 || items <= 0) {
        return cost;
    }
    // ceil(items / min_segments) items per segment gives at most min_segments segments, and
    // exactly that many (or one fewer) when items >= min_segments.
    const std::int64_t floor_cost =
        std::max<std::int64_t>((items + min_segments - 1) / min_segments, 1);
    return std::min(cost, floor_cost);
}

Schedule make_schedule(const CsrView& a, RowRange range, std::int64_t cost)
{
    if (range.begin < 0 || range.begin > range.end || range.end > a.num_rows) {
        HALO_THROW(InputError, "merge-path schedule: row range [", range.begin, ", ", range.end,
                   ") outside the matrix's rows [0, ", a.num_rows, ")");
    }
    if (cost < 1) {
        HALO_THROW(InputError, "merge-path schedule: cost ", cost, " must be at least 1");
    }
    Schedule s;
    s.range = range;
    s.cost = cost;
    s.first_nonzero = a.num_rows == 0 ? 0 : a.indptr[range.begin];
    s.items = range.size() + (a.num_rows == 0 ? 0 : a.indptr[range.end] - s.first_nonzero);
    const std::int64_t num_segments = (s.items + cost - 1) / cost;
    s.segment_rows.resize(static_cast<std::size_t>(num_segments + 1));
    // Independent searches, one per segment boundary (Algorithm 1 runs them in the threads).
#pragma omp parallel for schedule(static)
    for (std::int64_t k = 0; k <= num_segments; ++k) {
        s.segment_rows[static_cast<std::size_t>(k)] =
            merge_path_search(a.indptr, range, s.diagonal(k)).row;
    }
    for (std::int64_t k = 1; k < num_segments; ++k) {
        // A boundary inside a row's nonzeros (strictly after its first) splits that row. A
        // boundary at the row's first nonzero does not: the row then lies wholly after it.
        const Coordinate c = s.start(k);
        if (c.row < range.end && c.nonzero > a.indptr[c.row] &&
            (s.split_rows.empty() || s.split_rows.back() != c.row)) {
            s.split_rows.push_back(c.row);
        }
    }
    return s;
}

WriteCounts emulate_merge_path_spmm(const CsrView& a, const Schedule& schedule,
                                    DenseView<const float> x, DenseView<float> y)
{
    HALO_EXPECTS(x.cols == y.cols, "x has ", x.cols, " columns, y has ", y.cols);
    const std::int64_t width = x.cols;
    WriteCounts counts;
    counts.split_rows = static_cast<std::int64_t>(schedule.split_rows.size());
    for (const std::int64_t row : schedule.split_rows) {
        std::fill(y.row(row), y.row(row) + width, 0.0f);
    }
    std::vector<float> acc(static_cast<std::size_t>(width));
    const auto accumulate = [&](std::int64_t from, std::int64_t to) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (std::int64_t j = from; j < to; ++j) {
            const float v = a.values == nullptr ? 1.0f : a.values[j];
            const float* xr = x.row(a.indices[j]);
            for (std::int64_t c = 0; c < width; ++c) {
                acc[static_cast<std::size_t>(c)] += v * xr[c];
            }
        }
    };
    for (std::int64_t s = 0; s < schedule.num_segments(); ++s) {
        const Coordinate begin = schedule.start(s);
        const Coordinate end = schedule.start(s + 1);
        std::int64_t j = begin.nonzero;
        // Rows whose end lies in this segment; only the first may have started before it.
        for (std::int64_t r = begin.row; r < end.row; ++r) {
            const std::int64_t row_end = a.indptr[r + 1];
            const bool partial = r == begin.row && j > a.indptr[r];
            accumulate(j, row_end);
            if (!partial) {
                std::copy(acc.begin(), acc.end(), y.row(r));
                ++counts.plain_rows;
            } else if (j < row_end) {
                for (std::int64_t c = 0; c < width; ++c) {
                    y(r, c) += acc[static_cast<std::size_t>(c)];
                }
                ++counts.atomic_updates;
            }
            j = row_end;
        }
        // The row this segment ends inside: its first nonzeros, continued by the next segment.
        if (j < end.nonzero) {
            accumulate(j, end.nonzero);
            for (std::int64_t c = 0; c < width; ++c) {
                y(end.row, c) += acc[static_cast<std::size_t>(c)];
            }
            ++counts.atomic_updates;
        }
    }
    return counts;
}

}  // namespace halo::mergepath
