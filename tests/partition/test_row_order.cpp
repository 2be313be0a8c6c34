// Row orders (halo/partition/row_order.hpp): Rabbit order keeps communities in one range of rows,
// every order is a permutation of each part's rows, the shards built with it are valid, and
// permute_by_keys renumbers a matrix exactly.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <list>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/shard.hpp"
#include "halo/partition/row_order.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo_test.hpp"
#include "thread_count.hpp"

namespace {

using i32 = std::vector<std::int32_t>;
using i64 = std::vector<std::int64_t>;

// Three cliques of 6, 5 and 4 nodes whose ids are dealt out round-robin-like by a seeded shuffle
// (so no clique is a range of ids), joined in a ring by one edge each.
struct Cliques {
    halo::Csr csr;
    std::vector<i64> members;
};

Cliques shuffled_cliques()
{
    const std::vector<int> sizes = {6, 5, 4};
    const int n = 15;
    std::vector<std::int64_t> id(n);
    for (int v = 0; v < n; ++v) {
        id[v] = v;
    }
    std::shuffle(id.begin(), id.end(), std::mt19937(7));
    Cliques c;
    halo::EdgeList e;
    e.num_nodes = n;
    int first = 0;
    for (const int s : sizes) {
        i64 m(id.begin() + first, id.begin() + first + s);
        for (int a = 0; a < s; ++a) {
            for (int b = a + 1; b < s; ++b) {
                e.src.push_back(m[a]);
                e.dst.push_back(m[b]);
            }
        }
        c.members.push_back(m);
        first += s;
    }
    for (std::size_t k = 0; k < c.members.size(); ++k) {  // the ring of bridges
        e.src.push_back(c.members[k][0]);
        e.dst.push_back(c.members[(k + 1) % c.members.size()][1]);
    }
    c.csr = halo::build_csr(e, {});
    return c;
}

halo::Csr rmat(int scale, int edge_factor)
{
    halo::BuildOptions build;
    build.symmetrize = true;
    build.normalization = halo::Normalization::gcn;
    build.self_loops = halo::SelfLoops::add;
    return halo::build_csr(
        halo::generate(halo::parse_graph_spec("rmat:" + std::to_string(scale) + ":" +
                                              std::to_string(edge_factor) + ":3")),
        build);
}

template <typename Check>
void expect_input_error(Check check, const std::string& fragment)
{
    try {
        check();
        ADD_FAILURE() << "no halo::InputError; expected one containing '" << fragment << "'";
    } catch (const halo::InputError& e) {
        EXPECT_NE(e.message().find(fragment), std::string::npos)
            << "message '" << e.message() << "' lacks '" << fragment << "'";
    }
}

// Within every part the keys are 0, 1, ..., (rows of the part) - 1.
void expect_positions(const i64& keys, const i32& owner, int parts, const std::string& what)
{
    std::vector<i64> seen(parts);
    for (std::size_t v = 0; v < keys.size(); ++v) {
        seen[owner[v]].push_back(keys[v]);
    }
    for (int p = 0; p < parts; ++p) {
        std::sort(seen[p].begin(), seen[p].end());
        for (std::size_t k = 0; k < seen[p].size(); ++k) {
            ASSERT_EQ(seen[p][k], static_cast<std::int64_t>(k)) << what << ", part " << p;
        }
    }
}

TEST(RowOrder, ParsesItsThreeNamesAndRefusesOthers)
{
    EXPECT_EQ(halo::parse_row_order("global"), halo::RowOrder::global);
    EXPECT_EQ(halo::parse_row_order("rcm"), halo::RowOrder::rcm);
    EXPECT_EQ(halo::parse_row_order("rabbit"), halo::RowOrder::rabbit);
    expect_input_error([] { (void)halo::parse_row_order("gorder"); },
                       "'gorder' is not global, rcm or rabbit");
}

TEST(RowOrder, RabbitPutsEachCliqueInOneRangeOfRows)
{
    const auto c = shuffled_cliques();
    const auto keys = halo::row_order_keys(c.csr, i32(15, 0), 1, halo::RowOrder::rabbit);
    expect_positions(keys, i32(15, 0), 1, "rabbit");
    // The ids alone do not keep any clique together; Rabbit order must.
    for (const auto& m : c.members) {
        i64 ks;
        for (const auto v : m) {
            ks.push_back(keys[v]);
        }
        const auto [lo, hi] = std::minmax_element(ks.begin(), ks.end());
        EXPECT_EQ(*hi - *lo, static_cast<std::int64_t>(m.size()) - 1)
            << "a clique of " << m.size() << " spread over keys " << *lo << ".." << *hi;
        const auto [id_lo, id_hi] = std::minmax_element(m.begin(), m.end());
        EXPECT_GT(*id_hi - *id_lo, static_cast<std::int64_t>(m.size()) - 1)
            << "the shuffle left a clique in one id range; the test proves nothing";
    }
    // Deterministic.
    EXPECT_EQ(halo::row_order_keys(c.csr, i32(15, 0), 1, halo::RowOrder::rabbit), keys);
}

TEST(RowOrder, RabbitWorksInsideEachPartOnly)
{
    // Cliques split across two parts: each part's keys are its own positions, and edges between
    // parts do not pull a node's key into another part's communities.
    const auto c = shuffled_cliques();
    i32 owner(15, 0);
    for (const auto v : c.members[1]) {
        owner[v] = 1;
    }
    for (const auto v : c.members[2]) {
        owner[v] = 1;
    }
    const auto keys = halo::row_order_keys(c.csr, owner, 2, halo::RowOrder::rabbit);
    expect_positions(keys, owner, 2, "rabbit on 2 parts");
    for (const auto& m : {c.members[1], c.members[2]}) {
        i64 ks;
        for (const auto v : m) {
            ks.push_back(keys[v]);
        }
        const auto [lo, hi] = std::minmax_element(ks.begin(), ks.end());
        EXPECT_EQ(*hi - *lo, static_cast<std::int64_t>(m.size()) - 1);
    }
}

TEST(RowOrder, RabbitGivesTheSameKeysOnAnyNumberOfThreads)
{
    // The parts aggregate on separate threads; the keys must not depend on how many there are.
    const auto g = rmat(12, 8);
    i32 owner(g.num_rows);
    std::mt19937 rng(13);
    for (auto& o : owner) {
        o = static_cast<std::int32_t>(rng() % 5);
    }
    auto keys = [&](int threads) {
        const halo::testing::ThreadCount count(threads);
        return halo::row_order_keys(g, owner, 5, halo::RowOrder::rabbit);
    };
    const auto one = keys(1);
    EXPECT_EQ(keys(4), one);
    expect_positions(one, owner, 5, "rabbit on 5 parts");
}

TEST(RowOrder, EveryOrderGivesValidShardsThatReassembleTheGraph)
{
    const auto g = rmat(10, 8);
    const auto n = g.num_rows;
    i32 owner(n);
    std::mt19937 rng(11);
    for (auto& o : owner) {
        o = static_cast<std::int32_t>(rng() % 3);
    }
    const auto plain = halo::build_shards(g, owner, 3);
    for (const auto order : {halo::RowOrder::rcm, halo::RowOrder::rabbit}) {
        const auto keys = halo::row_order_keys(g, owner, 3, order);
        expect_positions(keys, owner, 3, "order " + std::to_string(static_cast<int>(order)));
        const auto shards = halo::build_shards(g, owner, 3, &keys);
        EXPECT_NO_THROW(halo::validate_halo_plans(shards, "ordered shards"));
        const auto back = halo::reassemble(shards, n);
        EXPECT_EQ(back.indptr, g.indptr);
        EXPECT_EQ(back.indices, g.indices);
        EXPECT_EQ(back.values, g.values);
        for (int p = 0; p < 3; ++p) {
            EXPECT_EQ(shards[p].num_interior, plain[p].num_interior);
            EXPECT_EQ(shards[p].num_halo, plain[p].num_halo);
            EXPECT_FALSE(shards[p].rows_in_global_order);
        }
    }
}

// Past 2^16 nodes the rows are ordered by a parallel sort: the same shards on 1 and 4 threads, and
// a ShardBuilder's parts (the layout made once) equal build_shards' in any order.
TEST(RowOrder, LargeGraphsGiveTheSameShardsOnAnyThreadCountAndFromAShardBuilder)
{
    const auto g = rmat(17, 4);
    ASSERT_GE(g.num_rows, 1 << 16);
    i32 owner(g.num_rows);
    std::mt19937 rng(17);
    for (auto& o : owner) {
        o = static_cast<std::int32_t>(rng() % 3);
    }
    const auto keys = halo::row_order_keys(g, owner, 3, halo::RowOrder::rcm);
    auto shards = [&](int threads) {
        const halo::testing::ThreadCount count(threads);
        return halo::build_shards(g, owner, 3, &keys);
    };
    const auto one = shards(1);
    const auto four = shards(4);
    halo::ShardBuilder builder(g, owner, 3, &keys);
    for (const int p : {1, 2, 0}) {
        SCOPED_TRACE(p);
        EXPECT_EQ(four[p].global_ids, one[p].global_ids);
        EXPECT_EQ(four[p].csr.indices, one[p].csr.indices);
        EXPECT_EQ(four[p].plan.send_rows, one[p].plan.send_rows);
        const auto built = builder.build(p);
        EXPECT_EQ(built.global_ids, one[p].global_ids);
        EXPECT_EQ(built.halo_global_ids, one[p].halo_global_ids);
        EXPECT_EQ(built.csr.indptr, one[p].csr.indptr);
        EXPECT_EQ(built.csr.indices, one[p].csr.indices);
        EXPECT_EQ(built.plan.send_ranks, one[p].plan.send_ranks);
        EXPECT_EQ(built.plan.send_rows, one[p].plan.send_rows);
        EXPECT_EQ(built.plan.recv_offsets, one[p].plan.recv_offsets);
        for (std::int64_t l = 1; l < built.num_owned; ++l) {
            if (l != built.num_interior) {
                ASSERT_LT(keys[built.global_ids[l - 1]], keys[built.global_ids[l]]) << l;
            }
        }
    }
}

// Misses of a fully associative LRU cache of `capacity` rows of X while an SpMM walks the rows of
// `a` in order and reads X's row of every column: the reuse that a locality order is for.
std::int64_t lru_misses(const halo::Csr& a, std::int64_t capacity)
{
    std::list<std::int64_t> recent;  // most recent first
    std::vector<std::list<std::int64_t>::iterator> where(a.num_cols, recent.end());
    std::int64_t misses = 0;
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            const auto c = a.indices[k];
            if (where[c] != recent.end()) {
                recent.erase(where[c]);
            } else {
                ++misses;
                if (static_cast<std::int64_t>(recent.size()) == capacity) {
                    where[recent.back()] = recent.end();
                    recent.pop_back();
                }
            }
            recent.push_front(c);
            where[c] = recent.begin();
        }
    }
    return misses;
}

