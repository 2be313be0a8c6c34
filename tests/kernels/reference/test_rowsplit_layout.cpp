// The row-split SpMM's lane/column mapping (kernels/cuda/spmm/rowsplit_layout.hpp), on the CPU: the
// layout chosen for every width, every column of every row covered by exactly one lane, and a
// plain emulation of the kernel (groups, cooperative loads of `group` nonzeros, broadcast, one
// store per lane) against reference::spmm. The kernel calls the same mapping functions, so a
// schedule bug shows up here without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cuda/spmm/rowsplit_layout.hpp"
#include "halo/core/csr.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo_test.hpp"

namespace {

namespace rs = halo::cuda::rowsplit;
using halo::testing::tolerance;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(RowsplitLayout, PicksTheSmallestGroupThatCoversTheWidth)
{
    for (std::int64_t width = 1; width <= 1100; ++width) {
        for (const int vec : {1, 4, 8}) {  // 8: 16-byte loads of fp16/bf16 features
            if (width % vec != 0) {
                continue;
            }
            SCOPED_TRACE(testing::Message() << "width " << width << " vec " << vec);
            const auto l = rs::make_layout(width, vec);
            EXPECT_EQ(l.vec, vec);
            EXPECT_TRUE(l.group == 4 || l.group == 8 || l.group == 16 || l.group == 32);
            const std::int64_t pass = std::int64_t{l.group} * l.vec;
            EXPECT_GE(l.chunks * pass, width);
            EXPECT_LT((l.chunks - 1) * pass, width);  // no pass without a column
            if (l.group > rs::kMinGroup) {
                // Half the group would not cover the width in one pass: no idle half group.
                EXPECT_GT(width, std::int64_t{l.group / 2} * l.vec);
            }
            if (l.group < rs::kWarp) {
                EXPECT_EQ(l.chunks, 1);
            }
        }
    }
    // The cases the kernel is named for.
    EXPECT_EQ(rs::make_layout(1, false).group, 4);
    EXPECT_EQ(rs::make_layout(16, false).group, 16);
    EXPECT_EQ(rs::make_layout(16, true).group, 4);
    EXPECT_EQ(rs::make_layout(33, false).group, 32);
    EXPECT_EQ(rs::make_layout(33, false).chunks, 2);
    EXPECT_EQ(rs::make_layout(128, true).group, 32);
    EXPECT_EQ(rs::make_layout(128, true).chunks, 1);
    EXPECT_EQ(rs::make_layout(1000, true).chunks, 8);
    EXPECT_EQ(rs::make_layout(1000, false).chunks, 32);
    EXPECT_EQ(rs::make_layout(1000, true).vec, 4);  // the bool overload: float4
    EXPECT_EQ(rs::make_layout(256, 8).group, 32);
    EXPECT_EQ(rs::make_layout(256, 8).chunks, 1);
    EXPECT_EQ(rs::make_layout(1000, 8).chunks, 4);
    EXPECT_EQ(rs::make_layout(8, 8).group, 4);
}

TEST(RowsplitLayout, EveryColumnIsCoveredByExactlyOneLane)
{
    for (std::int64_t width = 1; width <= 1100; ++width) {
        for (const int vec : {1, 4, 8}) {
            if (width % vec != 0) {
                continue;
            }
            SCOPED_TRACE(testing::Message() << "width " << width << " vec " << vec);
            const auto l = rs::make_layout(width, vec);
            std::vector<int> count(static_cast<std::size_t>(width), 0);
            for (std::int64_t chunk = 0; chunk < l.chunks; ++chunk) {
                for (int lane = 0; lane < l.group; ++lane) {
                    const auto first = rs::first_column(l.group, l.vec, chunk, lane);
                    ASSERT_EQ(first % l.vec, 0) << "vector lane not 16-byte aligned";
                    if (first >= width) {
                        continue;  // an idle lane (the kernel's `active` is false)
                    }
                    // An active vector lane must have all its columns inside the width.
                    ASSERT_LE(first + l.vec, width) << "lane " << lane << " chunk " << chunk;
                    for (int e = 0; e < l.vec; ++e) {
                        ++count[static_cast<std::size_t>(first + e)];
                    }
                }
            }
            for (std::int64_t j = 0; j < width; ++j) {
                ASSERT_EQ(count[static_cast<std::size_t>(j)], 1) << "column " << j;
            }
        }
    }
}

TEST(RowsplitLayout, VectorAccessesNeedAlignedPointersWidthsAndStrides)
{
    alignas(16) float buffer[16] = {};
    EXPECT_TRUE(rs::vectorizable(buffer, 8, buffer + 4, 4, 4));
    EXPECT_FALSE(rs::vectorizable(buffer + 1, 8, buffer, 4, 4));  // x misaligned
    EXPECT_FALSE(rs::vectorizable(buffer, 8, buffer + 2, 4, 4));  // y misaligned
    EXPECT_FALSE(rs::vectorizable(buffer, 8, buffer, 4, 3));      // width
    EXPECT_FALSE(rs::vectorizable(buffer, 7, buffer, 8, 4));      // x.ld
    EXPECT_FALSE(rs::vectorizable(buffer, 8, buffer, 9, 4));      // y.ld
}

// ---------------------------------------------------------------------------------------------
// The kernel, emulated: for each row, each pass and each batch of `group` nonzeros, lane l loads
// pair base + l, then every lane takes pair j from lane j and accumulates its columns with fma;
// finally each active lane stores its columns once. `writes` counts stores per element.

void emulate_rowsplit(const halo::Csr& a, const std::vector<float>& x, std::int64_t ldx,
                      std::vector<float>& y, std::int64_t ldy, std::vector<int>& writes,
                      std::int64_t width, halo::RowRange rows, const rs::Layout& l)
{
    std::vector<std::int32_t> lane_col(static_cast<std::size_t>(l.group));
    std::vector<float> lane_val(static_cast<std::size_t>(l.group));
    std::vector<float> acc(static_cast<std::size_t>(l.group * l.vec));
    for (auto row = rows.begin; row < rows.end; ++row) {
        const auto start = a.indptr[row];
        const auto stop = a.indptr[row + 1];
        for (std::int64_t chunk = 0; chunk < l.chunks; ++chunk) {
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (auto base = start; base < stop; base += l.group) {
                for (int lane = 0; lane < l.group; ++lane) {
                    const auto k = base + lane;
                    lane_col[lane] = k < stop ? a.indices[k] : 0;
                    lane_val[lane] = k < stop ? (a.has_values() ? a.values[k] : 1.0f) : 0.0f;
                }
                const int n = static_cast<int>(std::min<std::int64_t>(stop - base, l.group));
                for (int j = 0; j < n; ++j) {
                    for (int lane = 0; lane < l.group; ++lane) {
                        const auto first = rs::first_column(l.group, l.vec, chunk, lane);
                        if (first >= width) {
                            continue;
                        }
                        for (int e = 0; e < l.vec; ++e) {
                            float& s = acc[static_cast<std::size_t>(lane * l.vec + e)];
                            s = std::fma(lane_val[j], x[lane_col[j] * ldx + first + e], s);
                        }
                    }
                }
            }
            for (int lane = 0; lane < l.group; ++lane) {
                const auto first = rs::first_column(l.group, l.vec, chunk, lane);
                if (first >= width) {
                    continue;
                }
                for (int e = 0; e < l.vec; ++e) {
                    y[row * ldy + first + e] = acc[static_cast<std::size_t>(lane * l.vec + e)];
                    ++writes[row * ldy + first + e];
                }
            }
        }
    }
}

halo::Csr test_graph(const std::string& kind, std::uint64_t seed, bool valued)
{
    halo::Csr a;
    if (kind == "rmat") {
        halo::RmatOptions o;
        o.scale = 8;
        o.edge_factor = 8;
        o.seed = seed;
        a = halo::build_csr(halo::generate_rmat(o), {});
    } else if (kind == "er") {
        // Directed, a third as many edges as nodes: most rows are empty.
        halo::ErdosRenyiOptions o;
        o.num_nodes = 600;
        o.num_edges = 200;
        o.seed = seed;
        halo::BuildOptions b;
        b.symmetrize = false;
        a = halo::build_csr(halo::generate_erdos_renyi(o), b);
    } else {
        // One row of 10^6 nonzeros between an empty row and a short one.
        a.num_rows = 3;
        a.num_cols = 1000000;
        a.indptr = {0, 0};
        for (std::int32_t c = 0; c < 1000000; ++c) {
            a.indices.push_back(c);
        }
        a.indptr.push_back(1000000);
        a.indices.push_back(7);
        a.indptr.push_back(1000001);
    }
    a.values.clear();
    if (valued) {
        a.values = halo::testing::random_floats(a.indices.size(), seed + 1);
    }
    return a;
}

TEST(RowsplitLayout, EmulatedKernelMatchesTheReference)
{
    std::uint64_t seed = 500;
    for (const std::string kind : {"rmat", "er", "long-row"}) {
        for (const bool valued : {false, true}) {
            const auto a = test_graph(kind, ++seed, valued);
            const auto n = a.num_rows;
            const std::vector<std::int64_t> widths =
                kind == "long-row" ? std::vector<std::int64_t>{1, 8}
                                   : std::vector<std::int64_t>{1, 3, 31, 32, 33, 100, 256, 1000};
            for (const auto width : widths) {
                for (const int vec : {1, 4, 8}) {  // 8: the fp16/bf16 lanes' columns
                    if (width % vec != 0) {
                        continue;
                    }
                    SCOPED_TRACE(testing::Message()
                                 << kind << (valued ? " valued" : " pattern") << ", width " << width
                                 << " vec " << vec);
                    const auto l = rs::make_layout(width, vec);
                    const std::int64_t ldx = width + (vec > 1 ? vec : 3);
                    const std::int64_t ldy = width + (vec > 1 ? 8 : 1);
                    auto x = halo::testing::random_floats(
                        static_cast<std::size_t>(a.num_cols * ldx), ++seed);
                    std::vector<float> want(static_cast<std::size_t>(n * ldy), kNaN);
                    halo::reference::spmm(a.view(), {x.data(), a.num_cols, width, ldx},
                                          {want.data(), n, width, ldy});
                    for (const auto& ranges : std::vector<std::vector<halo::RowRange>>{
                             {{0, n}}, {{0, n / 3}, {n / 3, n}}, {{n / 2, n / 2}, {n - 1, n}}}) {
                        std::vector<float> y(static_cast<std::size_t>(n * ldy), kNaN);
                        std::vector<int> writes(y.size(), 0);
                        std::vector<char> covered(static_cast<std::size_t>(n), 0);
                        for (const auto& r : ranges) {
                            emulate_rowsplit(a, x, ldx, y, ldy, writes, width, r, l);
                            for (auto i = r.begin; i < r.end; ++i) {
                                covered[i] = 1;
                            }
                        }
                        for (std::int64_t i = 0; i < n; ++i) {
                            // A sum of row_nnz products of |a| <= 1 and |x| <= 1, any order.
                            const float tol =
                                tolerance<float>(4, std::max<std::int64_t>(1, a.row_nnz(i)));
                            for (std::int64_t j = 0; j < ldy; ++j) {
                                const auto at = i * ldy + j;
                                if (j >= width || covered[i] == 0) {
                                    ASSERT_EQ(writes[at], 0) << "(" << i << ", " << j << ")";
                                    ASSERT_TRUE(std::isnan(y[at])) << "(" << i << ", " << j << ")";
                                } else {
                                    ASSERT_EQ(writes[at], 1) << "(" << i << ", " << j << ")";
                                    ASSERT_NEAR(y[at], want[at], tol)
                                        << "(" << i << ", " << j << ")";
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

// The chunked kernel's unit length: the base length, or ceil(sqrt(degree)) where larger, so that
// neither a unit nor the last unit's sum over the row's units is long.
TEST(RowsplitLayout, UnitLengthIsTheBaseOrTheCeilingOfTheSquareRoot)
{
    EXPECT_EQ(rs::unit_length(168, 32), 32);        // Cora's longest row: 6 units of 32
    EXPECT_EQ(rs::unit_length(3992, 32), 64);       // BlogCatalog's: 63 units
    EXPECT_EQ(rs::unit_length(1000000, 32), 1000);  // a perfect square
    EXPECT_EQ(rs::unit_length(1000001, 32), 1001);
    EXPECT_EQ(rs::unit_length(100, 1), 10);
    EXPECT_EQ(rs::unit_length(2, 1), 2);
    for (std::int64_t degree = 2; degree < 5000; ++degree) {
        for (const std::int64_t length : {1, 5, 32, 64}) {
            if (degree <= length) {
                continue;
            }
            const auto unit = rs::unit_length(degree, length);
            const auto units = (degree + unit - 1) / unit;
            ASSERT_GE(unit, length) << degree;
            ASSERT_GE(unit * unit, degree) << degree;  // at most as many units as nonzeros a unit
            ASSERT_LE(units, unit) << degree;
            if (unit > length) {
                ASSERT_LT((unit - 1) * (unit - 1), degree) << degree;  // the smallest such root
            }
        }
    }
    const std::int64_t huge = std::int64_t{1} << 40;  // beyond a double's exact square roots
    const auto root = rs::unit_length(huge + 1, 32);
    EXPECT_GE(root * root, huge + 1);
    EXPECT_LT((root - 1) * (root - 1), huge + 1);
}

}  // namespace
