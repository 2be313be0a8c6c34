// Accel-GCN preprocessing on the CPU: Algorithm 1's patterns, the paper's Fig. 3 example, the
// coverage of every nonzero of the requested rows exactly once (random, R-MAT, empty rows, a row
// of 10^6 nonzeros, several segments), and a host emulation of the kernel's schedule against
// reference::spmm.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/kernels_host/accel_gcn_partition.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo_test.hpp"
#include "spmm_fixtures.hpp"

namespace {

using halo::AccelGcnBlock;
using halo::AccelGcnPartition;
using halo::AccelGcnPartitionOptions;
using halo::Csr;
using halo::RowRange;
using halo::testing::kNaN;
using halo::testing::rmat_graph;
using halo::testing::tolerance;

Csr csr_from_rows(std::int64_t num_cols, const std::vector<std::vector<std::int32_t>>& rows,
                  bool valued, std::uint64_t seed)
{
    Csr a;
    a.num_rows = static_cast<std::int64_t>(rows.size());
    a.num_cols = num_cols;
    for (const auto& r : rows) {
        a.indices.insert(a.indices.end(), r.begin(), r.end());
        a.indptr.push_back(static_cast<std::int64_t>(a.indices.size()));
    }
    if (valued) {
        a.values = halo::testing::random_floats(a.indices.size(), seed, 0.1f, 1.0f);
    }
    return a;
}

// Erdos-Renyi with fewer edges than nodes: many empty rows.
Csr sparse_er(std::int64_t n, std::int64_t m, std::uint64_t seed, bool valued)
{
    Csr a = halo::testing::directed_erdos_renyi(n, m, seed);
    if (valued) {
        a.values = halo::testing::random_floats(a.indices.size(), seed + 7, -1.0f, 1.0f);
    }
    return a;
}

// One row of 10^6 nonzeros among short and empty rows.
Csr long_row()
{
    constexpr std::int32_t kLong = 1000000;
    std::vector<std::vector<std::int32_t>> rows(5);
    rows[1] = {0, 5, 9};
    rows[3].resize(kLong);
    std::iota(rows[3].begin(), rows[3].end(), 0);
    rows[4] = {7};
    return csr_from_rows(kLong, rows, true, 11);
}

// Decodes the blocks of segments [s0, s1) as the kernel does, checks every structural rule and
// that each nonzero of the segments' rows is covered exactly once.
void check_partition(const Csr& a, const AccelGcnPartition& p, std::int64_t s0, std::int64_t s1)
{
    const auto& opt = p.options;
    const std::int64_t pos_begin = p.segment_rows[s0];
    const std::int64_t pos_end = p.segment_rows[s1];
    // Sorted rows: a permutation of each segment's rows, by degree (longer than deg_bound last),
    // stable.
    std::vector<std::int64_t> loc(p.sorted_rows.size() + 1, 0);
    for (std::int64_t s = s0; s < s1; ++s) {
        const RowRange seg = p.segments[s];
        std::vector<std::int32_t> rows(p.sorted_rows.begin() + p.segment_rows[s],
                                       p.sorted_rows.begin() + p.segment_rows[s + 1]);
        ASSERT_EQ(static_cast<std::int64_t>(rows.size()), seg.size());
        // Without degree sorting the key is constant: the rows keep their original order.
        auto key = [&](std::int32_t r) {
            return opt.degree_sort
                       ? std::min<std::int64_t>(a.row_nnz(r), std::int64_t{opt.deg_bound} + 1)
                       : std::int64_t{0};
        };
        for (std::size_t i = 1; i < rows.size(); ++i) {
            ASSERT_TRUE(key(rows[i - 1]) < key(rows[i]) ||
                        (key(rows[i - 1]) == key(rows[i]) && rows[i - 1] < rows[i]))
                << "sort order at position " << i << " of segment " << s;
        }
        std::vector<std::int32_t> sorted = rows;
        std::sort(sorted.begin(), sorted.end());
        for (std::size_t i = 0; i < sorted.size(); ++i) {
            ASSERT_EQ(sorted[i], seg.begin + static_cast<std::int64_t>(i));
        }
    }
    // Reordered nonzeros: row at position k holds exactly the original row's nonzeros.
    std::int64_t nz = 0;
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(p.sorted_rows.size()); ++k) {
        const std::int32_t row = p.sorted_rows[k];
        loc[k] = nz;
        for (std::int64_t j = a.indptr[row]; j < a.indptr[row + 1]; ++j, ++nz) {
            ASSERT_EQ(p.indices[nz], a.indices[j]);
            if (a.has_values()) {
                ASSERT_EQ(p.values[nz], a.values[j]);
            }
        }
    }
    loc.back() = nz;
    ASSERT_EQ(nz, static_cast<std::int64_t>(p.indices.size()));
    ASSERT_EQ(p.values.size(), a.has_values() ? p.indices.size() : 0);

