// MaxK's edge groups and Fused3S's BSB as dataset kernel metadata (no GPU): both survive a round
// trip through KernelMetadata and the dataset file, on a random graph with empty rows and on cora;
// a stored structure is checked against the operator it is given, and damaged arrays (a changed
// fingerprint, a truncated array, a group count off by one, a bitmap bit outside the pattern, a
// bad window order) are rejected with a message naming the problem; the offline builder produces
// exactly the (kernel, operator) entries the engine's plans read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/core/shard.hpp"
#include "halo/engine/engine.hpp"
#include "halo/kernels_host/fused3s.hpp"
#include "halo/kernels_host/fused3s_metadata.hpp"
#include "halo/kernels_host/maxk.hpp"
#include "halo/kernels_host/maxk_metadata.hpp"
#include "halo/partition/kernel_metadata_build.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo/store/store.hpp"
#include "halo_test.hpp"

namespace halo::testing {
namespace {

// 300 nodes, directed: every fifth node has no out-edge (empty rows), node 1 is a hub of 150
// out-edges (several edge groups, update_mode 1; wide BSB windows), the others 0 .. 12 random ones.
Csr random_graph(std::uint64_t seed)
{
    constexpr std::int64_t n = 300;
    std::mt19937_64 rng(seed);
    EdgeList edges;
    edges.num_nodes = n;
    for (std::int64_t v = 0; v < n; ++v) {
        if (v % 5 == 0) {
            continue;
        }
        const auto degree = v == 1 ? 150 : static_cast<int>(rng() % 13);
        for (int k = 0; k < degree; ++k) {
            edges.src.push_back(v);
            edges.dst.push_back(v == 1 ? 2 * k : static_cast<global_id>(rng() % n));
        }
    }
    BuildOptions build;
    build.symmetrize = false;
    return build_csr(edges, build);
}

Csr with_self_loops(Csr a)
{
    apply_self_loops(a, SelfLoops::add);
    return a;
}

void expect_same_groups(const EdgeGroups& a, const EdgeGroups& b)
{
    EXPECT_EQ(a.group_size, b.group_size);
    EXPECT_EQ(a.num_rows, b.num_rows);
    EXPECT_EQ(a.nnz, b.nnz);
    EXPECT_EQ(a.row, b.row);
    EXPECT_EQ(a.count, b.count);
    EXPECT_EQ(a.first, b.first);
    EXPECT_EQ(a.update_mode, b.update_mode);
}

void expect_same_bsb(const Bsb& a, const Bsb& b)
{
    EXPECT_EQ(a.num_rows, b.num_rows);
    EXPECT_EQ(a.num_cols, b.num_cols);
    EXPECT_EQ(a.nnz, b.nnz);
    EXPECT_EQ(a.window_blocks, b.window_blocks);
    EXPECT_EQ(a.block_columns, b.block_columns);
    EXPECT_EQ(a.block_bitmaps, b.block_bitmaps);
    EXPECT_EQ(a.window_order, b.window_order);
}

template <typename Fn>
void expect_input_error(Fn&& fn, const std::vector<std::string>& parts)
{
    try {
        fn();
        ADD_FAILURE() << "did not throw";
    } catch (const InputError& e) {
        const std::string what = e.what();
        for (const auto& p : parts) {
            EXPECT_NE(what.find(p), std::string::npos) << "message lacks \"" << p << "\": " << what;
        }
    }
}

// A one-part dataset of `a` (the metadata stored beside it need not belong to its csr).
std::filesystem::path one_part_dataset(const std::filesystem::path& dir, const Csr& a)
{
    const std::vector<std::int32_t> owner(static_cast<std::size_t>(a.num_rows), 0);
    DatasetInfo info;
    info.num_nodes = a.num_rows;
    info.num_nonzeros = a.nnz();
    info.num_parts = 1;
    info.partitioner = "block";
    info.normalization = "none";
    info.self_loops = "keep";
    const auto path = dir / "d.h5";
    write_dataset(path, info, owner, build_shards(a, owner, 1));
    return path;
}

KernelMetadata through_file(const std::filesystem::path& path, const KernelMetadata& md)
{
    store_kernel_metadata(path, 0, md);
    const auto back = read_kernel_metadata(path, 0, md.kernel, md.op);
    EXPECT_TRUE(back.has_value()) << md.kernel << "/" << md.op;
    return back.value_or(KernelMetadata{});
}

TEST(MaxkFused3sMetadata, RandomGraphRoundTripThroughTheDataset)
{
    const auto adjacency = random_graph(11);
    const auto gcn = with_self_loops(adjacency);
    const auto path = one_part_dataset(scratch_dir("maxk_fused3s_md"), adjacency);
    ASSERT_EQ(adjacency.row_nnz(0), 0) << "the fixture must have empty rows";
    for (const auto& [op, a] : {std::pair{std::string(kernel_operator_adjacency), &adjacency},
                                std::pair{std::string(kernel_operator_gcn), &gcn}}) {
        SCOPED_TRACE(op);
        const auto groups = build_edge_groups(a->view());
        ASSERT_FALSE(shared_rows(groups).empty()) << "the fixture must have rows of several groups";
        const auto md = through_file(path, edge_groups_to_metadata(groups, a->view(), op));
        EXPECT_EQ(md.kernel, "maxk");
        EXPECT_EQ(md.op, op);
        expect_same_groups(groups, edge_groups_from_metadata(md, a->view()));

        const auto bsb = build_bsb(*a);
        ASSERT_GT(bsb_stats(bsb).max_blocks_per_window, 1);
        const auto bmd = through_file(path, bsb_to_metadata(bsb, *a, op));
        EXPECT_EQ(bmd.kernel, "fused3s");
        expect_same_bsb(bsb, bsb_from_metadata(bmd, *a));
    }
    EXPECT_EQ(list_kernel_metadata(path, 0),
              (std::vector<std::string>{"fused3s/adjacency", "fused3s/gcn", "maxk/adjacency",
                                        "maxk/gcn"}));
}

TEST(MaxkFused3sMetadata, EmptyOperator)
{
    Csr a;
    a.num_cols = 4;
    const auto groups = build_edge_groups(a.view());
    expect_same_groups(groups, edge_groups_from_metadata(
                                   edge_groups_to_metadata(groups, a.view(), "gcn"), a.view()));
    const auto bsb = build_bsb(a);
    expect_same_bsb(bsb, bsb_from_metadata(bsb_to_metadata(bsb, a, "gcn"), a));
}

TEST(MaxkMetadata, RejectsAnotherOperatorAndDamage)
{
    const auto a = with_self_loops(random_graph(12));
    const auto groups = build_edge_groups(a.view());
    auto md = edge_groups_to_metadata(groups, a.view(), "gcn");
    md.origin = "d.h5: /parts/0/kernels/maxk/gcn";
    ASSERT_NO_THROW(edge_groups_from_metadata(md, a.view()));

    // Another operator, and the same one with a changed stored fingerprint.
    const auto other = with_self_loops(random_graph(13));
    expect_input_error([&] { edge_groups_from_metadata(md, other.view()); },
                       {md.origin, "built for an operator", "fingerprint"});
    auto bad = md;
    bad.fingerprint ^= 1;
    expect_input_error([&] { edge_groups_from_metadata(bad, a.view()); },
                       {md.origin, "built for an operator", std::to_string(bad.fingerprint),
                        std::to_string(md.fingerprint)});

    bad = md;
    bad.int32_arrays["count"].pop_back();
    expect_input_error([&] { edge_groups_from_metadata(bad, a.view()); },
                       {md.origin + "/count", std::to_string(groups.size() - 1) + " values",
                        "expected " + std::to_string(groups.size())});
    bad = md;
    bad.int64_arrays.erase("first");
    expect_input_error([&] { edge_groups_from_metadata(bad, a.view()); },
                       {md.origin, "missing", "'first'"});
    bad = md;
    bad.ints["num_groups"] = a.num_rows - 1;
    expect_input_error([&] { edge_groups_from_metadata(bad, a.view()); },
                       {md.origin, "num_groups = " + std::to_string(a.num_rows - 1)});

    // A group's count off by one, either way: the row is no longer tiled exactly.
    const std::int64_t q =
        std::find(groups.count.begin(), groups.count.end(), 3) - groups.count.begin();
    ASSERT_LT(q, groups.size()) << "the fixture must have a group of 3 nonzeros";
    for (const int delta : {+1, -1}) {
        bad = md;
        bad.int32_arrays["count"][static_cast<std::size_t>(q)] += delta;
        expect_input_error([&] { edge_groups_from_metadata(bad, a.view()); },
                           {md.origin, "group " + std::to_string(q + (delta < 0 ? 1 : 0))});
    }
    bad = md;
    bad.int32_arrays["update_mode"][static_cast<std::size_t>(q)] = 1;
    expect_input_error([&] { edge_groups_from_metadata(bad, a.view()); },
                       {md.origin, "group " + std::to_string(q), "update_mode 1, expected 0"});
    bad = md;
    bad.ints["group_size"] = 0;
    expect_input_error([&] { edge_groups_from_metadata(bad, a.view()); },
                       {md.origin, "group_size = 0"});
    bad = md;
    bad.kernel = "fused3s";
    expect_input_error([&] { edge_groups_from_metadata(bad, a.view()); },
                       {md.origin, "'fused3s' metadata, not maxk"});
}

TEST(Fused3sMetadata, RejectsAnotherOperatorAndDamage)
{
    const auto a = with_self_loops(random_graph(14));
    const auto bsb = build_bsb(a);
    auto md = bsb_to_metadata(bsb, a, "gcn");
    md.origin = "d.h5: /parts/0/kernels/fused3s/gcn";
    ASSERT_NO_THROW(bsb_from_metadata(md, a));

    const auto adjacency = random_graph(14);
    expect_input_error([&] { bsb_from_metadata(md, adjacency); },
                       {md.origin, "built for an operator"});
    auto bad = md;
    bad.fingerprint += 1;
    expect_input_error(
        [&] { bsb_from_metadata(bad, a); },
        {md.origin, std::to_string(bad.fingerprint), std::to_string(md.fingerprint)});

    const auto blocks = bsb.num_blocks();
    bad = md;
    bad.int64_arrays["block_bitmaps"].pop_back();
    expect_input_error([&] { bsb_from_metadata(bad, a); },
                       {md.origin + "/block_bitmaps", std::to_string(2 * blocks - 1) + " values",
                        "expected " + std::to_string(2 * blocks)});
    bad = md;
    bad.int32_arrays["block_columns"].resize(8 * static_cast<std::size_t>(blocks) + 8, -1);
    expect_input_error([&] { bsb_from_metadata(bad, a); },
                       {md.origin + "/block_columns", "expected " + std::to_string(8 * blocks)});
    bad = md;
    bad.int64_arrays["window_blocks"].pop_back();
    expect_input_error([&] { bsb_from_metadata(bad, a); }, {md.origin + "/window_blocks"});
    bad = md;
    bad.int32_arrays.erase("window_order");
    expect_input_error([&] { bsb_from_metadata(bad, a); }, {md.origin, "missing", "window_order"});
    bad = md;
    bad.ints["num_blocks"] = blocks + 1;
    expect_input_error([&] { bsb_from_metadata(bad, a); }, {md.origin, "num_blocks"});
    bad = md;
    bad.ints["window_rows"] = 32;
    expect_input_error([&] { bsb_from_metadata(bad, a); }, {md.origin, "window_rows = 32"});

    // A bitmap bit for an entry that the pattern lacks (a real column slot, a real row).
    std::int64_t word = -1;
    int bit = -1;
    std::int64_t row = -1;
    for (std::int64_t w = 0; w < bsb.num_windows() && word < 0; ++w) {
        for (auto b = bsb.window_blocks[w]; b < bsb.window_blocks[w + 1] && word < 0; ++b) {
            for (int r = 0; r < kBsbWindowRows && word < 0; ++r) {
                for (int s = 0; s < kBsbBlockCols; ++s) {
                    if (16 * w + r < a.num_rows && bsb.block_columns[8 * b + s] != kBsbNoColumn &&
                        !bsb.bit(b, r, s)) {
                        word = 2 * b + r / 8;
                        bit = 8 * (r % 8) + s;
                        row = 16 * w + r;
                        break;
                    }
                }
            }
        }
    }
    ASSERT_GE(word, 0);
    bad = md;
    auto& bitmaps = bad.int64_arrays["block_bitmaps"];
    bitmaps[static_cast<std::size_t>(word)] ^= std::int64_t{1} << bit;
    expect_input_error([&] { bsb_from_metadata(bad, a); },
                       {md.origin, "bitmaps hold " + std::to_string(a.nnz() + 1) + " nonzeros"});
    // The same bit with the row's diagonal bit cleared: the count is right, the entries are not
    // (the message names the first column that differs: the diagonal missing, or the new one).
    const auto own =
        std::find(a.indices.begin() + a.indptr[row], a.indices.begin() + a.indptr[row + 1], row);
    ASSERT_NE(own, a.indices.begin() + a.indptr[row + 1]) << "the gcn pattern has a diagonal";
    const auto w = row / kBsbWindowRows;
    const int r = static_cast<int>(row % kBsbWindowRows);
    for (auto b = bsb.window_blocks[w]; b < bsb.window_blocks[w + 1]; ++b) {
        for (int s = 0; s < kBsbBlockCols; ++s) {
            if (bsb.block_columns[8 * b + s] == *own) {
                bitmaps[static_cast<std::size_t>(2 * b + r / 8)] ^= std::int64_t{1}
                                                                    << (8 * (r % 8) + s);
            }
        }
    }
    expect_input_error(
        [&] { bsb_from_metadata(bad, a); },
        {md.origin, "window " + std::to_string(w) + " row " + std::to_string(row), "BSB"});

    // Window order: two windows of different block counts swapped, and a window listed twice.
    const auto& order = bsb.window_order;
    const auto heavier = std::adjacent_find(order.begin(), order.end(), [&](auto x, auto y) {
        return bsb.window_block_count(x) > bsb.window_block_count(y);
    });
    ASSERT_NE(heavier, order.end()) << "the fixture must have windows of different block counts";
    const auto i = static_cast<std::size_t>(heavier - order.begin());
    bad = md;
    std::swap(bad.int32_arrays["window_order"][i], bad.int32_arrays["window_order"][i + 1]);
    expect_input_error([&] { bsb_from_metadata(bad, a); },
                       {md.origin, "window_order[" + std::to_string(i + 1) + "]"});
    bad = md;
    bad.int32_arrays["window_order"][1] = bad.int32_arrays["window_order"][0];
    expect_input_error([&] { bsb_from_metadata(bad, a); }, {md.origin, "window_order"});
    bad = md;
    bad.kernel = "maxk";
    expect_input_error([&] { bsb_from_metadata(bad, a); }, {"'maxk' metadata, not fused3s"});
}

// Builds, through halo-partition's builder, the metadata of part 1 of a graph cut in two, writes
// it with the dataset and reads it back for the operators the engine's plans use.
void check_offline_metadata(const Csr& raw)
{
    const auto owner = partition_graph(raw.view(), {Partitioner::block, 2});
    const auto shards = build_shards(raw, owner, 2);
    const auto& shard = shards[1];
    const auto mds = build_kernel_metadata(shard, "none", {"maxk", "fused3s"});
    ASSERT_EQ(mds.size(), 3u);
    EXPECT_EQ(mds[0].kernel + "/" + mds[0].op, "maxk/gcn");
    EXPECT_EQ(mds[1].kernel + "/" + mds[1].op, "fused3s/adjacency");
    EXPECT_EQ(mds[2].kernel + "/" + mds[2].op, "fused3s/gcn");

    DatasetInfo info;
    info.num_nodes = raw.num_rows;
    info.num_nonzeros = raw.nnz();
    info.num_parts = 2;
    info.partitioner = "block";
    info.normalization = "none";
    info.self_loops = "keep";
    const auto path = scratch_dir("offline_md") / "d.h5";
    {
        DatasetWriter writer(path, info, owner);
        for (const auto& s : shards) {
            writer.write_part(s);
        }
        for (const auto& md : mds) {
            writer.write_kernel_metadata(1, md);
        }
        writer.commit();
    }
    EXPECT_EQ(list_kernel_metadata(path, 1),
              (std::vector<std::string>{"fused3s/adjacency", "fused3s/gcn", "maxk/gcn"}));
    const auto read = [&](const char* kernel, std::string_view op) {
        auto md = read_kernel_metadata(path, 1, kernel, std::string(op));
        EXPECT_TRUE(md.has_value()) << kernel << "/" << op;
        return md.value_or(KernelMetadata{});
    };

    // The engine's gcn operator (real degrees) has the pattern the metadata was built for.
    std::vector<float> degree = gcn_degrees(shard);
    degree.resize(static_cast<std::size_t>(shard.num_owned + shard.num_halo), 2.0f);
    const auto gcn = make_aggregation(shard, Aggregation::gcn, "none", degree);
    expect_same_groups(build_edge_groups(gcn.view()),
                       edge_groups_from_metadata(read("maxk", kernel_operator_gcn), gcn.view()));
    expect_same_bsb(build_bsb(gcn), bsb_from_metadata(read("fused3s", kernel_operator_gcn), gcn));
    expect_same_bsb(build_bsb(shard.csr),
                    bsb_from_metadata(read("fused3s", kernel_operator_adjacency), shard.csr));
    // Metadata of one pattern given the other is refused.
    expect_input_error([&] { bsb_from_metadata(read("fused3s", kernel_operator_adjacency), gcn); },
                       {"/parts/1/kernels/fused3s/adjacency", "built for an operator"});
}

TEST(OfflineKernelMetadata, MaxkAndFused3sOnARandomGraph)
{
    BuildOptions build;
    build.symmetrize = true;
    auto edges = EdgeList{};
    const auto a = random_graph(15);
    edges.num_nodes = a.num_rows;
    for (std::int64_t r = 0; r < a.num_rows; ++r) {
        for (auto k = a.indptr[r]; k < a.indptr[r + 1]; ++k) {
            edges.src.push_back(r);
            edges.dst.push_back(a.indices[k]);
        }
    }
    check_offline_metadata(build_csr(edges, build));

    const auto& known = offline_metadata_kernels();
    EXPECT_NE(std::find(known.begin(), known.end(), "maxk"), known.end());
    EXPECT_NE(std::find(known.begin(), known.end(), "fused3s"), known.end());
}

TEST(OfflineKernelMetadata, MaxkAndFused3sOnCora)
{
    HALO_REQUIRE_SHARED_FILE(path, "cora.el.gz");
    BuildOptions build;
    build.symmetrize = true;
    check_offline_metadata(build_csr(read_edge_list(path), build));
}

TEST(OfflineKernelMetadata, MeanDatasetsGetNoMaxkGroups)
{
    const auto raw = grid_graph(8);
    const auto owner = partition_graph(raw.view(), {Partitioner::block, 2});
    const auto shard = build_shard(raw, owner, 2, 0);
    const auto mds = build_kernel_metadata(shard, "mean", {"maxk", "fused3s"});
    ASSERT_EQ(mds.size(), 1u) << "no gcn operator on a mean-normalized dataset";
    EXPECT_EQ(mds[0].kernel + "/" + mds[0].op, "fused3s/adjacency");
}

}  // namespace
}  // namespace halo::testing
