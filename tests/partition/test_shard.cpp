// Shard builder and halo plans on hand-checked examples, and the checks that catch corrupted
// shards. The numbering in each expectation was worked out by hand from the rules in shard.hpp;
// in particular a row lists its columns by ascending *global* id, which is not ascending local id
// once halo columns (numbered after the owned rows) or reordered owned rows are involved.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/shard.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo_test.hpp"

namespace {

using ids = std::vector<halo::global_id>;
using i32 = std::vector<std::int32_t>;
using i64 = std::vector<std::int64_t>;

halo::Csr path_graph(int n)
{
    halo::EdgeList e;
    e.num_nodes = n;
    for (int v = 0; v + 1 < n; ++v) {
        e.src.push_back(v);
        e.dst.push_back(v + 1);
    }
    return halo::build_csr(e, {});
}

// The path 0-1-2-3-4-5-6-7 over 3 parts, chosen so that part 0 has an interior row with a larger
// id than a boundary row, part 1 has no interior row and part 2 stores 7 before 6.
const i32 path_owner = {1, 0, 0, 0, 1, 1, 2, 2};

std::vector<halo::Shard> path_shards()
{
    return halo::build_shards(path_graph(8), path_owner, 3);
}

void expect_same_shard(const halo::Shard& a, const halo::Shard& b)
{
    EXPECT_EQ(a.part, b.part);
    EXPECT_EQ(a.num_parts, b.num_parts);
    EXPECT_EQ(a.num_owned, b.num_owned);
    EXPECT_EQ(a.num_halo, b.num_halo);
    EXPECT_EQ(a.num_interior, b.num_interior);
    EXPECT_EQ(a.global_ids, b.global_ids);
    EXPECT_EQ(a.halo_global_ids, b.halo_global_ids);
    EXPECT_EQ(a.csr.num_rows, b.csr.num_rows);
    EXPECT_EQ(a.csr.num_cols, b.csr.num_cols);
    EXPECT_EQ(a.csr.indptr, b.csr.indptr);
    EXPECT_EQ(a.csr.indices, b.csr.indices);
    EXPECT_EQ(a.csr.values, b.csr.values);
    EXPECT_EQ(a.plan.recv_ranks, b.plan.recv_ranks);
    EXPECT_EQ(a.plan.recv_offsets, b.plan.recv_offsets);
    EXPECT_EQ(a.plan.send_ranks, b.plan.send_ranks);
    EXPECT_EQ(a.plan.send_offsets, b.plan.send_offsets);
    EXPECT_EQ(a.plan.send_rows, b.plan.send_rows);
}

void expect_same_csr(const halo::Csr& a, const halo::Csr& b)
{
    EXPECT_EQ(a.num_rows, b.num_rows);
    EXPECT_EQ(a.num_cols, b.num_cols);
    EXPECT_EQ(a.indptr, b.indptr);
    EXPECT_EQ(a.indices, b.indices);
    EXPECT_EQ(a.values, b.values);
}

// Runs `check` and expects an InputError whose message (without source location) holds every
// fragment.
template <typename Check>
void expect_input_error(Check check, const std::vector<std::string>& fragments)
{
    try {
        check();
        ADD_FAILURE() << "no halo::InputError; expected one containing '" << fragments.front()
                      << "'";
    } catch (const halo::InputError& e) {
        for (const auto& f : fragments) {
            EXPECT_NE(e.message().find(f), std::string::npos)
                << "message '" << e.message() << "' lacks '" << f << "'";
        }
    }
}

// Corrupts a copy of the valid path shards and expects validate_halo_plans to reject it.
void expect_corruption_caught(const std::function<void(std::vector<halo::Shard>&)>& corrupt,
                              const std::vector<std::string>& fragments)
{
    auto shards = path_shards();
    ASSERT_NO_THROW(halo::validate_halo_plans(shards, "test.h5"));
    corrupt(shards);
    expect_input_error([&] { halo::validate_halo_plans(shards, "test.h5"); }, fragments);
}

}  // namespace

