// MaxK on the CPU (include/halo/kernels_host/maxk.hpp): the top-k reference and its tie/NaN rule on
// hand-computed rows; the GPU's threshold search (kernels/cuda/maxk/maxk_select.hpp) emulated on
// the host against the reference; CBSR checks; edge groups (hand-computed, coverage on random
// graphs and a 10^5-nonzero row, validate() on every kind of corruption); the SSD reference on a
// hand-computed product and against reference::spmm on the densified CBSR; and the GPU group
// schedule emulated (reference::ssd_edge_groups) against the reference, with row ranges and NaN
// poisoning.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda/maxk/maxk_select.hpp"
#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels_host/maxk.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo_test.hpp"
#include "spmm_fixtures.hpp"

namespace {

using halo::Cbsr;
using halo::Csr;
using halo::EdgeGroups;
using halo::RowRange;
using halo::testing::HostMatrix;
using halo::testing::kNaN;

constexpr float kInf = std::numeric_limits<float>::infinity();

RowRange all_rows(const Csr& a)
{
    return {0, a.num_rows};
}

std::uint32_t bits(float v)
{
    return std::bit_cast<std::uint32_t>(v);
}

// Top-k of one row given as a vector.
Cbsr topk_row(const std::vector<float>& row, std::int64_t k)
{
    return halo::reference::maxk_topk(
        halo::dense_view<const float>(row.data(), 1, static_cast<std::int64_t>(row.size())), k);
}

std::vector<std::int32_t> columns(const Cbsr& s, std::int64_t i = 0)
{
    return {s.indices.begin() + i * s.k, s.indices.begin() + (i + 1) * s.k};
}

// Checks that `body` throws E whose message contains `part`.
template <typename E>
void expect_error(const std::function<void()>& body, const std::string& part)
{
    try {
        body();
        ADD_FAILURE() << "no exception; expected one containing '" << part << "'";
    } catch (const E& e) {
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
            << "message: " << e.what() << "\nexpected to contain: " << part;
    }
}

TEST(MaxkTopk, HandComputedRows)
{
    const auto s = topk_row({3, 1, 4, 1, 5}, 2);
    EXPECT_EQ(columns(s), (std::vector<std::int32_t>{2, 4}));
    EXPECT_EQ(s.values, (std::vector<float>{4, 5}));

    // Ties: the lower column wins, output in column order.
    EXPECT_EQ(columns(topk_row({1, 1, 1, 1}, 2)), (std::vector<std::int32_t>{0, 1}));
    EXPECT_EQ(columns(topk_row({2, 7, 2, 7, 2}, 3)), (std::vector<std::int32_t>{0, 1, 3}));
    // -0.0 ranks below +0.0.
    EXPECT_EQ(columns(topk_row({-0.0f, 0.0f}, 1)), (std::vector<std::int32_t>{1}));
    EXPECT_EQ(columns(topk_row({0.0f, -0.0f}, 1)), (std::vector<std::int32_t>{0}));
    // Negative values and infinities.
    EXPECT_EQ(columns(topk_row({-3, -kInf, -1, -2}, 2)), (std::vector<std::int32_t>{2, 3}));
    EXPECT_EQ(columns(topk_row({kInf, 1e38f, -kInf}, 1)), (std::vector<std::int32_t>{0}));
    // k == width keeps everything.
    const auto all = topk_row({5, -1, 2}, 3);
    EXPECT_EQ(columns(all), (std::vector<std::int32_t>{0, 1, 2}));
    EXPECT_EQ(all.values, (std::vector<float>{5, -1, 2}));
}

TEST(MaxkTopk, NanRanksAboveInfinity)
{
    const float nan1 = std::bit_cast<float>(0x7FC00001u);
    const float nan2 = std::bit_cast<float>(0xFFC00002u);  // negative NaN
    const auto one = topk_row({kInf, nan1, 5, nan2}, 1);
    EXPECT_EQ(columns(one), (std::vector<std::int32_t>{1}));
    EXPECT_EQ(bits(one.values[0]), 0x7FC00001u) << "the NaN's bits are kept";
    const auto three = topk_row({kInf, nan1, 5, nan2}, 3);
    EXPECT_EQ(columns(three), (std::vector<std::int32_t>{0, 1, 3}));
    EXPECT_EQ(bits(three.values[2]), 0xFFC00002u);
}

TEST(MaxkTopk, OrderKeyIsMonotone)
{
    const std::vector<float> ordered = {-kInf,  -1e30f, -1.0f, -1e-40f, -0.0f, 0.0f,
                                        1e-40f, 1.0f,   1e30f, kInf,    kNaN};
    for (std::size_t i = 1; i < ordered.size(); ++i) {
        EXPECT_LT(halo::maxk_order_key(ordered[i - 1]), halo::maxk_order_key(ordered[i]))
            << ordered[i - 1] << " vs " << ordered[i];
    }
    EXPECT_EQ(halo::maxk_order_key(std::bit_cast<float>(0xFFFFFFFFu)), 0xFFFFFFFFu);
    EXPECT_GT(halo::maxk_order_key(-kInf), 0u) << "0 marks absent entries in the kernel";
    const auto r = halo::testing::random_floats(2000, 5, -1e3f, 1e3f);
    for (std::size_t i = 1; i < r.size(); ++i) {
        EXPECT_EQ(r[i - 1] < r[i], halo::maxk_order_key(r[i - 1]) < halo::maxk_order_key(r[i]));
        EXPECT_EQ(halo::maxk::order_key(bits(r[i])), halo::maxk_order_key(r[i]))
            << "host and kernel keys differ";
    }
}

// The kernel's selection on the host: keys, the threshold from select_threshold (counts by
// plain loops instead of warp sums, with the number of counts recorded), and the compaction in
// column order.
Cbsr emulate_kernel_topk(const HostMatrix& x, std::int64_t k, int* max_counts)
{
    Cbsr out(x.rows, x.cols, k);
    for (std::int64_t i = 0; i < x.rows; ++i) {
        std::vector<std::uint32_t> keys(static_cast<std::size_t>(x.cols));
        for (std::int64_t j = 0; j < x.cols; ++j) {
            keys[j] = halo::maxk::order_key(bits(x(i, j)));
        }
        int counts = 0;
        const auto th = halo::maxk::select_threshold(static_cast<std::uint32_t>(k), [&](auto t) {
            ++counts;
            return static_cast<std::uint32_t>(std::count_if(
                keys.begin(), keys.end(), [t](std::uint32_t key) { return key >= t; }));
        });
        *max_counts = std::max(*max_counts, counts);
        std::int64_t taken = 0;
        std::uint32_t ties = 0;
        for (std::int64_t j = 0; j < x.cols; ++j) {
            const bool tie = keys[j] == th.key;
            if (keys[j] > th.key || (tie && ties < th.ties)) {
                EXPECT_LT(taken, k) << "row " << i << " selects more than k";
                if (taken < k) {
                    out.values[i * k + taken] = x(i, j);
                    out.indices[i * k + taken] = static_cast<halo::cbsr_index>(j);
                }
                ++taken;
            }
            ties += tie ? 1 : 0;
        }
        EXPECT_EQ(taken, k) << "row " << i;
    }
    return out;
}

// Rows with many ties (values from a small set), random values, NaNs, signed zeros and
// infinities, at widths 1 .. 1024 and every kind of k.
HostMatrix adversarial_rows(std::int64_t rows, std::int64_t dim, std::uint64_t seed)
{
    HostMatrix x(rows, dim);
    std::mt19937_64 rng(seed);
    const std::vector<float> specials = {0.0f, -0.0f, kInf, -kInf, kNaN, 1.0f, -1.0f};
    for (std::int64_t i = 0; i < rows; ++i) {
        const int kind = static_cast<int>(i % 4);
        for (std::int64_t j = 0; j < dim; ++j) {
            float v = 0;
            switch (kind) {
                case 0:
                    v = std::uniform_real_distribution<float>(-1, 1)(rng);
                    break;
                case 1:
                    v = static_cast<float>(std::uniform_int_distribution<int>(-2, 2)(rng));
                    break;
                case 2:
                    v = specials[std::uniform_int_distribution<std::size_t>(
                        0, specials.size() - 1)(rng)];
                    break;
                default:
                    v = 3.0f;  // all equal
            }
            x(i, j) = v;
        }
    }
    return x;
}

void expect_same_cbsr(const Cbsr& want, const Cbsr& got, const std::string& what)
{
    ASSERT_EQ(want.values.size(), got.values.size()) << what;
    for (std::size_t e = 0; e < want.values.size(); ++e) {
        const auto i = static_cast<std::int64_t>(e) / want.k;
        ASSERT_EQ(want.indices[e], got.indices[e])
            << what << ": row " << i << " entry " << e % want.k << " column";
        ASSERT_EQ(bits(want.values[e]), bits(got.values[e]))
            << what << ": row " << i << " entry " << e % want.k << " value bits";
    }
}

TEST(MaxkTopk, KernelSelectionEmulatedMatchesReference)
{
    int max_counts = 0;
    for (const std::int64_t dim : {1, 2, 7, 31, 32, 33, 100, 256, 1000, 1024}) {
        const auto x = adversarial_rows(24, dim, 100 + dim);
        for (const std::int64_t k : {1, 2, 3, 4, 8, 16, 32, 64, 100, 1000, 1024}) {
            for (const std::int64_t kk : {k, dim}) {
                if (kk > dim) {
                    continue;
                }
                const auto want = halo::reference::maxk_topk(x.cview(), kk);
                const auto got = emulate_kernel_topk(x, kk, &max_counts);
                expect_same_cbsr(want, got,
                                 "width " + std::to_string(dim) + ", k " + std::to_string(kk));
            }
        }
    }
    EXPECT_LE(max_counts, 33) << "the bitwise search takes at most 32 + 1 counts";
}

TEST(MaxkTopk, ReferenceOutputIsValidCbsr)
{
    const auto x = adversarial_rows(64, 300, 9);
    const auto s = halo::reference::maxk_topk(x.cview(), 17);
    EXPECT_NO_THROW(halo::validate(s.view(), "top-k"));
    // The kept entries are the largest: every dropped key <= every kept key.
    for (std::int64_t i = 0; i < x.rows; ++i) {
        std::uint32_t min_kept = 0xFFFFFFFFu;
        std::vector<char> kept(300, 0);
        for (std::int64_t t = 0; t < s.k; ++t) {
            kept[s.indices[i * s.k + t]] = 1;
            min_kept = std::min(min_kept, halo::maxk_order_key(s.values[i * s.k + t]));
        }
        for (std::int64_t j = 0; j < 300; ++j) {
            if (kept[j] == 0) {
                EXPECT_LE(halo::maxk_order_key(x(i, j)), min_kept) << "row " << i << " col " << j;
            }
        }
    }
}

TEST(MaxkCbsr, ShapeAndContentChecks)
{
    EXPECT_THROW(Cbsr(2, 0, 1), halo::LogicError);
    EXPECT_THROW(Cbsr(2, 1025, 1), halo::LogicError);
    EXPECT_THROW(Cbsr(2, 8, 9), halo::LogicError);
    EXPECT_THROW(Cbsr(2, 8, 0), halo::LogicError);
    EXPECT_NO_THROW(Cbsr(0, 1024, 1024));
    Cbsr s(2, 8, 2);
    s.indices = {0, 7, 3, 5};
    EXPECT_NO_THROW(halo::validate(s.view(), "s"));
    s.indices = {0, 8, 3, 5};
    expect_error<halo::InputError>([&] { halo::validate(s.view(), "s.h5"); },
                                   "s.h5: row 0 entry 1: column 8 outside [0, 8)");
    s.indices = {0, 7, 5, 5};
    expect_error<halo::InputError>([&] { halo::validate(s.view(), "s"); },
                                   "row 1 entry 1: column 5 does not follow column 5");
    s.indices = {0, 7, -1, 5};
    expect_error<halo::InputError>([&] { halo::validate(s.view(), "s"); }, "column -1");
}

// ---------------------------------------------------------------------------------------------
// Edge groups.

Csr csr_from_lengths(const std::vector<std::int64_t>& lengths, std::int64_t num_cols, bool valued,
                     std::uint64_t seed)
{
    return halo::testing::csr_with_rows(lengths, num_cols, valued, seed);
}

TEST(MaxkEdgeGroups, HandComputed)
{
    const Csr a = csr_from_lengths({3, 0, 7, 4}, 5, false, 0);
    const auto g = halo::build_edge_groups(a.view(), {4});
    EXPECT_EQ(g.group_size, 4);
    EXPECT_EQ(g.num_rows, 4);
    EXPECT_EQ(g.nnz, 14);
    EXPECT_EQ(g.row, (std::vector<std::int32_t>{0, 1, 2, 2, 3}));
    EXPECT_EQ(g.count, (std::vector<std::int32_t>{3, 0, 4, 3, 4}));
    EXPECT_EQ(g.first, (std::vector<std::int64_t>{0, 3, 3, 7, 10}));
    EXPECT_EQ(g.update_mode, (std::vector<std::int32_t>{0, 0, 1, 1, 0}));
    EXPECT_EQ(halo::shared_rows(g), (std::vector<std::int32_t>{2}));
    const auto r = halo::edge_group_range(g, {1, 3});
    EXPECT_EQ(r.begin, 1);
    EXPECT_EQ(r.end, 4);
    const auto none = halo::edge_group_range(g, {2, 2});
    EXPECT_EQ(none.begin, none.end);
    const auto all = halo::edge_group_range(g, {0, 4});
    EXPECT_EQ(all.begin, 0);
    EXPECT_EQ(all.end, 5);
    EXPECT_NO_THROW(halo::validate(g, a.view()));
}

TEST(MaxkEdgeGroups, LongestFirstIsAStableSortByCount)
{
    const Csr a = csr_from_lengths({3, 0, 7, 4, 1, 4}, 5, false, 0);
    const auto g = halo::build_edge_groups(a.view(), {4});
    ASSERT_EQ(g.count, (std::vector<std::int32_t>{3, 0, 4, 3, 4, 1, 4}));
    EXPECT_EQ(halo::longest_first(g, {0, 7}), (std::vector<std::int32_t>{2, 4, 6, 0, 3, 5, 1}));
    EXPECT_EQ(halo::longest_first(g, {3, 6}), (std::vector<std::int32_t>{4, 3, 5}));
    EXPECT_TRUE(halo::longest_first(g, {2, 2}).empty());
    EXPECT_THROW((void)halo::longest_first(g, {0, 8}), halo::InputError);
    EXPECT_THROW((void)halo::longest_first(g, {3, 2}), halo::InputError);
    auto bad = g;
    bad.count[1] = 5;
    EXPECT_THROW((void)halo::longest_first(bad, {0, 7}), halo::InputError);

    // Large groups take the comparison sort; both paths give the same order on random counts.
    const Csr r = halo::testing::rmat_csr(9, 7, false);
    const auto small = halo::build_edge_groups(r.view(), {5});
    auto large = small;
    large.group_size = (1 << 16) + 1;
    const auto want = halo::longest_first(small, {0, small.size()});
    EXPECT_EQ(halo::longest_first(large, {0, large.size()}), want);
    for (std::size_t i = 1; i < want.size(); ++i) {
        const auto p = want[i - 1];
        const auto q = want[i];
        ASSERT_TRUE(small.count[p] > small.count[q] || (small.count[p] == small.count[q] && p < q))
            << "positions " << i - 1 << " and " << i;
    }
}

// Every nonzero of every row in exactly one group of that row, in order; sizes within bounds;
// update_mode as the row's group count says.
void expect_coverage(const Csr& a, const EdgeGroups& g)
{
    std::vector<std::int32_t> cover(static_cast<std::size_t>(a.nnz()), 0);
    std::vector<std::int64_t> groups_of_row(static_cast<std::size_t>(a.num_rows), 0);
    for (std::int64_t q = 0; q < g.size(); ++q) {
        ASSERT_GE(g.count[q], 0);
        ASSERT_LE(g.count[q], g.group_size);
        ASSERT_GE(g.first[q], a.indptr[g.row[q]]);
        ASSERT_LE(g.first[q] + g.count[q], a.indptr[g.row[q] + 1]);
        for (auto e = g.first[q]; e < g.first[q] + g.count[q]; ++e) {
            ++cover[e];
        }
        ++groups_of_row[g.row[q]];
    }
    for (std::int64_t e = 0; e < a.nnz(); ++e) {
        ASSERT_EQ(cover[e], 1) << "nonzero " << e;
    }
    for (std::int64_t q = 0; q < g.size(); ++q) {
        ASSERT_EQ(g.update_mode[q], groups_of_row[g.row[q]] > 1 ? 1 : 0) << "group " << q;
    }
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        const auto len = a.row_nnz(i);
        ASSERT_EQ(groups_of_row[i],
                  std::max<std::int64_t>(1, (len + g.group_size - 1) / g.group_size))
            << "row " << i;
    }
}