    // Coverage: nonzeros of the positions [pos_begin, pos_end), once each; rows written once.
    std::vector<int> covered(p.indices.size(), 0);
    std::vector<int> written(p.sorted_rows.size(), 0);
    const std::int32_t w = opt.warps_per_block;
    const std::int32_t cap = opt.warp_nonzeros();
    for (std::int64_t bi = p.segment_blocks[s0]; bi < p.segment_blocks[s1]; ++bi) {
        const AccelGcnBlock& b = p.blocks[bi];
        ASSERT_GE(b.first_row, pos_begin);
        ASSERT_LT(b.first_row, pos_end);
        const std::int32_t row = p.sorted_rows[b.first_row];
        if (b.split(opt.deg_bound)) {
            ASSERT_EQ(b.degree, a.row_nnz(row));
            ASSERT_GT(b.info, 0);
            ASSERT_LE(b.info, opt.deg_bound);
            ASSERT_GE(b.first_nonzero, loc[b.first_row]);
            ASSERT_LE(b.first_nonzero + b.info, loc[b.first_row + 1]);
            for (std::int32_t warp = 0; warp < w; ++warp) {
                const std::int64_t lo = std::min<std::int64_t>(std::int64_t{warp} * cap, b.info);
                const std::int64_t hi = std::min<std::int64_t>(lo + cap, b.info);
                for (std::int64_t k = lo; k < hi; ++k) {
                    ++covered[b.first_nonzero + k];
                }
            }
            continue;
        }
        const halo::AccelGcnPattern pat = halo::accel_gcn_pattern(opt, b.degree);
        ASSERT_EQ(b.warp_nonzeros(), pat.warp_nonzeros);
        ASSERT_GE(b.rows(), 1);
        ASSERT_LE(b.rows(), pat.block_rows);
        ASSERT_LE(b.first_row + b.rows(), pos_end);
        ASSERT_EQ(b.first_nonzero, loc[b.first_row]);
        const std::int32_t per_row =
            b.warp_nonzeros() == 0 ? 1 : (b.degree + b.warp_nonzeros() - 1) / b.warp_nonzeros();
        ASSERT_LE(b.rows() * per_row, w) << "block " << bi << " needs more warps than it has";
        for (std::int32_t r = 0; r < b.rows(); ++r) {
            ASSERT_EQ(a.row_nnz(p.sorted_rows[b.first_row + r]), b.degree);
            ++written[b.first_row + r];
            for (std::int32_t part = 0; part < per_row; ++part) {
                const std::int64_t lo =
                    std::min<std::int64_t>(std::int64_t{part} * b.warp_nonzeros(), b.degree);
                const std::int64_t hi = std::min<std::int64_t>(lo + b.warp_nonzeros(), b.degree);
                for (std::int64_t k = lo; k < hi; ++k) {
                    ++covered[b.first_nonzero + std::int64_t{r} * b.degree + k];
                }
            }
        }
    }
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(p.sorted_rows.size()); ++k) {
        const bool inside = k >= pos_begin && k < pos_end;
        const bool split = a.row_nnz(p.sorted_rows[k]) > opt.deg_bound;
        ASSERT_EQ(written[k], inside && !split ? 1 : 0) << "sorted position " << k;
        for (std::int64_t j = loc[k]; j < loc[k + 1]; ++j) {
            ASSERT_EQ(covered[j], inside ? 1 : 0) << "nonzero " << j << " at position " << k;
        }
    }
    // Split rows: exactly the rows longer than deg_bound, each once.
    std::vector<std::int32_t> expected;
    for (std::int64_t k = pos_begin; k < pos_end; ++k) {
        if (a.row_nnz(p.sorted_rows[k]) > opt.deg_bound) {
            expected.push_back(p.sorted_rows[k]);
        }
    }
    std::vector<std::int32_t> got(p.split_rows.begin() + p.segment_split_rows[s0],
                                  p.split_rows.begin() + p.segment_split_rows[s1]);
    std::sort(expected.begin(), expected.end());
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got, expected);
}