// A planted-partition graph: 64 communities of 64 nodes, each node drawing 12 neighbours inside
// its community and 2 anywhere (seeded), ids shuffled so that no community is a range of ids.
halo::Csr shuffled_communities()
{
    const std::int64_t groups = 64;
    const std::int64_t size = 64;
    const auto n = groups * size;
    std::mt19937_64 rng(9);
    i64 id(n);
    for (std::int64_t v = 0; v < n; ++v) {
        id[v] = v;
    }
    std::shuffle(id.begin(), id.end(), rng);
    halo::EdgeList e;
    e.num_nodes = n;
    for (std::int64_t v = 0; v < n; ++v) {
        const auto base = v / size * size;
        for (int k = 0; k < 14; ++k) {
            const auto u = k < 12 ? base + static_cast<std::int64_t>(rng() % size)
                                  : static_cast<std::int64_t>(rng() % n);
            if (u != v) {
                e.src.push_back(id[v]);
                e.dst.push_back(id[u]);
            }
        }
    }
    return halo::build_csr(e, {});
}

TEST(RowOrder, RabbitRecoversTheLocalityAShuffleDestroys)
{
    // With a cache of 4 communities' rows, the shuffled ids miss on most reads; Rabbit order must
    // bring the misses below half of that (a community read from a warm cache misses about once
    // per node), and no order may lose a read.
    const auto shuffled = shuffled_communities();
    const auto n = shuffled.num_rows;
    const auto capacity = n / 16;
    const auto before = lru_misses(shuffled, capacity);
    std::int64_t after[3] = {};
    for (const auto order : {halo::RowOrder::global, halo::RowOrder::rcm, halo::RowOrder::rabbit}) {
        const auto keys = halo::row_order_keys(shuffled, i32(n, 0), 1, order);
        const auto ordered = halo::permute_by_keys(shuffled, keys);
        ASSERT_EQ(ordered.nnz(), shuffled.nnz());
        after[static_cast<int>(order)] = lru_misses(ordered, capacity);
    }
    std::printf(
        "LRU misses (cache of %lld rows): shuffled %lld, rcm %lld, rabbit %lld of %lld "
        "reads\n",
        static_cast<long long>(capacity), static_cast<long long>(before),
        static_cast<long long>(after[1]), static_cast<long long>(after[2]),
        static_cast<long long>(shuffled.nnz()));
    EXPECT_EQ(after[0], before);  // global keys change nothing
    EXPECT_LT(after[2], before / 2);
}

