// The MergePath-SpMM schedule (host preprocessing, no GPU): the binary search against a merge path
// built item by item, the coverage of every nonzero and row of the requested range by exactly one
// segment, the split-row list against an independent count, and the CPU emulation of the kernel's
// walk against reference::spmm on random, R-MAT, Erdos-Renyi (empty rows) and one-long-row
// matrices, over full and split row ranges and a spread of costs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo_test.hpp"
#include "preprocess/mergepath_schedule.hpp"
#include "spmm_fixtures.hpp"

namespace {

namespace mp = halo::mergepath;
using halo::testing::csr_with_rows;
using halo::testing::erdos_renyi_csr;
using halo::testing::kNaN;
using halo::testing::rmat_csr;
using halo::testing::tolerance;

// The merge path of a range built item by item: point d is (rows consumed, nonzeros consumed)
// after d items, a row end being consumed as soon as all of its nonzeros are.
std::vector<mp::Coordinate> explicit_path(const halo::Csr& a, halo::RowRange range)
{
    std::vector<mp::Coordinate> path;
    std::int64_t r = range.begin;
    std::int64_t j = a.indptr[range.begin];
    path.push_back({r, j});
    while (r < range.end || j < a.indptr[range.end]) {
        if (r < range.end && a.indptr[r + 1] <= j) {
            ++r;
        } else {
            ++j;
        }
        path.push_back({r, j});
    }
    return path;
}

TEST(MergePathSchedule, SearchFollowsTheExplicitPath)
{
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        const auto a = erdos_renyi_csr(200, seed, false);
        const auto b = rmat_csr(7, seed, false);
        for (const halo::Csr* m : {&a, &b}) {
            for (const halo::RowRange range :
                 {m->view().all_rows(), halo::RowRange{m->num_rows / 3, m->num_rows},
                  halo::RowRange{5, 6}, halo::RowRange{7, 7}}) {
                const auto path = explicit_path(*m, range);
                for (std::size_t d = 0; d < path.size(); ++d) {
                    const auto c = mp::merge_path_search(m->indptr.data(), range,
                                                         static_cast<std::int64_t>(d));
                    ASSERT_EQ(c.row, path[d].row) << "diagonal " << d << " seed " << seed;
                    ASSERT_EQ(c.nonzero, path[d].nonzero) << "diagonal " << d << " seed " << seed;
                }
            }
        }
    }
}

// Which segments hold each nonzero and each row end of the range, computed from the stored start
// rows only through the diagonal identity; checks that segments tile the path and that the split
// rows are exactly the rows whose nonzeros lie in more than one segment.
void check_coverage(const halo::Csr& a, halo::RowRange range, const mp::Schedule& s)
{
    SCOPED_TRACE("range [" + std::to_string(range.begin) + ", " + std::to_string(range.end) +
                 "), cost " + std::to_string(s.cost));
    const std::int64_t first = a.indptr[range.begin];
    const std::int64_t nnz = a.indptr[range.end] - first;
    ASSERT_EQ(s.items, range.size() + nnz);
    ASSERT_EQ(s.num_segments(), (s.items + s.cost - 1) / s.cost);
    ASSERT_EQ(s.start(0).row, range.begin);
    ASSERT_EQ(s.start(0).nonzero, first);
    ASSERT_EQ(s.start(s.num_segments()).row, range.end);
    ASSERT_EQ(s.start(s.num_segments()).nonzero, a.indptr[range.end]);

    // segment_of_nz[j - first]: the segment that holds nonzero j; segments of each row.
    std::vector<std::int64_t> segment_of_nz(static_cast<std::size_t>(nnz), -1);
    std::vector<std::set<std::int64_t>> segments_of_row(static_cast<std::size_t>(range.size()));
    std::vector<int> row_end_count(static_cast<std::size_t>(range.size()), 0);
    for (std::int64_t k = 0; k < s.num_segments(); ++k) {
        const auto b = s.start(k);
        const auto e = s.start(k + 1);
        ASSERT_LE(b.row, e.row);
        ASSERT_LE(b.nonzero, e.nonzero);
        ASSERT_LE((e.row - b.row) + (e.nonzero - b.nonzero), s.cost);
        ASSERT_GE(b.row, range.begin);
        ASSERT_LE(e.row, range.end);
        for (std::int64_t j = b.nonzero; j < e.nonzero; ++j) {
            ASSERT_EQ(segment_of_nz[static_cast<std::size_t>(j - first)], -1) << "nonzero " << j;
            segment_of_nz[static_cast<std::size_t>(j - first)] = k;
        }
        for (std::int64_t r = b.row; r < e.row; ++r) {
            ++row_end_count[static_cast<std::size_t>(r - range.begin)];
        }
    }
    for (std::int64_t r = range.begin; r < range.end; ++r) {
        ASSERT_EQ(row_end_count[static_cast<std::size_t>(r - range.begin)], 1) << "row " << r;
        for (std::int64_t j = a.indptr[r]; j < a.indptr[r + 1]; ++j) {
            const auto seg = segment_of_nz[static_cast<std::size_t>(j - first)];
            ASSERT_GE(seg, 0) << "nonzero " << j << " of row " << r << " in no segment";
            segments_of_row[static_cast<std::size_t>(r - range.begin)].insert(seg);
        }
    }
    std::vector<std::int64_t> expected_split;
    for (std::int64_t r = range.begin; r < range.end; ++r) {
        if (segments_of_row[static_cast<std::size_t>(r - range.begin)].size() > 1) {
            expected_split.push_back(r);
        }
    }
    // A row whose nonzeros all sit in one segment may still be listed when the boundary falls
    // between its last nonzero and its end (the next segment then adds an empty part, skipped);
    // every truly split row must be listed, and nothing outside the range.
    for (const auto r : expected_split) {
        ASSERT_TRUE(std::binary_search(s.split_rows.begin(), s.split_rows.end(), r))
            << "split row " << r << " not listed";
    }
    ASSERT_TRUE(std::is_sorted(s.split_rows.begin(), s.split_rows.end()));
    ASSERT_TRUE(std::adjacent_find(s.split_rows.begin(), s.split_rows.end()) == s.split_rows.end());
    for (const auto r : s.split_rows) {
        ASSERT_GE(r, range.begin);
        ASSERT_LT(r, range.end);
        ASSERT_GT(a.row_nnz(r), 0) << "empty row " << r << " listed as split";
    }
}