// The emulated schedule over segments [s0, s1) against reference::spmm on the same rows; rows
// outside stay NaN.
void check_emulation(const Csr& a, const AccelGcnPartition& p, std::int64_t s0, std::int64_t s1,
                     std::int64_t d, std::uint64_t seed)
{
    const auto xs = halo::testing::random_floats(static_cast<std::size_t>(a.num_cols * d), seed);
    const halo::DenseView<const float> x{xs.data(), a.num_cols, d, d};
    const std::int64_t ld = d + 3;  // padding columns must stay NaN too
    std::vector<float> got(static_cast<std::size_t>(a.num_rows * ld), kNaN);
    std::vector<float> want(static_cast<std::size_t>(a.num_rows * ld), kNaN);
    const RowRange rows{p.segments[s0].begin, p.segments[s1 - 1].end};
    halo::accel_gcn_emulate(p, s0, s1, x, {got.data(), a.num_rows, d, ld});
    halo::reference::spmm(a.view(), x, {want.data(), a.num_rows, d, ld}, rows);
    const float max_abs_a = a.has_values()
                                ? std::abs(*std::max_element(
                                      a.values.begin(), a.values.end(),
                                      [](float u, float v) { return std::abs(u) < std::abs(v); }))
                                : 1.0f;
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        // A dot product of length nnz(i) with |a| <= max_abs_a and |x| < 1, summed in another
        // order (per-warp partials, then their sum): scale nnz * max|a| * max|x| as the helper
        // states; k = 4 covers the two orders' rounding (random-sign terms, no cancellation).
        const double len = static_cast<double>(std::max<std::int64_t>(1, a.row_nnz(i)));
        const float tol = tolerance<float>(4.0, len * max_abs_a);
        for (std::int64_t j = 0; j < ld; ++j) {
            const float g = got[i * ld + j];
            const float w = want[i * ld + j];
            if (i < rows.begin || i >= rows.end || j >= d) {
                ASSERT_TRUE(std::isnan(g)) << "row " << i << " col " << j << " written";
            } else {
                ASSERT_NEAR(g, w, tol) << "row " << i << " col " << j << " d " << d;
            }
        }
    }
}

TEST(AccelGcnPartition, PatternsFollowAlgorithm1)
{
    const AccelGcnPartitionOptions opt{12, 96};  // 8 nonzeros per warp
    EXPECT_EQ(opt.warp_nonzeros(), 8);
    const auto p1 = halo::accel_gcn_pattern(opt, 1);
    EXPECT_EQ(p1.warps_per_row, 1);
    EXPECT_EQ(p1.block_rows, 12);
    EXPECT_EQ(p1.warp_nonzeros, 1);
    const auto p9 = halo::accel_gcn_pattern(opt, 9);  // 2 warps of 5
    EXPECT_EQ(p9.warps_per_row, 2);
    EXPECT_EQ(p9.block_rows, 6);
    EXPECT_EQ(p9.warp_nonzeros, 5);
    const auto p33 = halo::accel_gcn_pattern(opt, 33);  // 5 is no divisor of 12: 6 warps of 6
    EXPECT_EQ(p33.warps_per_row, 6);
    EXPECT_EQ(p33.block_rows, 2);
    EXPECT_EQ(p33.warp_nonzeros, 6);
    const auto p96 = halo::accel_gcn_pattern(opt, 96);
    EXPECT_EQ(p96.warps_per_row, 12);
    EXPECT_EQ(p96.block_rows, 1);
    EXPECT_EQ(p96.warp_nonzeros, 8);
    const auto p0 = halo::accel_gcn_pattern(opt, 0);
    EXPECT_EQ(p0.warp_nonzeros, 0);
    EXPECT_EQ(p0.block_rows, 12);
    EXPECT_THROW((void)halo::accel_gcn_pattern(opt, 97), halo::LogicError);
}

