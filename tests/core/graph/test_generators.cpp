#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo_test.hpp"
#include "thread_count.hpp"

namespace {

halo::RmatOptions rmat(int scale, std::uint64_t seed, double edge_factor = 16)
{
    halo::RmatOptions o;
    o.scale = scale;
    o.edge_factor = edge_factor;
    o.seed = seed;
    return o;
}

using halo::testing::ThreadCount;

template <typename Generate>
void expect_thread_count_independent(Generate generate)
{
    halo::EdgeList serial;
    {
        ThreadCount one(1);
        serial = generate();
    }
    for (const int threads : {2, 4}) {
        ThreadCount guard(threads);
        if (ThreadCount::team_size() != threads) {
            GTEST_SKIP() << "OpenMP gives " << ThreadCount::team_size() << " threads, asked "
                         << threads;
        }
        const auto parallel = generate();
        EXPECT_EQ(parallel.num_nodes, serial.num_nodes) << threads << " threads";
        EXPECT_TRUE(parallel.src == serial.src) << threads << " threads";
        EXPECT_TRUE(parallel.dst == serial.dst) << threads << " threads";
    }
}

void expect_ids_in_range(const halo::EdgeList& edges)
{
    ASSERT_EQ(edges.src.size(), edges.dst.size());
    const auto n = edges.num_nodes;
    const auto outside = [n](halo::global_id v) { return v < 0 || v >= n; };
    EXPECT_EQ(std::count_if(edges.src.begin(), edges.src.end(), outside), 0);
    EXPECT_EQ(std::count_if(edges.dst.begin(), edges.dst.end(), outside), 0);
}

// Number of edges at the same position with the same endpoints in both lists.
std::int64_t same_edges(const halo::EdgeList& x, const halo::EdgeList& y)
{
    std::int64_t same = 0;
    for (std::size_t e = 0; e < std::min(x.src.size(), y.src.size()); ++e) {
        same += x.src[e] == y.src[e] && x.dst[e] == y.dst[e] ? 1 : 0;
    }
    return same;
}

// Degrees of the simple undirected graph: symmetrized, deduplicated, without self-loops.
std::vector<std::int64_t> undirected_degrees(const halo::EdgeList& edges)
{
    halo::BuildOptions opt;
    opt.symmetrize = true;
    opt.self_loops = halo::SelfLoops::drop;
    const auto csr = halo::build_csr(edges, opt);
    std::vector<std::int64_t> degree(csr.num_rows);
    for (std::int64_t i = 0; i < csr.num_rows; ++i) {
        degree[i] = csr.row_nnz(i);
    }
    return degree;
}

double mean(const std::vector<std::int64_t>& v)
{
    return static_cast<double>(std::accumulate(v.begin(), v.end(), std::int64_t{0})) /
           static_cast<double>(v.size());
}

std::string top_degrees(std::vector<std::int64_t> degree, std::size_t count)
{
    std::sort(degree.rbegin(), degree.rend());
    std::string out;
    for (std::size_t i = 0; i < std::min(count, degree.size()); ++i) {
        if (i > 0) {
            out += ' ';
        }
        out += std::to_string(degree[i]);
    }
    return out;
}

// The message of the halo::InputError that `f` throws ("" and a failure if it throws none).
template <typename F>
std::string input_error(F f)
{
    try {
        f();
    } catch (const halo::InputError& e) {
        return e.message();
    }
    ADD_FAILURE() << "expected halo::InputError";
    return "";
}

#define EXPECT_CONTAINS(text, part) \
    EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

}  // namespace

TEST(Rmat, SizesAreExactAndIdsInRange)
{
    for (const double ef : {16.0, 1.0, 2.5}) {
        const auto edges = halo::generate_rmat(rmat(12, 3, ef));
        EXPECT_EQ(edges.num_nodes, 4096);
        EXPECT_EQ(edges.num_edges(), static_cast<std::int64_t>(ef * 4096)) << ef;
        EXPECT_FALSE(edges.has_weights());
        expect_ids_in_range(edges);
    }
    auto odd = rmat(7, 3);  // an odd scale uses half of the last draw
    odd.scramble = false;
    const auto edges = halo::generate_rmat(odd);
    EXPECT_EQ(edges.num_nodes, 128);
    EXPECT_EQ(edges.num_edges(), 2048);
    expect_ids_in_range(edges);
}

