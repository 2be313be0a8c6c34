// Steps 5 and 6 of the distributed path (include/halo/partition_mpi/distributed_partition.hpp):
// each row to the rank handling its part, the shards with their send plans, the quality; and the
// joined dataset they are written to.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "distributed_steps.hpp"
#include "halo/core/error.hpp"
#include "halo/mpi/failure_watch.hpp"
#include "halo/mpi/mpi_error.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo/store/store.hpp"

namespace halo {
namespace detail {
namespace {

// Send plans: every receive block of part q from part p tells p which rows q expects.
void set_send_plans(const Comm& c, std::vector<Shard>& shards, std::int64_t n)
{
    std::vector<std::int64_t> send;
    std::vector<int> counts(c.size, 0);
    std::vector<std::vector<std::int64_t>> per_rank(c.size);
    for (const auto& shard : shards) {
        const auto& plan = shard.plan;
        for (std::size_t b = 0; b < plan.recv_ranks.size(); ++b) {
            const auto p = plan.recv_ranks[b];
            auto& out = per_rank[part_rank(p, c.size)];
            out.push_back(p);
            out.push_back(shard.part);
            out.push_back(plan.recv_offsets[b + 1] - plan.recv_offsets[b]);
            out.insert(out.end(), shard.halo_global_ids.begin() + plan.recv_offsets[b],
                       shard.halo_global_ids.begin() + plan.recv_offsets[b + 1]);
        }
    }
    for (int r = 0; r < c.size; ++r) {
        counts[r] = static_cast<int>(per_rank[r].size());
        send.insert(send.end(), per_rank[r].begin(), per_rank[r].end());
        per_rank[r] = {};
    }
    std::vector<std::int64_t> got;
    c.alltoallv_append(send, counts, got);
    send = {};
    // (receiver part q, global ids) per sending part p.
    std::vector<std::vector<std::pair<std::int32_t, std::vector<global_id>>>> requests(
        shards.size());
    for (std::size_t at = 0; at < got.size();) {
        const auto p = static_cast<int>(got[at]);
        const auto q = static_cast<std::int32_t>(got[at + 1]);
        const auto count = got[at + 2];
        at += 3;
        auto& list = requests[static_cast<std::size_t>(p / c.size)];
        list.emplace_back(q, std::vector<global_id>(got.begin() + at, got.begin() + at + count));
        at += count;
    }
    got = {};
    // Local from here: a rank that finds a plan wrong says so, every rank leaves together.
    collectively(c.comm, "building its send plans", [&] {
        std::vector<local_id> local_of(n, -1);
        for (std::size_t s = 0; s < shards.size(); ++s) {
            auto& shard = shards[s];
            for (std::int64_t l = 0; l < shard.num_owned; ++l) {
                local_of[shard.global_ids[l]] = static_cast<local_id>(l);
            }
            auto& list = requests[s];
            std::sort(list.begin(), list.end(),
                      [](const auto& a, const auto& b) { return a.first < b.first; });
            auto& plan = shard.plan;
            plan.send_ranks.clear();
            plan.send_offsets.assign(1, 0);
            plan.send_rows.clear();
            for (const auto& [q, ids] : list) {
                plan.send_ranks.push_back(q);
                for (const auto g : ids) {
                    HALO_EXPECTS(local_of[g] >= 0, "part ", q, " expects node ", g, " from part ",
                                 shard.part, ", which does not own it");
                    plan.send_rows.push_back(local_of[g]);
                }
                plan.send_offsets.push_back(static_cast<std::int64_t>(plan.send_rows.size()));
            }
            for (std::int64_t l = 0; l < shard.num_owned; ++l) {
                local_of[shard.global_ids[l]] = -1;
            }
            validate_shard(shard, "part " + std::to_string(shard.part));
        }
    });
}

}  // namespace

ReceivedRows send_rows_to_parts(const Comm& c, const Csr& block, std::int64_t first_row,
                                const std::vector<std::int32_t>& owner, std::int64_t chunk,
                                bool has_values)
{
    const auto num_local = block.num_rows;
    ReceivedRows got;
    std::vector<std::int64_t> order(num_local);
    std::iota(order.begin(), order.end(), 0);
    std::int64_t next_row = 0;
    std::vector<int> row_counts(c.size);
    std::vector<int> nz_counts(c.size);
    std::vector<local_id> ids;
    std::vector<std::int64_t> lengths;
    std::vector<local_id> cols;
    std::vector<float> values;
    while (true) {
        auto end_row = next_row;
        std::int64_t nz = 0;
        while (end_row < num_local && (nz == 0 || nz + block.row_nnz(end_row) <= chunk)) {
            nz += block.row_nnz(end_row);
            ++end_row;
        }
        if (c.max(end_row > next_row ? 1 : 0) == 0) {
            break;
        }
        // Rows of this round grouped by destination rank (stable: ascending global id).
        std::fill(row_counts.begin(), row_counts.end(), 0);
        std::fill(nz_counts.begin(), nz_counts.end(), 0);
        for (auto i = next_row; i < end_row; ++i) {
            const auto d = part_rank(owner[first_row + i], c.size);
            ++row_counts[d];
            nz_counts[d] += static_cast<int>(block.row_nnz(i));
        }
        std::stable_sort(order.begin() + next_row, order.begin() + end_row,
                         [&](std::int64_t a, std::int64_t b) {
                             return part_rank(owner[first_row + a], c.size) <
                                    part_rank(owner[first_row + b], c.size);
                         });
        ids.clear();
        lengths.clear();
        cols.clear();
        values.clear();
        for (auto k = next_row; k < end_row; ++k) {
            const auto i = order[k];
            ids.push_back(static_cast<local_id>(first_row + i));
            lengths.push_back(block.row_nnz(i));
            cols.insert(cols.end(), block.indices.begin() + block.indptr[i],
                        block.indices.begin() + block.indptr[i + 1]);
            if (block.has_values()) {
                values.insert(values.end(), block.values.begin() + block.indptr[i],
                              block.values.begin() + block.indptr[i + 1]);
            }
        }
        c.alltoallv_append(ids, row_counts, got.ids);
        c.alltoallv_append(lengths, row_counts, got.lengths);
        c.alltoallv_append(cols, nz_counts, got.cols);
        if (has_values) {
            if (!block.has_values()) {
                values.assign(cols.size(), 1.0f);
            }
            c.alltoallv_append(values, nz_counts, got.values);
        }
        next_row = end_row;
    }
    return got;
}

std::vector<Shard> build_rank_shards(const Comm& c, ReceivedRows got, std::int64_t n,
                                     const std::vector<std::int32_t>& owner, int num_parts,
                                     const std::vector<std::uint8_t>& boundary)
{
    std::vector<Shard> shards;
    Csr rows;
    rows.num_rows = n;
    rows.num_cols = n;
    rows.indptr.assign(n + 1, 0);
    for (std::size_t r = 0; r < got.ids.size(); ++r) {
        rows.indptr[got.ids[r] + 1] = got.lengths[r];
    }
    std::partial_sum(rows.indptr.begin(), rows.indptr.end(), rows.indptr.begin());
    rows.indices.resize(got.cols.size());
    rows.values.resize(got.values.size());
    {
        std::int64_t at = 0;
        for (std::size_t r = 0; r < got.ids.size(); ++r) {
            const auto out = rows.indptr[got.ids[r]];
            std::copy_n(got.cols.begin() + at, got.lengths[r], rows.indices.begin() + out);
            if (!got.values.empty()) {
                std::copy_n(got.values.begin() + at, got.lengths[r], rows.values.begin() + out);
            }
            at += got.lengths[r];
        }
    }
    got = {};
    collectively(c.comm, "building its shards", [&] {
        for (int p = c.rank; p < num_parts; p += c.size) {
            shards.push_back(build_shard_rows(rows, owner, num_parts, p, boundary));
        }
    });
    rows = {};
    set_send_plans(c, shards, n);
    return shards;
}

void part_quality(const Comm& c, const std::vector<Shard>& shards, int num_parts, std::int64_t n,
                  std::int64_t num_nonzeros, PartitionQuality& q)
{
    q.parts.assign(num_parts, {});
    q.halo_volume = 0;
    std::vector<std::int64_t> stats(4 * static_cast<std::size_t>(num_parts), 0);
    for (const auto& shard : shards) {
        const auto p = static_cast<std::size_t>(shard.part);
        stats[4 * p] = shard.num_owned;
        stats[4 * p + 1] = shard.csr.nnz();
        stats[4 * p + 2] = shard.num_halo;
        stats[4 * p + 3] = static_cast<std::int64_t>(shard.plan.recv_ranks.size());
    }
    c.sum(stats);
    double max_rows = 0;
    double max_nnz = 0;
    for (int p = 0; p < num_parts; ++p) {
        auto& part = q.parts[p];
        part.owned_rows = stats[4 * p];
        part.nnz = stats[4 * p + 1];
        part.halo_rows = stats[4 * p + 2];
        part.neighbours = static_cast<std::int32_t>(stats[4 * p + 3]);
        q.halo_volume += part.halo_rows;
        max_rows = std::max(max_rows, static_cast<double>(part.owned_rows));
        max_nnz = std::max(max_nnz, static_cast<double>(part.nnz));
    }
    q.row_imbalance = n > 0 ? max_rows / (static_cast<double>(n) / num_parts) : 1.0;
    q.nnz_imbalance =
        num_nonzeros > 0 ? max_nnz / (static_cast<double>(num_nonzeros) / num_parts) : 1.0;
}

}  // namespace detail

using detail::Comm;

void write_distributed_dataset(MPI_Comm comm, const std::filesystem::path& path, DatasetInfo info,
                               const DistributedPartition& result,
                               const std::function<void(DatasetWriter&, const Shard&)>& extra)
{
    const Comm c(comm);
    info.num_nodes = result.num_nodes;
    info.num_nonzeros = result.num_nonzeros;
    info.has_values = result.has_values;
    // No stale root may outlive this run: part files are about to be replaced under it.
    if (c.rank == 0) {
        std::error_code ignored;
        std::filesystem::remove(path, ignored);
    }
    HALO_MPI_TRY(MPI_Barrier(c.comm));
    if (c.size == 1) {
        DatasetWriter writer(path, info, result.owner);
        for (const auto& shard : result.shards) {
            writer.write_part(shard);
            if (extra) {
                extra(writer, shard);
            }
        }
        writer.commit();
        return;
    }
    collectively(c.comm, "writing its part file", [&] {
        if (result.shards.empty()) {
            return;
        }
        std::vector<int> mine;
        for (const auto& shard : result.shards) {
            mine.push_back(shard.part);
        }
        DatasetWriter writer(part_file_path(path, c.rank, c.size), info, result.owner, mine);
        for (const auto& shard : result.shards) {
            writer.write_part(shard);
            if (extra) {
                extra(writer, shard);
            }
        }
        writer.commit();
    });
    collectively(c.comm, "writing the dataset root", [&] {
        if (c.rank != 0) {
            return;
        }
        DatasetWriter root(path, info, result.owner);
        for (int p = 0; p < info.num_parts; ++p) {
            // Relative: HDF5 looks for an external link's file beside the file that holds it.
            root.link_part(p, part_file_path(path.filename(), part_rank(p, c.size), c.size));
        }
        root.commit();
    });
}

}  // namespace halo