TEST(AccelGcnPartition, PaperFigure3Example)
{
    // Rows of degree 2, 4, 2; two warps of two nonzeros per block: BP-1 takes rows 0 and 2
    // {deg 2, row 0, loc 0, 2|2}, BP-2 row 1 {deg 4, row 2, loc 4, 2|1}.
    const Csr a = csr_from_rows(4, {{0, 1}, {0, 1, 2, 3}, {2, 3}}, false, 0);
    const RowRange all[] = {{0, 3}};
    const AccelGcnPartition p = halo::build_accel_gcn_partition(a.view(), all, {2, 4});
    EXPECT_EQ(p.sorted_rows, (std::vector<std::int32_t>{0, 2, 1}));
    ASSERT_EQ(p.blocks.size(), 2u);
    EXPECT_EQ(p.blocks[0], (AccelGcnBlock{2, 0, 0, (2 << 16) | 2}));
    EXPECT_EQ(p.blocks[1], (AccelGcnBlock{4, 2, 4, (2 << 16) | 1}));
    EXPECT_EQ(p.indices, (std::vector<std::int32_t>{0, 1, 2, 3, 0, 1, 2, 3}));
    EXPECT_TRUE(p.split_rows.empty());
}

TEST(AccelGcnPartition, SplitRowsFollowAlgorithm2)
{
    // Degree 10 with deg_bound 4: chunks of 4, 4, 2, one block each, info = the chunk's size.
    std::vector<std::int32_t> row(10);
    std::iota(row.begin(), row.end(), 0);
    const Csr a = csr_from_rows(10, {row, {3}}, true, 3);
    const RowRange all[] = {{0, 2}};
    const AccelGcnPartition p = halo::build_accel_gcn_partition(a.view(), all, {2, 4});
    EXPECT_EQ(p.sorted_rows, (std::vector<std::int32_t>{1, 0}));
    ASSERT_EQ(p.blocks.size(), 4u);
    EXPECT_EQ(p.blocks[0], (AccelGcnBlock{1, 0, 0, (1 << 16) | 1}));
    EXPECT_EQ(p.blocks[1], (AccelGcnBlock{10, 1, 1, 4}));
    EXPECT_EQ(p.blocks[2], (AccelGcnBlock{10, 1, 5, 4}));
    EXPECT_EQ(p.blocks[3], (AccelGcnBlock{10, 1, 9, 2}));
    EXPECT_EQ(p.split_rows, (std::vector<std::int32_t>{0}));
}

TEST(AccelGcnPartition, CoversEveryNonzeroOnce)
{
    const std::vector<Csr> graphs = {rmat_graph(10, 8, 1),
                                     rmat_graph(12, 4, 2),
                                     sparse_er(3000, 1500, 3, true),
                                     sparse_er(500, 4000, 4, false),
                                     long_row(),
                                     csr_from_rows(3, {{}}, false, 0),
                                     Csr{}};
    const std::vector<AccelGcnPartitionOptions> options = {{12, 96}, {1, 1}, {4, 64}, {32, 32}};
    for (const Csr& a : graphs) {
        for (const auto& opt : options) {
            const std::int64_t n = a.num_rows;
            const RowRange cuts[] = {{0, n / 3}, {n / 3, n}, {n / 5, n / 2}};
            const auto segments = halo::accel_gcn_segments(n, cuts);
            const AccelGcnPartition p = halo::build_accel_gcn_partition(a.view(), segments, opt);
            SCOPED_TRACE(::testing::Message() << "rows " << n << " nnz " << a.nnz() << " warps "
                                              << opt.warps_per_block << " bound " << opt.deg_bound);
            for (std::int64_t s0 = 0; s0 < p.num_segments(); ++s0) {
                for (std::int64_t s1 = s0 + 1; s1 <= p.num_segments(); ++s1) {
                    check_partition(a, p, s0, s1);
                }
            }
            // The plan's check of stored partitions accepts every partition the builder makes.
            EXPECT_NO_THROW(halo::validate_accel_gcn_partition(a.view(), p));
            const RowRange one[] = {{n / 4, n}};
            check_partition(a, halo::build_accel_gcn_partition(a.view(), one, opt), 0, 1);
        }
    }
}

