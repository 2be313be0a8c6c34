#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/detail/resident_memory.hpp"
#include "halo/core/enum_names.hpp"
#include "halo/core/error.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/memory_limits.hpp"
#include "halo/core/progress.hpp"

namespace halo {
namespace {

void check_ids(const EdgeList& edges)
{
    if (edges.num_nodes < 0 || edges.num_nodes > std::numeric_limits<local_id>::max()) {
        HALO_THROW(InputError, "graph has ", edges.num_nodes,
                   " nodes; supported are 0 to 2^31-1 (int32 column ids)");
    }
    if (edges.dst.size() != edges.src.size() ||
        (edges.has_weights() && edges.weights.size() != edges.src.size())) {
        HALO_THROW(LogicError, "edge list arrays differ in length: src ", edges.src.size(),
                   ", dst ", edges.dst.size(), ", weights ", edges.weights.size());
    }
    const auto n = edges.num_nodes;
    const auto m = edges.num_edges();
    // Row offsets for every node plus a column id per edge (twice that when symmetrized).
    check_allocation("graph", std::to_string(n) + " nodes' CSR row offsets",
                     8.0 * (static_cast<double>(n) + 1));
    std::int64_t bad = m;
#pragma omp parallel for reduction(min : bad)
    for (std::int64_t e = 0; e < m; ++e) {
        if (edges.src[e] < 0 || edges.src[e] >= n || edges.dst[e] < 0 || edges.dst[e] >= n) {
            bad = std::min(bad, e);
        }
    }
    if (bad < m) {
        HALO_THROW(InputError, "edge ", bad, " (", edges.src[bad], " -> ", edges.dst[bad],
                   ") has a node id outside [0, ", n, ")");
    }
}

// Sorts each row's columns and merges duplicates (max weight). Rows are independent.
void sort_and_dedupe(Csr& csr)
{
    const auto n = csr.num_rows;
    const bool weighted = csr.has_values();
    auto kept = detail::resident_vector<offset_t>(static_cast<std::size_t>(n) + 1);
#pragma omp parallel
    {
        std::vector<std::pair<local_id, float>> buffer;
#pragma omp for schedule(dynamic, 1024)
        for (std::int64_t i = 0; i < n; ++i) {
            const auto begin = csr.indptr[i];
            const auto end = csr.indptr[i + 1];
            offset_t out = begin;
            if (weighted) {
                buffer.clear();
                for (auto k = begin; k < end; ++k) {
                    buffer.emplace_back(csr.indices[k], csr.values[k]);
                }
                std::sort(buffer.begin(), buffer.end());
                for (const auto& [col, w] : buffer) {
                    if (out > begin && csr.indices[out - 1] == col) {
                        csr.values[out - 1] = std::max(csr.values[out - 1], w);
                    } else {
                        csr.indices[out] = col;
                        csr.values[out] = w;
                        ++out;
                    }
                }
            } else {
                std::sort(csr.indices.begin() + begin, csr.indices.begin() + end);
                out = std::unique(csr.indices.begin() + begin, csr.indices.begin() + end) -
                      csr.indices.begin();
            }
            kept[i + 1] = out - begin;
        }
    }
    std::partial_sum(kept.begin(), kept.end(), kept.begin());
    auto indices = detail::resident_vector<local_id>(static_cast<std::size_t>(kept[n]));
    auto values = detail::resident_vector<float>(static_cast<std::size_t>(weighted ? kept[n] : 0));
#pragma omp parallel for schedule(dynamic, 1024)
    for (std::int64_t i = 0; i < n; ++i) {
        const auto len = kept[i + 1] - kept[i];
        std::copy_n(csr.indices.begin() + csr.indptr[i], len, indices.begin() + kept[i]);
        if (weighted) {
            std::copy_n(csr.values.begin() + csr.indptr[i], len, values.begin() + kept[i]);
        }
    }
    csr.indptr = std::move(kept);
    csr.indices = std::move(indices);
    csr.values = std::move(values);
}

}  // namespace

Csr detail::build_pattern_by_row_blocks(std::int64_t num_nodes, const std::vector<global_id>& rows,
                                        const std::vector<global_id>& cols, bool symmetrize,
                                        int block_shift, const ProgressLine& progress)
{
    HALO_EXPECTS(block_shift >= 0 && block_shift <= 16, "block_shift ", block_shift,
                 " outside [0, 16] (the row inside a block is 16 bits)");
    const std::int64_t block_rows = std::int64_t{1} << block_shift;
    const global_id row_mask = block_rows - 1;
    HALO_EXPECTS(rows.size() == cols.size(), "edge arrays of ", rows.size(), " and ", cols.size());
    const auto n = num_nodes;
    const auto m = static_cast<std::int64_t>(rows.size());
    const auto blocks = std::max<std::int64_t>((n + block_rows - 1) / block_rows, 1);
    Csr csr;
    csr.num_rows = n;
    csr.num_cols = n;
    csr.indptr = detail::resident_vector<offset_t>(static_cast<std::size_t>(n) + 1);
    if (n == 0) {
        return csr;
    }
    // Every edge gives one entry, and a second (its mirror) when symmetrized off the diagonal.
    auto for_entries = [&](std::int64_t e, auto&& f) {
        f(rows[e], cols[e]);
        if (symmetrize && rows[e] != cols[e]) {
            f(cols[e], rows[e]);
        }
    };
    // Pass 1: per slice of the edges (one per thread), entries per block; then each (block,
    // slice) pair's first position in the temporary arrays, blocks in order and the slices in
    // order inside a block. The slices are loop iterations, not thread ids: every slice is
    // counted and scattered even where the runtime gives fewer threads than asked for.
    const int threads = omp_get_max_threads();
    std::vector<offset_t> start(static_cast<std::size_t>(threads * blocks + 1), 0);
    auto slice = [m, threads](int t) {
        return std::pair{m * t / threads, m * (t + 1) / threads};
    };
    // Progress in passes (0 to 3): passes 1 and 2 as slice 0 goes (the slices are equal), pass 3
    // by the blocks done. A clock read per 2^20 edges or 64 blocks: nothing next to the work.
    // The edge loops run in chunks of 2^20 edges, the inner loop as without a meter.
    ProgressMeter meter(progress, "building the CSR", 3.0, "passes", 1.0);
    constexpr std::int64_t kChunk = std::int64_t{1} << 20;
    const auto for_edges = [&](int pass, int t, std::int64_t first, std::int64_t last,
                               auto&& body) {
        for (auto chunk = first; chunk < last; chunk += kChunk) {
            const auto stop = std::min(last, chunk + kChunk);
            for (auto e = chunk; e < stop; ++e) {
                body(e);
            }
            if (t == 0) {
                meter.set(pass + double(stop - first) / double(last - first));
            }
        }
    };
    std::atomic<std::int64_t> blocks_done{0};
#pragma omp parallel for schedule(static, 1)
    for (int t = 0; t < threads; ++t) {
        std::vector<offset_t> count(static_cast<std::size_t>(blocks), 0);
        const auto [first, last] = slice(t);
        for_edges(0, t, first, last, [&](std::int64_t e) {
            for_entries(e, [&](global_id r, global_id) { ++count[r >> block_shift]; });
        });
        for (std::int64_t b = 0; b < blocks; ++b) {
            start[static_cast<std::size_t>(b * threads + t + 1)] = count[b];
        }
    }
    std::partial_sum(start.begin(), start.end(), start.begin());
    const auto entries = start.back();
    auto in_block = detail::resident_vector<std::uint16_t>(static_cast<std::size_t>(entries));
    auto column = detail::resident_vector<local_id>(static_cast<std::size_t>(entries));
    // Pass 2: each slice is scattered into its own runs of the blocks' regions.
#pragma omp parallel for schedule(static, 1)
    for (int t = 0; t < threads; ++t) {
        std::vector<offset_t> cursor(static_cast<std::size_t>(blocks));
        for (std::int64_t b = 0; b < blocks; ++b) {
            cursor[b] = start[static_cast<std::size_t>(b * threads + t)];
        }
        const auto [first, last] = slice(t);
        for_edges(1, t, first, last, [&](std::int64_t e) {
            for_entries(e, [&](global_id r, global_id c) {
                const auto k = cursor[r >> block_shift]++;
                in_block[k] = static_cast<std::uint16_t>(r & row_mask);
                column[k] = static_cast<local_id>(c);
            });
        });
    }
    // Pass 3: block by block, its entries placed by row (cursors of the block's rows), each row
    // sorted and deduplicated, and the kept columns written back to the front of the block's
    // region; indptr[r + 1] = row r's kept count.
#pragma omp parallel
    {
        std::vector<offset_t> offset;
        std::vector<local_id> placed;
#pragma omp for schedule(dynamic, 1)
        for (std::int64_t b = 0; b < blocks; ++b) {
            const auto begin = start[static_cast<std::size_t>(b * threads)];
            const auto end = start[static_cast<std::size_t>((b + 1) * threads)];
            const auto row0 = b * block_rows;
            const auto nrows = std::min(block_rows, n - row0);
            offset.assign(static_cast<std::size_t>(nrows) + 1, 0);
            for (auto k = begin; k < end; ++k) {
                ++offset[in_block[k] + 1];
            }
            std::partial_sum(offset.begin(), offset.end(), offset.begin());
            placed.resize(static_cast<std::size_t>(end - begin));
            for (auto k = begin; k < end; ++k) {
                placed[offset[in_block[k]]++] = column[k];
            }
            // offset[i] is now the end of row i (the start of row i + 1).
            auto out = begin;
            offset_t row_begin = 0;
            for (std::int64_t i = 0; i < nrows; ++i) {
                const auto row_end = offset[i];
                auto* first = placed.data() + row_begin;
                auto* last = placed.data() + row_end;
                std::sort(first, last);
                last = std::unique(first, last);
                out = std::copy(first, last, column.begin() + out) - column.begin();
                csr.indptr[row0 + i + 1] = last - first;
                row_begin = row_end;
            }
            if (const auto done = blocks_done.fetch_add(1, std::memory_order_relaxed) + 1;
                done % 64 == 0) {
                meter.set(2.0 + double(done) / double(blocks));
            }
        }
    }
    std::partial_sum(csr.indptr.begin(), csr.indptr.end(), csr.indptr.begin());
    in_block = {};
    csr.indices = detail::resident_vector<local_id>(static_cast<std::size_t>(csr.indptr[n]));
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < blocks; ++b) {
        const auto row0 = b * block_rows;
        const auto row1 = std::min(row0 + block_rows, n);
        std::copy_n(column.begin() + start[static_cast<std::size_t>(b * threads)],
                    csr.indptr[row1] - csr.indptr[row0], csr.indices.begin() + csr.indptr[row0]);
    }
    return csr;
}

