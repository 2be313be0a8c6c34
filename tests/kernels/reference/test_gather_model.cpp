// The gather model of SpMM (include/halo/kernels_host/gather_model.hpp), no GPU: a sequence worked
// by hand, both simulations against plain quadratic ones on random matrices, the properties every
// cache has (cold misses, MIN <= LRU, fewer misses with more capacity), thread-count independence,
// and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <list>
#include <random>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels_host/gather_model.hpp"
#include "thread_count.hpp"

namespace {

// One row reading the given columns in order.
halo::Csr one_row(std::int64_t num_cols, const std::vector<halo::local_id>& cols)
{
    halo::Csr a;
    a.num_rows = 1;
    a.num_cols = num_cols;
    a.indices = cols;
    a.indptr = {0, static_cast<halo::offset_t>(cols.size())};
    return a;
}

// A random CSR whose columns follow a skewed law (a few hot columns, many cold), so that caches
// of every size between 1 and the column count hit and miss.
halo::Csr random_csr(std::int64_t rows, std::int64_t cols, std::int64_t max_row, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int64_t> row_len(0, max_row);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    halo::Csr a;
    a.num_rows = rows;
    a.num_cols = cols;
    for (std::int64_t r = 0; r < rows; ++r) {
        const auto len = row_len(rng);
        for (std::int64_t i = 0; i < len; ++i) {
            const double x = u(rng);
            a.indices.push_back(static_cast<halo::local_id>(x * x * x * static_cast<double>(cols)));
        }
        a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));
    }
    return a;
}

// Belady's MIN with bypass, the plain way: on a miss with a full cache, scan the cache and every
// later access for the cached row used farthest ahead.
std::int64_t naive_min(const halo::Csr& a, std::int64_t capacity)
{
    const auto& s = a.indices;
    auto next_use = [&](std::size_t t, halo::local_id k) {
        for (auto u = t + 1; u < s.size(); ++u) {
            if (s[u] == k) {
                return u;
            }
        }
        return s.size();
    };
    std::vector<halo::local_id> cache;
    std::int64_t misses = 0;
    for (std::size_t t = 0; t < s.size(); ++t) {
        const auto k = s[t];
        const auto it = std::find(cache.begin(), cache.end(), k);
        if (it != cache.end()) {
            continue;
        }
        ++misses;
        if (static_cast<std::int64_t>(cache.size()) < capacity) {
            cache.push_back(k);
            continue;
        }
        auto farthest = cache.begin();
        for (auto c = cache.begin(); c != cache.end(); ++c) {
            if (next_use(t, *c) > next_use(t, *farthest)) {
                farthest = c;
            }
        }
        if (next_use(t, *farthest) > next_use(t, k)) {
            *farthest = k;
        }
    }
    return misses;
}

std::int64_t naive_lru(const halo::Csr& a, std::int64_t capacity)
{
    std::list<halo::local_id> cache;  // most recent first
    std::int64_t misses = 0;
    for (const auto k : a.indices) {
        const auto it = std::find(cache.begin(), cache.end(), k);
        if (it != cache.end()) {
            cache.erase(it);
        } else {
            ++misses;
            if (static_cast<std::int64_t>(cache.size()) == capacity) {
                cache.pop_back();
            }
        }
        cache.push_front(k);
    }
    return misses;
}

std::int64_t naive_distinct(const halo::Csr& a)
{
    auto cols = a.indices;
    std::sort(cols.begin(), cols.end());
    return std::unique(cols.begin(), cols.end()) - cols.begin();
}

TEST(GatherModel, ASequenceWorkedByHand)
{
    // 0 1 2 0 1 2 through two rows of cache. LRU always evicts the row read next: every read
    // misses. MIN keeps 0 and 1 and does not keep 2 (used farthest ahead): misses 0, 1, 2, 2.
    const auto a = one_row(3, {0, 1, 2, 0, 1, 2});
    const std::vector<std::int64_t> capacities{1, 2, 3, 10};
    const auto r = halo::gather_traffic(a.view(), capacities);
    ASSERT_EQ(r.size(), 4u);
    EXPECT_EQ(r[1].capacity_rows, 2);
    EXPECT_EQ(r[1].accesses, 6);
    EXPECT_EQ(r[1].distinct, 3);
    EXPECT_EQ(r[1].lru_misses, 6);
    EXPECT_EQ(r[1].min_misses, 4);
    // One row of cache: LRU misses every read; MIN keeps 0 (read again first, a hit at t = 3)
    // and does not keep 1 or 2: 5 misses.
    EXPECT_EQ(r[0].lru_misses, 6);
    EXPECT_EQ(r[0].min_misses, 5);
    // Room for every row: the cold misses only.
    for (const std::size_t i : {2u, 3u}) {
        EXPECT_EQ(r[i].lru_misses, 3) << i;
        EXPECT_EQ(r[i].min_misses, 3) << i;
    }
}

