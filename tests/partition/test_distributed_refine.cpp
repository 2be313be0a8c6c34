// The distributed greedy k-way refinement (halo/partition_mpi/distributed_refine.hpp), run under
// mpiexec -n 1, 2 and 3: it never increases the cut, reports the cut it leaves, keeps the balance
// bound, gives the same labels on every run, finds the obvious partition of two cliques from a bad
// labelling, and never makes halo-partition's PT-Scotch result worse, which stays the same for any
// thread count.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition_mpi/distributed_partition.hpp"
#include "halo/partition_mpi/distributed_refine.hpp"
#include "halo_test.hpp"
#include "mpi_world.hpp"
#include "thread_count.hpp"

namespace {

using halo::testing::world_rank;
using halo::testing::world_size;

std::int64_t first_row(std::int64_t n, int r)
{
    return n * r / world_size();
}

// This rank's block of rows of `csr` (global column ids).
halo::Csr block_rows(const halo::Csr& csr)
{
    const auto begin = first_row(csr.num_rows, world_rank());
    const auto end = first_row(csr.num_rows, world_rank() + 1);
    halo::Csr block;
    block.num_rows = end - begin;
    block.num_cols = csr.num_cols;
    block.indptr.assign(csr.indptr.begin() + begin, csr.indptr.begin() + end + 1);
    for (auto& offset : block.indptr) {
        offset -= csr.indptr[begin];
    }
    block.indices.assign(csr.indices.begin() + csr.indptr[begin],
                         csr.indices.begin() + csr.indptr[end]);
    return block;
}

// Every rank's labels, in row order.
std::vector<std::int32_t> gather(const std::vector<std::int32_t>& mine, std::int64_t n)
{
    std::vector<int> counts(world_size());
    std::vector<int> displs(world_size());
    for (int r = 0; r < world_size(); ++r) {
        displs[r] = static_cast<int>(first_row(n, r));
        counts[r] = static_cast<int>(first_row(n, r + 1) - first_row(n, r));
    }
    std::vector<std::int32_t> all(n);
    MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_INT32_T, all.data(),
                   counts.data(), displs.data(), MPI_INT32_T, MPI_COMM_WORLD);
    return all;
}

std::int64_t cut_of(const halo::Csr& csr, const std::vector<std::int32_t>& parts)
{
    std::int64_t cut = 0;
    for (std::int64_t i = 0; i < csr.num_rows; ++i) {
        for (auto k = csr.indptr[i]; k < csr.indptr[i + 1]; ++k) {
            cut += csr.indices[k] > i && parts[csr.indices[k]] != parts[i] ? 1 : 0;
        }
    }
    return cut;
}

// Part weights with vertex weight 1 + off-diagonal degree.
std::vector<std::int64_t> weights_of(const halo::Csr& csr, const std::vector<std::int32_t>& parts,
                                     int num_parts)
{
    std::vector<std::int64_t> w(num_parts, 0);
    for (std::int64_t i = 0; i < csr.num_rows; ++i) {
        std::int64_t degree = 0;
        for (auto k = csr.indptr[i]; k < csr.indptr[i + 1]; ++k) {
            degree += csr.indices[k] != i ? 1 : 0;
        }
        w[parts[i]] += 1 + degree;
    }
    return w;
}

halo::Csr symmetric_csr(const halo::EdgeList& edges)
{
    halo::BuildOptions build;
    build.symmetrize = true;
    return halo::build_csr(edges, build);
}

}  // namespace

TEST(DistributedRefine, FindsTwoCliquesFromABadLabelling)
{
    // Cliques {0..7} and {8..15} joined by the edge 7-8; 0, 1 start with the second clique and
    // 9, 10 with the first (cut 25; the best is 1).
    halo::EdgeList edges;
    edges.num_nodes = 16;
    for (int base : {0, 8}) {
        for (int a = 0; a < 8; ++a) {
            for (int b = a + 1; b < 8; ++b) {
                edges.src.push_back(base + a);
                edges.dst.push_back(base + b);
            }
        }
    }
    edges.src.push_back(7);
    edges.dst.push_back(8);
    const auto csr = symmetric_csr(edges);
    std::vector<std::int32_t> initial = {1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1, 1};
    const auto begin = first_row(16, world_rank());
    std::vector<std::int32_t> mine(initial.begin() + begin,
                                   initial.begin() + first_row(16, world_rank() + 1));
    halo::RefineOptions o;
    o.num_parts = 2;
    // Room for two clique vertices per rank in the other part: the moves need slack (a greedy
    // refinement makes no swaps).
    o.imbalance = 1.5;
    const auto stats = halo::refine_partition(MPI_COMM_WORLD, block_rows(csr), begin, mine, o);
    const auto all = gather(mine, 16);
    EXPECT_EQ(stats.cut_before, cut_of(csr, initial));
    EXPECT_EQ(stats.cut_after, 1);
    EXPECT_EQ(cut_of(csr, all), 1);
    for (int i = 0; i < 16; ++i) {
        EXPECT_EQ(all[i], i < 8 ? 0 : 1) << "node " << i;
    }
}