Csr build_csr(const EdgeList& edges, const BuildOptions& options)
{
    check_ids(edges);
    const auto n = edges.num_nodes;
    const auto m = edges.num_edges();
    const bool weighted = options.use_weights && edges.has_weights();
    const auto& rows = options.transpose ? edges.dst : edges.src;
    const auto& cols = options.transpose ? edges.src : edges.dst;

    if (!weighted) {
        auto csr = detail::build_pattern_by_row_blocks(n, rows, cols, options.symmetrize, 14,
                                                       options.progress);
        apply_self_loops(csr, options.self_loops);
        normalize(csr, options.normalization);
        return csr;
    }
    Csr csr;
    csr.num_rows = n;
    csr.num_cols = n;
    csr.indptr = detail::resident_vector<offset_t>(static_cast<std::size_t>(n) + 1);
    // Weighted builds: counting and placement run on all threads with atomic row cursors, so the order of a row's
    // entries before sort_and_dedupe depends on the schedule; sorting (by column, then weight) and
    // merging duplicates by max weight make the result independent of it: the same CSR bit for bit
    // for any thread count.
    const bool symmetrize = options.symmetrize;
#pragma omp parallel for schedule(static)
    for (std::int64_t e = 0; e < m; ++e) {
        std::atomic_ref<offset_t>(csr.indptr[rows[e] + 1]).fetch_add(1, std::memory_order_relaxed);
        if (symmetrize && rows[e] != cols[e]) {
            std::atomic_ref<offset_t>(csr.indptr[cols[e] + 1])
                .fetch_add(1, std::memory_order_relaxed);
        }
    }
    std::partial_sum(csr.indptr.begin(), csr.indptr.end(), csr.indptr.begin());
    csr.indices = detail::resident_vector<local_id>(static_cast<std::size_t>(csr.indptr[n]));
    if (weighted) {
        csr.values = detail::resident_vector<float>(static_cast<std::size_t>(csr.indptr[n]));
    }
    std::vector<offset_t> next(csr.indptr.begin(), csr.indptr.end() - 1);
    auto place = [&](global_id r, global_id c, std::int64_t e) {
        const auto k = std::atomic_ref<offset_t>(next[r]).fetch_add(1, std::memory_order_relaxed);
        csr.indices[k] = static_cast<local_id>(c);
        if (weighted) {
            csr.values[k] = edges.weights[e];
        }
    };
#pragma omp parallel for schedule(static)
    for (std::int64_t e = 0; e < m; ++e) {
        place(rows[e], cols[e], e);
        if (symmetrize && rows[e] != cols[e]) {
            place(cols[e], rows[e], e);
        }
    }
    next = {};
    sort_and_dedupe(csr);
    apply_self_loops(csr, options.self_loops);
    normalize(csr, options.normalization);
    return csr;
}