TEST(Shard, PathOverThreePartsHasTheHandCheckedNumbering)
{
    const auto shards = path_shards();
    ASSERT_EQ(shards.size(), 3u);

    // Part 0 owns 1, 2, 3: 2 is interior; 1 and 3 touch nodes 0 and 4 of part 1. Local columns
    // 0..4 are nodes 2, 1, 3 | 0, 4. Rows in global column order: node 2 reads nodes {1, 3} =
    // local {1, 2}; node 1 reads {0, 2} = {3, 0}; node 3 reads {2, 4} = {0, 4}.
    const auto& s0 = shards[0];
    EXPECT_EQ(s0.num_owned, 3);
    EXPECT_EQ(s0.num_interior, 1);
    EXPECT_EQ(s0.num_halo, 2);
    EXPECT_EQ(s0.global_ids, (ids{2, 1, 3}));
    EXPECT_EQ(s0.halo_global_ids, (ids{0, 4}));
    EXPECT_EQ(s0.csr.num_rows, 3);
    EXPECT_EQ(s0.csr.num_cols, 5);
    EXPECT_EQ(s0.csr.indptr, (i64{0, 2, 4, 6}));
    EXPECT_EQ(s0.csr.indices, (i32{1, 2, 3, 0, 0, 4}));
    EXPECT_TRUE(s0.csr.values.empty());
    EXPECT_EQ(s0.plan.recv_ranks, (i32{1}));
    EXPECT_EQ(s0.plan.recv_offsets, (i64{0, 2}));
    EXPECT_EQ(s0.plan.send_ranks, (i32{1}));
    EXPECT_EQ(s0.plan.send_offsets, (i64{0, 2}));
    EXPECT_EQ(s0.plan.send_rows, (i32{1, 2}));  // nodes 1 and 3
    EXPECT_EQ(s0.interior_rows().size(), 1);
    EXPECT_EQ(s0.boundary_rows().begin, 1);

    // Part 1 owns 0, 4, 5, all boundary; it receives 1, 3 from part 0 and 6 from part 2. Local
    // columns 0..5 are nodes 0, 4, 5 | 1, 3, 6: node 0 reads {1} = {3}; node 4 reads {3, 5} =
    // {4, 2}; node 5 reads {4, 6} = {1, 5}.
    const auto& s1 = shards[1];
    EXPECT_EQ(s1.num_interior, 0);
    EXPECT_EQ(s1.global_ids, (ids{0, 4, 5}));
    EXPECT_EQ(s1.halo_global_ids, (ids{1, 3, 6}));
    EXPECT_EQ(s1.csr.indptr, (i64{0, 1, 3, 5}));
    EXPECT_EQ(s1.csr.indices, (i32{3, 4, 2, 1, 5}));
    EXPECT_EQ(s1.plan.recv_ranks, (i32{0, 2}));
    EXPECT_EQ(s1.plan.recv_offsets, (i64{0, 2, 3}));
    EXPECT_EQ(s1.plan.send_ranks, (i32{0, 2}));
    EXPECT_EQ(s1.plan.send_offsets, (i64{0, 2, 3}));
    EXPECT_EQ(s1.plan.send_rows, (i32{0, 1, 2}));  // 0, 4 to part 0; 5 to part 2

    // Part 2 owns 6, 7: 7 is interior and comes first. Local columns 0..2 are nodes 7, 6 | 5:
    // node 7 reads {6} = {1}; node 6 reads {5, 7} = {2, 0}.
    const auto& s2 = shards[2];
    EXPECT_EQ(s2.num_interior, 1);
    EXPECT_EQ(s2.global_ids, (ids{7, 6}));
    EXPECT_EQ(s2.halo_global_ids, (ids{5}));
    EXPECT_EQ(s2.csr.indptr, (i64{0, 1, 3}));
    EXPECT_EQ(s2.csr.indices, (i32{1, 2, 0}));
    EXPECT_EQ(s2.plan.recv_ranks, (i32{1}));
    EXPECT_EQ(s2.plan.send_ranks, (i32{1}));
    EXPECT_EQ(s2.plan.send_rows, (i32{1}));  // node 6

    EXPECT_NO_THROW(halo::validate_halo_plans(shards, "path"));
    for (const auto& s : shards) {
        EXPECT_NO_THROW(halo::validate_shard_owner(s, path_owner, "path"));
    }
    expect_same_csr(halo::reassemble(shards, 8), path_graph(8));
    for (int p = 0; p < 3; ++p) {
        SCOPED_TRACE(p);
        expect_same_shard(halo::build_shard(path_graph(8), path_owner, 3, p), shards[p]);
    }
}

