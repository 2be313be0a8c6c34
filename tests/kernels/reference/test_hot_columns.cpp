// MergePath's hot columns for its L2 hints (kernels/preprocess/hot_columns.hpp): the most-read
// columns with ties to the lower id, every other nonzero's index marked, on a hand-made operator
// and on R-MAT against a serial recount; the edges (no hot column, every column hot) and the
// column limit.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "halo/csr.hpp"
#include "halo/error.hpp"
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

TEST(HotColumns, RejectsColumnsPastTheMark)
{
    const std::vector<halo::offset_t> indptr{0, 0};
    const halo::CsrView wide{1, std::int64_t{1} << 31, indptr.data(), nullptr, nullptr};
    EXPECT_THROW(mark_cold_columns(wide, 1), halo::InputError);
}

}  // namespace