namespace {

// Row i of `csr` is row first_row + i of a larger matrix: its diagonal is column first_row + i.
void apply_self_loops_from(Csr& csr, SelfLoops policy, std::int64_t first_row)
{
    if (policy == SelfLoops::keep) {
        return;
    }
    const auto n = csr.num_rows;
    const bool weighted = csr.has_values();
    auto indptr = detail::resident_vector<offset_t>(static_cast<std::size_t>(n) + 1);
    // First pass: each row's new length.
#pragma omp parallel for schedule(dynamic, 1024)
    for (std::int64_t i = 0; i < n; ++i) {
        const auto first = csr.indices.begin() + csr.indptr[i];
        const auto last = csr.indices.begin() + csr.indptr[i + 1];
        const bool has = std::binary_search(first, last, static_cast<local_id>(first_row + i));
        const auto len = last - first;
        indptr[i + 1] = policy == SelfLoops::drop ? len - (has ? 1 : 0) : len + (has ? 0 : 1);
    }
    std::partial_sum(indptr.begin(), indptr.end(), indptr.begin());
    auto indices = detail::resident_vector<local_id>(static_cast<std::size_t>(indptr[n]));
    auto values =
        detail::resident_vector<float>(static_cast<std::size_t>(weighted ? indptr[n] : 0));
#pragma omp parallel for schedule(dynamic, 1024)
    for (std::int64_t i = 0; i < n; ++i) {
        auto out = indptr[i];
        bool placed = policy == SelfLoops::drop;
        for (auto k = csr.indptr[i]; k < csr.indptr[i + 1]; ++k) {
            const auto c = csr.indices[k];
            if (!placed && c >= first_row + i) {
                placed = true;
                // Insert the missing diagonal before the first larger column.
                if (c > first_row + i) {
                    indices[out] = static_cast<local_id>(first_row + i);
                    if (weighted) {
                        values[out] = 1.0f;
                    }
                    ++out;
                }
            }
            if (policy == SelfLoops::drop && c == first_row + i) {
                continue;
            }
            indices[out] = c;
            if (weighted) {
                values[out] = csr.values[k];
            }
            ++out;
        }
        if (!placed) {
            indices[out] = static_cast<local_id>(first_row + i);
            if (weighted) {
                values[out] = 1.0f;
            }
        }
    }
    csr.indptr = std::move(indptr);
    csr.indices = std::move(indices);
    csr.values = std::move(values);
}

}  // namespace

