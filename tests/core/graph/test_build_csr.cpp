#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo_test.hpp"
#include "thread_count.hpp"

namespace {

halo::EdgeList edges(std::int64_t n, std::vector<std::pair<std::int64_t, std::int64_t>> list,
                     std::vector<float> weights = {})
{
    halo::EdgeList e;
    e.num_nodes = n;
    for (auto [s, d] : list) {
        e.src.push_back(s);
        e.dst.push_back(d);
    }
    e.weights = std::move(weights);
    return e;
}

std::vector<std::vector<int>> dense(const halo::Csr& csr)
{
    std::vector<std::vector<int>> m(csr.num_rows, std::vector<int>(csr.num_cols, 0));
    for (std::int64_t i = 0; i < csr.num_rows; ++i) {
        for (auto k = csr.indptr[i]; k < csr.indptr[i + 1]; ++k) {
            m[i][csr.indices[k]] += 1;
        }
    }
    return m;
}

}  // namespace

TEST(BuildCsr, DirectedKeepsOrientationAndSortsColumns)
{
    halo::BuildOptions opt;
    opt.symmetrize = false;
    const auto csr = halo::build_csr(edges(4, {{0, 3}, {0, 1}, {2, 0}, {0, 1}}), opt);
    halo::validate(csr, "test");
    EXPECT_EQ(csr.indptr, (std::vector<halo::offset_t>{0, 2, 2, 3, 3}));
    EXPECT_EQ(csr.indices, (std::vector<halo::local_id>{1, 3, 0}));  // duplicate (0,1) merged
    EXPECT_FALSE(csr.has_values());
}

TEST(BuildCsr, TransposePutsDestinationInRows)
{
    halo::BuildOptions opt;
    opt.symmetrize = false;
    opt.transpose = true;
    const auto csr = halo::build_csr(edges(3, {{0, 2}, {1, 2}}), opt);
    EXPECT_EQ(csr.indptr, (std::vector<halo::offset_t>{0, 0, 0, 2}));
    EXPECT_EQ(csr.indices, (std::vector<halo::local_id>{0, 1}));
}

TEST(BuildCsr, SymmetrizeIsUnionAndIdempotent)
{
    halo::BuildOptions opt;
    const auto once = halo::build_csr(edges(3, {{0, 1}, {1, 2}}), opt);
    const auto both = halo::build_csr(edges(3, {{0, 1}, {1, 0}, {1, 2}, {2, 1}}), opt);
    EXPECT_EQ(dense(once), (std::vector<std::vector<int>>{{0, 1, 0}, {1, 0, 1}, {0, 1, 0}}));
    EXPECT_EQ(once.indptr, both.indptr);
    EXPECT_EQ(once.indices, both.indices);
}

TEST(BuildCsr, WeightedDuplicatesKeepTheLargerWeight)
{
    halo::BuildOptions opt;
    const auto csr = halo::build_csr(edges(2, {{0, 1}, {1, 0}}, {2.0f, 5.0f}), opt);
    ASSERT_TRUE(csr.has_values());
    EXPECT_EQ(csr.values, (std::vector<float>{5.0f, 5.0f}));
}

TEST(BuildCsr, SelfLoopPolicies)
{
    const auto e = edges(3, {{0, 0}, {0, 1}, {2, 1}});
    halo::BuildOptions opt;
    opt.self_loops = halo::SelfLoops::keep;
    EXPECT_EQ(halo::count_diagonal(halo::build_csr(e, opt).view()), 1);
    opt.self_loops = halo::SelfLoops::drop;
    const auto dropped = halo::build_csr(e, opt);
    EXPECT_EQ(halo::count_diagonal(dropped.view()), 0);
    EXPECT_EQ(dropped.nnz(), 4);
    opt.self_loops = halo::SelfLoops::add;
    const auto added = halo::build_csr(e, opt);
    EXPECT_EQ(halo::count_diagonal(added.view()), 3);
    EXPECT_EQ(added.nnz(), 7);
    halo::validate(added, "added");
    for (std::int64_t i = 0; i < added.num_rows; ++i) {  // rows stay sorted
        for (auto k = added.indptr[i] + 1; k < added.indptr[i + 1]; ++k) {
            EXPECT_LT(added.indices[k - 1], added.indices[k]);
        }
    }
}

TEST(BuildCsr, AddSelfLoopsKeepsExistingWeight)
{
    halo::BuildOptions opt;
    opt.self_loops = halo::SelfLoops::add;
    const auto csr = halo::build_csr(edges(2, {{0, 0}, {0, 1}}, {3.0f, 2.0f}), opt);
    // row 0: (0,0)=3 (kept), (0,1)=2; row 1: (1,0)=2, (1,1)=1 (added)
    EXPECT_EQ(csr.indices, (std::vector<halo::local_id>{0, 1, 0, 1}));
    EXPECT_EQ(csr.values, (std::vector<float>{3.0f, 2.0f, 2.0f, 1.0f}));
}

