// Fused3S on the CPU (no GPU needed): the BSB format (hand cases, random graphs, empty rows,
// windows of more than 8 blocks, a last partial window, window reordering, every check of
// validate()), the fp64 attention reference on hand-computed cases, and the kernel's fragment
// mapping (kernels/cuda/attention/fused3s_layout.hpp): checked against the PTX ISA's layout tables
// transcribed here independently, then used in a lane-by-lane emulation of the whole kernel
// schedule (Q staging, S = Q K^T through an emulated mma, bitmap masking, the online softmax with
// its cross-warp maxima and sums, P V, the un-permuted store) against reference::sparse_attention.
// The kernel indexes its registers with the same functions, so a mapping or schedule bug shows up
// here in CI.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cuda/attention/fused3s_layout.hpp"
#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels_host/attention.hpp"
#include "halo/kernels_host/fused3s.hpp"
#include "halo_test.hpp"
#include "spmm_fixtures.hpp"

namespace {

namespace f3 = halo::cuda::fused3s;
using halo::Bsb;
using halo::Csr;

Csr csr_from_rows(const std::vector<std::vector<std::int32_t>>& rows, std::int64_t num_cols)
{
    Csr a;
    a.num_rows = static_cast<std::int64_t>(rows.size());
    a.num_cols = num_cols;
    for (const auto& row : rows) {
        a.indices.insert(a.indices.end(), row.begin(), row.end());
        a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));
    }
    return a;
}

// The CSR with each row's columns ascending (what bsb_pattern returns).
Csr sorted_rows(Csr a)
{
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        std::sort(a.indices.begin() + a.indptr[i], a.indices.begin() + a.indptr[i + 1]);
    }
    a.values.clear();
    return a;
}

void expect_same_pattern(const Csr& got, const Csr& want)
{
    ASSERT_EQ(got.num_rows, want.num_rows);
    ASSERT_EQ(got.num_cols, want.num_cols);
    ASSERT_EQ(got.indptr, want.indptr);
    ASSERT_EQ(got.indices, want.indices);
}

// Builds, validates and round-trips `a`; returns the BSB.
Bsb check_roundtrip(const Csr& a)
{
    const Bsb bsb = halo::build_bsb(a);
    EXPECT_NO_THROW(halo::validate(bsb, a, "test"));
    expect_same_pattern(halo::bsb_pattern(bsb), sorted_rows(a));
    EXPECT_EQ(bsb.num_windows(), (a.num_rows + 15) / 16);
    // Compaction: each window has exactly ceil(distinct columns / 8) blocks.
    for (std::int64_t w = 0; w < bsb.num_windows(); ++w) {
        std::set<std::int32_t> distinct;
        for (auto row = 16 * w; row < std::min(16 * w + 16, a.num_rows); ++row) {
            distinct.insert(a.indices.begin() + a.indptr[row],
                            a.indices.begin() + a.indptr[row + 1]);
        }
        EXPECT_EQ(bsb.window_block_count(w), (static_cast<std::int64_t>(distinct.size()) + 7) / 8)
            << "window " << w;
    }
    return bsb;
}

// Runs `fn`, which must throw halo::InputError whose message holds every one of `parts`.
void expect_input_error(const std::function<void()>& fn, std::initializer_list<std::string> parts)
{
    try {
        fn();
    } catch (const halo::InputError& e) {
        for (const auto& part : parts) {
            EXPECT_NE(e.message().find(part), std::string::npos)
                << "message \"" << e.message() << "\" lacks \"" << part << "\"";
        }
        return;
    }
    ADD_FAILURE() << "no halo::InputError thrown";
}

// ---------------------------------------------------------------------------------------------
// The format.

TEST(BsbFormat, HandCaseEncodesColumnsAndBits)
{
    // Window 0 has the distinct columns 0 1 5 9 10 11 12 13 | 14 15 16 17: two blocks.
    const Csr a = csr_from_rows({{1, 5, 17}, {5}, {0, 9, 10, 11, 12, 13, 14, 15, 16}}, 20);
    const Bsb bsb = check_roundtrip(a);
    EXPECT_EQ(bsb.num_rows, 3);
    EXPECT_EQ(bsb.num_cols, 20);
    EXPECT_EQ(bsb.nnz, 13);
    EXPECT_EQ(bsb.window_blocks, (std::vector<std::int64_t>{0, 2}));
    EXPECT_EQ(bsb.block_columns, (std::vector<std::int32_t>{0, 1, 5, 9, 10, 11, 12, 13, 14, 15, 16,
                                                            17, -1, -1, -1, -1}));
    const std::uint64_t block0 = (1u << 1) | (1u << 2)          // row 0: columns 1, 5
                                 | (1u << 10)                   // row 1: column 5
                                 | (1u << 16) | (0x1fu << 19);  // row 2: 0, 9..13
    const std::uint64_t block1 = (1u << 3)                      // row 0: column 17
                                 | (0x7u << 16);                // row 2: 14, 15, 16
    EXPECT_EQ(bsb.block_bitmaps, (std::vector<std::uint64_t>{block0, 0, block1, 0}));
    EXPECT_EQ(bsb.window_order, (std::vector<std::int32_t>{0}));
    EXPECT_TRUE(bsb.bit(0, 2, 0));
    EXPECT_FALSE(bsb.bit(0, 1, 0));
}