void apply_self_loops(Csr& csr, SelfLoops policy)
{
    if (policy == SelfLoops::keep) {
        return;
    }
    HALO_EXPECTS(csr.num_rows == csr.num_cols, "self-loops need a square matrix, got ",
                 csr.num_rows, " x ", csr.num_cols);
    apply_self_loops_from(csr, policy, 0);
}

Csr build_csr_rows(std::int64_t first_row, std::int64_t num_rows, std::int64_t num_cols,
                   const std::vector<local_id>& rows, const std::vector<local_id>& cols,
                   const std::vector<float>& weights, SelfLoops self_loops)
{
    const auto m = static_cast<std::int64_t>(rows.size());
    HALO_EXPECTS(cols.size() == rows.size() && (weights.empty() || weights.size() == rows.size()),
                 "entry arrays differ in length: rows ", rows.size(), ", cols ", cols.size(),
                 ", weights ", weights.size());
    const bool weighted = !weights.empty();
    Csr csr;
    csr.num_rows = num_rows;
    csr.num_cols = num_cols;
    csr.indptr.assign(num_rows + 1, 0);
    std::int64_t bad = m;
#pragma omp parallel for schedule(static) reduction(min : bad)
    for (std::int64_t e = 0; e < m; ++e) {
        const auto r = rows[e];
        if (r < 0 || r >= num_rows || cols[e] < 0 || cols[e] >= num_cols) {
            bad = std::min(bad, e);
            continue;
        }
        std::atomic_ref<offset_t>(csr.indptr[r + 1]).fetch_add(1, std::memory_order_relaxed);
    }
    if (bad < m) {
        HALO_THROW(LogicError, "entry ", bad, " (block row ", rows[bad], ", column ", cols[bad],
                   ") outside ", num_rows, " rows x columns [0, ", num_cols, ")");
    }
    std::partial_sum(csr.indptr.begin(), csr.indptr.end(), csr.indptr.begin());
    csr.indices = detail::resident_vector<local_id>(static_cast<std::size_t>(m));
    csr.values.resize(weighted ? m : 0);
    std::vector<offset_t> next(csr.indptr.begin(), csr.indptr.end() - 1);
#pragma omp parallel for schedule(static)
    for (std::int64_t e = 0; e < m; ++e) {
        const auto k =
            std::atomic_ref<offset_t>(next[rows[e]]).fetch_add(1, std::memory_order_relaxed);
        csr.indices[k] = cols[e];
        if (weighted) {
            csr.values[k] = weights[e];
        }
    }
    next = {};
    sort_and_dedupe(csr);
    apply_self_loops_from(csr, self_loops, first_row);
    return csr;
}

