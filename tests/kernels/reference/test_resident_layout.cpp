// The resident-slice SpMM's chunk layout and bank-conflict schedule
// (kernels/preprocess/resident_layout.hpp), on the CPU: every nonzero of the range stored exactly
// once on a lane of its row, every row of the range given one group of aligned lanes, the split
// rule, the schedule's bank conflicts under the model against CSR order, and the emulated kernel
// (the order of operations the device test holds the kernel to, bit for bit) against
// reference::spmm.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo_test.hpp"
#include "preprocess/resident_layout.hpp"

namespace {

namespace rl = halo::resident;
using halo::testing::tolerance;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

halo::Csr rmat(int scale, int edge_factor, std::uint64_t seed, bool valued)
{
    halo::RmatOptions o;
    o.scale = scale;
    o.edge_factor = edge_factor;
    o.seed = seed;
    auto a = halo::build_csr(halo::generate_rmat(o), {});
    a.values.clear();
    if (valued) {
        a.values = halo::testing::random_floats(a.indices.size(), seed + 1);
    }
    return a;
}

// Rows of 0, 1, 9, 100, 3000 and 70000 nonzeros (the last past 32 lanes of the limit), columns
// cycling over 5000.
halo::Csr long_rows(bool valued)
{
    halo::Csr a;
    a.num_cols = 5000;
    for (const std::int64_t degree : {0, 1, 9, 100, 3000, 70000, 0, 2}) {
        for (std::int64_t k = 0; k < degree; ++k) {
            a.indices.push_back(static_cast<std::int32_t>((k * 7919 + degree) % a.num_cols));
        }
        a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));
        ++a.num_rows;
    }
    if (valued) {
        a.values = halo::testing::random_floats(a.indices.size(), 77);
    }
    return a;
}

// Structural checks of a layout of rows `r` of `a`.
void check_structure(const halo::Csr& a, const rl::Layout& l, halo::RowRange r)
{
    ASSERT_EQ(l.lane_row.size(), static_cast<std::size_t>(l.num_chunks() * rl::kLanes));
    ASSERT_EQ(l.lane_info.size(), l.lane_row.size());
    ASSERT_EQ(l.columns.size(), static_cast<std::size_t>(l.chunk_start.back()));
    ASSERT_EQ(l.values.size(), a.has_values() ? l.columns.size() : 0u);
    EXPECT_EQ(l.nonzeros, r.empty() ? 0 : a.indptr[r.end] - a.indptr[r.begin]);
    // (row, column, value) of every stored entry against the range's nonzeros, as multisets.
    std::map<std::tuple<std::int64_t, int, float>, int> count;
    for (auto i = r.begin; i < r.end; ++i) {
        for (auto p = a.indptr[i]; p < a.indptr[i + 1]; ++p) {
            ++count[{i, a.indices[p], a.has_values() ? a.values[p] : 1.0f}];
        }
    }
    std::vector<int> leaders(static_cast<std::size_t>(a.num_rows), 0);
    for (std::int64_t c = 0; c < l.num_chunks(); ++c) {
        EXPECT_EQ((l.chunk_start[c + 1] - l.chunk_start[c]) % rl::kLanes, 0);
        int longest = 0;
        for (int lane = 0; lane < rl::kLanes; ++lane) {
            const auto at = static_cast<std::size_t>(c * rl::kLanes + lane);
            const int items = rl::Layout::items(l.lane_info[at]);
            const int g = rl::Layout::group(l.lane_info[at]);
            const std::int64_t row = l.lane_row[at];
            longest = std::max(longest, items);
            // Padding: the zero row, value 0.
            for (std::int64_t k = items; k < l.steps(c); ++k) {
                const auto e = static_cast<std::size_t>(l.chunk_start[c] + k * rl::kLanes + lane);
                ASSERT_EQ(l.columns[e], a.num_cols) << "chunk " << c << " lane " << lane;
                if (!l.values.empty()) {
                    ASSERT_EQ(l.values[e], 0.0f);
                }
            }
            if (row < 0) {
                EXPECT_EQ(items, 0);
                EXPECT_EQ(g, 1);
                continue;
            }
            ASSERT_GE(row, r.begin);
            ASSERT_LT(row, r.end);
            // Groups are aligned runs of lanes of one row; the first lane leads.
            const int first = lane - lane % g;
            for (int t = first; t < first + g; ++t) {
                EXPECT_EQ(l.lane_row[static_cast<std::size_t>(c * rl::kLanes + t)], row);
            }
            if (lane % g == 0) {
                ++leaders[static_cast<std::size_t>(row)];
            }
            // The split rule: the fewest lanes holding at most the limit each, 32 at most.
            const std::int64_t degree = a.row_nnz(row);
            EXPECT_LE(items, (degree + g - 1) / g);
            if (g < rl::kLanes) {
                EXPECT_LE((degree + g - 1) / g, l.segment) << "row " << row;
            }
            if (g > 1) {
                EXPECT_GT((degree + g / 2 - 1) / (g / 2), l.segment) << "row " << row;
            }
            for (int k = 0; k < items; ++k) {
                const auto e = static_cast<std::size_t>(l.chunk_start[c] + k * rl::kLanes + lane);
                auto it = count.find({row, l.columns[e], l.values.empty() ? 1.0f : l.values[e]});
                ASSERT_NE(it, count.end()) << "row " << row << " column " << l.columns[e];
                if (--it->second == 0) {
                    count.erase(it);
                }
            }
        }
        EXPECT_EQ(l.steps(c), longest) << "chunk " << c << " pads beyond its longest lane";
    }
    EXPECT_TRUE(count.empty()) << count.size() << " nonzeros of the range not stored";
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        EXPECT_EQ(leaders[static_cast<std::size_t>(i)], i >= r.begin && i < r.end ? 1 : 0)
            << "row " << i;
    }
}