TEST(MaxkEdgeGroups, CoverRandomGraphsAndALongRow)
{
    for (const std::int32_t size : {1, 3, 16, 64, 1000}) {
        SCOPED_TRACE(testing::Message() << "group size " << size);
        const Csr rmat = halo::testing::rmat_csr(10, 3, false);
        const auto g = halo::build_edge_groups(rmat.view(), {size});
        expect_coverage(rmat, g);
        EXPECT_NO_THROW(halo::validate(g, rmat.view()));
        const Csr er = halo::testing::erdos_renyi_csr(2000, 4, false);
        const auto ge = halo::build_edge_groups(er.view(), {size});
        expect_coverage(er, ge);
        EXPECT_NO_THROW(halo::validate(ge, er.view()));
    }
    const Csr longrow = csr_from_lengths({5, 100000, 0, 64, 65}, 1000, false, 0);
    const auto g = halo::build_edge_groups(longrow.view(), {64});
    expect_coverage(longrow, g);
    EXPECT_EQ(g.size(), 1 + 1563 + 1 + 1 + 2);
    EXPECT_EQ(halo::shared_rows(g), (std::vector<std::int32_t>{1, 4}));
    EXPECT_NO_THROW(halo::validate(g, longrow.view()));
}

TEST(MaxkEdgeGroups, OptionsAreChecked)
{
    const Csr a = csr_from_lengths({2}, 2, false, 0);
    expect_error<halo::InputError>([&] { (void)halo::build_edge_groups(a.view(), {0}); },
                                   "edge group size 0");
    expect_error<halo::InputError>([&] { (void)halo::build_edge_groups(a.view(), {-3}); },
                                   "edge group size -3");
}