TEST(RowOrder, PermuteByKeysRenumbersRowsAndColumnsAlike)
{
    const auto g = rmat(9, 4);  // gcn values: every entry distinct enough to track
    const auto n = g.num_rows;
    i64 keys(n);
    std::mt19937_64 rng(3);
    for (auto& k : keys) {
        k = static_cast<std::int64_t>(rng() % 64);  // many ties: broken by id
    }
    const auto b = halo::permute_by_keys(g, keys);
    ASSERT_NO_THROW(halo::validate(b, "permuted"));
    // The new number of each node: its rank by (key, id).
    i64 order(n);
    for (std::int64_t v = 0; v < n; ++v) {
        order[v] = v;
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int64_t x, std::int64_t y) { return keys[x] < keys[y]; });
    i64 new_of(n);
    for (std::int64_t i = 0; i < n; ++i) {
        new_of[order[i]] = i;
    }
    std::map<std::tuple<std::int64_t, std::int64_t>, float> want;
    std::map<std::tuple<std::int64_t, std::int64_t>, float> got;
    for (std::int64_t i = 0; i < n; ++i) {
        for (auto k = g.indptr[i]; k < g.indptr[i + 1]; ++k) {
            want[{new_of[i], new_of[g.indices[k]]}] = g.values[k];
        }
        for (auto k = b.indptr[i]; k < b.indptr[i + 1]; ++k) {
            got[{i, b.indices[k]}] = b.values[k];
            if (k > b.indptr[i]) {
                EXPECT_LT(b.indices[k - 1], b.indices[k]) << "row " << i << " not ascending";
            }
        }
    }
    EXPECT_EQ(got, want);
    // The inverse renumbering gives the matrix back exactly.
    i64 old_key(n);  // new row i goes back to old id order[i]
    for (std::int64_t i = 0; i < n; ++i) {
        old_key[i] = order[i];
    }
    const auto again = halo::permute_by_keys(b, old_key);
    EXPECT_EQ(again.indptr, g.indptr);
    EXPECT_EQ(again.indices, g.indices);
    EXPECT_EQ(again.values, g.values);
}

TEST(RowOrder, BadInputsAreRefusedByName)
{
    const auto g = rmat(6, 4);
    const auto n = g.num_rows;
    i32 owner(n, 0);
    owner[5] = 2;
    expect_input_error([&] { (void)halo::row_order_keys(g, owner, 2, halo::RowOrder::rabbit); },
                       "node 5 has owner 2, outside [0, 2)");
    expect_input_error([&] { (void)halo::row_order_keys(g, i32(3, 0), 1, halo::RowOrder::rcm); },
                       "owner has 3 entries for a graph of");
    expect_input_error([&] { (void)halo::permute_by_keys(g, i64(4, 0)); },
                       "4 order keys for a matrix of");
    halo::Csr wide = g;
    wide.num_cols += 1;
    expect_input_error([&] { (void)halo::permute_by_keys(wide, i64(n, 0)); },
                       "needs a square matrix");
}

}  // namespace