TEST(Rmat, SameSeedSameEdgesWhateverTheThreadCount)
{
    expect_thread_count_independent([] { return halo::generate_rmat(rmat(15, 42)); });
    auto plain = rmat(13, 7);
    plain.scramble = false;
    expect_thread_count_independent([&] { return halo::generate_rmat(plain); });
}

TEST(Rmat, DifferentSeedsDiffer)
{
    const auto x = halo::generate_rmat(rmat(14, 1));
    const auto y = halo::generate_rmat(rmat(14, 2));
    // The chance that one position repeats is sum_edges p^2 = (a^2+b^2+c^2+d^2)^14 ~ 3e-6.
    EXPECT_LT(same_edges(x, y), x.num_edges() / 1000);
    EXPECT_EQ(same_edges(x, halo::generate_rmat(rmat(14, 1))), x.num_edges());
}

TEST(Rmat, QuadrantFrequenciesMatchTheProbabilities)
{
    // Unscrambled, bit l of (src, dst) is level l's quadrant; check the first level (low half of
    // the first draw) and the last (high half of the last draw).
    auto o = rmat(14, 11);
    o.scramble = false;
    o.a = 0.45;  // b != c, so that a swap of the (0, 1) and (1, 0) quadrants shows
    o.b = 0.25;
    o.c = 0.15;
    const auto edges = halo::generate_rmat(o);
    const double expected[4] = {o.a, o.b, o.c, 1.0 - o.a - o.b - o.c};
    for (const int bit : {o.scale - 1, 0}) {
        std::int64_t count[4] = {0, 0, 0, 0};
        for (std::int64_t e = 0; e < edges.num_edges(); ++e) {
            ++count[((edges.src[e] >> bit) & 1) * 2 + ((edges.dst[e] >> bit) & 1)];
        }
        for (int q = 0; q < 4; ++q) {
            // 2^18 edges: the standard deviation of a frequency is below 0.001.
            EXPECT_NEAR(static_cast<double>(count[q]) / edges.num_edges(), expected[q], 0.005)
                << "bit " << bit << " quadrant " << q;
        }
    }
}

TEST(Rmat, DegreesAreHeavyTailedUnlikeErdosRenyi)
{
    // Scale 15, edge factor 16, seed 5, as a simple undirected graph; observed when written:
    //   R-MAT: mean degree 26.9 (8562 isolated nodes), median 3, 99th percentile 455,
    //          top 5952 2942 2895 2877 2876 2865 2843 2836 (the unscrambled node 0, then the 15
    //          nodes with one bit set), max / mean 221
    //   ER:    mean degree 32.0, median 32, 99th percentile 46, top 57 56 55 54 54 54 54 53,
    //          max / mean 1.8
    const auto rmat_degree = undirected_degrees(halo::generate_rmat(rmat(15, 5)));
    const auto er_degree = undirected_degrees(halo::generate_erdos_renyi({1 << 15, 16 << 15, 5}));
    const double rmat_mean = mean(rmat_degree);
    const double er_mean = mean(er_degree);
    const auto rmat_max = *std::max_element(rmat_degree.begin(), rmat_degree.end());
    const auto er_max = *std::max_element(er_degree.begin(), er_degree.end());
    RecordProperty("rmat_top_degrees", top_degrees(rmat_degree, 10));
    RecordProperty("er_top_degrees", top_degrees(er_degree, 10));
    EXPECT_GE(static_cast<double>(rmat_max), 20.0 * rmat_mean)
        << "mean " << rmat_mean << ", top " << top_degrees(rmat_degree, 10);
    EXPECT_LT(static_cast<double>(er_max), 4.0 * er_mean)
        << "mean " << er_mean << ", top " << top_degrees(er_degree, 10);
}