TEST(MaxkEdgeGroups, ValidateNamesTheCorruption)
{
    const Csr a = csr_from_lengths({3, 0, 7, 4}, 5, false, 0);
    const auto good = halo::build_edge_groups(a.view(), {4});
    auto corrupt = [&](const std::function<void(EdgeGroups&)>& change, const std::string& part) {
        EdgeGroups g = good;
        change(g);
        expect_error<halo::InputError>([&] { halo::validate(g, a.view(), "data.h5:/parts/0"); },
                                       part);
    };
    corrupt([](EdgeGroups& g) { g.count.pop_back(); }, "array lengths differ");
    corrupt([](EdgeGroups& g) { g.group_size = 0; }, "edge group size 0");
    corrupt([](EdgeGroups& g) { g.nnz = 13; }, "built for 4 rows and 13 nonzeros");
    corrupt([](EdgeGroups& g) { g.num_rows = 5; }, "built for 5 rows");
    corrupt([](EdgeGroups& g) { g.row[2] = 7; },
            "data.h5:/parts/0: group 2: row 7, expected row 2");
    corrupt([](EdgeGroups& g) { g.row[1] = 0; }, "group 1: row 0, expected row 1");
    corrupt([](EdgeGroups& g) { g.first[3] = 8; }, "group 3 (row 2): first 8, expected 7");
    corrupt([](EdgeGroups& g) { g.count[0] = 2; }, "group 1: row 1, expected row 0");
    corrupt([](EdgeGroups& g) { g.count[2] = 5; }, "group 2 (row 2): count 5 outside [0, 4]");
    corrupt([](EdgeGroups& g) { g.count[2] = -1; }, "count -1 outside [0, 4]");
    corrupt([](EdgeGroups& g) { g.count[1] = 1; }, "group 1 (row 1): count 1 runs past");
    corrupt([](EdgeGroups& g) { g.count[4] = 0; }, "group 4 (row 3): count 0 in a row of 4");
    corrupt([](EdgeGroups& g) { g.update_mode[2] = 0; },
            "group 2 (row 2): update_mode 0, expected 1 (the row has 2 groups)");
    corrupt([](EdgeGroups& g) { g.update_mode[0] = 1; },
            "group 0 (row 0): update_mode 1, expected 0 (the row has 1 group)");
    corrupt(
        [](EdgeGroups& g) {
            g.row.push_back(3);
            g.count.push_back(0);
            g.first.push_back(14);
            g.update_mode.push_back(0);
        },
        "group 5: row 3 after the last row 3 was covered (1 extra groups)");
    corrupt(
        [](EdgeGroups& g) {
            g.row.pop_back();
            g.count.pop_back();
            g.first.pop_back();
            g.update_mode.pop_back();
        },
        "4 groups end before row 3 is covered");
    // Groups of another operator with the same shape.
    const Csr other = csr_from_lengths({3, 1, 6, 4}, 5, false, 0);
    expect_error<halo::InputError>([&] { halo::validate(good, other.view(), "g"); },
                                   "g: group 1 (row 1): count 0 in a row of 1");
}