TEST(BsbFormat, RowsEightToFifteenUseTheHighWord)
{
    std::vector<std::vector<std::int32_t>> rows(16);
    rows[8] = {3};
    rows[15] = {3, 4};
    const Bsb bsb = check_roundtrip(csr_from_rows(rows, 5));
    ASSERT_EQ(bsb.num_blocks(), 1);
    EXPECT_EQ(bsb.block_bitmaps[0], 0u);
    EXPECT_EQ(bsb.block_bitmaps[1], (std::uint64_t{1} << 0) | (std::uint64_t{3} << 56));
}

TEST(BsbFormat, EmptyMatrixAndEmptyRows)
{
    Csr empty;
    const Bsb none = check_roundtrip(empty);
    EXPECT_EQ(none.num_windows(), 0);
    EXPECT_EQ(none.num_blocks(), 0);

    // 40 rows, only rows 20 and 39 have nonzeros: window 0 has no block at all.
    std::vector<std::vector<std::int32_t>> rows(40);
    rows[20] = {7};
    rows[39] = {0, 7};
    const Bsb bsb = check_roundtrip(csr_from_rows(rows, 8));
    EXPECT_EQ(bsb.window_blocks, (std::vector<std::int64_t>{0, 0, 1, 2}));
    EXPECT_EQ(bsb.window_order, (std::vector<std::int32_t>{1, 2, 0}));

    // Columns but no nonzeros.
    const Bsb hollow = check_roundtrip(csr_from_rows(std::vector<std::vector<std::int32_t>>(5), 9));
    EXPECT_EQ(hollow.num_blocks(), 0);
}

TEST(BsbFormat, WideWindowAndLastPartialWindow)
{
    // 37 rows: windows of 16, 16 and 5 rows. Row 17 alone has 100 distinct columns: 13 blocks.
    std::vector<std::vector<std::int32_t>> rows(37);
    for (std::int32_t c = 0; c < 100; ++c) {
        rows[17].push_back(3 * c + 1);
    }
    rows[36] = {299, 0};
    rows[32] = {5};
    rows[0] = {2};
    const Bsb bsb = check_roundtrip(csr_from_rows(rows, 300));
    EXPECT_EQ(bsb.window_blocks, (std::vector<std::int64_t>{0, 1, 14, 15}));
    EXPECT_EQ(bsb.window_order, (std::vector<std::int32_t>{1, 0, 2}));
    // The last block of window 1 holds the last 4 columns and 4 padding slots.
    const std::int64_t last = 13;
    for (int s = 0; s < 8; ++s) {
        EXPECT_EQ(bsb.block_columns[8 * last + s], s < 4 ? 3 * (96 + s) + 1 : halo::kBsbNoColumn);
    }
    // Window 2 (rows 32..36): row 36 is row 4 of the window.
    EXPECT_EQ(bsb.block_columns[8 * 14 + 0], 0);
    EXPECT_EQ(bsb.block_columns[8 * 14 + 1], 5);
    EXPECT_EQ(bsb.block_columns[8 * 14 + 2], 299);
    EXPECT_TRUE(bsb.bit(14, 4, 0));
    EXPECT_TRUE(bsb.bit(14, 4, 2));
    EXPECT_TRUE(bsb.bit(14, 0, 1));
    const auto stats = halo::bsb_stats(bsb);
    EXPECT_EQ(stats.windows, 3);
    EXPECT_EQ(stats.blocks, 15);
    EXPECT_EQ(stats.max_blocks_per_window, 13);
    EXPECT_DOUBLE_EQ(stats.blocks_per_window, 5.0);
    EXPECT_DOUBLE_EQ(stats.fill, 104.0 / (128.0 * 15));
}

