// Accel-GCN preprocessing (host only, no CUDA): degree sort and block-level partition.
//
// Deviations from the paper's pseudo-code, each for correctness:
// - Algorithm 1 stops at deg < deg_bound; rows of degree exactly deg_bound still fit one block
//   (all warps on one row), so the patterns run up to deg_bound inclusive.
// - Algorithm 2 emits a trailing block with rows_remaining (or deg_remaining) even when that is
//   zero; empty blocks are not emitted here.
// - Degree 0 rows get blocks too (one warp per row, zero nonzeros), so that the kernel writes
//   their zero outputs like every other row's.
#include "halo/accel_gcn_partition.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>

#include "halo/error.hpp"

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

// Appends one segment's sorted rows, reordered nonzeros, blocks and split rows to `p`.
void partition_segment(const CsrView& a, RowRange seg, AccelGcnPartition& p)
{
    const AccelGcnPartitionOptions& opt = p.options;
    const std::int32_t bound = opt.deg_bound;
    const std::int64_t n = seg.size();
    // Counting sort: buckets 0 .. bound by degree, bucket bound + 1 for every longer row (those
    // are split into chunks of deg_bound whatever their degree, so their order does not matter).
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
    const std::int64_t base = static_cast<std::int64_t>(p.sorted_rows.size());
    p.sorted_rows.resize(static_cast<std::size_t>(base + n));
    {
        std::vector<std::int64_t> next(start.begin(), start.end() - 1);
        for (std::int64_t r = seg.begin; r < seg.end; ++r) {
            p.sorted_rows[static_cast<std::size_t>(base + next[bucket(r)]++)] =
                static_cast<local_id>(r);
        }
    }

    // Nonzeros in sorted row order; loc[k] is where sorted row k's first nonzero lands.
    const std::int64_t nnz_base = static_cast<std::int64_t>(p.indices.size());
    std::vector<std::int64_t> loc(static_cast<std::size_t>(n) + 1, nnz_base);
    for (std::int64_t k = 0; k < n; ++k) {
        const std::int64_t row = p.sorted_rows[static_cast<std::size_t>(base + k)];
        const std::int64_t b = a.indptr[row];
        const std::int64_t e = a.indptr[row + 1];
        loc[static_cast<std::size_t>(k) + 1] = loc[static_cast<std::size_t>(k)] + (e - b);
        p.indices.insert(p.indices.end(), a.indices + b, a.indices + e);
        if (a.values != nullptr) {
            p.values.insert(p.values.end(), a.values + b, a.values + e);
        }
    }

    // Algorithm 2 over the degree buckets (rows of one degree are consecutive).
    auto block = [&](std::int64_t deg, std::int64_t k, std::int64_t nz, std::int64_t info) {
        p.blocks.push_back({static_cast<std::int32_t>(deg), static_cast<std::int32_t>(base + k),
                            static_cast<std::int32_t>(nz), static_cast<std::int32_t>(info)});
    };
    for (std::int32_t deg = 0; deg <= bound; ++deg) {
        const AccelGcnPattern pat = accel_gcn_pattern(opt, deg);
        const std::int64_t info_hi = std::int64_t{pat.warp_nonzeros} << 16;
        for (std::int64_t k = start[deg]; k < start[deg + 1]; k += pat.block_rows) {
            const std::int64_t rows = std::min<std::int64_t>(pat.block_rows, start[deg + 1] - k);
            block(deg, k, loc[static_cast<std::size_t>(k)], info_hi | rows);
        }
    }
    for (std::int64_t k = start[bound + 1]; k < n; ++k) {
        const std::int64_t deg =
            loc[static_cast<std::size_t>(k) + 1] - loc[static_cast<std::size_t>(k)];
        if (deg > INT_MAX) {
            HALO_THROW(InputError, "accel_gcn: row ",
                       p.sorted_rows[static_cast<std::size_t>(base + k)], " has ", deg,
                       " nonzeros, beyond the int32 degree of the int4 metadata");
        }
        p.split_rows.push_back(p.sorted_rows[static_cast<std::size_t>(base + k)]);
        for (std::int64_t done = 0; done < deg; done += bound) {
            block(deg, k, loc[static_cast<std::size_t>(k)] + done,
                  std::min<std::int64_t>(bound, deg - done));
        }
    }
}

}  // namespace

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
    p.indices.reserve(static_cast<std::size_t>(total_nnz));
    if (a.values != nullptr) {
        p.values.reserve(static_cast<std::size_t>(total_nnz));
    }
    for (const RowRange& seg : segments) {
        partition_segment(a, seg, p);
        p.segments.push_back(seg);
        p.segment_rows.push_back(static_cast<std::int64_t>(p.sorted_rows.size()));
        p.segment_blocks.push_back(static_cast<std::int64_t>(p.blocks.size()));
        p.segment_split_rows.push_back(static_cast<std::int64_t>(p.split_rows.size()));
    }
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