// ---------------------------------------------------------------------------------------------
// The SSD operator.

TEST(MaxkSsd, HandComputed)
{
    // A = [[2, 0, 1], [0, 0, 0], [1, 3, 0]] (valued), S (3 x 4, k = 2):
    //   row 0: (1, 5), (3, -1);  row 1: (0, 2), (1, 1);  row 2: (2, 4), (3, 3).
    Csr a;
    a.num_rows = 3;
    a.num_cols = 3;
    a.indptr = {0, 2, 2, 4};
    a.indices = {0, 2, 0, 1};
    a.values = {2, 1, 1, 3};
    Cbsr s(3, 4, 2);
    s.indices = {1, 3, 0, 1, 2, 3};
    s.values = {5, -1, 2, 1, 4, 3};
    HostMatrix out(3, 4, 6);
    halo::reference::ssd(a.view(), s.view(), out.view(), {0, 3});
    // Row 0 = 2 * S0 + 1 * S2 = [0, 10, 4, -2 + 3]; row 1 = 0; row 2 = S0 + 3 * S1 = [6, 8, 0, -1].
    const std::vector<std::vector<float>> want = {{0, 10, 4, 1}, {0, 0, 0, 0}, {6, 8, 0, -1}};
    for (std::int64_t i = 0; i < 3; ++i) {
        for (std::int64_t j = 0; j < 4; ++j) {
            EXPECT_EQ(out(i, j), want[i][j]) << "(" << i << ", " << j << ")";
        }
        EXPECT_TRUE(std::isnan(out(i, 4)) && std::isnan(out(i, 5))) << "padding of row " << i;
    }
    // A range leaves the other rows untouched.
    HostMatrix part(3, 4);
    halo::reference::ssd(a.view(), s.view(), part.view(), {2, 3});
    EXPECT_TRUE(std::isnan(part(0, 0)) && std::isnan(part(1, 3)));
    EXPECT_EQ(part(2, 1), 8.0f);
    // The group schedule gives the same (exact small integers, any order).
    for (const std::int32_t size : {1, 2, 3}) {
        HostMatrix emu(3, 4, 6);
        halo::reference::ssd_edge_groups(halo::build_edge_groups(a.view(), {size}), a.view(),
                                         s.view(), emu.view(), {0, 3});
        for (std::int64_t i = 0; i < 3; ++i) {
            for (std::int64_t j = 0; j < 4; ++j) {
                EXPECT_EQ(emu(i, j), want[i][j]) << "group size " << size;
            }
        }
    }
}

