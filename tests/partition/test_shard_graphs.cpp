// Shards of real and synthetic graphs: for every partitioner and several part counts the shards
// validate, their halo plans agree pairwise, they match the owner array and partition_quality,
// every local row lists its global row's nonzeros in the global CSR's own order, and they
// reassemble to exactly the global CSR.
#include <map>
#include <string>
#include <vector>

#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/core/shard.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo_test.hpp"

namespace {

const std::vector<int> part_counts = {1, 2, 3, 4, 7};
// kaminpar where the build has it.
const std::vector<halo::Partitioner> methods = [] {
    std::vector<halo::Partitioner> m = {halo::Partitioner::metis, halo::Partitioner::block,
                                        halo::Partitioner::random};
    if (halo::kaminpar_available()) {
        m.push_back(halo::Partitioner::kaminpar);
    }
    return m;
}();

// Each shared graph is read and built once per test binary.
const halo::Csr& shared_graph(const std::filesystem::path& path, const halo::BuildOptions& options)
{
    static std::map<std::string, halo::Csr> cache;
    const auto key = path.string() + (options.symmetrize ? "" : " directed") +
                     (options.normalization == halo::Normalization::none ? "" : " normalized");
    auto it = cache.find(key);
    if (it == cache.end()) {
        it = cache.emplace(key, halo::build_csr(halo::read_edge_list(path), options)).first;
    }
    return it->second;
}

std::vector<std::int32_t> partition(const halo::Csr& g, halo::Partitioner method, int parts)
{
    halo::PartitionOptions options;
    options.method = method;
    options.num_parts = parts;
    options.seed = 7;
    return halo::partition_graph(g.view(), options);
}

void expect_same_csr(const halo::Csr& got, const halo::Csr& want)
{
    ASSERT_EQ(got.num_rows, want.num_rows);
    ASSERT_EQ(got.num_cols, want.num_cols);
    EXPECT_TRUE(got.indptr == want.indptr) << "row offsets differ";
    EXPECT_TRUE(got.indices == want.indices) << "column indices differ";
    EXPECT_TRUE(got.values == want.values) << "values differ";
}

// Each local row, mapped back to global ids, is its global row entry for entry (build_csr sorts
// rows): the order a row's sum visits its nonzeros is then the same for every part count.
// reassemble() sorts rows, so it cannot see this.
void expect_rows_in_global_order(const halo::Csr& g, const halo::Shard& s)
{
    auto global_column = [&s](std::int32_t c) {
        return c < s.num_owned ? s.global_ids[c] : s.halo_global_ids[c - s.num_owned];
    };
    std::int64_t bad_rows = 0;
    std::int64_t first_bad = -1;
    for (std::int64_t l = 0; l < s.num_owned; ++l) {
        const auto i = s.global_ids[l];
        const auto first = s.csr.indptr[l];
        const auto count = s.csr.indptr[l + 1] - first;
        bool same = count == g.indptr[i + 1] - g.indptr[i];
        for (std::int64_t e = 0; same && e < count; ++e) {
            same = global_column(s.csr.indices[first + e]) == g.indices[g.indptr[i] + e] &&
                   (!g.has_values() || s.csr.values[first + e] == g.values[g.indptr[i] + e]);
        }
        if (!same) {
            first_bad = first_bad < 0 ? l : first_bad;
            ++bad_rows;
        }
    }
    EXPECT_EQ(bad_rows, 0) << "part " << s.part << ": first such local row " << first_bad
                           << " differs from its global row in order or values";
}

// Everything the shards of one partition must satisfy.
void check_shards(const halo::Csr& g, const std::vector<std::int32_t>& owner, int parts,
                  const std::string& what)
{
    SCOPED_TRACE(what);
    const auto shards = halo::build_shards(g, owner, parts);
    ASSERT_EQ(static_cast<int>(shards.size()), parts);
    ASSERT_NO_THROW(halo::validate_halo_plans(shards, what));
    const auto quality = halo::partition_quality(g.view(), owner, parts);
    std::int64_t owned = 0;
    std::int64_t nnz = 0;
    for (int p = 0; p < parts; ++p) {
        const auto& s = shards[p];
        ASSERT_NO_THROW(halo::validate_shard_owner(s, owner, what));
        EXPECT_EQ(s.num_owned, quality.parts[p].owned_rows);
        EXPECT_EQ(s.csr.nnz(), quality.parts[p].nnz);
        EXPECT_EQ(s.num_halo, quality.parts[p].halo_rows);
        EXPECT_EQ(static_cast<std::int32_t>(s.plan.recv_ranks.size()), quality.parts[p].neighbours);
        EXPECT_EQ(s.csr.has_values(), g.has_values());
        expect_rows_in_global_order(g, s);
        owned += s.num_owned;
        nnz += s.csr.nnz();
    }
    EXPECT_EQ(owned, g.num_rows);
    EXPECT_EQ(nnz, g.nnz());
    if (parts == 1) {
        EXPECT_EQ(shards[0].num_interior, g.num_rows);
        EXPECT_EQ(shards[0].num_halo, 0);
    }
    expect_same_csr(halo::reassemble(shards, g.num_rows), g);
}

void check_all_partitions(const halo::Csr& g, const std::string& name)
{
    for (const auto method : methods) {
        for (const int parts : part_counts) {
            const auto owner = partition(g, method, parts);
            check_shards(g, owner, parts,
                         name + " " + halo::to_string(method) + " P=" + std::to_string(parts));
        }
    }
}

// build_shard derives the send lists by scanning the other parts; build_shards from the peers'
// receive blocks. Both must give the same shard.
void expect_single_part_builds_agree(const halo::Csr& g, int parts)
{
    const auto owner = partition(g, halo::Partitioner::metis, parts);
    const auto shards = halo::build_shards(g, owner, parts);
    for (int p = 0; p < parts; ++p) {
        SCOPED_TRACE(p);
        const auto s = halo::build_shard(g, owner, parts, p);
        EXPECT_EQ(s.global_ids, shards[p].global_ids);
        EXPECT_EQ(s.halo_global_ids, shards[p].halo_global_ids);
        EXPECT_EQ(s.num_interior, shards[p].num_interior);
        EXPECT_EQ(s.csr.indptr, shards[p].csr.indptr);
        EXPECT_EQ(s.csr.indices, shards[p].csr.indices);
        EXPECT_EQ(s.csr.values, shards[p].csr.values);
        EXPECT_EQ(s.plan.recv_ranks, shards[p].plan.recv_ranks);
        EXPECT_EQ(s.plan.recv_offsets, shards[p].plan.recv_offsets);
        EXPECT_EQ(s.plan.send_ranks, shards[p].plan.send_ranks);
        EXPECT_EQ(s.plan.send_offsets, shards[p].plan.send_offsets);
        EXPECT_EQ(s.plan.send_rows, shards[p].plan.send_rows);
    }
}

halo::Csr power_law_graph(int scale = 12)
{
    halo::RmatOptions options;
    options.scale = scale;
    options.edge_factor = 8;
    options.seed = 3;
    return halo::build_csr(halo::generate_rmat(options), {});
}

}  // namespace