TEST(BuildCsr, GcnNormalizationMatchesHandComputation)
{
    // Path 0-1-2 with self-loops: degrees 2, 3, 2.
    halo::BuildOptions opt;
    opt.self_loops = halo::SelfLoops::add;
    opt.normalization = halo::Normalization::gcn;
    const auto csr = halo::build_csr(edges(3, {{0, 1}, {1, 2}}), opt);
    const std::vector<float> expected = {1.0f / 2.0f,
                                         1.0f / std::sqrt(6.0f),  // row 0: (0,0) (0,1)
                                         1.0f / std::sqrt(6.0f),
                                         1.0f / 3.0f,
                                         1.0f / std::sqrt(6.0f),  // row 1
                                         1.0f / std::sqrt(6.0f),
                                         1.0f / 2.0f};  // row 2
    ASSERT_EQ(csr.values.size(), expected.size());
    for (std::size_t k = 0; k < expected.size(); ++k) {
        EXPECT_NEAR(csr.values[k], expected[k], halo::testing::tolerance<float>(4, 1.0)) << k;
    }
}

TEST(BuildCsr, MeanNormalizationRowsSumToOne)
{
    halo::BuildOptions opt;
    opt.normalization = halo::Normalization::mean;
    const auto csr = halo::build_csr(edges(4, {{0, 1}, {0, 2}, {0, 3}, {1, 2}}), opt);
    for (std::int64_t i = 0; i < csr.num_rows; ++i) {
        float sum = 0.0f;
        for (auto k = csr.indptr[i]; k < csr.indptr[i + 1]; ++k) {
            sum += csr.values[k];
        }
        EXPECT_NEAR(sum, 1.0f, halo::testing::tolerance<float>(4, 1.0));
    }
    EXPECT_FLOAT_EQ(csr.values[0], 1.0f / 3.0f);  // row 0 has 3 neighbours
}

TEST(BuildCsr, IsolatedNodesGiveEmptyRowsAndZeroNormalization)
{
    halo::BuildOptions opt;
    opt.normalization = halo::Normalization::gcn;
    const auto csr = halo::build_csr(edges(5, {{0, 1}}), opt);
    EXPECT_EQ(csr.num_rows, 5);
    EXPECT_EQ(csr.row_nnz(4), 0);
    for (const auto v : csr.values) {
        EXPECT_TRUE(std::isfinite(v));
    }
}

TEST(BuildCsr, OutOfRangeIdIsAnInputErrorNamingTheEdge)
{
    try {
        halo::build_csr(edges(3, {{0, 1}, {1, 7}}), {});
        FAIL() << "expected halo::InputError";
    } catch (const halo::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("edge 1 (1 -> 7)"), std::string::npos) << e.what();
    }
    EXPECT_THROW(halo::build_csr(edges(3, {{-1, 1}}), {}), halo::InputError);
}

TEST(BuildCsr, ParsersRejectUnknownNames)
{
    EXPECT_EQ(halo::parse_normalization("gcn"), halo::Normalization::gcn);
    EXPECT_EQ(halo::parse_self_loops("add"), halo::SelfLoops::add);
    EXPECT_THROW(halo::parse_normalization("sym"), halo::InputError);
    EXPECT_THROW(halo::parse_self_loops("yes"), halo::InputError);
}

TEST(Csr, ValidateNamesTheViolation)
{
    halo::Csr csr;
    csr.num_rows = 2;
    csr.num_cols = 2;
    csr.indptr = {0, 2, 1};
    csr.indices = {0, 1};
    try {
        halo::validate(csr, "parts/0/csr");
        FAIL();
    } catch (const halo::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("parts/0/csr: indptr decreases at row 1"),
                  std::string::npos)
            << e.what();
    }
    csr.indptr = {0, 1, 2};
    csr.indices = {0, 2};
    EXPECT_THROW(halo::validate(csr, "x"), halo::InputError);
}