TEST(BsbFormat, RandomGraphsRoundTrip)
{
    for (const std::uint64_t seed : {1u, 2u, 3u}) {
        SCOPED_TRACE(testing::Message() << "seed " << seed);
        check_roundtrip(halo::testing::rmat_csr(10, seed, false));
        check_roundtrip(halo::testing::erdos_renyi_csr(1000 + 7 * seed, seed, false));
        // Rectangular, unsorted rows of random lengths (0 to 60) over 500 columns.
        std::mt19937_64 rng(seed);
        std::vector<std::vector<std::int32_t>> rows(203);
        for (auto& row : rows) {
            std::set<std::int32_t> cols;
            const auto len = rng() % 61;
            while (cols.size() < len) {
                cols.insert(static_cast<std::int32_t>(rng() % 500));
            }
            row.assign(cols.rbegin(), cols.rend());
        }
        const Bsb bsb = check_roundtrip(csr_from_rows(rows, 500));
        for (std::size_t i = 1; i < bsb.window_order.size(); ++i) {
            const auto prev = bsb.window_order[i - 1];
            const auto cur = bsb.window_order[i];
            ASSERT_GE(bsb.window_block_count(prev), bsb.window_block_count(cur));
            if (bsb.window_block_count(prev) == bsb.window_block_count(cur)) {
                ASSERT_LT(prev, cur) << "ties keep the natural order";
            }
        }
    }
}

TEST(BsbFormat, ValuesAreIgnored)
{
    const Csr pattern = halo::testing::rmat_csr(8, 5, false);
    const Csr valued = halo::testing::rmat_csr(8, 5, true);
    const Bsb a = halo::build_bsb(pattern);
    const Bsb b = halo::build_bsb(valued);
    EXPECT_EQ(a.block_columns, b.block_columns);
    EXPECT_EQ(a.block_bitmaps, b.block_bitmaps);
}

TEST(BsbFormat, RejectsDuplicateColumnsAndBadCsr)
{
    expect_input_error(
        [] {
            halo::build_bsb(csr_from_rows({{1}, {4, 2, 4}}, 5));
        },
        {"row 1", "column 4", "more than once"});
    Csr bad = csr_from_rows({{1}, {7}}, 5);
    EXPECT_THROW(halo::build_bsb(bad), halo::InputError);
}

TEST(BsbFormat, ValidateNamesTheFault)
{
    std::vector<std::vector<std::int32_t>> rows(20);
    for (std::int32_t c = 0; c < 12; ++c) {
        rows[c % 16].push_back(c);
    }
    rows[17] = {3};
    const Csr a = csr_from_rows(rows, 12);
    const Bsb good = halo::build_bsb(a);
    ASSERT_NO_THROW(halo::validate(good, a, "good"));
    ASSERT_EQ(good.window_blocks, (std::vector<std::int64_t>{0, 2, 3}));

    auto with = [&](const std::function<void(Bsb&)>& edit) {
        Bsb b = good;
        edit(b);
        return b;
    };
    auto check = [&](const Bsb& b, std::initializer_list<std::string> parts) {
        SCOPED_TRACE(testing::Message() << "expecting \"" << *parts.begin() << "\"...");
        expect_input_error([&] { halo::validate(b, a, "parts/0/kernels/fused3s"); }, parts);
    };
    check(with([](Bsb& b) { b.block_columns[3] = 99; }),
          {"parts/0/kernels/fused3s", "window 0", "block 0", "slot 3", "99"});
    check(with([](Bsb& b) { std::swap(b.block_columns[1], b.block_columns[2]); }),
          {"window 0", "block 0", "slot 2", "does not ascend"});
    check(with([](Bsb& b) { b.block_columns[9] = -1; }), {"window 0", "block 1", "slot 1"});
    check(with([](Bsb& b) { b.block_bitmaps[3] |= std::uint64_t{1} << 7; }),
          {"window 0", "block 1", "slot 7", "padding"});
    check(with([](Bsb& b) { b.block_bitmaps[5] |= std::uint64_t{1} << 16; }),
          {"window 1", "block 2", "row 26", "past the last row"});
    check(with([](Bsb& b) { b.block_bitmaps[0] &= ~std::uint64_t{1}; }),
          {"window 0", "block 0", "slot 0", "no nonzero"});
    check(with([](Bsb& b) { b.block_bitmaps[0] |= std::uint64_t{1} << 10; }),
          {"nonzeros", "14", "13"});
    check(with([](Bsb& b) { b.window_blocks[1] = 4; }), {"window 1", "decreases", "4", "3"});
    check(with([](Bsb& b) { b.window_blocks.pop_back(); }), {"window_blocks", "3"});
    check(with([](Bsb& b) { b.block_columns.push_back(0); }), {"block_columns", "24"});
    check(with([](Bsb& b) { b.block_bitmaps.pop_back(); }), {"block_bitmaps", "6"});
    check(with([](Bsb& b) { b.window_order = {0, 0}; }), {"window_order[1]", "permutation"});
    check(with([](Bsb& b) { b.window_order = {1, 0}; }), {"window_order[1]", "more than"});
    check(with([](Bsb& b) { b.window_order.pop_back(); }), {"window_order", "expected 2"});
    check(with([](Bsb& b) { b.num_cols = 13; }), {"13"});
    // A consistent BSB of another pattern: swap column 5's bit from row 5 to row 6.
    check(with([](Bsb& b) {
              b.block_bitmaps[0] &= ~(std::uint64_t{1} << (8 * 5 + 5));
              b.block_bitmaps[0] |= std::uint64_t{1} << (8 * 6 + 5);
          }),
          {"window 0", "row 5", "column 5"});
}