TEST(ResidentLayout, StoresEveryNonzeroOnceOnItsRowsLanes)
{
    std::uint64_t seed = 10;
    for (const bool valued : {false, true}) {
        for (const auto& a : {rmat(9, 8, ++seed, valued), long_rows(valued)}) {
            const auto n = a.num_rows;
            for (const auto r : {halo::RowRange{0, n}, halo::RowRange{0, n / 3},
                                 halo::RowRange{n / 3, n}, halo::RowRange{n / 2, n / 2}}) {
                for (const std::int64_t segment : {0, 1, 4, 64}) {
                    for (const bool schedule : {true, false}) {
                        SCOPED_TRACE(testing::Message()
                                     << n << " rows, range [" << r.begin << ", " << r.end
                                     << "), segment " << segment << ", schedule " << schedule);
                        const auto l = rl::build_layout(a.view(), r, segment, schedule);
                        EXPECT_EQ(l.segment, segment > 0 ? segment : rl::segment_limit(l.nonzeros));
                        check_structure(a, l, r);
                    }
                }
            }
        }
    }
}

TEST(ResidentLayout, LongRowsSplitOverAlignedGroups)
{
    const auto a = long_rows(false);
    const auto l = rl::build_layout(a.view(), {0, a.num_rows}, 64);
    // 3000 nonzeros over 64 a lane: 47 lanes -> 32 (the cap); 100: 2 lanes; 9, 1, 2: one each.
    std::map<std::int64_t, int> group;
    for (std::size_t at = 0; at < l.lane_row.size(); ++at) {
        if (l.lane_row[at] >= 0) {
            group[l.lane_row[at]] = rl::Layout::group(l.lane_info[at]);
        }
    }
    EXPECT_EQ(group[5], 32);  // 70000 nonzeros: 2188 a lane
    EXPECT_EQ(group[4], 32);
    EXPECT_EQ(group[3], 2);
    EXPECT_EQ(group[2], 1);
    EXPECT_EQ(group[0], 1);  // empty rows get a lane: their output is written
    // Larger groups first: the two 32-lane rows fill the first two chunks.
    EXPECT_EQ(l.lane_row[0], 5);
    EXPECT_EQ(l.lane_row[rl::kLanes], 4);
    EXPECT_EQ(l.steps(0), (70000 + 31) / 32);
}

TEST(ResidentLayout, ScheduleCutsBankConflictsOfTheModel)
{
    // R-MAT 12 with edge factor 32 (a power-law graph of 4096 columns, rows of 1 to ~2000), 64
    // nonzeros a lane at most: CSR order takes about 2.5 wavefronts a phase where 1 would do.
    const auto a = rmat(12, 32, 3, true);
    const auto csr = rl::count_wavefronts(rl::build_layout(a.view(), {0, a.num_rows}, 64, false));
    const auto sched = rl::count_wavefronts(rl::build_layout(a.view(), {0, a.num_rows}, 64, true));
    ASSERT_GT(csr.ideal, 0);
    EXPECT_EQ(csr.ideal, sched.ideal);  // the same lanes and steps, only the order differs
    const double before = static_cast<double>(csr.model) / static_cast<double>(csr.ideal);
    const double after = static_cast<double>(sched.model) / static_cast<double>(sched.ideal);
    RecordProperty("wavefronts_per_phase_csr_order", std::to_string(before));
    RecordProperty("wavefronts_per_phase_scheduled", std::to_string(after));
    EXPECT_GT(before, 2.2);
    EXPECT_LT(after, 1.6);
    EXPECT_LT(after * 1.5, before);
    std::printf("wavefronts a phase: %.3f in CSR order, %.3f scheduled\n", before, after);
}