TEST(Rmat, ScrambleIsARelabelingOfTheSameEdges)
{
    auto o = rmat(14, 9);
    o.scramble = false;
    const auto plain = halo::generate_rmat(o);
    o.scramble = true;
    const auto scrambled = halo::generate_rmat(o);
    ASSERT_EQ(plain.num_edges(), scrambled.num_edges());

    // Edge by edge the same draws, so one map old id -> new id explains every edge, and it is
    // injective.
    std::map<halo::global_id, halo::global_id> relabel;
    std::map<halo::global_id, halo::global_id> inverse;
    bool consistent = true;
    auto record = [&](halo::global_id from, halo::global_id to) {
        consistent &= relabel.try_emplace(from, to).first->second == to;
        consistent &= inverse.try_emplace(to, from).first->second == from;
    };
    for (std::int64_t e = 0; e < plain.num_edges(); ++e) {
        record(plain.src[e], scrambled.src[e]);
        record(plain.dst[e], scrambled.dst[e]);
    }
    EXPECT_TRUE(consistent);

    auto plain_degree = undirected_degrees(plain);
    auto scrambled_degree = undirected_degrees(scrambled);
    // Unscrambled, node 0 collects the most probable quadrant at every level.
    EXPECT_EQ(std::max_element(plain_degree.begin(), plain_degree.end()) - plain_degree.begin(), 0);
    EXPECT_NE(relabel.at(0), 0);
    std::sort(plain_degree.begin(), plain_degree.end());
    std::sort(scrambled_degree.begin(), scrambled_degree.end());
    EXPECT_TRUE(plain_degree == scrambled_degree);
}

TEST(Rmat, LargeScalesUseInt64Ids)
{
    EXPECT_EQ(halo::rmat_num_edges(rmat(28, 1)), std::int64_t{1} << 32);
    EXPECT_EQ(halo::rmat_num_edges(rmat(40, 1)), std::int64_t{1} << 44);
    // Scale 40 with 1024 edges: every id needs more than 32 bits of range.
    const auto edges = halo::generate_rmat(rmat(40, 3, 1.0 / (1 << 30)));
    EXPECT_EQ(edges.num_nodes, std::int64_t{1} << 40);
    EXPECT_EQ(edges.num_edges(), 1024);
    expect_ids_in_range(edges);
    const auto max_id = std::max(*std::max_element(edges.src.begin(), edges.src.end()),
                                 *std::max_element(edges.dst.begin(), edges.dst.end()));
    EXPECT_GT(max_id, std::int64_t{1} << 32);
}

TEST(Rmat, InvalidOptionsAreInputErrors)
{
    auto with = [](auto change) {
        auto o = rmat(10, 1);
        change(o);
        return input_error([&] { halo::generate_rmat(o); });
    };
    EXPECT_CONTAINS(with([](auto& o) { o.scale = 0; }), "R-MAT scale 0 is outside 1..40");
    EXPECT_CONTAINS(with([](auto& o) { o.scale = 41; }), "R-MAT scale 41 is outside 1..40");
    EXPECT_CONTAINS(with([](auto& o) { o.edge_factor = 0; }), "R-MAT edge factor 0");
    EXPECT_CONTAINS(with([](auto& o) { o.edge_factor = -2; }), "edge factor -2");
    EXPECT_CONTAINS(with([](auto& o) { o.a = 0; }), "probability a = 0 is outside (0, 1)");
    EXPECT_CONTAINS(with([](auto& o) { o.c = 1.5; }), "probability c = 1.5 is outside (0, 1)");
    EXPECT_CONTAINS(with([](auto& o) { o.a = 0.5, o.b = 0.3, o.c = 0.2; }), "a + b + c");
    EXPECT_CONTAINS(with([](auto& o) { o.scale = 40, o.edge_factor = 1e6; }), "2^58");
}