// In a directed graph a part may reference another part's interior row, which that part stores
// before its boundary rows: the halo block then follows the owner's local order, not global ids,
// while the rows that read it keep global column order, each value beside its column.
TEST(Shard, DirectedGraphHaloFollowsTheOwnersLocalOrderAndValuesFollowTheirColumns)
{
    halo::Csr g;
    g.num_rows = 4;
    g.num_cols = 4;
    g.indptr = {0, 2, 3, 4, 5};
    g.indices = {2, 3, 0, 0, 2};  // 0 -> 2, 0 -> 3, 1 -> 0, 2 -> 0, 3 -> 2
    g.values = {2.5f, 3.5f, 1.0f, 4.0f, 5.0f};
    const i32 owner = {0, 0, 1, 1};
    const auto shards = halo::build_shards(g, owner, 2);

    // Local columns 0..3 are nodes 1, 0 | 3, 2. Node 0 reads nodes {2, 3} = local {3, 2}:
    // descending local ids, ascending global ids.
    const auto& s0 = shards[0];
    EXPECT_EQ(s0.global_ids, (ids{1, 0}));
    EXPECT_EQ(s0.num_interior, 1);
    EXPECT_EQ(s0.halo_global_ids, (ids{3, 2}));  // 3 is interior on part 1, so its row 0
    EXPECT_EQ(s0.csr.indptr, (i64{0, 1, 3}));
    EXPECT_EQ(s0.csr.indices, (i32{1, 3, 2}));
    EXPECT_EQ(s0.csr.values, (std::vector<float>{1.0f, 2.5f, 3.5f}));
    EXPECT_EQ(s0.plan.send_rows, (i32{1}));  // node 0, which row 2 of part 1 reads

    // Local columns 0..2 are nodes 3, 2 | 0: node 3 reads {2} = {1}; node 2 reads {0} = {2}.
    const auto& s1 = shards[1];
    EXPECT_EQ(s1.global_ids, (ids{3, 2}));
    EXPECT_EQ(s1.halo_global_ids, (ids{0}));
    EXPECT_EQ(s1.csr.indptr, (i64{0, 1, 2}));
    EXPECT_EQ(s1.csr.indices, (i32{1, 2}));
    EXPECT_EQ(s1.csr.values, (std::vector<float>{5.0f, 4.0f}));
    EXPECT_EQ(s1.plan.send_ranks, (i32{0}));
    EXPECT_EQ(s1.plan.send_rows, (i32{0, 1}));  // nodes 3, 2: part 0's halo order

    EXPECT_NO_THROW(halo::validate_halo_plans(shards, "directed"));
    expect_same_csr(halo::reassemble(shards, 4), g);
    for (int p = 0; p < 2; ++p) {
        SCOPED_TRACE(p);
        expect_same_shard(halo::build_shard(g, owner, 2, p), shards[p]);
    }

    // A CSR whose rows are not sorted (a binary CSR may come so) gives the same shards: the
    // builder sorts each row by global column and carries the values along.
    auto unsorted = g;
    unsorted.indices = {3, 2, 0, 0, 2};
    unsorted.values = {3.5f, 2.5f, 1.0f, 4.0f, 5.0f};
    const auto from_unsorted = halo::build_shards(unsorted, owner, 2);
    halo::ShardBuilder builder(unsorted, owner, 2);
    for (int p = 0; p < 2; ++p) {
        SCOPED_TRACE(p);
        expect_same_shard(from_unsorted[p], shards[p]);
        expect_same_shard(halo::build_shard(unsorted, owner, 2, p), shards[p]);
        expect_same_shard(builder.build(p), shards[p]);
    }
    EXPECT_THROW((void)builder.build(2), halo::LogicError);
}