// Emulates the kernel's walk on y poisoned with NaN and compares with reference::spmm: a row of
// the range that the walk never writes stays NaN, a row outside it that it writes loses its NaN.
void check_emulation(const halo::Csr& a, halo::RowRange range, const mp::Schedule& s,
                     std::int64_t width, std::uint64_t seed)
{
    SCOPED_TRACE("width " + std::to_string(width) + ", cost " + std::to_string(s.cost));
    const auto xs =
        halo::testing::random_floats(static_cast<std::size_t>(a.num_cols * width), seed);
    const halo::DenseView<const float> x{xs.data(), a.num_cols, width, width};
    const std::int64_t ld = width + 3;  // padding: never written
    std::vector<float> got(static_cast<std::size_t>(a.num_rows * ld), kNaN);
    std::vector<float> want(static_cast<std::size_t>(a.num_rows * width), kNaN);
    const auto counts =
        mp::emulate_merge_path_spmm(a.view(), s, x, {got.data(), a.num_rows, width, ld});
    halo::reference::spmm(a.view(), x, {want.data(), a.num_rows, width, width}, range);
    EXPECT_EQ(counts.plain_rows + counts.split_rows, range.size());
    EXPECT_EQ(counts.split_rows, static_cast<std::int64_t>(s.split_rows.size()));
    float max_a = 1.0f;
    for (const float v : a.values) {
        max_a = std::max(max_a, std::abs(v));
    }
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        const bool inside = i >= range.begin && i < range.end;
        // A row is a sum of row_nnz products |a| * |x| <= max_a (x in [-1, 1)): scale bounds the
        // sum of the terms' magnitudes. The emulation sums a split row in parts and then adds the
        // parts, the reference in one pass: two different roundings of the same sum, each a few
        // eps * scale in practice (random signs), hence k = 4.
        const float tol = tolerance<float>(4.0, static_cast<double>(a.row_nnz(i)) * max_a);
        for (std::int64_t c = 0; c < ld; ++c) {
            const float g = got[static_cast<std::size_t>(i * ld + c)];
            if (!inside || c >= width) {
                ASSERT_TRUE(std::isnan(g)) << "row " << i << " column " << c << " written";
                continue;
            }
            const float w = want[static_cast<std::size_t>(i * width + c)];
            ASSERT_FALSE(std::isnan(g)) << "row " << i << " column " << c << " not written";
            ASSERT_NEAR(g, w, tol) << "row " << i << " column " << c;
        }
    }
}

void check_all(const halo::Csr& a, std::uint64_t seed, const std::vector<std::int64_t>& widths)
{
    const std::int64_t n = a.num_rows;
    const std::vector<halo::RowRange> ranges = {{0, n}, {0, n / 3}, {n / 3, n}};
    for (const auto range : ranges) {
        for (const std::int64_t cost : {1, 2, 7, 30, 50, 1000, 1 << 30}) {
            const auto s = mp::make_schedule(a.view(), range, cost);
            check_coverage(a, range, s);
            for (const auto width : widths) {
                check_emulation(a, range, s, width, ++seed);
            }
        }
    }
}