TEST(ErdosRenyi, SizesAreExactAndIdsInRange)
{
    const auto edges = halo::generate_erdos_renyi({1000, 12345, 8});
    EXPECT_EQ(edges.num_nodes, 1000);
    EXPECT_EQ(edges.num_edges(), 12345);
    expect_ids_in_range(edges);
    EXPECT_EQ(halo::generate_erdos_renyi({5, 0, 8}).num_edges(), 0);
    const auto one = halo::generate_erdos_renyi({1, 10, 8});
    EXPECT_EQ(std::count(one.src.begin(), one.src.end(), 0), 10);
}

TEST(ErdosRenyi, SameSeedSameEdgesWhateverTheThreadCount)
{
    expect_thread_count_independent([] { return halo::generate_erdos_renyi({50000, 800000, 3}); });
    // 2^64 mod n = 2^62 for n = 3 * 2^61: a quarter of the draws are rejected and redrawn.
    expect_thread_count_independent([] {
        return halo::generate_erdos_renyi({3 * (std::int64_t{1} << 61), 100000, 3});
    });
}

TEST(ErdosRenyi, DifferentSeedsDiffer)
{
    const auto x = halo::generate_erdos_renyi({1 << 14, 1 << 18, 1});
    const auto y = halo::generate_erdos_renyi({1 << 14, 1 << 18, 2});
    EXPECT_LT(same_edges(x, y), 10);  // expected m / n^2 = 0.001
}

TEST(ErdosRenyi, DrawsAreUniform)
{
    // Small n: every id is equally likely (an unbiased bounded draw).
    const auto small = halo::generate_erdos_renyi({3, 300000, 4});
    for (const auto* ids : {&small.src, &small.dst}) {
        for (halo::global_id v = 0; v < 3; ++v) {
            // 100000 expected per id, standard deviation 258.
            EXPECT_NEAR(std::count(ids->begin(), ids->end(), v), 100000, 1500) << v;
        }
    }
    // Huge n with heavy rejection: thirds of the range are equally likely and ids stay in range.
    const std::int64_t n = 3 * (std::int64_t{1} << 61);
    const auto huge = halo::generate_erdos_renyi({n, 300000, 4});
    expect_ids_in_range(huge);
    std::int64_t thirds[3] = {0, 0, 0};
    for (const auto v : huge.src) {
        ++thirds[v / (n / 3)];
    }
    for (const auto count : thirds) {
        EXPECT_NEAR(count, 100000, 1500);
    }
}

TEST(ErdosRenyi, InvalidOptionsAreInputErrors)
{
    EXPECT_CONTAINS(input_error([] {
                        halo::generate_erdos_renyi({0, 10, 1});
                    }),
                    "Erdos-Renyi node count 0 must be >= 1");
    EXPECT_CONTAINS(input_error([] {
                        halo::generate_erdos_renyi({10, -5, 1});
                    }),
                    "Erdos-Renyi edge count -5 must be >= 0");
}

TEST(GraphSpec, ParsesRmatAndErdosRenyi)
{
    const auto r = halo::parse_graph_spec("rmat:20:16");
    ASSERT_TRUE(std::holds_alternative<halo::RmatOptions>(r));
    const auto& ro = std::get<halo::RmatOptions>(r);
    EXPECT_EQ(ro.scale, 20);
    EXPECT_EQ(ro.edge_factor, 16.0);
    EXPECT_EQ(ro.seed, halo::kDefaultGraphSeed);
    EXPECT_EQ(ro.a, 0.57);
    EXPECT_EQ(ro.b, 0.19);
    EXPECT_EQ(ro.c, 0.19);
    EXPECT_TRUE(ro.scramble);

    const auto seeded = std::get<halo::RmatOptions>(halo::parse_graph_spec("rmat:14:2.5:42"));
    EXPECT_EQ(seeded.edge_factor, 2.5);
    EXPECT_EQ(seeded.seed, 42u);

    const auto e = halo::parse_graph_spec("er:1000:5000:7");
    ASSERT_TRUE(std::holds_alternative<halo::ErdosRenyiOptions>(e));
    const auto& eo = std::get<halo::ErdosRenyiOptions>(e);
    EXPECT_EQ(eo.num_nodes, 1000);
    EXPECT_EQ(eo.num_edges, 5000);
    EXPECT_EQ(eo.seed, 7u);
    EXPECT_EQ(std::get<halo::ErdosRenyiOptions>(halo::parse_graph_spec("er:10:20")).seed,
              halo::kDefaultGraphSeed);
}