TEST(ShardGraphs, CoraReassemblesForEveryPartitioner)
{
    HALO_REQUIRE_SHARED_FILE(path, "cora.el.gz");
    check_all_partitions(shared_graph(path, {}), "cora");
}

TEST(ShardGraphs, CiteseerReassemblesForEveryPartitioner)
{
    HALO_REQUIRE_SHARED_FILE(path, "citeseer.el.gz");
    check_all_partitions(shared_graph(path, {}), "citeseer");
}

TEST(ShardGraphs, FourEltMeshReassemblesForEveryPartitioner)
{
    HALO_REQUIRE_SHARED_FILE(path, "4elt.el.gz");
    check_all_partitions(shared_graph(path, {}), "4elt");
}

TEST(ShardGraphs, NormalizedValuesTravelWithTheirColumns)
{
    HALO_REQUIRE_SHARED_FILE(path, "cora.el.gz");
    halo::BuildOptions options;
    options.self_loops = halo::SelfLoops::add;
    options.normalization = halo::Normalization::gcn;
    const auto& g = shared_graph(path, options);
    ASSERT_TRUE(g.has_values());
    for (const int parts : {3, 7}) {
        check_shards(g, partition(g, halo::Partitioner::metis, parts), parts,
                     "cora gcn P=" + std::to_string(parts));
    }
    expect_single_part_builds_agree(g, 3);
}