TEST(BuildCsr, SameCsrForAnyThreadCount)
{
    // An R-MAT multigraph with hubs, duplicates and self-loops, weighted with ties, so that the
    // atomic placement really interleaves and the merge of duplicates (max weight) matters.
    auto e = halo::generate_rmat({.scale = 12, .edge_factor = 8, .seed = 7});
    e.weights.resize(e.src.size());
    for (std::size_t k = 0; k < e.weights.size(); ++k) {
        e.weights[k] = static_cast<float>((k * 2654435761ULL) % 5);
    }
    for (const bool weighted : {false, true}) {
        for (const bool symmetrize : {false, true}) {
            halo::BuildOptions opt;
            opt.symmetrize = symmetrize;
            opt.use_weights = weighted;
            opt.self_loops = halo::SelfLoops::add;
            opt.normalization = weighted ? halo::Normalization::gcn : halo::Normalization::none;
            halo::Csr reference;
            {
                halo::testing::ThreadCount one(1);
                reference = halo::build_csr(e, opt);
            }
            halo::validate(reference, "reference");
            for (const int threads : {2, 3, 7}) {
                halo::testing::ThreadCount count(threads);
                const auto csr = halo::build_csr(e, opt);
                EXPECT_EQ(csr.indptr, reference.indptr) << threads << " threads";
                EXPECT_EQ(csr.indices, reference.indices) << threads << " threads";
                ASSERT_EQ(csr.values.size(), reference.values.size());
                // Bit for bit (NaN-safe); memcmp of an empty (null) buffer is undefined.
                if (!csr.values.empty()) {
                    EXPECT_EQ(0, std::memcmp(csr.values.data(), reference.values.data(),
                                             csr.values.size() * sizeof(float)))
                        << threads << " threads, symmetrize " << symmetrize;
                }
            }
        }
    }
}

// The unweighted build by row blocks against a row-set reference: every block size from one row
// to 2^16 (more rows than the graph has), several thread counts, hubs, duplicates, self-loops,
// empty rows and a graph of one node.
TEST(BuildCsr, RowBlockPatternEqualsASetReference)
{
    auto e = halo::generate_rmat({.scale = 10, .edge_factor = 6, .seed = 11});
    e.num_nodes += 5;  // isolated nodes at the end: empty rows
    for (int k = 0; k < 40; ++k) {
        e.src.push_back(k % 3);  // duplicates and self-loops
        e.dst.push_back(k % 4);
    }
    for (const bool symmetrize : {false, true}) {
        std::vector<std::set<std::int32_t>> want(static_cast<std::size_t>(e.num_nodes));
        for (std::size_t k = 0; k < e.src.size(); ++k) {
            want[e.src[k]].insert(static_cast<std::int32_t>(e.dst[k]));
            if (symmetrize) {
                want[e.dst[k]].insert(static_cast<std::int32_t>(e.src[k]));
            }
        }
        for (const int shift : {0, 2, 5, 14, 16}) {
            for (const int threads : {1, 3, 7}) {
                SCOPED_TRACE("symmetrize " + std::to_string(symmetrize) + ", 2^" +
                             std::to_string(shift) + " rows a block, " + std::to_string(threads) +
                             " threads");
                halo::testing::ThreadCount count(threads);
                const auto csr = halo::detail::build_pattern_by_row_blocks(e.num_nodes, e.src, e.dst,
                                                                           symmetrize, shift);
                halo::validate(csr, "blocked");
                ASSERT_EQ(csr.num_rows, e.num_nodes);
                for (std::int64_t i = 0; i < e.num_nodes; ++i) {
                    const std::vector<std::int32_t> row(csr.indices.begin() + csr.indptr[i],
                                                        csr.indices.begin() + csr.indptr[i + 1]);
                    ASSERT_EQ(row, std::vector<std::int32_t>(want[i].begin(), want[i].end()))
                        << "row " << i;
                }
            }
        }
    }
    const std::vector<std::int64_t> none;
    const auto empty = halo::detail::build_pattern_by_row_blocks(0, none, none, true);
    EXPECT_EQ(empty.num_rows, 0);
    EXPECT_EQ(empty.indptr, std::vector<std::int64_t>{0});
    const std::vector<std::int64_t> zero{0, 0};
    const auto one = halo::detail::build_pattern_by_row_blocks(1, zero, zero, true, 3);
    EXPECT_EQ(one.indptr, (std::vector<std::int64_t>{0, 1}));
    EXPECT_EQ(one.indices, std::vector<std::int32_t>{0});
    EXPECT_THROW(halo::detail::build_pattern_by_row_blocks(1, zero, zero, true, 17),
                 halo::LogicError);
}