TEST(GatherModel, BothCachesEqualPlainSimulationsOnRandomMatrices)
{
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
        const auto a = random_csr(40, 60, 9, seed);
        const auto distinct = naive_distinct(a);
        std::vector<std::int64_t> capacities;
        for (std::int64_t c = 1; c <= 64; c = c < 8 ? c + 1 : 2 * c) {
            capacities.push_back(c);
        }
        const auto r = halo::gather_traffic(a.view(), capacities);
        ASSERT_EQ(r.size(), capacities.size());
        for (std::size_t i = 0; i < r.size(); ++i) {
            const auto c = capacities[i];
            SCOPED_TRACE(testing::Message() << "seed " << seed << ", capacity " << c);
            EXPECT_EQ(r[i].accesses, a.nnz());
            EXPECT_EQ(r[i].distinct, distinct);
            EXPECT_EQ(r[i].min_misses, naive_min(a, c));
            EXPECT_EQ(r[i].lru_misses, naive_lru(a, c));
            EXPECT_GE(r[i].min_misses, distinct);
            EXPECT_LE(r[i].min_misses, r[i].lru_misses);
            if (i > 0) {  // both are stack algorithms: more rows never miss more
                EXPECT_LE(r[i].min_misses, r[i - 1].min_misses);
                EXPECT_LE(r[i].lru_misses, r[i - 1].lru_misses);
            }
        }
    }
}

TEST(GatherModel, LargerMatrixAndItsThreadCountIndependence)
{
    // Large enough that MIN's heap compacts many times (capacity 7: every 1038 pushes).
    const auto a = random_csr(3000, 5000, 40, 99);
    const std::vector<std::int64_t> capacities{7, 100, 1000, 5000};
    std::vector<halo::GatherTraffic> one;
    {
        halo::testing::ThreadCount threads(1);
        one = halo::gather_traffic(a.view(), capacities);
    }
    std::vector<halo::GatherTraffic> many;
    {
        halo::testing::ThreadCount threads(4);
        many = halo::gather_traffic(a.view(), capacities);
    }
    ASSERT_EQ(one.size(), many.size());
    for (std::size_t i = 0; i < one.size(); ++i) {
        EXPECT_EQ(one[i].min_misses, many[i].min_misses) << i;
        EXPECT_EQ(one[i].lru_misses, many[i].lru_misses) << i;
    }
    EXPECT_EQ(one[0].min_misses, naive_min(a, 7));
    EXPECT_EQ(one[0].lru_misses, naive_lru(a, 7));
    EXPECT_LT(one[2].min_misses, one[2].lru_misses);  // MIN is strictly better somewhere
    EXPECT_EQ(one[3].min_misses, one[3].distinct);
}

TEST(GatherModel, EmptyMatricesAndCapacities)
{
    halo::Csr empty;
    const std::vector<std::int64_t> capacities{1};
    const auto r = halo::gather_traffic(empty.view(), capacities);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].accesses, 0);
    EXPECT_EQ(r[0].min_misses, 0);
    EXPECT_EQ(r[0].lru_misses, 0);
    EXPECT_EQ(halo::cache_capacity_rows(50 << 20, 512), 102400);
    EXPECT_EQ(halo::cache_capacity_rows(100, 512), 1);  // one row at least
}

TEST(GatherModel, BadInputIsRefused)
{
    const auto a = one_row(3, {0, 3});
    const std::vector<std::int64_t> one{1};
    try {
        (void)halo::gather_traffic(a.view(), one);
        FAIL() << "column 3 of a 3-column matrix was accepted";
    } catch (const halo::Error& e) {
        EXPECT_NE(std::string(e.what()).find("column index 3 at nonzero 1"), std::string::npos)
            << e.what();
    }
    const auto ok = one_row(3, {0, 1});
    const std::vector<std::int64_t> zero{0};
    EXPECT_THROW((void)halo::gather_traffic(ok.view(), zero), halo::Error);
    EXPECT_THROW((void)halo::cache_capacity_rows(1024, 0), halo::Error);
}

}  // namespace