// Random S of rows x dim with k entries per row: top-k of random values.
Cbsr random_cbsr(std::int64_t rows, std::int64_t dim, std::int64_t k, std::uint64_t seed)
{
    const auto x = halo::testing::random_matrix(rows, dim, dim, seed);
    return halo::reference::maxk_topk(x.cview(), k);
}

TEST(MaxkSsd, EqualsSpmmOnTheDenseEmbedding)
{
    const Csr a = halo::testing::rmat_csr(9, 11, true);
    for (const std::int64_t k : {1, 4, 32, 64}) {
        const auto s = random_cbsr(a.num_cols, 64, k, 20 + k);
        HostMatrix dense(a.num_cols, 64);
        halo::reference::cbsr_to_dense(s.view(), dense.view());
        HostMatrix want(a.num_rows, 64);
        halo::reference::spmm(a.view(), dense.cview(), want.view());
        HostMatrix got(a.num_rows, 64);
        halo::reference::ssd(a.view(), s.view(), got.view(), all_rows(a));
        // Same products in the same order; the skipped ones are exact zeros.
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            for (std::int64_t j = 0; j < 64; ++j) {
                ASSERT_EQ(got(i, j), want(i, j)) << "k " << k << " (" << i << ", " << j << ")";
            }
        }
    }
}