TEST(MergePathSchedule, RmatPatternAndValued)
{
    check_all(rmat_csr(9, 3, false), 100, {1, 3, 33});
    check_all(rmat_csr(9, 4, true), 200, {1, 5});
}

TEST(MergePathSchedule, ErdosRenyiWithEmptyRows)
{
    const auto a = erdos_renyi_csr(1500, 5, true);
    ASSERT_GT(std::count(a.indptr.begin() + 1, a.indptr.end(), a.indptr[1]), 1);
    check_all(a, 300, {1, 4});
}

TEST(MergePathSchedule, OneRowOfAMillionNonzeros)
{
    // Every segment but the last lies inside the one row: it is split unless one segment holds it.
    const auto a = csr_with_rows({1'000'000}, 4096);
    for (const std::int64_t cost : {30, 1'000'000, 1'000'001}) {
        const auto s = mp::make_schedule(a.view(), a.view().all_rows(), cost);
        check_coverage(a, a.view().all_rows(), s);
        EXPECT_EQ(s.split_rows.size(), cost > 1'000'000 ? 0u : 1u) << "cost " << cost;
        check_emulation(a, a.view().all_rows(), s, 1, 400 + static_cast<std::uint64_t>(cost));
    }
}

TEST(MergePathSchedule, LongRowsBetweenEmptyRuns)
{
    std::vector<std::int64_t> lengths(300, 0);
    lengths[0] = 500;
    lengths[150] = 77;
    lengths[298] = 1000;
    lengths[299] = 1;
    const auto a = csr_with_rows(lengths, 64);
    check_all(a, 500, {1, 32});
}

TEST(MergePathSchedule, OneRowAndNoRows)
{
    const auto one = csr_with_rows({3}, 5);
    check_all(one, 600, {1, 2});
    const auto single_empty = csr_with_rows({0}, 5);
    check_all(single_empty, 700, {1});
    const halo::Csr none;
    const auto s = mp::make_schedule(none.view(), {0, 0}, 10);
    EXPECT_EQ(s.num_segments(), 0);
    EXPECT_EQ(s.items, 0);
    EXPECT_TRUE(s.split_rows.empty());
}

TEST(MergePathSchedule, EmptyRangeInsideAMatrix)
{
    const auto a = rmat_csr(6, 9, false);
    const auto s = mp::make_schedule(a.view(), {10, 10}, 5);
    EXPECT_EQ(s.num_segments(), 0);
    check_emulation(a, {10, 10}, s, 3, 800);
}

TEST(MergePathSchedule, CostsFollowThePaper)
{
    EXPECT_EQ(mp::default_cost(1), 50);
    EXPECT_EQ(mp::default_cost(2), 50);
    EXPECT_EQ(mp::default_cost(4), 15);
    EXPECT_EQ(mp::default_cost(8), 15);
    EXPECT_EQ(mp::default_cost(16), 20);
    EXPECT_EQ(mp::default_cost(32), 30);
    EXPECT_EQ(mp::default_cost(64), 35);
    EXPECT_EQ(mp::default_cost(128), 50);
    EXPECT_EQ(mp::default_cost(1000), 50);
    // The parallelism floor lowers the cost of a small range only.
    EXPECT_EQ(mp::effective_cost(13264, 30, 1024), 13);
    EXPECT_EQ(mp::effective_cost(10'000'000, 30, 1024), 30);
    EXPECT_EQ(mp::effective_cost(100, 30, 1024), 1);
    EXPECT_EQ(mp::effective_cost(100, 30, 0), 30);
    EXPECT_EQ(mp::effective_cost(0, 30, 1024), 30);
    EXPECT_THROW((void)mp::effective_cost(100, 0, 1024), halo::LogicError);
}

TEST(MergePathSchedule, RejectsBadInput)
{
    const auto a = csr_with_rows({2, 0, 4}, 4);
    EXPECT_THROW((void)mp::make_schedule(a.view(), {0, 4}, 5), halo::InputError);
    EXPECT_THROW((void)mp::make_schedule(a.view(), {2, 1}, 5), halo::InputError);
    EXPECT_THROW((void)mp::make_schedule(a.view(), {-1, 2}, 5), halo::InputError);
    EXPECT_THROW((void)mp::make_schedule(a.view(), {0, 3}, 0), halo::InputError);
}

}  // namespace