TEST(DistributedRefine, NeverWorseBalancedAndRepeatable)
{
    for (const char* name : {"cora.el.gz", "facebook-combined.el.gz"}) {
        HALO_REQUIRE_SHARED_FILE(path, name);
        const auto csr = symmetric_csr(halo::read_graph(path));
        const auto n = csr.num_rows;
        const auto begin = first_row(n, world_rank());
        const auto block = block_rows(csr);
        for (const int parts : {2, 5, 8}) {
            const std::string tag = std::string(name) + " parts " + std::to_string(parts);
            // A poor start: contiguous id ranges.
            std::vector<std::int32_t> initial(n);
            for (std::int64_t i = 0; i < n; ++i) {
                initial[i] = static_cast<std::int32_t>(i * parts / n);
            }
            halo::RefineOptions o;
            o.num_parts = parts;
            o.chunk_entries = 100;  // many exchange rounds
            auto first = std::vector<std::int32_t>(initial.begin() + begin,
                                                   initial.begin() + begin + block.num_rows);
            auto second = first;
            const auto stats = halo::refine_partition(MPI_COMM_WORLD, block, begin, first, o);
            halo::refine_partition(MPI_COMM_WORLD, block, begin, second, o);
            EXPECT_EQ(first, second) << tag;
            const auto all = gather(first, n);
            EXPECT_EQ(stats.cut_before, cut_of(csr, initial)) << tag;
            EXPECT_EQ(stats.cut_after, cut_of(csr, all)) << tag;
            EXPECT_LE(stats.cut_after, stats.cut_before) << tag;
            EXPECT_LT(stats.cut_after, stats.cut_before) << tag;  // a poor start leaves room
            const auto before = weights_of(csr, initial, parts);
            const auto after = weights_of(csr, all, parts);
            std::int64_t total = 0;
            for (const auto w : before) {
                total += w;
            }
            const auto bound = static_cast<std::int64_t>(
                std::floor(o.imbalance * static_cast<double>(total) / parts));
            for (int p = 0; p < parts; ++p) {
                EXPECT_LE(after[p], std::max(bound, before[p])) << tag << " part " << p;
                EXPECT_GT(after[p], 0) << tag << " part " << p;
            }
        }
    }
}

TEST(DistributedRefine, NeverMakesPtScotchWorse)
{
    HALO_REQUIRE_SHARED_FILE(path, "citeseer.el.gz");
    for (const int parts : {2, 4}) {
        halo::DistributedOptions o;
        o.num_parts = parts;
        o.build.symmetrize = true;
        o.refine_passes = 0;
        const auto plain = halo::partition_distributed(MPI_COMM_WORLD, path.string(), o);
        o.refine_passes = 8;
        const auto refined = halo::partition_distributed(MPI_COMM_WORLD, path.string(), o);
        EXPECT_LE(refined.quality.edge_cut, plain.quality.edge_cut) << "parts " << parts;
    }
}

TEST(DistributedRefine, SamePartitionForAnyThreadCount)
{
    HALO_REQUIRE_SHARED_FILE(path, "cora.el.gz");
    halo::DistributedOptions o;
    o.num_parts = 4;
    o.build.symmetrize = true;
    std::vector<std::int32_t> one;
    {
        const halo::testing::ThreadCount threads(1);
        one = halo::partition_distributed(MPI_COMM_WORLD, path.string(), o).owner;
    }
    const halo::testing::ThreadCount threads(3);
    EXPECT_EQ(halo::partition_distributed(MPI_COMM_WORLD, path.string(), o).owner, one);
}
