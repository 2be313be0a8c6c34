#include <algorithm>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/partition/partition.hpp"
#include "halo_test.hpp"

TEST(Partition, EveryMethodAssignsEveryNodeToAValidPart)
{
    const auto g = halo::testing::grid_graph(20);
    for (auto method :
         {halo::Partitioner::metis, halo::Partitioner::block, halo::Partitioner::random}) {
        for (int p : {1, 2, 3, 7}) {
            halo::PartitionOptions opt;
            opt.method = method;
            opt.num_parts = p;
            const auto owner = halo::partition_graph(g.view(), opt);
            ASSERT_EQ(static_cast<std::int64_t>(owner.size()), g.num_rows);
            std::vector<int> count(p, 0);
            for (auto o : owner) {
                ASSERT_GE(o, 0);
                ASSERT_LT(o, p);
                ++count[o];
            }
            for (int q = 0; q < p; ++q) {
                EXPECT_GT(count[q], 0) << halo::to_string(method) << " P=" << p << " part " << q;
            }
        }
    }
}

TEST(Partition, MetisCutsFewerEdgesThanRandomOnAGrid)
{
    const auto g = halo::testing::grid_graph(40);
    halo::PartitionOptions opt;
    opt.num_parts = 4;
    opt.method = halo::Partitioner::metis;
    const auto metis = halo::partition_quality(g.view(), halo::partition_graph(g.view(), opt), 4);
    opt.method = halo::Partitioner::random;
    const auto random = halo::partition_quality(g.view(), halo::partition_graph(g.view(), opt), 4);
    EXPECT_LT(metis.edge_cut * 5, random.edge_cut);
    EXPECT_LT(metis.row_imbalance, 1.1);
}

TEST(Partition, BalanceRowsKeepsRowsAndNonzerosWithinTheTolerance)
{
    // R-MAT's degrees are skewed: balancing 1 + degree alone leaves the low-degree rows piled on
    // some parts (row imbalance ~1.5 here, 1.95 on R-MAT 24); two constraints balance both.
    halo::BuildOptions build;
    build.symmetrize = true;
    const auto g = halo::build_csr(halo::generate(halo::parse_graph_spec("rmat:14:16:3")), build);
    halo::PartitionOptions opt;
    opt.num_parts = 4;
    const auto one = halo::partition_quality(g.view(), halo::partition_graph(g.view(), opt), 4);
    opt.balance_rows = true;
    const auto owner = halo::partition_graph(g.view(), opt);
    const auto two = halo::partition_quality(g.view(), owner, 4);
    EXPECT_LE(two.row_imbalance, 1.06);
    EXPECT_LE(two.nnz_imbalance, 1.06);
    EXPECT_LT(two.row_imbalance, one.row_imbalance);
    // The cut pays little for it (within 10% of the one-constraint cut).
    EXPECT_LT(static_cast<double>(two.edge_cut), 1.10 * static_cast<double>(one.edge_cut));
    EXPECT_EQ(halo::partition_graph(g.view(), opt), owner);  // deterministic for a seed
}

TEST(Partition, SeedMakesMetisAndRandomDeterministic)
{
    const auto g = halo::testing::grid_graph(30);
    for (auto method : {halo::Partitioner::metis, halo::Partitioner::random}) {
        halo::PartitionOptions opt;
        opt.method = method;
        opt.num_parts = 3;
        opt.seed = 17;
        EXPECT_EQ(halo::partition_graph(g.view(), opt), halo::partition_graph(g.view(), opt));
    }
}

TEST(Partition, QualityOfABlockSplitOfAPath)
{
    halo::EdgeList e;
    e.num_nodes = 6;
    for (int v = 0; v + 1 < 6; ++v) {
        e.src.push_back(v);
        e.dst.push_back(v + 1);
    }
    const auto g = halo::build_csr(e, {});
    halo::PartitionOptions opt;
    opt.method = halo::Partitioner::block;
    opt.num_parts = 2;
    const auto owner = halo::partition_graph(g.view(), opt);
    EXPECT_EQ(owner, (std::vector<std::int32_t>{0, 0, 0, 1, 1, 1}));
    const auto q = halo::partition_quality(g.view(), owner, 2);
    EXPECT_EQ(q.edge_cut, 1);
    EXPECT_EQ(q.halo_volume, 2);
    EXPECT_EQ(q.parts[0].halo_rows, 1);
    EXPECT_EQ(q.parts[0].neighbours, 1);
    EXPECT_EQ(q.parts[0].nnz, 5);
    EXPECT_DOUBLE_EQ(q.row_imbalance, 1.0);
}

TEST(Partition, RejectsImpossibleRequests)
{
    const auto g = halo::testing::grid_graph(3);
    halo::PartitionOptions opt;
    opt.num_parts = 0;
    EXPECT_THROW(halo::partition_graph(g.view(), opt), halo::InputError);
    opt.num_parts = 10;  // 9 nodes
    EXPECT_THROW(halo::partition_graph(g.view(), opt), halo::InputError);
    EXPECT_THROW(halo::parse_partitioner("kahip"), halo::InputError);
}

TEST(Partition, MetisLimitNamesTheLimitAndSuggestsKaminparAndPtscotch)
{
    // Fake counts: no graph of that size is built.
    EXPECT_NO_THROW(halo::check_metis_limit(1000, 2147483647LL));
    try {
        halo::check_metis_limit(1LL << 26, 4294967296LL);
        FAIL() << "no error above 2^31 - 1 entries";
    } catch (const halo::InputError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("2^31 - 1"), std::string::npos) << what;
        EXPECT_NE(what.find("--partitioner kaminpar"), std::string::npos) << what;
        EXPECT_NE(what.find("ptscotch"), std::string::npos) << what;
        EXPECT_NE(what.find("4294967296"), std::string::npos) << what;
    }
    EXPECT_THROW(halo::check_metis_limit(1LL << 31, 10), halo::InputError);
}

TEST(Partition, DistributedPartitionersAreParsedButNotRunSerially)
{
    EXPECT_EQ(halo::parse_partitioner("ptscotch"), halo::Partitioner::ptscotch);
    EXPECT_EQ(halo::to_string(halo::Partitioner::ptscotch), "ptscotch");
    EXPECT_EQ(halo::parse_partitioner("kaminpar"), halo::Partitioner::kaminpar);
    EXPECT_EQ(halo::parse_partitioner("dkaminpar"), halo::Partitioner::dkaminpar);
    const auto g = halo::testing::grid_graph(3);
    halo::PartitionOptions opt;
    opt.num_parts = 2;
    for (const auto method : {halo::Partitioner::ptscotch, halo::Partitioner::dkaminpar}) {
        opt.method = method;
        EXPECT_THROW(halo::partition_graph(g.view(), opt), halo::InputError);
    }
}