TEST(ShardGraphs, PowerLawGraphReassemblesForEveryPartitioner)
{
    const auto g = power_law_graph();
    check_all_partitions(g, "rmat-12");
    expect_single_part_builds_agree(g, 4);
}

// Parts this large (over 2^18 nonzeros each) take the builder's OpenMP-parallel paths, which the
// small graphs above do not reach.
TEST(ShardGraphs, LargePartsReassembleThroughTheParallelPaths)
{
    const auto g = power_law_graph(16);
    ASSERT_GT(g.nnz(), std::int64_t{1} << 19);  // two parts
    for (const auto method : {halo::Partitioner::block, halo::Partitioner::random}) {
        check_shards(g, partition(g, method, 2), 2, "rmat-16 " + halo::to_string(method) + " P=2");
    }
    const auto owner = partition(g, halo::Partitioner::random, 2);
    const auto shards = halo::build_shards(g, owner, 2);
    for (int p = 0; p < 2; ++p) {
        const auto s = halo::build_shard(g, owner, 2, p);
        EXPECT_EQ(s.halo_global_ids, shards[p].halo_global_ids);
        EXPECT_EQ(s.csr.indices, shards[p].csr.indices);
        EXPECT_EQ(s.plan.send_rows, shards[p].plan.send_rows);
    }
}

// A directed graph: sends are not the mirror of the halo, so the single-part builder's scan of the
// other parts is what finds them.
TEST(ShardGraphs, DirectedGraphSingleAndAllPartBuildsAgree)
{
    HALO_REQUIRE_SHARED_FILE(path, "wiki-Vote.el.gz");
    halo::BuildOptions options;
    options.symmetrize = false;
    const auto& g = shared_graph(path, options);
    for (const int parts : {2, 4}) {
        check_shards(g, partition(g, halo::Partitioner::metis, parts), parts,
                     "wiki-Vote directed P=" + std::to_string(parts));
    }
    expect_single_part_builds_agree(g, 4);
    // The case this test is for: rows that reference nothing off-part (interior) are still read
    // by other parts, so their halo blocks are not in ascending global id.
    const auto shards = halo::build_shards(g, partition(g, halo::Partitioner::metis, 4), 4);
    std::int64_t interior_rows_sent = 0;
    for (const auto& s : shards) {
        for (const auto r : s.plan.send_rows) {
            interior_rows_sent += r < s.num_interior ? 1 : 0;
        }
    }
    EXPECT_GT(interior_rows_sent, 0);
}

TEST(ShardGraphs, MetisCutsFewerEdgesThanBlockOnPowerLawGraphs)
{
    HALO_REQUIRE_SHARED_FILE(path, "as-22july06.el.gz");
    const auto& internet = shared_graph(path, {});
    const auto rmat = power_law_graph();
    for (const auto* g : {&internet, &rmat}) {
        const auto metis = partition(*g, halo::Partitioner::metis, 4);
        const auto block = partition(*g, halo::Partitioner::block, 4);
        const auto metis_quality = halo::partition_quality(g->view(), metis, 4);
        const auto block_quality = halo::partition_quality(g->view(), block, 4);
        EXPECT_LT(metis_quality.edge_cut, block_quality.edge_cut);
        EXPECT_LT(metis_quality.halo_volume, block_quality.halo_volume);
        check_shards(*g, metis, 4, "power-law metis P=4");
        check_shards(*g, block, 4, "power-law block P=4");
    }
}