// slice_rows: the rows' offsets from zero, their columns and values, the same column count; an
// empty range and a range of empty rows; a range outside the matrix is an error.
TEST(SliceRows, CopiesTheRowsOfARange)
{
    halo::Csr a;
    a.num_rows = 5;
    a.num_cols = 7;
    a.indptr = {0, 2, 2, 5, 6, 6};
    a.indices = {1, 6, 0, 3, 4, 2};
    a.values = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
    const auto mid = halo::slice_rows(a, {1, 4});
    halo::validate(mid, "slice");
    EXPECT_EQ(mid.num_rows, 3);
    EXPECT_EQ(mid.num_cols, 7);
    EXPECT_EQ(mid.indptr, (std::vector<halo::offset_t>{0, 0, 3, 4}));
    EXPECT_EQ(mid.indices, (std::vector<halo::local_id>{0, 3, 4, 2}));
    EXPECT_EQ(mid.values, (std::vector<float>{3.0f, 4.0f, 5.0f, 6.0f}));
    auto pattern = a;
    pattern.values.clear();
    const auto tail = halo::slice_rows(pattern, {4, 5});
    EXPECT_EQ(tail.indptr, (std::vector<halo::offset_t>{0, 0}));
    EXPECT_TRUE(tail.indices.empty());
    EXPECT_FALSE(tail.has_values());
    const auto none = halo::slice_rows(a, {2, 2});
    EXPECT_EQ(none.num_rows, 0);
    EXPECT_EQ(none.indptr, (std::vector<halo::offset_t>{0}));
    EXPECT_THROW(halo::slice_rows(a, {3, 6}), halo::Error);
    EXPECT_THROW(halo::slice_rows(a, {3, 2}), halo::Error);
}

// sparse_rows: the nonzeros of a dense row-major matrix in row order, columns ascending, NaN kept
// (it is not zero), -0 dropped; refused above the density (exactly at it: kept); a dense matrix
// refused by the row sample alone; empty shapes give nothing.
TEST(SparseRows, KeepsTheNonzerosUpToTheDensity)
{
    const float nan = std::nanf("");
    const std::vector<float> x = {0.0f, 2.0f, 0.0f, -0.0f,  //
                                  0.0f, 0.0f, 0.0f, 0.0f,   //
                                  1.5f, 0.0f, nan,  -3.0f};
    const auto csr = halo::sparse_rows(x.data(), 3, 4, 0.5);
    ASSERT_TRUE(csr.has_value());
    halo::validate(*csr, "sparse rows");
    EXPECT_EQ(csr->num_rows, 3);
    EXPECT_EQ(csr->num_cols, 4);
    EXPECT_EQ(csr->indptr, (std::vector<halo::offset_t>{0, 1, 1, 4}));
    EXPECT_EQ(csr->indices, (std::vector<halo::local_id>{1, 0, 2, 3}));
    ASSERT_EQ(csr->values.size(), 4u);
    EXPECT_EQ(csr->values[0], 2.0f);
    EXPECT_EQ(csr->values[1], 1.5f);
    EXPECT_TRUE(std::isnan(csr->values[2]));
    EXPECT_EQ(csr->values[3], -3.0f);
    // 4 of 12 nonzero: kept at density 4/12, refused just below it.
    EXPECT_TRUE(halo::sparse_rows(x.data(), 3, 4, 4.0 / 12.0).has_value());
    EXPECT_FALSE(halo::sparse_rows(x.data(), 3, 4, 3.9 / 12.0).has_value());
    EXPECT_FALSE(halo::sparse_rows(x.data(), 0, 4, 1.0).has_value());
    EXPECT_FALSE(halo::sparse_rows(x.data(), 3, 0, 1.0).has_value());
    EXPECT_THROW(halo::sparse_rows(nullptr, 3, 4, 1.0), halo::LogicError);

    // A large matrix, dense but for one row: the sample refuses it; sparse but for one dense row
    // (below the density overall): kept, and equal to the matrix.
    const std::int64_t rows = 5000;
    const std::int64_t cols = 64;
    std::vector<float> dense(static_cast<std::size_t>(rows * cols), 1.0f);
    std::fill_n(dense.begin(), cols, 0.0f);
    EXPECT_FALSE(halo::sparse_rows(dense.data(), rows, cols, 0.05).has_value());
    std::vector<float> sparse(static_cast<std::size_t>(rows * cols), 0.0f);
    for (std::int64_t i = 0; i < rows; ++i) {
        sparse[i * cols + (i * 7) % cols] = static_cast<float>(i + 1);
    }
    std::fill_n(sparse.begin() + 17 * cols, cols, 0.5f);
    const auto kept = halo::sparse_rows(sparse.data(), rows, cols, 0.05);
    ASSERT_TRUE(kept.has_value());
    halo::validate(*kept, "sparse rows");
    std::vector<float> back(sparse.size(), 0.0f);
    for (std::int64_t i = 0; i < rows; ++i) {
        for (auto k = kept->indptr[i]; k < kept->indptr[i + 1]; ++k) {
            back[i * cols + kept->indices[k]] = kept->values[k];
        }
    }
    EXPECT_EQ(back, sparse);
}
