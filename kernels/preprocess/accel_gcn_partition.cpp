// Accel-GCN preprocessing (host only, no CUDA): degree sort and block-level partition.
//
// Deviations from the paper's pseudo-code, each for correctness:
// - Algorithm 1 stops at deg < deg_bound; rows of degree exactly deg_bound still fit one block
//   (all warps on one row), so the patterns run up to deg_bound inclusive.
// - Algorithm 2 emits a trailing block with rows_remaining (or deg_remaining) even when that is
//   zero; empty blocks are not emitted here.
// - Degree 0 rows get blocks too (one warp per row, zero nonzeros), so that the kernel writes
//   their zero outputs like every other row's.
// Without degree sorting (the ablation switch), Algorithm 2 runs over the maximal runs of equal
// degree in the original row order; with it, those runs are the degree classes, so one loop
// (partition_blocks) produces both.
#include "halo/kernels_host/accel_gcn_partition.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <numeric>

#include "halo/core/error.hpp"

namespace halo {

void validate(const AccelGcnPartitionOptions& options)
{
    if (options.warps_per_block < 1 || options.warps_per_block > 32) {
        HALO_THROW(InputError, "accel_gcn: warps_per_block ", options.warps_per_block,
                   " outside 1 .. 32 (a thread block holds at most 1024 threads)");
    }
    if (options.deg_bound < options.warps_per_block ||
        options.deg_bound % options.warps_per_block != 0) {
        HALO_THROW(InputError, "accel_gcn: deg_bound ", options.deg_bound,
                   " is not a positive multiple of warps_per_block ", options.warps_per_block);
    }
    if (options.warp_nonzeros() > 0xFFFF) {
        HALO_THROW(InputError, "accel_gcn: deg_bound / warps_per_block = ", options.warp_nonzeros(),
                   " exceeds the 16 bits of the metadata's nonzeros-per-warp field");
    }
}

AccelGcnPattern accel_gcn_pattern(const AccelGcnPartitionOptions& options, std::int32_t deg)
{
    HALO_EXPECTS(deg >= 0 && deg <= options.deg_bound, "degree ", deg, " outside [0, deg_bound ",
                 options.deg_bound, "]");
    const std::int32_t warps = options.warps_per_block;
    if (deg == 0) {
        return {1, warps, 0};
    }
    for (std::int32_t f = 1; f <= warps; ++f) {
        if (warps % f == 0 && static_cast<std::int64_t>(f) * options.warp_nonzeros() >= deg) {
            return {f, warps / f, (deg + f - 1) / f};
        }
    }
    // Unreachable: f = warps gives warps * warp_nonzeros = deg_bound >= deg.
    HALO_THROW(LogicError, "no Accel-GCN pattern for degree ", deg);
}

std::vector<RowRange> accel_gcn_segments(std::int64_t num_rows, std::span<const RowRange> ranges)
{
    std::vector<std::int64_t> cuts{0, num_rows};
    for (const RowRange& r : ranges) {
        HALO_EXPECTS(r.begin >= 0 && r.begin <= r.end && r.end <= num_rows, "row range [", r.begin,
                     ", ", r.end, ") outside [0, ", num_rows, ")");
        cuts.push_back(r.begin);
        cuts.push_back(r.end);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<RowRange> segments;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
        segments.push_back({cuts[i], cuts[i + 1]});
    }
    return segments;
}

namespace {

// The order of a segment's rows: counting sort by degree (buckets 0 .. bound by degree, bucket
// bound + 1 for every longer row: those are split into chunks of deg_bound whatever their degree,
// so their order does not matter), stable; or the original order without degree sorting.
void order_rows(const CsrView& a, RowRange seg, const AccelGcnPartitionOptions& opt,
                std::vector<local_id>& sorted_rows)
{
    const std::int64_t base = static_cast<std::int64_t>(sorted_rows.size());
    sorted_rows.resize(static_cast<std::size_t>(base + seg.size()));
    if (!opt.degree_sort) {
        std::iota(sorted_rows.begin() + base, sorted_rows.end(), static_cast<local_id>(seg.begin));
        return;
    }
    const std::int32_t bound = opt.deg_bound;
    std::vector<std::int64_t> start(static_cast<std::size_t>(bound) + 3, 0);
    auto bucket = [&](std::int64_t row) {
        const std::int64_t deg = a.indptr[row + 1] - a.indptr[row];
        return static_cast<std::size_t>(std::min<std::int64_t>(deg, std::int64_t{bound} + 1));
    };
    for (std::int64_t r = seg.begin; r < seg.end; ++r) {
        ++start[bucket(r) + 1];
    }
    for (std::size_t b = 1; b < start.size(); ++b) {
        start[b] += start[b - 1];
    }
    for (std::int64_t r = seg.begin; r < seg.end; ++r) {
        sorted_rows[static_cast<std::size_t>(base + start[bucket(r)]++)] = static_cast<local_id>(r);
    }
}

// Algorithm 2 over one segment whose rows are already at sorted positions [base, base + n), their
// nonzeros at offsets from nnz_base on: maximal runs of consecutive rows of one degree <=
// deg_bound go into blocks of the pattern's block_rows rows; every longer row into chunks of
// deg_bound nonzeros, one block each. With degree sorting the runs are the degree classes (the
// paper's loop over degrees, in the same order); without it, the runs of the original order.
void partition_blocks(const CsrView& a, std::int64_t base, std::int64_t n, std::int64_t nnz_base,
                      AccelGcnPartition& p)
{
    const AccelGcnPartitionOptions& opt = p.options;
    const std::int32_t bound = opt.deg_bound;
    auto degree = [&](std::int64_t k) {
        const std::int64_t row = p.sorted_rows[static_cast<std::size_t>(base + k)];
        return a.indptr[row + 1] - a.indptr[row];
    };
    auto block = [&](std::int64_t deg, std::int64_t k, std::int64_t nz, std::int64_t info) {
        p.blocks.push_back({static_cast<std::int32_t>(deg), static_cast<std::int32_t>(base + k),
                            static_cast<std::int32_t>(nz), static_cast<std::int32_t>(info)});
    };
    std::int64_t nz = nnz_base;
    std::int64_t k = 0;
    while (k < n) {
        const std::int64_t deg = degree(k);
        if (deg > bound) {
            if (deg > INT_MAX) {
                HALO_THROW(InputError, "accel_gcn: row ",
                           p.sorted_rows[static_cast<std::size_t>(base + k)], " has ", deg,
                           " nonzeros, beyond the int32 degree of the int4 metadata");
            }
            p.split_rows.push_back(p.sorted_rows[static_cast<std::size_t>(base + k)]);
            for (std::int64_t done = 0; done < deg; done += bound) {
                block(deg, k, nz + done, std::min<std::int64_t>(bound, deg - done));
            }
            nz += deg;
            ++k;
            continue;
        }
        std::int64_t run_end = k + 1;
        while (run_end < n && degree(run_end) == deg) {
            ++run_end;
        }
        const AccelGcnPattern pat = accel_gcn_pattern(opt, static_cast<std::int32_t>(deg));
        const std::int64_t info_hi = std::int64_t{pat.warp_nonzeros} << 16;
        for (std::int64_t first = k; first < run_end; first += pat.block_rows) {
            const std::int64_t rows = std::min<std::int64_t>(pat.block_rows, run_end - first);
            block(deg, first, nz, info_hi | rows);
            nz += rows * deg;
        }
        k = run_end;
    }
}

}  // namespace

void accel_gcn_gather_nonzeros(const CsrView& a, AccelGcnPartition& p)
{
    std::int64_t total = 0;
    for (const local_id row : p.sorted_rows) {
        if (row < 0 || row >= a.num_rows) {
            HALO_THROW(InputError, "accel_gcn partition: sorted row ", row, " outside the ",
                       a.num_rows, " rows of the matrix");
        }
        total += a.indptr[row + 1] - a.indptr[row];
    }
    if (total > INT_MAX) {
        HALO_THROW(InputError, "accel_gcn partition: ", total,
                   " nonzeros exceed the int32 offsets of the int4 metadata");
    }
    p.indices.clear();
    p.values.clear();
    p.indices.reserve(static_cast<std::size_t>(total));
    if (a.values != nullptr) {
        p.values.reserve(static_cast<std::size_t>(total));
    }
    for (const local_id row : p.sorted_rows) {
        const std::int64_t b = a.indptr[row];
        const std::int64_t e = a.indptr[row + 1];
        p.indices.insert(p.indices.end(), a.indices + b, a.indices + e);
        if (a.values != nullptr) {
            p.values.insert(p.values.end(), a.values + b, a.values + e);
        }
    }
}

namespace {

// The stored nonzeros of `p` (when it stores them): as many as its rows have in `a` (loc: the
// offsets of the sorted rows' nonzeros), within the int4 metadata's int32 offsets, and each equal
// to the matrix's (values too, for a valued matrix).
void check_stored_nonzeros(const CsrView& a, const AccelGcnPartition& p,
                           const std::vector<std::int64_t>& loc)
{
    const auto n = static_cast<std::int64_t>(p.sorted_rows.size());
    const std::int64_t nnz = loc.back();
    if (nnz > INT_MAX) {
        HALO_THROW(InputError, "accel_gcn partition: ", nnz,
                   " nonzeros exceed the int32 offsets of the int4 metadata");
    }
    const bool have_indices = !p.indices.empty() || nnz == 0;
    if (have_indices && static_cast<std::int64_t>(p.indices.size()) != nnz) {
        HALO_THROW(InputError, "accel_gcn partition: ", p.indices.size(),
                   " stored nonzeros, its rows have ", nnz, " in the matrix");
    }
    const std::size_t want_values = have_indices && a.values != nullptr ? p.indices.size() : 0;
    if (p.values.size() != want_values) {
        HALO_THROW(InputError, "accel_gcn partition: ", p.values.size(),
                   " stored values, expected ", want_values,
                   a.values != nullptr ? " (valued matrix)" : " (pattern matrix)");
    }
    if (!p.indices.empty()) {
        for (std::int64_t k = 0; k < n; ++k) {
            const std::int64_t row = p.sorted_rows[static_cast<std::size_t>(k)];
            const std::int64_t b = a.indptr[row];
            const std::int64_t off = loc[static_cast<std::size_t>(k)];
            for (std::int64_t j = 0; j < a.indptr[row + 1] - b; ++j) {
                const auto at = static_cast<std::size_t>(off + j);
                if (p.indices[at] != a.indices[b + j] ||
                    (a.values != nullptr && !(p.values[at] == a.values[b + j]))) {
                    HALO_THROW(InputError, "accel_gcn partition: stored nonzero ", off + j,
                               " (row ", row, ", entry ", j, ") differs from the matrix's");
                }
            }
        }
    }
}

}  // namespace

void validate_accel_gcn_partition(const CsrView& a, const AccelGcnPartition& p)
{
    validate(p.options);
    const std::int64_t num_segments = p.num_segments();
    const auto table_ok = [&](const std::vector<std::int64_t>& t, std::size_t total) {
        if (t.size() != static_cast<std::size_t>(num_segments) + 1 || t.front() != 0 ||
            t.back() != static_cast<std::int64_t>(total)) {
            return false;
        }
        return std::is_sorted(t.begin(), t.end());
    };
    if (!table_ok(p.segment_rows, p.sorted_rows.size()) ||
        !table_ok(p.segment_blocks, p.blocks.size()) ||
        !table_ok(p.segment_split_rows, p.split_rows.size())) {
        HALO_THROW(InputError, "accel_gcn partition: segment tables of ", num_segments,
                   " segments do not match its ", p.sorted_rows.size(), " rows, ",
                   p.blocks.size(), " blocks and ", p.split_rows.size(), " split rows");
    }
    const std::int32_t bound = p.options.deg_bound;
    const auto n = static_cast<std::int64_t>(p.sorted_rows.size());
    // Each segment's rows: a permutation of its range; loc = offsets of the rows' nonzeros.
    std::vector<std::int64_t> stamp(static_cast<std::size_t>(a.num_rows), -1);
    std::vector<std::int64_t> loc(static_cast<std::size_t>(n) + 1, 0);
    for (std::int64_t s = 0; s < num_segments; ++s) {
        const RowRange seg = p.segments[static_cast<std::size_t>(s)];
        if (seg.begin < 0 || seg.begin > seg.end || seg.end > a.num_rows) {
            HALO_THROW(InputError, "accel_gcn partition: segment ", s, " [", seg.begin, ", ",
                       seg.end, ") outside the ", a.num_rows, " rows of the matrix");
        }
        const std::int64_t k0 = p.segment_rows[static_cast<std::size_t>(s)];
        const std::int64_t k1 = p.segment_rows[static_cast<std::size_t>(s) + 1];
        std::int64_t long_rows = 0;
        if (k1 - k0 != seg.size()) {
            HALO_THROW(InputError, "accel_gcn partition: segment ", s, " [", seg.begin, ", ",
                       seg.end, ") lists ", k1 - k0, " sorted rows");
        }
        for (std::int64_t k = k0; k < k1; ++k) {
            const std::int64_t row = p.sorted_rows[static_cast<std::size_t>(k)];
            if (row < seg.begin || row >= seg.end || stamp[static_cast<std::size_t>(row)] == s) {
                HALO_THROW(InputError, "accel_gcn partition: sorted position ", k, " holds row ",
                           row, ", outside segment ", s, " [", seg.begin, ", ", seg.end,
                           ") or repeated");
            }
            stamp[static_cast<std::size_t>(row)] = s;
            const std::int64_t deg = a.indptr[row + 1] - a.indptr[row];
            loc[static_cast<std::size_t>(k) + 1] = loc[static_cast<std::size_t>(k)] + deg;
            long_rows += deg > bound ? 1 : 0;
        }
        // Split rows: exactly the segment's rows above deg_bound, each once (a listed row is
        // re-stamped, so a repeat or a row of another segment fails).
        const std::int64_t q0 = p.segment_split_rows[static_cast<std::size_t>(s)];
        const std::int64_t q1 = p.segment_split_rows[static_cast<std::size_t>(s) + 1];
        if (q1 - q0 != long_rows) {
            HALO_THROW(InputError, "accel_gcn partition: segment ", s, " lists ", q1 - q0,
                       " split rows, it has ", long_rows, " rows above deg_bound ", bound);
        }
        for (std::int64_t q = q0; q < q1; ++q) {
            const std::int64_t row = p.split_rows[static_cast<std::size_t>(q)];
            if (row < 0 || row >= a.num_rows || stamp[static_cast<std::size_t>(row)] != s ||
                a.indptr[row + 1] - a.indptr[row] <= bound) {
                HALO_THROW(InputError, "accel_gcn partition: split row ", row, " of segment ", s,
                           " is outside it, repeated or not longer than deg_bound ", bound);
            }
            stamp[static_cast<std::size_t>(row)] = -2 - s;
        }
    }
    check_stored_nonzeros(a, p, loc);
    // Blocks: the rules the kernel relies on, and coverage of every row exactly once.
    std::vector<std::int64_t> covered(static_cast<std::size_t>(n), 0);
    for (std::int64_t s = 0; s < num_segments; ++s) {
        const std::int64_t k0 = p.segment_rows[static_cast<std::size_t>(s)];
        const std::int64_t k1 = p.segment_rows[static_cast<std::size_t>(s) + 1];
        for (std::int64_t bi = p.segment_blocks[static_cast<std::size_t>(s)];
             bi < p.segment_blocks[static_cast<std::size_t>(s) + 1]; ++bi) {
            const AccelGcnBlock& b = p.blocks[static_cast<std::size_t>(bi)];
            const auto bad = [&](const char* what) {
                HALO_THROW(InputError, "accel_gcn partition: block ", bi, " {degree ", b.degree,
                           ", row ", b.first_row, ", nonzero ", b.first_nonzero, ", info ",
                           b.info, "} of segment ", s, ": ", what);
            };
            if (b.first_row < k0 || b.first_row >= k1) {
                bad("its first row lies outside the segment");
            }
            const auto pos = static_cast<std::size_t>(b.first_row);
            if (b.degree != loc[pos + 1] - loc[pos]) {
                bad("its degree differs from its row's in the matrix (another matrix?)");
            }
            if (b.split(bound)) {
                if (b.info < 1 || b.info > bound ||
                    b.first_nonzero != loc[pos] + covered[pos] ||
                    covered[pos] + b.info > b.degree) {
                    bad("its chunk does not continue the row's previous chunks");
                }
                covered[pos] += b.info;
                continue;
            }
            const AccelGcnPattern pat = accel_gcn_pattern(p.options, b.degree);
            if (b.warp_nonzeros() != pat.warp_nonzeros || b.rows() < 1 ||
                b.rows() > pat.block_rows || b.first_row + b.rows() > k1) {
                bad("its rows or nonzeros per warp break Algorithm 1's pattern for its degree");
            }
            if (b.first_nonzero != loc[pos]) {
                bad("its nonzero offset is not its first row's");
            }
            for (std::int32_t r = 0; r < b.rows(); ++r) {
                const auto k = pos + static_cast<std::size_t>(r);
                if (loc[k + 1] - loc[k] != b.degree || covered[k] != 0) {
                    bad("a row of the block has another degree or another block");
                }
                covered[k] = b.degree == 0 ? 1 : b.degree;
            }
        }
        for (std::int64_t k = k0; k < k1; ++k) {
            const std::int64_t deg = loc[static_cast<std::size_t>(k) + 1] -
                                     loc[static_cast<std::size_t>(k)];
            if (covered[static_cast<std::size_t>(k)] != std::max<std::int64_t>(deg, 1)) {
                HALO_THROW(InputError, "accel_gcn partition: row ",
                           p.sorted_rows[static_cast<std::size_t>(k)], " of segment ", s,
                           " (degree ", deg, ") is not covered exactly once by its blocks");
            }
        }
    }
}

void check_stored_accel_gcn_partition(const CsrView& a, const AccelGcnPartition& p,
                                      const AccelGcnPartitionOptions& options,
                                      std::span<const RowRange> ranges)
{
    if (!(p.options == options)) {
        HALO_THROW(InputError, "accel_gcn: the stored partition was built with warps_per_block ",
                   p.options.warps_per_block, ", deg_bound ", p.options.deg_bound,
                   ", degree_sort ", p.options.degree_sort, "; the plan asks for ",
                   options.warps_per_block, ", ", options.deg_bound, ", ", options.degree_sort);
    }
    std::int64_t next = 0;
    for (std::size_t s = 0; s < p.segments.size(); ++s) {
        if (p.segments[s].begin != next || p.segments[s].end < next) {
            HALO_THROW(InputError, "accel_gcn: stored partition segment ", s, " [",
                       p.segments[s].begin, ", ", p.segments[s].end, ") does not start at row ",
                       next, " (segments must tile the rows in order)");
        }
        next = p.segments[s].end;
    }
    if (next != a.num_rows) {
        HALO_THROW(InputError, "accel_gcn: the stored partition covers ", next,
                   " rows, the matrix has ", a.num_rows, " (a partition of another matrix?)");
    }
    validate_accel_gcn_partition(a, p);
    for (const RowRange& r : ranges) {
        const auto at_bound = [&](std::int64_t row) {
            return std::binary_search(p.segment_rows.begin(), p.segment_rows.end(), row);
        };
        if (!at_bound(r.begin) || !at_bound(r.end)) {
            HALO_THROW(InputError, "accel_gcn: requested range [", r.begin, ", ", r.end,
                       ") is not a union of the stored partition's segments");
        }
    }
}

AccelGcnPartition build_accel_gcn_partition(const CsrView& a, std::span<const RowRange> segments,
                                            const AccelGcnPartitionOptions& options)
{
    validate(options);
    if (a.num_rows > INT_MAX) {
        HALO_THROW(InputError, "accel_gcn: ", a.num_rows,
                   " rows exceed the int32 row positions of the int4 metadata");
    }
    std::int64_t total_rows = 0;
    std::int64_t total_nnz = 0;
    for (const RowRange& seg : segments) {
        if (seg.begin < 0 || seg.begin > seg.end || seg.end > a.num_rows) {
            HALO_THROW(InputError, "accel_gcn: segment [", seg.begin, ", ", seg.end,
                       ") outside [0, ", a.num_rows, ")");
        }
        total_rows += seg.size();
        total_nnz += a.indptr[seg.end] - a.indptr[seg.begin];
    }
    if (total_rows > INT_MAX || total_nnz > INT_MAX) {
        HALO_THROW(
            InputError, "accel_gcn: ", total_rows, " rows and ", total_nnz,
            " nonzeros to partition; the int4 metadata holds int32 positions (use cusparse)");
    }
    AccelGcnPartition p;
    p.options = options;
    p.sorted_rows.reserve(static_cast<std::size_t>(total_rows));
    std::int64_t nnz_base = 0;
    for (const RowRange& seg : segments) {
        const std::int64_t base = static_cast<std::int64_t>(p.sorted_rows.size());
        order_rows(a, seg, options, p.sorted_rows);
        partition_blocks(a, base, seg.size(), nnz_base, p);
        nnz_base += a.indptr[seg.end] - a.indptr[seg.begin];
        p.segments.push_back(seg);
        p.segment_rows.push_back(static_cast<std::int64_t>(p.sorted_rows.size()));
        p.segment_blocks.push_back(static_cast<std::int64_t>(p.blocks.size()));
        p.segment_split_rows.push_back(static_cast<std::int64_t>(p.split_rows.size()));
    }
    accel_gcn_gather_nonzeros(a, p);
    return p;
}

void accel_gcn_emulate(const AccelGcnPartition& p, std::int64_t first_segment,
                       std::int64_t last_segment, DenseView<const float> x, DenseView<float> y)
{
    HALO_EXPECTS(
        0 <= first_segment && first_segment <= last_segment && last_segment <= p.num_segments(),
        "segments [", first_segment, ", ", last_segment, ") outside [0, ", p.num_segments(), ")");
    const std::int64_t d = x.cols;
    const std::int32_t warps = p.options.warps_per_block;
    const std::int32_t bound = p.options.deg_bound;
    const std::int32_t warp_cap = p.options.warp_nonzeros();
    const bool valued = !p.values.empty();
    auto value = [&](std::int64_t k) {
        return valued ? p.values[static_cast<std::size_t>(k)] : 1.0f;
    };
    // One warp's partial sum over nonzeros [b, e), per column (the register of each lane).
    std::vector<float> partial(static_cast<std::size_t>(d));
    auto warp_sum = [&](std::int64_t b, std::int64_t e) {
        std::fill(partial.begin(), partial.end(), 0.0f);
        for (std::int64_t k = b; k < e; ++k) {
            const float v = value(k);
            const float* xr = x.row(p.indices[static_cast<std::size_t>(k)]);
            for (std::int64_t j = 0; j < d; ++j) {
                partial[static_cast<std::size_t>(j)] += v * xr[j];
            }
        }
    };
    for (std::int64_t s = p.segment_split_rows[static_cast<std::size_t>(first_segment)];
         s < p.segment_split_rows[static_cast<std::size_t>(last_segment)]; ++s) {
        std::fill(y.row(p.split_rows[static_cast<std::size_t>(s)]),
                  y.row(p.split_rows[static_cast<std::size_t>(s)]) + d, 0.0f);
    }
    // Shared accumulator of a block: one row per block row (split blocks: one).
    std::vector<float> shared(static_cast<std::size_t>(warps * d));
    for (std::int64_t bi = p.segment_blocks[static_cast<std::size_t>(first_segment)];
         bi < p.segment_blocks[static_cast<std::size_t>(last_segment)]; ++bi) {
        const AccelGcnBlock& blk = p.blocks[static_cast<std::size_t>(bi)];
        if (blk.split(bound)) {
            std::fill(shared.begin(), shared.begin() + d, 0.0f);
            for (std::int32_t w = 0; w < warps; ++w) {
                const std::int64_t b = std::min<std::int64_t>(std::int64_t{w} * warp_cap, blk.info);
                const std::int64_t e = std::min<std::int64_t>(b + warp_cap, blk.info);
                warp_sum(blk.first_nonzero + b, blk.first_nonzero + e);
                for (std::int64_t j = 0; j < d; ++j) {
                    shared[static_cast<std::size_t>(j)] += partial[static_cast<std::size_t>(j)];
                }
            }
            float* yr = y.row(p.sorted_rows[static_cast<std::size_t>(blk.first_row)]);
            for (std::int64_t j = 0; j < d; ++j) {
                yr[j] += shared[static_cast<std::size_t>(j)];
            }
            continue;
        }
        const std::int32_t rows = blk.rows();
        const std::int32_t per_warp = blk.warp_nonzeros();
        const std::int32_t warps_per_row =
            per_warp == 0 ? 1 : (blk.degree + per_warp - 1) / per_warp;
        std::fill(shared.begin(), shared.begin() + rows * d, 0.0f);
        for (std::int32_t w = 0; w < rows * warps_per_row; ++w) {
            const std::int32_t r = w / warps_per_row;
            const std::int32_t part = w % warps_per_row;
            const std::int64_t row_first = blk.first_nonzero + std::int64_t{r} * blk.degree;
            const std::int64_t b =
                std::min<std::int64_t>(std::int64_t{part} * per_warp, blk.degree);
            const std::int64_t e = std::min<std::int64_t>(b + per_warp, blk.degree);
            warp_sum(row_first + b, row_first + e);
            for (std::int64_t j = 0; j < d; ++j) {
                shared[static_cast<std::size_t>(r * d + j)] += partial[static_cast<std::size_t>(j)];
            }
        }
        for (std::int32_t r = 0; r < rows; ++r) {
            float* yr = y.row(p.sorted_rows[static_cast<std::size_t>(blk.first_row + r)]);
            std::copy(shared.begin() + r * d, shared.begin() + (r + 1) * d, yr);
        }
    }
}

}  // namespace halo