std::vector<double> normalization_degrees(Csr& csr)
{
    const auto n = csr.num_rows;
    if (!csr.has_values()) {
        csr.values.assign(csr.indices.size(), 1.0f);
    }
    // Degrees in double: a row sum of many float weights should not lose the low bits.
    std::vector<double> degree(n, 0.0);
#pragma omp parallel for schedule(dynamic, 1024)
    for (std::int64_t i = 0; i < n; ++i) {
        double sum = 0.0;
        for (auto k = csr.indptr[i]; k < csr.indptr[i + 1]; ++k) {
            sum += csr.values[k];
        }
        degree[i] = sum;
    }
    return degree;
}

void normalize_rows(Csr& rows, std::int64_t first_row, Normalization kind,
                    const std::vector<double>& degree, const std::vector<double>& all_degrees)
{
    const auto n = rows.num_rows;
    auto inv_sqrt = [](double d) { return d > 0.0 ? 1.0 / std::sqrt(d) : 0.0; };
#pragma omp parallel for schedule(dynamic, 1024)
    for (std::int64_t i = 0; i < n; ++i) {
        for (auto k = rows.indptr[i]; k < rows.indptr[i + 1]; ++k) {
            const double a = rows.values[k];
            const double scaled = kind == Normalization::mean
                                      ? (degree[i] > 0.0 ? a / degree[i] : 0.0)
                                      : a * inv_sqrt(all_degrees[first_row + i]) *
                                            inv_sqrt(all_degrees[rows.indices[k]]);
            rows.values[k] = static_cast<float>(scaled);
        }
    }
}

void normalize(Csr& csr, Normalization kind)
{
    if (kind == Normalization::none) {
        return;
    }
    const auto degree = normalization_degrees(csr);
    if (kind == Normalization::gcn) {
        HALO_EXPECTS(csr.num_rows == csr.num_cols, "gcn normalization needs a square matrix, got ",
                     csr.num_rows, " x ", csr.num_cols);
    }
    normalize_rows(csr, 0, kind, degree, degree);
}

namespace {

constexpr std::array<EnumName<SelfLoops>, 3> self_loop_names{
    {{SelfLoops::keep, "keep"}, {SelfLoops::drop, "drop"}, {SelfLoops::add, "add"}}};
constexpr std::array<EnumName<Normalization>, 3> normalization_names{
    {{Normalization::none, "none"}, {Normalization::gcn, "gcn"}, {Normalization::mean, "mean"}}};

}  // namespace

SelfLoops parse_self_loops(std::string_view text)
{
    return parse_enum(self_loop_names, text, "self-loop policy");
}

Normalization parse_normalization(std::string_view text)
{
    return parse_enum(normalization_names, text, "normalization");
}

std::string to_string(SelfLoops policy)
{
    return std::string(enum_name(self_loop_names, policy));
}

std::string to_string(Normalization kind)
{
    return std::string(enum_name(normalization_names, kind));
}

}  // namespace halo