// ---------------------------------------------------------------------------------------------
// The fp64 reference.

TEST(AttentionReference, HandCase)
{
    // Row 0 attends to columns 0 and 1 with scores 1 * (q . k) = 1 and 0; row 1 is empty; row 2
    // attends to column 1 only.
    const Csr a = csr_from_rows({{0, 1}, {}, {1}}, 2);
    const std::vector<float> q = {1, 0, 0, 0, 5, 5};
    const std::vector<float> k = {1, 0, 0, 1};
    const std::vector<float> v = {2, 4, -2, 8};
    std::vector<double> out(6, 7.0);
    halo::reference::sparse_attention(
        a.view(), halo::dense_view(q.data(), 3, 2), halo::dense_view(k.data(), 2, 2),
        halo::dense_view(v.data(), 2, 2), 1.0, halo::dense_view(out.data(), 3, 2));
    const double p0 = std::exp(1.0) / (std::exp(1.0) + 1.0);
    EXPECT_NEAR(out[0], p0 * 2 + (1 - p0) * -2, 1e-12);
    EXPECT_NEAR(out[1], p0 * 4 + (1 - p0) * 8, 1e-12);
    EXPECT_EQ(out[2], 0.0);
    EXPECT_EQ(out[3], 0.0);
    EXPECT_NEAR(out[4], -2, 1e-12);
    EXPECT_NEAR(out[5], 8, 1e-12);
}

TEST(AttentionReference, LargeScoresStayFinite)
{
    const Csr a = csr_from_rows({{0, 1, 2}}, 3);
    const std::vector<float> q = {1000};
    const std::vector<float> k = {1000, 999, -1000};
    const std::vector<float> v = {1, 2, 3};
    std::vector<double> out(1);
    halo::reference::sparse_attention(
        a.view(), halo::dense_view(q.data(), 1, 1), halo::dense_view(k.data(), 3, 1),
        halo::dense_view(v.data(), 3, 1), 1.0, halo::dense_view(out.data(), 1, 1));
    EXPECT_TRUE(std::isfinite(out[0]));
    EXPECT_NEAR(out[0], 1.0, 1e-12);
}

TEST(AttentionReference, AdditiveScores)
{
    const Csr a = csr_from_rows({{0, 1}}, 2);
    const std::vector<float> el = {0.5f};
    const std::vector<float> er = {1.0f, -2.5f};  // e = 1.5 and LeakyReLU(-2) = -0.4
    const std::vector<float> v = {1, 0};
    std::vector<double> out(1);
    halo::reference::additive_attention(a.view(), el.data(), er.data(), 0.2,
                                        halo::dense_view(v.data(), 2, 1),
                                        halo::dense_view(out.data(), 1, 1));
    EXPECT_NEAR(out[0], std::exp(1.5) / (std::exp(1.5) + std::exp(-0.4)), 1e-12);
}

// ---------------------------------------------------------------------------------------------
// The fragment layouts, against the PTX ISA's tables (9.7.14.5.8, mma.m16n8k16, .f16 A and B,
// .f32 C/D) written out here as the document states them.

int ptx_group(int lane)
{
    return lane >> 2;
}
int ptx_tig(int lane)
{
    return lane % 4;
}
int ptx_a_row(int lane, int i)
{
    return (i < 2 || (i >= 4 && i < 6)) ? ptx_group(lane) : ptx_group(lane) + 8;
}
int ptx_a_col(int lane, int i)
{
    return i < 4 ? ptx_tig(lane) * 2 + (i & 1) : ptx_tig(lane) * 2 + (i & 1) + 8;
}
int ptx_b_row(int lane, int i)
{
    return i < 2 ? ptx_tig(lane) * 2 + (i & 1) : ptx_tig(lane) * 2 + (i & 1) + 8;
}
int ptx_b_col(int lane, int)
{
    return ptx_group(lane);
}
int ptx_c_row(int lane, int i)
{
    return i < 2 ? ptx_group(lane) : ptx_group(lane) + 8;
}
int ptx_c_col(int lane, int i)
{
    return ptx_tig(lane) * 2 + (i & 1);
}