TEST(GraphSpec, ToStringRoundTripsAndGenerateRunsTheGenerator)
{
    for (const char* text : {"rmat:12:16:3", "rmat:9:0.5:18446744073709551615", "er:700:900:5"}) {
        const auto spec = halo::parse_graph_spec(text);
        EXPECT_EQ(halo::to_string(spec), text);
        EXPECT_EQ(halo::to_string(halo::parse_graph_spec(halo::to_string(spec))), text);
    }
    auto o = rmat(8, 3);
    o.scramble = false;
    EXPECT_EQ(halo::to_string(o), "rmat:8:16:3 (a=0.57, b=0.19, c=0.19, unscrambled)");

    const auto from_spec = halo::generate(halo::parse_graph_spec("rmat:12:16:3"));
    const auto direct = halo::generate_rmat(rmat(12, 3));
    EXPECT_TRUE(from_spec.src == direct.src && from_spec.dst == direct.dst);
    const auto er = halo::generate(halo::parse_graph_spec("er:700:900:5"));
    EXPECT_TRUE(er.src == halo::generate_erdos_renyi({700, 900, 5}).src);
}

TEST(GraphSpec, MalformedSpecsNameTheSpecAndTheField)
{
    auto parse_error = [](const char* text) {
        return input_error([text] { halo::parse_graph_spec(text); });
    };
    EXPECT_EQ(parse_error("rmat:abc:16"),
              "graph spec 'rmat:abc:16': SCALE 'abc' is not an integer");
    EXPECT_EQ(parse_error("rmat:20"),
              "graph spec 'rmat:20': expected rmat:SCALE:EF[:SEED], got 2 field(s)");
    EXPECT_EQ(parse_error("foo:1"),
              "graph spec 'foo:1': unknown generator 'foo' (expected rmat:SCALE:EF[:SEED] or "
              "er:N:M[:SEED])");
    EXPECT_CONTAINS(parse_error(""), "unknown generator ''");
    EXPECT_CONTAINS(parse_error("rmat:20:16:1:2"), "got 5 field(s)");
    EXPECT_CONTAINS(parse_error("rmat:20:x"), "EF 'x' is not a number");
    EXPECT_CONTAINS(parse_error("rmat:20:16x"), "EF '16x' is not a number");
    EXPECT_CONTAINS(parse_error("rmat:20:16:"), "SEED '' is not a non-negative integer");
    EXPECT_CONTAINS(parse_error("rmat:20:16:-1"), "SEED '-1' is not a non-negative integer");
    EXPECT_CONTAINS(parse_error("rmat: 20:16"), "SCALE ' 20' is not an integer");
    EXPECT_CONTAINS(parse_error("rmat:99999999999:16"), "SCALE '99999999999' is out of range");
    EXPECT_EQ(parse_error("rmat:41:16"),
              "graph spec 'rmat:41:16': R-MAT scale 41 is outside 1..40");
    EXPECT_CONTAINS(parse_error("rmat:20:0"), "graph spec 'rmat:20:0': R-MAT edge factor 0");
    EXPECT_CONTAINS(parse_error("rmat:20:nan"), "R-MAT edge factor nan");
    EXPECT_CONTAINS(parse_error("er:100"), "expected er:N:M[:SEED], got 2 field(s)");
    EXPECT_CONTAINS(parse_error("er:0:10"), "graph spec 'er:0:10': Erdos-Renyi node count 0");
    EXPECT_CONTAINS(parse_error("er:10:-3"), "Erdos-Renyi edge count -3 must be >= 0");
    EXPECT_CONTAINS(parse_error("er:1e3:10"), "N '1e3' is not an integer");
    EXPECT_CONTAINS(parse_error("RMAT:20:16"), "unknown generator 'RMAT'");
}