TEST(AccelGcnPartition, UnsortedRowsKeepTheirOrderInRunsOfEqualDegree)
{
    // Degrees 2, 2, 2, 1, 2, 0, 0, 5 with 2 warps of 2 nonzeros (deg_bound 4): without sorting
    // Algorithm 2 walks the original order, a block takes up to block_rows rows of a run of one
    // degree (2 for degree <= 2) and a change of degree closes it; row 7 (degree 5) is split.
    const Csr a = csr_from_rows(
        8, {{0, 1}, {1, 2}, {2, 3}, {4}, {5, 6}, {}, {}, {0, 1, 2, 3, 4}}, false, 0);
    const RowRange all[] = {{0, 8}};
    const AccelGcnPartition p =
        halo::build_accel_gcn_partition(a.view(), all, {2, 4, /*degree_sort=*/false});
    EXPECT_EQ(p.sorted_rows, (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
    const std::vector<AccelGcnBlock> want = {
        {2, 0, 0, (2 << 16) | 2}, {2, 2, 4, (2 << 16) | 1}, {1, 3, 6, (1 << 16) | 1},
        {2, 4, 7, (2 << 16) | 1}, {0, 5, 9, 2},             {5, 7, 9, 4},
        {5, 7, 13, 1}};
    EXPECT_EQ(p.blocks, want);
    EXPECT_EQ(p.split_rows, (std::vector<std::int32_t>{7}));
    // The nonzeros are the matrix's own, unpermuted.
    EXPECT_EQ(p.indices, a.indices);
    // Sorted, the four degree-2 rows fill two blocks, the empty rows and the degree-1 row one
    // each, plus the two chunks of row 7: 6 blocks instead of 7.
    const AccelGcnPartition sorted = halo::build_accel_gcn_partition(a.view(), all, {2, 4});
    EXPECT_EQ(sorted.sorted_rows, (std::vector<std::int32_t>{5, 6, 3, 0, 1, 2, 4, 7}));
    EXPECT_EQ(sorted.blocks.size(), 6u);
}

TEST(AccelGcnPartition, UnsortedPartitionCoversEveryNonzeroOnceAndEmulates)
{
    const std::vector<Csr> graphs = {rmat_graph(10, 8, 7), sparse_er(3000, 1500, 8, true),
                                     long_row(), csr_from_rows(3, {{}}, false, 0), Csr{}};
    std::uint64_t seed = 500;
    for (const Csr& a : graphs) {
        for (AccelGcnPartitionOptions opt :
             std::vector<AccelGcnPartitionOptions>{{12, 96}, {1, 1}, {4, 8}}) {
            opt.degree_sort = false;
            const std::int64_t n = a.num_rows;
            const RowRange cuts[] = {{0, n / 3}, {n / 3, n}};
            const auto p =
                halo::build_accel_gcn_partition(a.view(), halo::accel_gcn_segments(n, cuts), opt);
            SCOPED_TRACE(::testing::Message() << "rows " << n << " nnz " << a.nnz() << " warps "
                                              << opt.warps_per_block << " unsorted");
            for (std::int64_t s0 = 0; s0 < p.num_segments(); ++s0) {
                for (std::int64_t s1 = s0 + 1; s1 <= p.num_segments(); ++s1) {
                    check_partition(a, p, s0, s1);
                }
            }
            EXPECT_NO_THROW(halo::validate_accel_gcn_partition(a.view(), p));
            // The original order throughout, so each segment's rows are its range ascending.
            for (std::size_t k = 0; k < p.sorted_rows.size(); ++k) {
                ASSERT_EQ(p.sorted_rows[k], static_cast<std::int32_t>(k));
            }
            if (p.num_segments() > 0 && a.nnz() < 100000) {
                check_emulation(a, p, 0, p.num_segments(), 33, ++seed);
            } else if (p.num_segments() > 0) {
                check_emulation(a, p, 0, p.num_segments(), 1, ++seed);
            }
        }
    }
}

TEST(AccelGcnPartition, GatherRebuildsTheNonzeros)
{
    for (const bool sort : {true, false}) {
        for (const Csr& a : {rmat_graph(10, 8, 9), sparse_er(2000, 1000, 10, true), long_row()}) {
            const std::int64_t n = a.num_rows;
            const RowRange cuts[] = {{0, n / 2}, {n / 2, n}};
            const auto built = halo::build_accel_gcn_partition(
                a.view(), halo::accel_gcn_segments(n, cuts), {4, 16, sort});
            AccelGcnPartition stored = built;
            stored.indices.clear();
            stored.values.clear();
            stored.indices.shrink_to_fit();
            // What a dataset holds is enough for the plan's checks ...
            EXPECT_NO_THROW(halo::validate_accel_gcn_partition(a.view(), stored));
            halo::accel_gcn_gather_nonzeros(a.view(), stored);
            // ... and the gather restores exactly what the builder made.
            EXPECT_EQ(stored.indices, built.indices);
            EXPECT_EQ(stored.values, built.values);
            EXPECT_EQ(stored.values.size(), a.has_values() ? a.indices.size() : 0u);
        }
    }
    AccelGcnPartition bad;
    bad.sorted_rows = {0, 5};
    const Csr a = csr_from_rows(2, {{0}, {1}}, false, 0);
    EXPECT_THROW(halo::accel_gcn_gather_nonzeros(a.view(), bad), halo::InputError);
}

// The message of the InputError that `f` throws (empty when it throws none).
template <typename F>
std::string input_error(F&& f)
{
    try {
        f();
    } catch (const halo::InputError& e) {
        return e.what();
    }
    return {};
}

TEST(AccelGcnPartition, StoredPartitionMismatchesAreNamed)
{
    const Csr a = rmat_graph(9, 8, 11);
    const std::int64_t n = a.num_rows;
    const std::vector<RowRange> ranges = {{0, n / 3}, {n / 3, n}};
    const AccelGcnPartitionOptions opt{12, 96};
    const auto good =
        halo::build_accel_gcn_partition(a.view(), halo::accel_gcn_segments(n, ranges), opt);
    EXPECT_NO_THROW(halo::check_stored_accel_gcn_partition(a.view(), good, opt, ranges));
    // Coarser requests are unions of the segments: fine. The whole range too.
    const RowRange whole[] = {{0, n}};
    EXPECT_NO_THROW(halo::check_stored_accel_gcn_partition(a.view(), good, opt, whole));
    auto expect_error = [&](const AccelGcnPartition& p, const AccelGcnPartitionOptions& o,
                            std::span<const RowRange> r, const Csr& m, const std::string& what) {
        const std::string msg =
            input_error([&] { halo::check_stored_accel_gcn_partition(m.view(), p, o, r); });
        EXPECT_NE(msg.find(what), std::string::npos) << "got: '" << msg << "'";
    };
    expect_error(good, {12, 96, false}, ranges, a, "degree_sort");
    expect_error(good, {4, 96}, ranges, a, "warps_per_block 12");
    const RowRange odd[] = {{1, n}};
    expect_error(good, opt, odd, a, "not a union of the stored partition's segments");
    // Another matrix: fewer rows, or as many rows with other degrees, or other columns.
    expect_error(good, opt, {}, rmat_graph(8, 8, 11), "covers " + std::to_string(n) + " rows");
    Csr other = a;
    std::rotate(other.indices.begin(), other.indices.begin() + 1, other.indices.end());
    expect_error(good, opt, {}, other, "differs from the matrix's");
    const Csr denser = rmat_graph(9, 16, 11);
    if (denser.num_rows == n) {
        expect_error(good, opt, {}, denser, "accel_gcn partition");
    }
    // Corrupted metadata that would overrun the kernel's shared memory or skip rows.
    AccelGcnPartition too_many_rows = good;
    too_many_rows.blocks.front().info = (too_many_rows.blocks.front().info & ~0xFFFF) | 0xFFFF;
    expect_error(too_many_rows, opt, {}, a, "Algorithm 1's pattern");
    AccelGcnPartition dropped = good;
    dropped.blocks.pop_back();
    dropped.segment_blocks.back() -= 1;
    expect_error(dropped, opt, {}, a, "not covered exactly once");
    AccelGcnPartition tables = good;
    tables.segment_rows.pop_back();
    expect_error(tables, opt, {}, a, "segment tables");
    AccelGcnPartition values = good;
    values.values.assign(values.indices.size(), 1.0f);
    expect_error(values, opt, {}, a, "stored values");
    AccelGcnPartition unsplit = good;
    unsplit.split_rows.push_back(0);
    unsplit.segment_split_rows.back() += 1;
    expect_error(unsplit, opt, {}, a, "split rows");
}

TEST(AccelGcnPartition, SegmentsCutAtEveryRangeBound)
{
    const RowRange ranges[] = {{0, 4}, {4, 10}, {2, 7}};
    const auto segments = halo::accel_gcn_segments(10, ranges);
    ASSERT_EQ(segments.size(), 4u);
    EXPECT_EQ(segments[0].end, 2);
    EXPECT_EQ(segments[1].end, 4);
    EXPECT_EQ(segments[2].end, 7);
    EXPECT_EQ(segments[3].end, 10);
    EXPECT_EQ(halo::accel_gcn_segments(0, {}).size(), 0u);
    const RowRange bad[] = {{3, 11}};
    EXPECT_THROW((void)halo::accel_gcn_segments(10, bad), halo::LogicError);
}

TEST(AccelGcnPartition, EmulatedScheduleMatchesReference)
{
    const std::vector<Csr> graphs = {rmat_graph(9, 8, 5), sparse_er(700, 400, 6, true), long_row()};
    const std::vector<AccelGcnPartitionOptions> options = {{12, 96}, {4, 8}, {1, 2}};
    std::uint64_t seed = 100;
    for (const Csr& a : graphs) {
        for (const auto& opt : options) {
            const std::int64_t n = a.num_rows;
            const RowRange cuts[] = {{0, n / 3}, {n / 3, n}};
            const auto p =
                halo::build_accel_gcn_partition(a.view(), halo::accel_gcn_segments(n, cuts), opt);
            for (const std::int64_t d : {1, 3, 33}) {
                if (d > 3 && a.nnz() > 100000) {
                    continue;  // the 10^6-nonzero row: narrow widths keep the test fast
                }
                SCOPED_TRACE(::testing::Message()
                             << "rows " << n << " warps " << opt.warps_per_block << " d " << d);
                for (std::int64_t s0 = 0; s0 < p.num_segments(); ++s0) {
                    for (std::int64_t s1 = s0 + 1; s1 <= p.num_segments(); ++s1) {
                        check_emulation(a, p, s0, s1, d, ++seed);
                    }
                }
            }
        }
    }
}

TEST(AccelGcnPartition, RejectsBadOptionsAndRanges)
{
    const Csr a = csr_from_rows(2, {{0}, {1}}, false, 0);
    const RowRange all[] = {{0, 2}};
    EXPECT_THROW((void)halo::build_accel_gcn_partition(a.view(), all, {0, 8}), halo::InputError);
    EXPECT_THROW((void)halo::build_accel_gcn_partition(a.view(), all, {33, 33}), halo::InputError);
    EXPECT_THROW((void)halo::build_accel_gcn_partition(a.view(), all, {4, 6}), halo::InputError);
    EXPECT_THROW((void)halo::build_accel_gcn_partition(a.view(), all, {1, 70000}),
                 halo::InputError);
    const RowRange outside[] = {{1, 3}};
    EXPECT_THROW((void)halo::build_accel_gcn_partition(a.view(), outside, {}), halo::InputError);
}

}  // namespace