TEST(Fused3sLayout, FragmentsMatchThePtxTables)
{
    std::vector<int> a_seen(256, 0);
    std::vector<int> b_seen(128, 0);
    std::vector<int> c_seen(128, 0);
    for (int lane = 0; lane < 32; ++lane) {
        for (int i = 0; i < 8; ++i) {
            const auto c = f3::a_coord(lane, i);
            ASSERT_EQ(c.row, ptx_a_row(lane, i)) << "lane " << lane << " a" << i;
            ASSERT_EQ(c.col, ptx_a_col(lane, i)) << "lane " << lane << " a" << i;
            ++a_seen[c.row * 16 + c.col];
        }
        for (int i = 0; i < 4; ++i) {
            const auto b = f3::b_coord(lane, i);
            ASSERT_EQ(b.row, ptx_b_row(lane, i)) << "lane " << lane << " b" << i;
            ASSERT_EQ(b.col, ptx_b_col(lane, i)) << "lane " << lane << " b" << i;
            ++b_seen[b.row * 8 + b.col];
            const auto c = f3::c_coord(lane, i);
            ASSERT_EQ(c.row, ptx_c_row(lane, i)) << "lane " << lane << " c" << i;
            ASSERT_EQ(c.col, ptx_c_col(lane, i)) << "lane " << lane << " c" << i;
            ++c_seen[c.row * 8 + c.col];
        }
        // The kernel loads each register's two halves as one 32-bit word: they must be adjacent
        // in the matrix (A and C along a row; B along k, which is a K row's feature or a V row's
        // position in the gathered block, see below).
        for (int r = 0; r < 4; ++r) {
            EXPECT_EQ(f3::a_coord(lane, 2 * r + 1).col, f3::a_coord(lane, 2 * r).col + 1);
            EXPECT_EQ(f3::a_coord(lane, 2 * r + 1).row, f3::a_coord(lane, 2 * r).row);
        }
        for (int r = 0; r < 2; ++r) {
            EXPECT_EQ(f3::c_coord(lane, 2 * r + 1).col, f3::c_coord(lane, 2 * r).col + 1);
        }
    }
    EXPECT_TRUE(std::all_of(a_seen.begin(), a_seen.end(), [](int n) { return n == 1; }));
    EXPECT_TRUE(std::all_of(b_seen.begin(), b_seen.end(), [](int n) { return n == 1; }));
    EXPECT_TRUE(std::all_of(c_seen.begin(), c_seen.end(), [](int n) { return n == 1; }));
}