TEST(MaxkSsd, TopkOfEveryColumnIsTheDenseProduct)
{
    const Csr a = halo::testing::erdos_renyi_csr(300, 2, true);
    const auto x = halo::testing::random_matrix(a.num_cols, 48, 48, 3);
    const auto s = halo::reference::maxk_topk(x.cview(), 48);
    HostMatrix want(a.num_rows, 48);
    halo::reference::spmm(a.view(), x.cview(), want.view());
    HostMatrix got(a.num_rows, 48);
    halo::reference::ssd(a.view(), s.view(), got.view(), all_rows(a));
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        for (std::int64_t j = 0; j < 48; ++j) {
            ASSERT_EQ(got(i, j), want(i, j)) << "(" << i << ", " << j << ")";
        }
    }
}

// The group schedule against the reference: rows of one group within the float rounding of two
// orders of the same sum, shared rows within that of group partials added in turn; rows outside
// the range and the padding stay NaN.
void check_group_schedule(const Csr& a, std::int32_t group_size, std::int64_t dim, std::int64_t k,
                          const std::vector<RowRange>& ranges, std::uint64_t seed)
{
    SCOPED_TRACE(testing::Message() << a.num_rows << " rows, " << a.nnz() << " nonzeros, group "
                                    << group_size << ", width " << dim << ", k " << k);
    const auto g = halo::build_edge_groups(a.view(), {group_size});
    const auto s = random_cbsr(a.num_cols, dim, k, seed);
    HostMatrix want(a.num_rows, dim, dim + 1);
    halo::reference::ssd(a.view(), s.view(), want.view(), all_rows(a));
    HostMatrix got(a.num_rows, dim, dim + 1);
    std::vector<char> covered(static_cast<std::size_t>(a.num_rows), 0);
    for (const auto& r : ranges) {
        halo::reference::ssd_edge_groups(g, a.view(), s.view(), got.view(), r);
        for (auto i = r.begin; i < r.end; ++i) {
            covered[i] = 1;
        }
    }
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        const double n = static_cast<double>(a.row_nnz(i));
        const double groups = std::max(1.0, std::ceil(n / group_size));
        // |a| <= 1, |s| < 1: a column's sum has at most n terms of magnitude < 1. The reference
        // rounds after each of n additions, the schedule after each of group_size fmas and each of
        // `groups` partial additions: k = n + group_size + groups + 2 bounds both together.
        const float tol =
            halo::testing::tolerance<float>(n + group_size + groups + 2, std::max(1.0, n));
        ASSERT_TRUE(std::isnan(got(i, dim))) << "padding of row " << i << " written";
        for (std::int64_t j = 0; j < dim; ++j) {
            if (covered[i] == 0) {
                ASSERT_TRUE(std::isnan(got(i, j))) << "row " << i << " outside the ranges written";
            } else {
                ASSERT_NEAR(got(i, j), want(i, j), tol) << "(" << i << ", " << j << ")";
            }
        }
    }
}

