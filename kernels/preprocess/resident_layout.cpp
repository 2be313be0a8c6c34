// The resident-slice SpMM's chunk layout and bank-conflict schedule (resident_layout.hpp).
#include "preprocess/resident_layout.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>

#include "halo/core/error.hpp"

namespace halo::resident {
namespace {

struct RowSlot {
    std::int64_t row = 0;
    int log_group = 0;
    std::int64_t per_lane = 0;  // ceil(degree / group): the group's longest lane
};

// Lane t of a group of g lanes over `degree` nonzeros takes a contiguous part: the first
// degree % g lanes one more than the others.
std::int64_t part_begin(std::int64_t degree, int g, int t)
{
    const std::int64_t base = degree / g;
    const std::int64_t extra = degree % g;
    return t * base + std::min<std::int64_t>(t, extra);
}

// One chunk's lanes: the CSR positions of each lane's nonzeros, in the order they are stored.
using LaneItems = std::array<std::vector<std::int64_t>, kLanes>;

// Orders each lane's nonzeros of one chunk against bank conflicts (header comment): at step k
// the lanes of each phase take, fewest choices first, a nonzero of the residue least taken in
// the phase so far (the zero row counts as taken where a lane of the phase pads), and among
// those the residue the lane has most nonzeros of left, which keeps its later choices open.
void schedule_chunk(const CsrView& a, LaneItems& lanes)
{
    std::array<std::array<std::vector<std::int64_t>, kResidues>, kLanes> buckets;
    std::array<std::array<std::size_t, kResidues>, kLanes> cursor{};
    std::array<std::size_t, kLanes> left{};
    std::size_t steps = 0;
    for (int l = 0; l < kLanes; ++l) {
        for (const std::int64_t p : lanes[static_cast<std::size_t>(l)]) {
            buckets[l][static_cast<std::size_t>(a.indices[p] % kResidues)].push_back(p);
        }
        left[l] = lanes[l].size();
        steps = std::max(steps, left[l]);
        lanes[l].clear();
    }
    auto choices = [&](int l) {
        int n = 0;
        for (int r = 0; r < kResidues; ++r) {
            n += cursor[l][r] < buckets[l][r].size() ? 1 : 0;
        }
        return n;
    };
    for (std::size_t k = 0; k < steps; ++k) {
        for (int q = 0; q < kLanes / kPhaseLanes; ++q) {
            std::array<int, kPhaseLanes> order{};
            int active = 0;
            for (int i = 0; i < kPhaseLanes; ++i) {
                const int l = q * kPhaseLanes + i;
                if (left[l] > 0) {
                    order[active++] = l;
                }
            }
            std::stable_sort(order.begin(), order.begin() + active,
                             [&](int x, int y) { return choices(x) < choices(y); });
            std::array<int, kResidues> taken{};
            if (active < kPhaseLanes) {
                taken[static_cast<std::size_t>(a.num_cols % kResidues)] = 1;  // the zero row
            }
            for (int i = 0; i < active; ++i) {
                const int l = order[i];
                // The least-taken residue of those the lane still has; among those, the one it
                // has most of (keeping its choices open for the later steps).
                int pick = -1;
                std::size_t most = 0;
                for (int r = 0; r < kResidues; ++r) {
                    const std::size_t n = buckets[l][r].size() - cursor[l][r];
                    if (n == 0) {
                        continue;
                    }
                    if (pick < 0 || taken[r] < taken[pick] ||
                        (taken[r] == taken[pick] && n > most)) {
                        pick = r;
                        most = n;
                    }
                }
                lanes[l].push_back(buckets[l][pick][cursor[l][pick]++]);
                ++taken[pick];
                --left[l];
            }
        }
    }
}

}  // namespace

std::int64_t segment_limit(std::int64_t nnz)
{
    return nnz < (std::int64_t{1} << 17)   ? 8
           : nnz < (std::int64_t{1} << 18) ? 16
           : nnz < (std::int64_t{1} << 19) ? 32
                                           : 64;
}

Layout build_layout(const CsrView& a, RowRange rows, std::int64_t segment, bool schedule)
{
    if (rows.begin < 0 || rows.begin > rows.end || rows.end > a.num_rows) {
        HALO_THROW(InputError, "resident SpMM layout: row range [", rows.begin, ", ", rows.end,
                   ") outside the operator's ", a.num_rows, " rows");
    }
    if (a.num_cols > 65535) {
        HALO_THROW(InputError, "resident SpMM layout: ", a.num_cols,
                   " columns; its 16-bit column indices (and the zero row after them) take at "
                   "most 65535");
    }
    if (segment < 0) {
        HALO_THROW(InputError, "resident SpMM layout: segment limit ", segment,
                   " must be positive (or 0 for the automatic limit)");
    }
    Layout out;
    out.rows = rows;
    out.nonzeros = rows.empty() ? 0 : a.indptr[rows.end] - a.indptr[rows.begin];
    out.segment = segment > 0 ? segment : segment_limit(out.nonzeros);

    std::vector<RowSlot> slots(static_cast<std::size_t>(rows.size()));
    for (std::int64_t i = rows.begin; i < rows.end; ++i) {
        const std::int64_t degree = a.indptr[i + 1] - a.indptr[i];
        if (degree > kItemsMask) {
            HALO_THROW(InputError, "resident SpMM layout: row ", i, " has ", degree,
                       " nonzeros, more than the layout's ", kItemsMask, " a lane");
        }
        RowSlot s{i, 0, degree};
        while ((1 << s.log_group) < kLanes && s.per_lane > out.segment) {
            ++s.log_group;
            s.per_lane = (degree + (std::int64_t{1} << s.log_group) - 1) >> s.log_group;
        }
        slots[static_cast<std::size_t>(i - rows.begin)] = s;
    }
    // Larger groups first (powers of two in descending order keep every group inside one chunk,
    // aligned to its size), then longer lanes first (chunks of similar lanes pad little).
    std::stable_sort(slots.begin(), slots.end(), [](const RowSlot& x, const RowSlot& y) {
        return x.log_group != y.log_group ? x.log_group > y.log_group : x.per_lane > y.per_lane;
    });

    // Lanes in order, then chunks of kLanes.
    std::int64_t lanes_used = 0;
    for (const auto& s : slots) {
        lanes_used += std::int64_t{1} << s.log_group;
    }
    const std::int64_t chunks = (lanes_used + kLanes - 1) / kLanes;
    out.lane_row.assign(static_cast<std::size_t>(chunks * kLanes), -1);
    out.lane_info.assign(static_cast<std::size_t>(chunks * kLanes), 0);
    {
        std::int64_t lane = 0;
        for (std::size_t s = 0; s < slots.size(); ++s) {
            const int g = 1 << slots[s].log_group;
            const std::int64_t degree = a.indptr[slots[s].row + 1] - a.indptr[slots[s].row];
            for (int t = 0; t < g; ++t) {
                const auto at = static_cast<std::size_t>(lane + t);
                out.lane_row[at] = static_cast<std::int32_t>(slots[s].row);
                const std::int64_t items = part_begin(degree, g, t + 1) - part_begin(degree, g, t);
                out.lane_info[at] =
                    static_cast<std::int32_t>(items) | (slots[s].log_group << kGroupShift);
            }
            lane += g;
        }
    }
    out.chunk_start.assign(static_cast<std::size_t>(chunks) + 1, 0);
    for (std::int64_t c = 0; c < chunks; ++c) {
        int steps = 0;
        for (int l = 0; l < kLanes; ++l) {
            steps = std::max(steps, Layout::items(out.lane_info[c * kLanes + l]));
        }
        out.chunk_start[c + 1] = out.chunk_start[c] + std::int64_t{steps} * kLanes;
    }
    const auto entries = static_cast<std::size_t>(out.chunk_start.back());
    out.zero_row = a.num_cols;
    out.columns.assign(entries, static_cast<std::uint16_t>(a.num_cols));
    if (a.values != nullptr) {
        out.values.assign(entries, 0.0f);
    }

#pragma omp parallel for schedule(dynamic, 16)
    for (std::int64_t c = 0; c < chunks; ++c) {
        LaneItems lanes;
        for (int l = 0; l < kLanes; ++l) {
            const auto at = static_cast<std::size_t>(c * kLanes + l);
            const std::int64_t row = out.lane_row[at];
            if (row < 0) {
                continue;
            }
            // The lane's place in its group: lanes of one group are consecutive and aligned.
            const int g = Layout::group(out.lane_info[at]);
            const int t = l % g;
            const std::int64_t degree = a.indptr[row + 1] - a.indptr[row];
            for (std::int64_t p = part_begin(degree, g, t); p < part_begin(degree, g, t + 1); ++p) {
                lanes[static_cast<std::size_t>(l)].push_back(a.indptr[row] + p);
            }
        }
        if (schedule) {
            schedule_chunk(a, lanes);
        }
        for (int l = 0; l < kLanes; ++l) {
            const auto& items = lanes[static_cast<std::size_t>(l)];
            for (std::size_t k = 0; k < items.size(); ++k) {
                const auto e = static_cast<std::size_t>(out.chunk_start[c] +
                                                        static_cast<std::int64_t>(k) * kLanes + l);
                out.columns[e] = static_cast<std::uint16_t>(a.indices[items[k]]);
                if (a.values != nullptr) {
                    out.values[e] = a.values[items[k]];
                }
            }
        }
    }
    return out;
}

Wavefronts count_wavefronts(const Layout& layout)
{
    Wavefronts w;
    for (std::int64_t c = 0; c < layout.num_chunks(); ++c) {
        const std::int64_t steps = layout.steps(c);
        for (std::int64_t k = 0; k < steps; ++k) {
            for (int q = 0; q < kLanes / kPhaseLanes; ++q) {
                std::array<std::array<int, kPhaseLanes>, kResidues> rows{};
                std::array<int, kResidues> distinct{};
                bool any = false;
                for (int i = 0; i < kPhaseLanes; ++i) {
                    // Every lane reads at every step: padding reads the zero row.
                    any = true;
                    const int col = layout.columns[static_cast<std::size_t>(
                        layout.chunk_start[static_cast<std::size_t>(c)] + k * kLanes +
                        q * kPhaseLanes + i)];
                    const int r = col % kResidues;
                    auto& seen = rows[static_cast<std::size_t>(r)];
                    if (std::find(seen.begin(), seen.begin() + distinct[r], col) ==
                        seen.begin() + distinct[r]) {
                        seen[static_cast<std::size_t>(distinct[r]++)] = col;
                    }
                }
                if (any) {
                    w.model += *std::max_element(distinct.begin(), distinct.end());
                    w.ideal += 1;
                }
            }
        }
    }
    return w;
}

void emulate(const Layout& layout, DenseView<const float> x, DenseView<float> y,
             const float* row_scale, const float* col_scale)
{
    HALO_EXPECTS(x.cols == y.cols, "x has ", x.cols, " columns, y has ", y.cols);
    const bool pattern = layout.values.empty();
    std::array<float, kLanes> sum{};
    std::array<float, kLanes> next{};
    for (std::int64_t c = 0; c < layout.num_chunks(); ++c) {
        const std::int64_t base = layout.chunk_start[static_cast<std::size_t>(c)];
        for (std::int64_t j = 0; j < x.cols; ++j) {
            for (int l = 0; l < kLanes; ++l) {
                float acc = 0.0f;
                // Every step of the chunk, the padding included (it adds v * 0: a sum of -0
                // becomes +0 there, as on the device).
                for (std::int64_t k = 0; k < layout.steps(c); ++k) {
                    const auto e = static_cast<std::size_t>(base + k * kLanes + l);
                    const int col = layout.columns[e];
                    const float xv = col == layout.zero_row ? 0.0f
                                     : col_scale != nullptr ? x(col, j) * col_scale[col]
                                                            : x(col, j);
                    acc = std::fmaf(pattern ? 1.0f : layout.values[e], xv, acc);
                }
                sum[static_cast<std::size_t>(l)] = acc;
            }
            // The kernel's butterfly: at each offset below its group's size a lane adds its
            // partner's sum to its own (both lanes of a pair get the same bits).
            for (int off = 1; off < kLanes; off *= 2) {
                for (int l = 0; l < kLanes; ++l) {
                    const int g =
                        Layout::group(layout.lane_info[static_cast<std::size_t>(c * kLanes + l)]);
                    next[static_cast<std::size_t>(l)] =
                        off < g ? sum[static_cast<std::size_t>(l)] +
                                      sum[static_cast<std::size_t>(l ^ off)]
                                : sum[static_cast<std::size_t>(l)];
                }
                sum = next;
            }
            for (int l = 0; l < kLanes; ++l) {
                const auto at = static_cast<std::size_t>(c * kLanes + l);
                const std::int64_t row = layout.lane_row[at];
                if (row < 0 || l % Layout::group(layout.lane_info[at]) != 0) {
                    continue;
                }
                const float v = sum[static_cast<std::size_t>(l)];
                y(row, j) = row_scale != nullptr ? v * row_scale[row] : v;
            }
        }
    }
}

}  // namespace halo::resident