TEST(Fused3sLayout, RemapIsAPermutationMatchingTheWideLoads)
{
    for (const int d : {32, 64, 128, 256}) {
        std::vector<int> seen(static_cast<std::size_t>(d), 0);
        for (int f = 0; f < d; ++f) {
            const int p = f3::remap_feature(f);
            ASSERT_GE(p, f & ~31);
            ASSERT_LT(p, (f & ~31) + 32) << "the permutation stays within a 32-feature chunk";
            ++seen[p];
        }
        EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
        for (int lane = 0; lane < 32; ++lane) {
            const int t = f3::thread_in_group(lane);
            for (int kk = 0; kk < d / 16; ++kk) {
                for (int r = 0; r < 2; ++r) {
                    // The kernel's 128-bit load at 32 c + 8 t gives word r of k-step 2 c + h as
                    // word 2 h + r: features 32 c + 8 t + 4 h + 2 r and the next one.
                    const int want = 32 * (kk / 2) + 8 * t + 4 * (kk % 2) + 2 * r;
                    ASSERT_EQ(f3::k_feature(lane, kk, 2 * r, true), want);
                    ASSERT_EQ(f3::k_feature(lane, kk, 2 * r + 1, true), want + 1);
                    ASSERT_EQ(f3::k_feature(lane, kk, 2 * r + 1, false),
                              f3::k_feature(lane, kk, 2 * r, false) + 1);
                }
            }
        }
        // Q's shared-memory permutation puts each physical pair where remap_feature reads it.
        for (int w = 0; w < d / 2; ++w) {
            const int logical = f3::remap_q_word(w);
            ASSERT_EQ(f3::remap_feature(2 * logical), 2 * w);
            ASSERT_EQ(f3::remap_feature(2 * logical + 1), 2 * w + 1);
        }
    }
    // V columns: within a warp's nt tiles, each physical column once; with remapping a lane's
    // tiles are contiguous.
    for (const int nt : {1, 2, 4, 8}) {
        for (const bool remap : {false, true}) {
            std::vector<int> seen(static_cast<std::size_t>(8 * nt), 0);
            for (int j = 0; j < nt; ++j) {
                for (int n = 0; n < 8; ++n) {
                    ++seen[f3::o_column(n, j, nt, remap)];
                }
            }
            EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
            for (int lane = 0; lane < 32; ++lane) {
                for (int j = 0; j < nt; ++j) {
                    EXPECT_EQ(f3::v_column(lane, j, nt, remap),
                              f3::o_column(f3::group_of(lane), j, nt, remap));
                    if (remap) {
                        EXPECT_EQ(f3::v_column(lane, j, nt, true),
                                  f3::v_column(lane, 0, nt, true) + j);
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The kernel's schedule, lane by lane.

// D += A B for one warp, each lane holding the elements the PTX tables assign to it.
void emulated_mma(float (&d)[32][4], const float (&a)[32][8], const float (&b)[32][4])
{
    float am[16][16];
    float bm[16][8];
    for (int lane = 0; lane < 32; ++lane) {
        for (int i = 0; i < 8; ++i) {
            am[ptx_a_row(lane, i)][ptx_a_col(lane, i)] = a[lane][i];
        }
        for (int i = 0; i < 4; ++i) {
            bm[ptx_b_row(lane, i)][ptx_b_col(lane, i)] = b[lane][i];
        }
    }
    for (int lane = 0; lane < 32; ++lane) {
        for (int i = 0; i < 4; ++i) {
            float sum = d[lane][i];
            for (int kk = 0; kk < 16; ++kk) {
                sum += am[ptx_c_row(lane, i)][kk] * bm[kk][ptx_c_col(lane, i)];
            }
            d[lane][i] = sum;
        }
    }
}

// The fused kernel (fused3s.cu) replayed on the CPU in fp32 without the fp16 rounding: the same
// loads through the same layout functions, the same phases between barriers, the same softmax.
std::vector<float> emulate_fused3s(const Bsb& bsb, const std::vector<float>& q,
                                   const std::vector<float>& k, const std::vector<float>& v, int d,
                                   bool remap, float scale)
{
    constexpr int W = f3::kWarps;
    const int nt = d / W / 8;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    const float scale_log2 = scale * 1.4426950408889634f;
    std::vector<float> out(static_cast<std::size_t>(bsb.num_rows * d), std::nanf(""));
    for (std::int64_t slot = 0; slot < bsb.num_windows(); ++slot) {
        const std::int64_t window = bsb.window_order[slot];
        const std::int64_t row0 = 16 * window;
        const std::int64_t first_block = bsb.window_blocks[window];
        const std::int64_t num_blocks = bsb.window_block_count(window);
        // Q staged: logical word remap_q_word(w) holds physical word w.
        std::vector<float> qs(static_cast<std::size_t>(16 * d), 0.0f);
        for (int r = 0; r < 16; ++r) {
            if (row0 + r >= bsb.num_rows) {
                continue;
            }
            for (int w = 0; w < d / 2; ++w) {
                const int lw = remap ? f3::remap_q_word(w) : w;
                qs[r * d + 2 * lw] = q[(row0 + r) * d + 2 * w];
                qs[r * d + 2 * lw + 1] = q[(row0 + r) * d + 2 * w + 1];
            }
        }
        // Per warp and lane: m, l (rows g, g + 8) and the accumulator tiles.
        std::vector<float> m_run(W * 32 * 2, neg_inf);
        std::vector<float> l_run(W * 32 * 2, 0.0f);
        std::vector<float> acc(static_cast<std::size_t>(W * 32 * nt * 4), 0.0f);
        const std::int64_t iterations = (num_blocks + W - 1) / W;
        for (std::int64_t it = 0; it < iterations; ++it) {
            float s[W][32][4];
            int col_s[f3::kGroupCols];
            float max_s[W][16];
            float sum_s[W][16];
            float p_s[16][f3::kGroupCols];
            // Phase 1: scores, masks, per-warp maxima.
            for (int warp = 0; warp < W; ++warp) {
                const std::int64_t local = it * W + warp;
                const bool has_block = local < num_blocks;
                const std::int64_t b = first_block + local;
                for (int lane = 0; lane < 8; ++lane) {
                    col_s[warp * 8 + lane] = has_block ? bsb.block_columns[8 * b + lane] : -1;
                }
                for (auto& lane_s : s[warp]) {
                    std::fill(lane_s, lane_s + 4, 0.0f);
                }
                if (has_block) {
                    for (int kk = 0; kk < d / 16; ++kk) {
                        float a[32][8];
                        float bf[32][4];
                        for (int lane = 0; lane < 32; ++lane) {
                            for (int r = 0; r < 4; ++r) {
                                const auto c = f3::a_coord(lane, 2 * r);
                                a[lane][2 * r] = qs[c.row * d + 16 * kk + c.col];
                                a[lane][2 * r + 1] = qs[c.row * d + 16 * kk + c.col + 1];
                            }
                            const auto col = bsb.block_columns[8 * b + f3::group_of(lane)];
                            for (int r = 0; r < 2; ++r) {
                                const int f = f3::k_feature(lane, kk, 2 * r, remap);
                                bf[lane][2 * r] = col < 0 ? 0.0f : k[col * d + f];
                                bf[lane][2 * r + 1] = col < 0 ? 0.0f : k[col * d + f + 1];
                            }
                        }
                        emulated_mma(s[warp], a, bf);
                    }
                    for (int lane = 0; lane < 32; ++lane) {
                        for (int i = 0; i < 4; ++i) {
                            const auto c = f3::c_coord(lane, i);
                            const auto word = bsb.block_bitmaps[2 * b + (c.row < 8 ? 0 : 1)];
                            const bool present =
                                ((word >> f3::bitmap_shift(c.row, c.col)) & 1) != 0;
                            s[warp][lane][i] = present ? s[warp][lane][i] * scale_log2 : neg_inf;
                        }
                    }
                } else {
                    for (auto& lane_s : s[warp]) {
                        std::fill(lane_s, lane_s + 4, neg_inf);
                    }
                }
                for (int g = 0; g < 8; ++g) {
                    float m0 = neg_inf;
                    float m1 = neg_inf;
                    for (int t = 0; t < 4; ++t) {
                        m0 = std::max({m0, s[warp][4 * g + t][0], s[warp][4 * g + t][1]});
                        m1 = std::max({m1, s[warp][4 * g + t][2], s[warp][4 * g + t][3]});
                    }
                    max_s[warp][g] = m0;
                    max_s[warp][g + 8] = m1;
                }
            }
            // Phase 2: new maxima, P, per-warp sums.
            std::vector<float> alpha(W * 32 * 2);
            for (int warp = 0; warp < W; ++warp) {
                for (int lane = 0; lane < 32; ++lane) {
                    const int g = f3::group_of(lane);
                    float m_use[2];
                    for (int r = 0; r < 2; ++r) {
                        float& m = m_run[(warp * 32 + lane) * 2 + r];
                        float m_new = m;
                        for (int w = 0; w < W; ++w) {
                            m_new = std::max(m_new, max_s[w][g + 8 * r]);
                        }
                        m_use[r] = m_new == neg_inf ? 0.0f : m_new;
                        alpha[(warp * 32 + lane) * 2 + r] = std::exp2(m - m_use[r]);
                        m = m_new;
                    }
                    for (int i = 0; i < 4; ++i) {
                        const auto c = f3::c_coord(lane, i);
                        p_s[c.row][warp * 8 + c.col] = std::exp2(s[warp][lane][i] - m_use[i >> 1]);
                    }
                }
                for (int row = 0; row < 16; ++row) {
                    float sum = 0.0f;
                    for (int c = 0; c < 8; ++c) {
                        sum += p_s[row][warp * 8 + c];
                    }
                    sum_s[warp][row] = sum;
                }
            }
            // Phase 3: l, rescaling, O += P V.
            for (int warp = 0; warp < W; ++warp) {
                float accw[8][32][4];
                for (int lane = 0; lane < 32; ++lane) {
                    const int g = f3::group_of(lane);
                    for (int r = 0; r < 2; ++r) {
                        float total = 0.0f;
                        for (int w = 0; w < W; ++w) {
                            total += sum_s[w][g + 8 * r];
                        }
                        const auto idx = (warp * 32 + lane) * 2 + r;
                        l_run[idx] = alpha[idx] * l_run[idx] + total;
                    }
                    for (int j = 0; j < nt; ++j) {
                        for (int i = 0; i < 4; ++i) {
                            float& x = acc[((warp * 32 + lane) * nt + j) * 4 + i];
                            x *= alpha[(warp * 32 + lane) * 2 + (i >> 1)];
                            accw[j][lane][i] = x;
                        }
                    }
                }
                for (int ks = 0; ks < f3::kGroupCols / 16; ++ks) {
                    if (it * W + 2 * ks >= num_blocks) {
                        break;
                    }
                    float a[32][8];
                    std::vector<float> bv(32 * 4 * static_cast<std::size_t>(nt));
                    for (int lane = 0; lane < 32; ++lane) {
                        for (int r = 0; r < 4; ++r) {
                            const auto c = f3::a_coord(lane, 2 * r);
                            a[lane][2 * r] = p_s[c.row][16 * ks + c.col];
                            a[lane][2 * r + 1] = p_s[c.row][16 * ks + c.col + 1];
                        }
                        for (int i = 0; i < 4; ++i) {
                            const int vrow = col_s[16 * ks + f3::b_coord(lane, i).row];
                            for (int j = 0; j < nt; ++j) {
                                const int col =
                                    warp * (d / W) + (remap ? f3::v_column(lane, 0, nt, true) + j
                                                            : f3::v_column(lane, j, nt, false));
                                bv[(lane * 4 + i) * nt + j] = vrow < 0 ? 0.0f : v[vrow * d + col];
                            }
                        }
                    }
                    for (int j = 0; j < nt; ++j) {
                        float b[32][4];
                        for (int lane = 0; lane < 32; ++lane) {
                            for (int i = 0; i < 4; ++i) {
                                b[lane][i] = bv[(lane * 4 + i) * nt + j];
                            }
                        }
                        emulated_mma(accw[j], a, b);
                    }
                }
                for (int lane = 0; lane < 32; ++lane) {
                    for (int j = 0; j < nt; ++j) {
                        for (int i = 0; i < 4; ++i) {
                            acc[((warp * 32 + lane) * nt + j) * 4 + i] = accw[j][lane][i];
                        }
                    }
                }
            }
        }
        // Normalize and store through the un-permutation.
        for (int warp = 0; warp < W; ++warp) {
            for (int lane = 0; lane < 32; ++lane) {
                for (int j = 0; j < nt; ++j) {
                    for (int i = 0; i < 4; ++i) {
                        const auto c = f3::c_coord(lane, i);
                        const float l = l_run[(warp * 32 + lane) * 2 + (i >> 1)];
                        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
                        const std::int64_t row = row0 + c.row;
                        if (row < bsb.num_rows) {
                            const int col = warp * (d / W) + f3::o_column(c.col, j, nt, remap);
                            out[row * d + col] = acc[((warp * 32 + lane) * nt + j) * 4 + i] * inv;
                        }
                    }
                }
            }
        }
    }
    return out;
}

void check_emulation(const Csr& a, int d, std::uint64_t seed)
{
    const Bsb bsb = halo::build_bsb(a);
    const auto q = halo::testing::random_floats(static_cast<std::size_t>(a.num_rows * d), seed);
    const auto k = halo::testing::random_floats(static_cast<std::size_t>(a.num_cols * d), seed + 1);
    const auto v = halo::testing::random_floats(static_cast<std::size_t>(a.num_cols * d), seed + 2);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    std::vector<double> want(static_cast<std::size_t>(a.num_rows * d));
    halo::reference::sparse_attention(a.view(), halo::dense_view(q.data(), a.num_rows, d),
                                      halo::dense_view(k.data(), a.num_cols, d),
                                      halo::dense_view(v.data(), a.num_cols, d), scale,
                                      halo::dense_view(want.data(), a.num_rows, d));
    for (const bool remap : {false, true}) {
        SCOPED_TRACE(testing::Message() << "d " << d << (remap ? ", remapped" : ", plain"));
        const auto got = emulate_fused3s(bsb, q, k, v, d, remap, scale);
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            for (int c = 0; c < d; ++c) {
                const double w = want[i * d + c];
                const float g = got[i * d + c];
                ASSERT_FALSE(std::isnan(g)) << "row " << i << " column " << c << " not written";
                if (a.row_nnz(i) == 0) {
                    ASSERT_EQ(g, 0.0f) << "row " << i << " has no neighbours";
                }
                // fp32 throughout: scores of d products, softmax and a weighted sum of |v| < 1.
                ASSERT_NEAR(g, w, halo::testing::tolerance<float>(8, d + a.row_nnz(i)))
                    << "row " << i << " column " << c;
            }
        }
    }
}

TEST(Fused3sEmulation, MatchesTheReference)
{
    // Many windows with more than 4 blocks (several iterations, padding warps), empty rows and a
    // last partial window.
    for (const int d : {32, 64, 128, 256}) {
        check_emulation(halo::testing::rmat_csr(7, 11, false), d, 100 + d);
    }
    check_emulation(halo::testing::erdos_renyi_csr(150, 4, false), 64, 7);
    std::vector<std::vector<std::int32_t>> rows(21);
    for (std::int32_t c = 0; c < 70; ++c) {
        rows[3].push_back(c);  // 9 blocks in window 0: three iterations, the last one partial
    }
    rows[20] = {69, 0};
    check_emulation(csr_from_rows(rows, 70), 128, 9);
}

}  // namespace