TEST(ResidentLayout, EmulatedKernelMatchesTheReference)
{
    std::uint64_t seed = 300;
    for (const bool valued : {false, true}) {
        for (const auto& a : {rmat(9, 8, ++seed, valued), long_rows(valued)}) {
            const auto n = a.num_rows;
            for (const std::int64_t width : {1, 4, 7}) {
                const std::int64_t ld = width + 3;
                const auto x =
                    halo::testing::random_floats(static_cast<std::size_t>(a.num_cols * ld), ++seed);
                std::vector<float> want(static_cast<std::size_t>(n * ld), kNaN);
                halo::reference::spmm(a.view(), {x.data(), a.num_cols, width, ld},
                                      {want.data(), n, width, ld});
                for (const bool schedule : {true, false}) {
                    std::vector<float> y(static_cast<std::size_t>(n * ld), kNaN);
                    for (const auto r : {halo::RowRange{0, n / 3}, halo::RowRange{n / 3, n}}) {
                        rl::emulate(rl::build_layout(a.view(), r, 0, schedule),
                                    {x.data(), a.num_cols, width, ld}, {y.data(), n, width, ld});
                    }
                    for (std::int64_t i = 0; i < n; ++i) {
                        const float tol =
                            tolerance<float>(4, std::max<std::int64_t>(1, a.row_nnz(i)));
                        for (std::int64_t j = 0; j < ld; ++j) {
                            const auto at = static_cast<std::size_t>(i * ld + j);
                            if (j >= width) {
                                EXPECT_TRUE(std::isnan(y[at])) << "padding written";
                            } else {
                                ASSERT_NEAR(y[at], want[at], tol)
                                    << "row " << i << " col " << j << " schedule " << schedule;
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST(ResidentLayout, EmulatedScalingsMatchTheScaledReference)
{
    auto a = rmat(9, 8, 41, false);
    const auto n = a.num_rows;
    const auto row = halo::testing::random_floats(static_cast<std::size_t>(n), 42, 0.1f, 1.0f);
    const auto col =
        halo::testing::random_floats(static_cast<std::size_t>(a.num_cols), 43, 0.1f, 1.0f);
    halo::Csr scaled = a;
    scaled.values.resize(a.indices.size());
    for (std::int64_t i = 0; i < n; ++i) {
        for (auto p = a.indptr[i]; p < a.indptr[i + 1]; ++p) {
            scaled.values[p] = row[i] * col[a.indices[p]];
        }
    }
    const std::int64_t width = 5;
    const auto x = halo::testing::random_floats(static_cast<std::size_t>(a.num_cols * width), 44);
    std::vector<float> want(static_cast<std::size_t>(n * width), kNaN);
    halo::reference::spmm(scaled.view(), {x.data(), a.num_cols, width, width},
                          {want.data(), n, width, width});
    std::vector<float> y(want.size(), kNaN);
    rl::emulate(rl::build_layout(a.view(), {0, n}), {x.data(), a.num_cols, width, width},
                {y.data(), n, width, width}, row.data(), col.data());
    for (std::size_t at = 0; at < y.size(); ++at) {
        const float tol = tolerance<float>(6, std::max<std::int64_t>(1, a.row_nnz(at / width)));
        ASSERT_NEAR(y[at], want[at], tol) << "element " << at;
    }
}

TEST(ResidentLayout, RejectsWhatTheKernelCannotHold)
{
    const auto a = rmat(8, 4, 5, false);
    EXPECT_THROW(rl::build_layout(a.view(), {-1, 3}), halo::InputError);
    EXPECT_THROW(rl::build_layout(a.view(), {5, 3}), halo::InputError);
    EXPECT_THROW(rl::build_layout(a.view(), {0, a.num_rows + 1}), halo::InputError);
    EXPECT_THROW(rl::build_layout(a.view(), {0, a.num_rows}, -2), halo::InputError);
    halo::Csr wide;
    wide.num_rows = 1;
    wide.num_cols = 65536;  // the zero row would be column 65536
    wide.indptr = {0, 1};
    wide.indices = {65535};
    try {
        (void)rl::build_layout(wide.view(), {0, 1});
        FAIL() << "65536 columns accepted";
    } catch (const halo::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("65536 columns"), std::string::npos) << e.what();
    }
    wide.num_cols = 65535;
    wide.indices = {65534};
    EXPECT_EQ(rl::build_layout(wide.view(), {0, 1}).zero_row, 65535);
}

TEST(ResidentLayout, SegmentLimitFollowsTheOperatorSize)
{
    EXPECT_EQ(rl::segment_limit(0), 8);
    EXPECT_EQ(rl::segment_limit((1 << 17) - 1), 8);
    EXPECT_EQ(rl::segment_limit(1 << 17), 16);
    EXPECT_EQ(rl::segment_limit(1 << 18), 32);
    EXPECT_EQ(rl::segment_limit(1 << 19), 64);
    EXPECT_EQ(rl::segment_limit(std::int64_t{1} << 40), 64);
}

}  // namespace