TEST(Shard, OnePartHasNoHaloAndOnlyInteriorRows)
{
    const auto g = path_graph(6);
    const auto shards = halo::build_shards(g, i32(6, 0), 1);
    ASSERT_EQ(shards.size(), 1u);
    const auto& s = shards[0];
    EXPECT_EQ(s.num_owned, 6);
    EXPECT_EQ(s.num_interior, 6);
    EXPECT_EQ(s.num_halo, 0);
    EXPECT_EQ(s.global_ids, (ids{0, 1, 2, 3, 4, 5}));
    EXPECT_TRUE(s.plan.recv_ranks.empty());
    EXPECT_TRUE(s.plan.send_ranks.empty());
    EXPECT_EQ(s.plan.recv_offsets, (i64{0}));
    EXPECT_EQ(s.plan.send_offsets, (i64{0}));
    EXPECT_EQ(s.plan.num_recv(), 0);
    EXPECT_EQ(s.plan.num_send(), 0);
    expect_same_csr(s.csr, g);
    EXPECT_NO_THROW(halo::validate_halo_plans(shards, "one part"));
}

// A path whose ids are scrambled: 0 - 5 - 2 - 7 - 4 - 1 - 6 - 3 (the multiples of 5 mod 8).
halo::Csr scrambled_path()
{
    halo::EdgeList e;
    e.num_nodes = 8;
    for (int k = 0; k + 1 < 8; ++k) {
        e.src.push_back((5 * k) % 8);
        e.dst.push_back((5 * (k + 1)) % 8);
    }
    halo::BuildOptions b;
    b.symmetrize = true;
    return halo::build_csr(e, b);
}

// Largest |local row - local column| over the owned columns: what RCM keeps small.
std::int64_t owned_bandwidth(const halo::Shard& s)
{
    std::int64_t w = 0;
    for (std::int64_t i = 0; i < s.num_owned; ++i) {
        for (auto k = s.csr.indptr[i]; k < s.csr.indptr[i + 1]; ++k) {
            if (s.csr.indices[k] < s.num_owned) {
                w = std::max<std::int64_t>(w, std::abs(s.csr.indices[k] - i));
            }
        }
    }
    return w;
}