TEST(MaxkSsd, GroupScheduleEmulationMatchesReference)
{
    const Csr rmat = halo::testing::rmat_csr(9, 2, true);
    const Csr er = halo::testing::erdos_renyi_csr(800, 5, true);
    const Csr longrow = csr_from_lengths({3, 0, 100000, 1, 0, 70}, 500, true, 8);
    for (const std::int32_t size : {1, 7, 64}) {
        check_group_schedule(rmat, size, 64, 8, {all_rows(rmat)}, 1);
        check_group_schedule(er, size, 33, 5, {{0, 300}, {300, er.num_rows}}, 2);
        check_group_schedule(rmat, size, 256, 64, {{10, 200}}, 3);
    }
    check_group_schedule(longrow, 64, 32, 4, {{0, 2}, {2, 6}}, 4);
    check_group_schedule(longrow, 64, 32, 32, {{1, 3}}, 5);
}

TEST(MaxkSsd, GroupScheduleIsExactOnIntegers)
{
    // Pattern A and small integer values in S: every partial sum is an integer below 2^24, exact
    // in float in any order, so the schedule must equal the reference bit for bit, long row too.
    const Csr a = csr_from_lengths({3, 0, 100000, 1, 0, 70, 64, 65}, 500, false, 0);
    auto s = random_cbsr(a.num_cols, 40, 6, 12);
    for (std::size_t e = 0; e < s.values.size(); ++e) {
        s.values[e] = static_cast<float>(static_cast<int>(e % 9) - 4);
    }
    HostMatrix want(a.num_rows, 40);
    halo::reference::ssd(a.view(), s.view(), want.view(), all_rows(a));
    for (const std::int32_t size : {1, 64, 1000}) {
        HostMatrix got(a.num_rows, 40);
        halo::reference::ssd_edge_groups(halo::build_edge_groups(a.view(), {size}), a.view(),
                                         s.view(), got.view(), all_rows(a));
        EXPECT_EQ(got.data, want.data) << "group size " << size;
    }
}

TEST(MaxkSsd, CpuPlanRunsRanges)
{
    const Csr a = halo::testing::rmat_csr(8, 4, true);
    auto plan = halo::reference::make_cpu_ssd_plan(a, 128);
    EXPECT_EQ(plan->algorithm(), "ssd-reference");
    const auto s = random_cbsr(a.num_cols, 128, 16, 6);
    HostMatrix want(a.num_rows, 128);
    halo::reference::ssd(a.view(), s.view(), want.view(), all_rows(a));
    HostMatrix got(a.num_rows, 128);
    plan->run(s.view(), got.view(), {0, a.num_rows / 3});
    plan->run(s.view(), got.view(), {a.num_rows / 3, a.num_rows});
    EXPECT_EQ(got.data, want.data);
    EXPECT_THROW(plan->run(s.view(), got.view(), {0, a.num_rows + 1}), halo::LogicError);
    const auto narrow = random_cbsr(a.num_cols - 1, 128, 16, 6);
    EXPECT_THROW(plan->run(narrow.view(), got.view(), all_rows(a)), halo::LogicError);
    EXPECT_THROW((void)halo::reference::make_cpu_ssd_plan(a, 2048), halo::LogicError);
}

}  // namespace
