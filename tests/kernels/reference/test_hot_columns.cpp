// MergePath's hot columns for its L2 hints (kernels/preprocess/hot_columns.hpp): the most-read
// columns with ties to the lower id, every other nonzero's index marked, on a hand-made operator
// and on R-MAT against a serial recount; the edges (no hot column, every column hot) and the
// column limit.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo_test.hpp"
#include "preprocess/hot_columns.hpp"
#include "spmm_fixtures.hpp"

namespace {

using halo::mergepath::kColdMark;
using halo::mergepath::mark_cold_columns;

std::int32_t cold(std::int32_t c)
{
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(c) | kColdMark);
}

// Column reads: 0 -> 1, 1 -> 3, 2 -> 2, 3 -> 3, 4 -> 0.
halo::Csr small()
{
    halo::Csr a;
    a.num_rows = 3;
    a.num_cols = 5;
    a.indptr = {0, 3, 6, 9};
    a.indices = {0, 1, 3, 1, 2, 3, 1, 2, 3};
    return a;
}

TEST(HotColumns, MostReadFirstTiesToTheLowerId)
{
    const auto a = small();
    // Two hot: columns 1 and 3 (3 reads each).
    const auto two = mark_cold_columns(a.view(), 2);
    EXPECT_EQ(two.hot, 2);
    EXPECT_EQ(two.hot_reads, 6);
    EXPECT_EQ(two.indices,
              (std::vector<std::int32_t>{cold(0), 1, 3, 1, cold(2), 3, 1, cold(2), 3}));
    // One hot: the tie between 1 and 3 goes to 1.
    const auto one = mark_cold_columns(a.view(), 1);
    EXPECT_EQ(one.hot_reads, 3);
    EXPECT_EQ(one.indices, (std::vector<std::int32_t>{cold(0), 1, cold(3), 1, cold(2), cold(3), 1,
                                                      cold(2), cold(3)}));
    // None hot: every index marked; all (and more) hot: none.
    const auto none = mark_cold_columns(a.view(), 0);
    EXPECT_EQ(none.hot, 0);
    EXPECT_TRUE(std::all_of(none.indices.begin(), none.indices.end(),
                            [](std::int32_t c) { return c < 0; }));
    for (const std::int64_t hot : {std::int64_t{5}, std::int64_t{100}}) {
        const auto all = mark_cold_columns(a.view(), hot);
        EXPECT_EQ(all.hot, 5);
        EXPECT_EQ(all.hot_reads, 9);
        EXPECT_EQ(all.indices, a.indices);
    }
    // An operator without nonzeros.
    halo::Csr empty;
    empty.num_rows = 2;
    empty.num_cols = 4;
    empty.indptr = {0, 0, 0};
    const auto e = mark_cold_columns(empty.view(), 2);
    EXPECT_EQ(e.hot, 2);
    EXPECT_TRUE(e.indices.empty());
}

// R-MAT 14 (past the parallel threshold): the marks equal a serial recount's, and the hot set
// holds the most-read columns.
TEST(HotColumns, RmatAgainstASerialRecount)
{
    const auto a = halo::testing::rmat_csr(14, 7, false);
    std::vector<std::int64_t> reads(static_cast<std::size_t>(a.num_cols), 0);
    for (const auto c : a.indices) {
        ++reads[static_cast<std::size_t>(c)];
    }
    for (const std::int64_t hot : {std::int64_t{1}, std::int64_t{100}, a.num_cols / 3}) {
        const auto m = mark_cold_columns(a.view(), hot);
        ASSERT_EQ(m.indices.size(), a.indices.size());
        std::vector<char> is_hot(reads.size(), 0);
        std::int64_t hot_reads = 0;
        std::int64_t hot_count = 0;
        for (std::size_t k = 0; k < a.indices.size(); ++k) {
            const auto c = a.indices[k];
            ASSERT_EQ(m.indices[k] & static_cast<std::int32_t>(~kColdMark), c) << k;
            const bool h = m.indices[k] >= 0;
            if (h && is_hot[static_cast<std::size_t>(c)] == 0) {
                is_hot[static_cast<std::size_t>(c)] = 1;
                ++hot_count;
                hot_reads += reads[static_cast<std::size_t>(c)];
            }
        }
        EXPECT_EQ(hot_count, hot);  // every hot column of R-MAT 14 is read at these sizes
        EXPECT_EQ(m.hot_reads, hot_reads);
        // No cold column is read more than the least-read hot one.
        std::int64_t least_hot = std::numeric_limits<std::int64_t>::max();
        std::int64_t most_cold = 0;
        for (std::size_t c = 0; c < reads.size(); ++c) {
            if (is_hot[c] != 0) {
                least_hot = std::min(least_hot, reads[c]);
            } else {
                most_cold = std::max(most_cold, reads[c]);
            }
        }
        EXPECT_LE(most_cold, least_hot) << hot;
    }
}

// hot_set alone (what the GPU plan calls on the counts it downloads): many ties, every size,
// against a brute-force order (most reads first, then the lower id).
TEST(HotColumns, HotSetTakesTheLowestIdsAmongTies)
{
    const std::vector<std::uint32_t> reads{3, 1, 3, 0, 3, 1, 2};
    const auto two = halo::mergepath::hot_set(reads, 2);
    EXPECT_EQ(two.is_hot, (std::vector<std::uint8_t>{1, 0, 1, 0, 0, 0, 0}));
    EXPECT_EQ(two.hot_reads, 6);
    const auto four = halo::mergepath::hot_set(reads, 4);
    EXPECT_EQ(four.is_hot, (std::vector<std::uint8_t>{1, 0, 1, 0, 1, 0, 1}));
    const auto five = halo::mergepath::hot_set(reads, 5);
    EXPECT_EQ(five.is_hot, (std::vector<std::uint8_t>{1, 1, 1, 0, 1, 0, 1}));
    EXPECT_EQ(five.hot_reads, 12);
    const auto past = halo::mergepath::hot_set(reads, 100);
    EXPECT_EQ(past.hot, 7);
    EXPECT_EQ(past.hot_reads, 13);
    EXPECT_EQ(halo::mergepath::hot_set({}, 3).hot, 0);

    std::uint64_t state = 12345;
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<std::uint32_t> r(200 + 37 * trial);
        for (auto& v : r) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            v = static_cast<std::uint32_t>((state >> 33) % (trial % 4 == 0 ? 3 : 50));
        }
        std::vector<std::int32_t> order(r.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](std::int32_t x, std::int32_t y) {
            return r[static_cast<std::size_t>(x)] > r[static_cast<std::size_t>(y)];
        });
        const auto hot = static_cast<std::int64_t>(r.size()) * trial / 20;
        std::vector<std::uint8_t> want(r.size(), 0);
        for (std::int64_t i = 0; i < hot; ++i) {
            want[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = 1;
        }
        const auto got = halo::mergepath::hot_set(r, hot);
        EXPECT_EQ(got.hot, hot) << trial;
        EXPECT_EQ(got.is_hot, want) << trial;
    }
}

TEST(HotColumns, RejectsColumnsPastTheMark)
{
    const std::vector<halo::offset_t> indptr{0, 0};
    const halo::CsrView wide{1, std::int64_t{1} << 31, indptr.data(), nullptr, nullptr};
    EXPECT_THROW(mark_cold_columns(wide, 1), halo::InputError);
}

}  // namespace