TEST(ShardRowOrder, RcmOrdersAScrambledPathAlongThePath)
{
    const auto g = scrambled_path();
    const auto keys = halo::row_order_keys(g, i32(8, 0), 1, halo::RowOrder::rcm);
    const auto global = halo::build_shards(g, i32(8, 0), 1);
    const auto rcm = halo::build_shards(g, i32(8, 0), 1, &keys);
    EXPECT_EQ(owned_bandwidth(global[0]), 5);  // 0 and 5, 2 and 7, 1 and 6 are neighbours
    EXPECT_EQ(owned_bandwidth(rcm[0]), 1);
    // Cuthill-McKee starts at an end of least degree (0 and 3 have degree 1: 0, the lower id),
    // walks the path, and the order is reversed.
    EXPECT_EQ(rcm[0].global_ids, (ids{3, 6, 1, 4, 7, 2, 5, 0}));
    EXPECT_FALSE(rcm[0].rows_in_global_order);
    EXPECT_NO_THROW(halo::validate_shard(rcm[0], "rcm"));
    expect_same_csr(halo::reassemble(rcm, 8), g);
    EXPECT_EQ(halo::row_order_keys(g, i32(8, 0), 1, halo::RowOrder::global),
              (i64{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(ShardRowOrder, RcmKeepsGroupsAndPlansAcrossParts)
{
    // Three parts of the scrambled path: interior rows still first, plans pairwise equal, the
    // shards reassemble the graph, and each group follows the keys.
    const auto g = scrambled_path();
    const i32 owner = {0, 1, 2, 1, 0, 0, 2, 2};
    const auto keys = halo::row_order_keys(g, owner, 3, halo::RowOrder::rcm);
    const auto shards = halo::build_shards(g, owner, 3, &keys);
    const auto plain = halo::build_shards(g, owner, 3);
    EXPECT_NO_THROW(halo::validate_halo_plans(shards, "rcm"));
    expect_same_csr(halo::reassemble(shards, 8), g);
    for (int p = 0; p < 3; ++p) {
        const auto& s = shards[p];
        EXPECT_EQ(s.num_interior, plain[p].num_interior) << "part " << p;
        EXPECT_EQ(s.num_halo, plain[p].num_halo) << "part " << p;
        for (std::int64_t l = 1; l < s.num_owned; ++l) {
            if (l != s.num_interior) {
                EXPECT_LT(keys[s.global_ids[l - 1]], keys[s.global_ids[l]]) << "part " << p;
            }
        }
        // One shard built alone equals the one of the whole set.
        const auto alone = halo::build_shard(g, owner, 3, p, &keys);
        EXPECT_EQ(alone.global_ids, s.global_ids);
        EXPECT_EQ(alone.halo_global_ids, s.halo_global_ids);
        EXPECT_EQ(alone.plan.send_rows, s.plan.send_rows);
    }
    // A ShardBuilder's parts, in any order and again, are the set's.
    halo::ShardBuilder builder(g, owner, 3, &keys);
    for (const int p : {2, 0, 1, 0}) {
        SCOPED_TRACE(p);
        expect_same_shard(builder.build(p), shards[p]);
    }
    // The validator's ascending-ids check applies to datasets in global order only.
    auto flagged = shards;
    flagged[0].rows_in_global_order = true;
    bool any_descent = false;
    for (const auto& s : shards) {
        any_descent = any_descent || !std::is_sorted(s.global_ids.begin(), s.global_ids.end());
    }
    if (any_descent) {
        EXPECT_THROW(
            {
                for (auto& s : flagged) {
                    s.rows_in_global_order = true;
                    halo::validate_shard(s, "flagged");
                }
            },
            halo::InputError);
    }
}

TEST(Shard, EmptyPartAndBadOwnersAreRejected)
{
    const auto g = path_graph(4);
    expect_input_error(
        [&] {
            halo::build_shards(g, {0, 0, 2, 2}, 3);
        },
        {"part 1 of 3 owns no node"});
    expect_input_error(
        [&] {
            halo::build_shard(g, {0, 0, 2, 2}, 3, 0);
        },
        {"part 1 of 3 owns no node"});
    expect_input_error(
        [&] {
            halo::build_shards(g, {0, 0, 5, 1}, 2);
        },
        {"owner[2] = 5 outside [0, 2)"});
    expect_input_error(
        [&] {
            halo::build_shards(g, {0, 1, 1}, 2);
        },
        {"owner has 3 entries for a graph of 4 nodes"});
    auto bad = g;
    bad.indices[3] = 9;
    expect_input_error(
        [&] {
            halo::build_shards(bad, {0, 0, 1, 1}, 2);
        },
        {"indices[3] = 9 outside [0, 4)"});
}

TEST(Shard, AttachNodeDataCopiesRowsInLocalOrder)
{
    auto shards = path_shards();
    const std::int64_t dim = 2;
    std::vector<float> features(8 * dim);
    std::vector<std::int32_t> labels(8);
    for (int v = 0; v < 8; ++v) {
        features[v * dim] = 10.0f * v;
        features[v * dim + 1] = 10.0f * v + 1.0f;
        labels[v] = v % 3 == 0 ? -1 : v % 3;
    }
    for (auto& s : shards) {
        halo::attach_node_data(s, features, dim, labels);
        ASSERT_EQ(s.feature_dim, dim);
        ASSERT_EQ(static_cast<std::int64_t>(s.features.size()), s.num_owned * dim);
        for (std::int64_t l = 0; l < s.num_owned; ++l) {
            const auto g = s.global_ids[l];
            EXPECT_EQ(s.features[l * dim], 10.0f * g);
            EXPECT_EQ(s.features[l * dim + 1], 10.0f * g + 1.0f);
            EXPECT_EQ(s.labels[l], labels[g]);
        }
    }
    EXPECT_EQ(shards[2].features, (std::vector<float>{70.0f, 71.0f, 60.0f, 61.0f}));
    EXPECT_NO_THROW(halo::validate_halo_plans(shards, "with data"));

    halo::attach_node_data(shards[0], {}, 0, {});
    EXPECT_EQ(shards[0].feature_dim, 0);
    EXPECT_TRUE(shards[0].features.empty());
    EXPECT_TRUE(shards[0].labels.empty());

    // Part 1 owns node 5, which a 5-row feature matrix or label list lacks.
    expect_input_error([&] { halo::attach_node_data(shards[1], std::vector<float>(10), 2, {}); },
                       {"owned node 5 has no feature row"});
    expect_input_error([&] { halo::attach_node_data(shards[1], {}, 0, i32(5, 0)); },
                       {"owned node 5 has no label"});
    expect_input_error([&] { halo::attach_node_data(shards[1], std::vector<float>(15), 2, {}); },
                       {"not a whole number of 2-wide rows"});
}

TEST(ShardValidation, ColumnIndexOutOfRange)
{
    expect_corruption_caught([](auto& s) { s[1].csr.indices[2] = 17; },
                             {"test.h5 part 1: csr/indices[2] = 17 outside [0, 6)"});
}

TEST(ShardValidation, InteriorRowTouchingAHaloColumn)
{
    // Part 0's row 0 (interior, node 2) reads local {1, 2} = nodes {1, 3}; make it read halo
    // column 4 (node 4) instead of node 3. The row still ascends by global id, {1, 4}, so the
    // interior check is the one that fires.
    expect_corruption_caught(
        [](auto& s) { s[0].csr.indices[1] = 4; },
        {"test.h5 part 0: csr/indices[1] = 4 is a halo column (>= num_owned = 3) in row 0",
         "an interior row (< num_interior = 1)"});
}

TEST(ShardValidation, BoundaryRowWithoutHaloColumn)
{
    // Part 2's row 1 (boundary, node 6) reads local {2, 0} = nodes {5, 7}; point its halo entry
    // at owned column 1 (node 6, a self loop). Nodes {6, 7} still ascend, so only the boundary
    // check can object.
    expect_corruption_caught([](auto& s) { s[2].csr.indices[1] = 1; },
                             {"test.h5 part 2: row 1 is a boundary row", "no halo column"});
}

TEST(ShardValidation, UnsortedColumnsAndBadIndptr)
{
    // Part 0's row 0 reads local {1, 2} = nodes {1, 3}; swapped, it descends in both numberings.
    expect_corruption_caught(
        [](auto& s) { std::swap(s[0].csr.indices[0], s[0].csr.indices[1]); },
        {"test.h5 part 0: csr/indices[1] = 1 (node 1) not above csr/indices[0] = 2 (node 3)",
         "row 0's columns must ascend by global id without duplicates"});
    // A repeated column: part 1's row 1 reads local {4, 2}; make it {4, 4}.
    expect_corruption_caught(
        [](auto& s) { s[1].csr.indices[2] = 4; },
        {"test.h5 part 1: csr/indices[2] = 4 (node 3) not above csr/indices[1] = 4 (node 3)",
         "without duplicates"});
    expect_corruption_caught([](auto& s) { s[0].csr.indptr[2] = 1; },
                             {"test.h5 part 0: csr/indptr[2] = 1 below csr/indptr[1] = 2"});
}

// The rule before global column order: rows sorted by local id. Such a row is in range, free of
// duplicates and ascending, yet its sum would run in another order than on one rank.
TEST(ShardValidation, RowSortedByLocalIdInsteadOfGlobalIdIsRejected)
{
    // Part 1's row 1 (node 4) reads local {4, 2} = nodes {3, 5}; by local id it would be {2, 4}.
    expect_corruption_caught(
        [](auto& s) { std::swap(s[1].csr.indices[1], s[1].csr.indices[2]); },
        {"test.h5 part 1: csr/indices[2] = 4 (node 3) not above csr/indices[1] = 2 (node 5)",
         "(row 1's columns must ascend by global id without duplicates)"});
    // Every row of every part sorted by local id (a pattern matrix: no values to carry): part 0's
    // row 1 (node 1, reading local {3, 0} = nodes {0, 2}) is the first that breaks the rule.
    expect_corruption_caught(
        [](auto& s) {
            for (auto& shard : s) {
                auto& a = shard.csr;
                for (std::int64_t i = 0; i < a.num_rows; ++i) {
                    std::sort(a.indices.begin() + a.indptr[i], a.indices.begin() + a.indptr[i + 1]);
                }
            }
        },
        {"test.h5 part 0: csr/indices[3] = 3 (node 0) not above csr/indices[2] = 0 (node 2)",
         "(row 1's columns must ascend by global id without duplicates)"});
}

TEST(ShardValidation, SendRowOutOfRange)
{
    expect_corruption_caught([](auto& s) { s[1].plan.send_rows[2] = 3; },
                             {"test.h5 part 1: halo/send_rows[2] = 3 outside [0, 3)"});
    expect_corruption_caught([](auto& s) { s[1].plan.send_rows[1] = -1; },
                             {"halo/send_rows[1] = -1 outside [0, 3)"});
}

TEST(ShardValidation, SendCountsThatDisagree)
{
    // Part 1 sends only node 0 to part 0, which expects nodes 0 and 4.
    expect_corruption_caught(
        [](auto& s) {
            auto& plan = s[1].plan;
            plan.send_rows = {0, 2};
            plan.send_offsets = {0, 1, 2};
        },
        {"test.h5: part 1 sends 1 rows to part 0, but part 0 expects 2 from part 1"});
    // Part 2 stops sending to part 1 altogether.
    expect_corruption_caught(
        [](auto& s) {
            auto& plan = s[2].plan;
            plan.send_ranks.clear();
            plan.send_offsets = {0};
            plan.send_rows.clear();
        },
        {"part 1 expects 1 rows from part 2, but part 2 sends none to part 1"});
}

TEST(ShardValidation, SendIdsThatDisagree)
{
    // Part 1 sends nodes 0, 5 (rows 0, 2) where part 0 expects 0, 4.
    expect_corruption_caught(
        [](auto& s) {
            s[1].plan.send_rows = {0, 2, 2};
        },
        {"part 1 sends node 5 (halo/send_rows[1] = 2) as row 1 of its block to part 0",
         "part 0 expects node 4 there (halo/global_ids[1])"});
}

TEST(ShardValidation, ReceiveOffsetsNotMonotone)
{
    expect_corruption_caught(
        [](auto& s) {
            s[1].plan.recv_offsets = {0, 4, 3};
        },
        {"test.h5 part 1: halo/recv_offsets[2] = 3 not above halo/recv_offsets[1] = 4"});
    expect_corruption_caught(
        [](auto& s) {
            s[1].plan.recv_offsets = {0, 2, 4};
        },
        {"halo/recv_offsets[2] = 4 but num_halo = 3"});
}

TEST(ShardValidation, PeersAndIds)
{
    expect_corruption_caught(
        [](auto& s) {
            s[1].plan.recv_ranks = {2, 0};
        },
        {"halo/recv_ranks[1] = 0 not above halo/recv_ranks[0] = 2"});
    expect_corruption_caught([](auto& s) { s[0].plan.send_ranks = {0}; },
                             {"test.h5 part 0: halo/send_ranks[0] = 0 is the part itself"});
    expect_corruption_caught([](auto& s) { s[1].halo_global_ids[2] = 4; },
                             {"halo/global_ids[2] = 4 repeats global_ids[1]"});
    expect_corruption_caught(
        [](auto& s) { std::swap(s[0].global_ids[1], s[0].global_ids[2]); },
        {"global_ids[2] = 1 not above global_ids[1] = 3", "boundary rows must ascend"});
    expect_corruption_caught([](auto& s) { std::swap(s[0], s[1]); },
                             {"test.h5: shard 0 holds part 1"});
    expect_corruption_caught([](auto& s) { s.pop_back(); },
                             {"part 0 has num_parts = 3 but there are 2 shards"});
}

TEST(ShardValidation, NodeDataSizes)
{
    expect_corruption_caught(
        [](auto& s) {
            s[2].feature_dim = 3;
            s[2].features.assign(5, 0.0f);
        },
        {"test.h5 part 2: features/values has 5 values, expected num_owned * feature_dim"});
    expect_corruption_caught(
        [](auto& s) {
            s[0].labels = {1, -2, 0};
        },
        {"labels[1] = -2 below -1"});
}

TEST(ShardValidation, OwnerDisagreement)
{
    auto shards = path_shards();
    auto owner = path_owner;
    owner[6] = 0;  // part 1 receives node 6 from part 2
    expect_input_error([&] { halo::validate_shard_owner(shards[1], owner, "test.h5 part 1"); },
                       {"test.h5 part 1: halo/global_ids[2] = 6 is owned by part 0",
                        "receive block comes from part 2"});
    expect_input_error([&] { halo::validate_shard_owner(shards[2], owner, "test.h5 part 2"); },
                       {"global_ids[1] = 6 is owned by part 0"});
}

TEST(ShardValidation, ReassembleRejectsOverlappingOrMissingNodes)
{
    auto shards = path_shards();
    expect_input_error([&] { halo::reassemble(shards, 7); },
                       {"reassemble: part 2: global_ids[0] = 7 outside [0, 7)"});
    expect_input_error([&] { halo::reassemble(shards, 9); },
                       {"reassemble: node 8 of 9 is owned by no part"});
    shards.pop_back();
    expect_input_error([&] { halo::reassemble(shards, 8); }, {"node 6 of 8 is owned by no part"});
}

namespace {

// A one-part shard of the path over n nodes: local order is global order, so validate_shard
// screens its columns in two streaming passes before any row-by-row check (shard_validate.cpp).
// With n above the parallel threshold (2^16 rows) the screen runs on every core.
halo::Shard one_part_path(int n)
{
    auto shards = halo::build_shards(path_graph(n), i32(n, 0), 1);
    return std::move(shards[0]);
}

}  // namespace

TEST(ShardValidation, OnePartScreenFindsEveryColumnFault)
{
    for (const int n : {8, 100000}) {
        SCOPED_TRACE("nodes " + std::to_string(n));
        const auto valid = one_part_path(n);
        ASSERT_NO_THROW(halo::validate_shard(valid, "one.h5"));
        // Row r (0 < r < n - 1) reads {r - 1, r + 1} at indptr[r] = 2r - 1.
        const std::int64_t r = n / 2;
        const auto k = valid.csr.indptr[r];
        auto check = [&](const std::function<void(halo::Shard&)>& corrupt,
                         const std::vector<std::string>& fragments) {
            auto s = valid;
            corrupt(s);
            expect_input_error([&] { halo::validate_shard(s, "one.h5"); }, fragments);
        };
        const auto at = [&](std::int64_t position) {
            return "csr/indices[" + std::to_string(position) + "]";
        };
        check([&](auto& s) { std::swap(s.csr.indices[k], s.csr.indices[k + 1]); },
              {"one.h5: " + at(k + 1), "row " + std::to_string(r) + "'s columns must ascend"});
        check([&](auto& s) { s.csr.indices[k + 1] = s.csr.indices[k]; },
              {at(k + 1), "without duplicates"});
        check([&](auto& s) { s.csr.indices[k + 1] = n; },
              {at(k + 1) + " = " + std::to_string(n) + " outside [0, " + std::to_string(n) + ")"});
        check([&](auto& s) { s.csr.indices[0] = -1; }, {at(0) + " = -1 outside"});
        // A descent at a row start is allowed (row r + 1 starts below row r's last column); one
        // inside the row before the last ({n - 3, n - 1}, the last row being {n - 2}) is not.
        const auto end = valid.csr.nnz() - 2;
        check([&](auto& s) { s.csr.indices[end] = s.csr.indices[end - 1] - 1; },
              {at(end), "not above", "row " + std::to_string(n - 2) + "'s columns"});
    }
}

TEST(ShardValidation, RepeatedIdsFoundWithOrWithoutAscendingHaloIds)
{
    // Part 1 of the path shards owns nodes {0, 4, 5} (all boundary rows) and receives {1, 3}
    // from part 0 and {6} from part 2: halo ids [1, 3, 6], ascending. A halo id equal to an owned
    // one is found by the merge walks while the halo ids ascend, by the sort otherwise.
    const auto shards = path_shards();
    ASSERT_EQ(shards[1].global_ids, (ids{0, 4, 5}));
    ASSERT_EQ(shards[1].halo_global_ids, (ids{1, 3, 6}));
    auto ascending = shards[1];
    ascending.halo_global_ids[2] = 5;
    expect_input_error([&] { halo::validate_shard(ascending, "t.h5"); },
                       {"t.h5: halo/global_ids[2] = 5 repeats global_ids[2]"});
    auto unordered = shards[1];
    unordered.halo_global_ids[0] = 5;
    expect_input_error([&] { halo::validate_shard(unordered, "t.h5"); },
                       {"t.h5: halo/global_ids[0] = 5 repeats global_ids[2]"});
}
