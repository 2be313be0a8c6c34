// The row-split SpMM kernel (include/halo/kernels/cuda/rowsplit.hpp) and its chunked variant
// against the CPU on fresh seeded inputs. Two oracles: reference::spmm within tolerance, and a host
// loop that sums each row's nonzeros in CSR order with std::fma, which the kernel must match bit
// for bit (it performs exactly those fused multiply-adds in that order; nvcc keeps IEEE fma, no
// fast math); for the chunked variant the loop sums each unit so and adds the units' sums in order.
// Outputs are poisoned with NaN, so rows outside the requested range and the padding between cols
// and ld must stay NaN. Both access paths run: float4 (widths and leading dimensions multiples of
// 4) and scalar.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cuda/spmm/rowsplit_layout.hpp"
#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/rowsplit.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo_test.hpp"
#include "spmm_device_fixtures.hpp"

namespace {

using halo::testing::DeviceMatrix;
using halo::testing::download;
using halo::testing::Gpu;
using halo::testing::graph_csr;
using halo::testing::HostMatrix;
using halo::testing::random_matrix;
using halo::testing::read_gcn_graph;
using halo::testing::row_max_abs;
using halo::testing::tolerance;
using halo::testing::upload;

// y[i, :] = sum_k a_ik x[k, :] with one fma per nonzero, in CSR order: the kernel's arithmetic.
// With `chunk` > 0 the chunked kernel's: a row of more than `chunk` nonzeros is summed so per unit
// of rowsplit::unit_length nonzeros, and the units' sums are added in order.
HostMatrix fma_spmm(const halo::Csr& a, const HostMatrix& x, std::int64_t ldy,
                    std::int64_t chunk = 0)
{
    HostMatrix y(a.num_rows, x.cols, ldy);
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        const auto begin = a.indptr[i];
        const auto end = a.indptr[i + 1];
        const std::int64_t unit = chunk > 0 && end - begin > chunk
                                      ? halo::cuda::rowsplit::unit_length(end - begin, chunk)
                                      : std::max<std::int64_t>(end - begin, 1);
        for (std::int64_t j = 0; j < x.cols; ++j) {
            float sum = 0.0f;
            for (auto u = begin; u < end; u += unit) {
                float s = 0.0f;
                for (auto k = u; k < std::min<std::int64_t>(u + unit, end); ++k) {
                    s = std::fma(a.has_values() ? a.values[k] : 1.0f, x(a.indices[k], j), s);
                }
                sum = u == begin ? s : sum + s;
            }
            y(i, j) = sum;
        }
    }
    return y;
}

// Leading dimensions: multiples of 4 (float4 path) when `vector` and the width allows, else odd
// paddings (scalar path). Either way ld > cols, so padding writes show up.
std::int64_t x_ld(std::int64_t width, bool vector)
{
    return vector ? width + 4 : width + 3;
}
std::int64_t y_ld(std::int64_t width, bool vector)
{
    return vector ? width + 8 : width + 1;
}

// Runs the plan over `ranges` in order on a NaN-poisoned y; after each run, rows not yet covered
// must still be NaN and covered rows must equal the fma loop exactly and the reference within
// tolerance. The final y goes to *result when given.
void check_spmm(halo::Backend& backend, halo::SpmmPlan& plan, const halo::Csr& a,
                std::int64_t width, bool vector, const std::vector<halo::RowRange>& ranges,
                std::uint64_t seed, HostMatrix* result = nullptr, std::int64_t chunk = 0)
{
    SCOPED_TRACE(testing::Message() << a.num_rows << " rows, " << a.nnz() << " nonzeros, "
                                    << (a.has_values() ? "valued" : "pattern") << ", width "
                                    << width << (vector ? ", float4 strides" : ", odd strides"));
    const auto x = random_matrix(a.num_cols, width, x_ld(width, vector), seed);
    const auto ldy = y_ld(width, vector);
    HostMatrix want(a.num_rows, width, ldy);
    halo::reference::spmm(a.view(), x.cview(), want.view());
    const auto exact = fma_spmm(a, x, ldy, chunk);
    auto dx = upload(backend, x);
    auto dy = upload(backend, HostMatrix(a.num_rows, width, ldy));
    std::vector<char> covered(static_cast<std::size_t>(a.num_rows), 0);
    HostMatrix got(a.num_rows, width, ldy);
    for (const auto& range : ranges) {
        SCOPED_TRACE(testing::Message()
                     << "after rows [" << range.begin << ", " << range.end << ")");
        plan.run(dx.view, dy.view, range);
        for (auto i = range.begin; i < range.end; ++i) {
            covered[i] = 1;
        }
        got = download(backend, dy);
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            const float max_a = row_max_abs(a, i);
            // A sum of row_nnz products |a_ik| * |x_kj| <= max_a * 1 (x in [-1, 1)), in CSR
            // order on the GPU and in the reference's order on the CPU: k = 4 covers both.
            const float tol =
                tolerance<float>(4, std::max<double>(1.0, a.row_nnz(i)) * std::max(max_a, 1.0f));
            for (std::int64_t j = 0; j < ldy; ++j) {
                if (j >= width) {
                    ASSERT_TRUE(std::isnan(got(i, j)))
                        << "padding (" << i << ", " << j << ") was written";
                } else if (covered[i] == 0) {
                    ASSERT_TRUE(std::isnan(got(i, j)))
                        << "row " << i << " outside the ranges was written: " << got(i, j);
                } else {
                    ASSERT_EQ(got(i, j), exact(i, j)) << "(" << i << ", " << j << ")";
                    ASSERT_NEAR(got(i, j), want(i, j), tol) << "(" << i << ", " << j << ")";
                }
            }
        }
    }
    if (result != nullptr) {
        *result = got;
    }
}

// 4 x 10^6 pattern: row 0 two nonzeros, row 1 every column, row 2 empty, row 3 one nonzero.
halo::Csr million_nonzero_row()
{
    const std::int64_t cols = 1000000;
    halo::Csr a;
    a.num_rows = 4;
    a.num_cols = cols;
    a.indices = {3, 999999};  // row 0
    a.indptr = {0, 2};
    for (halo::local_id c = 0; c < cols; ++c) {  // row 1: every column
        a.indices.push_back(c);
    }
    a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));
    a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));  // row 2: empty
    a.indices.push_back(500000);                                        // row 3
    a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));
    return a;
}

// The standard ranges: all rows; interior then boundary (as the engine runs them around the
// exchange); a middle range, an empty one and the single last row.
std::vector<std::vector<halo::RowRange>> standard_ranges(std::int64_t n)
{
    return {{{0, n}}, {{0, n / 3}, {n / 3, n}}, {{n / 4, n / 2}, {n / 2, n / 2}, {n - 1, n}}};
}

TEST(RowsplitSpmm, RandomGraphsAllWidthsAndRowRanges)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 3000;
    for (const std::string kind : {"rmat", "er"}) {
        for (const bool valued : {false, true}) {
            const auto a = graph_csr(kind, kind == "rmat" ? 10 : 11, ++seed, valued);
            const auto plan = halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 1000);
            EXPECT_EQ(plan->algorithm(), "rowsplit");
            for (const std::int64_t width : {1, 3, 4, 8, 16, 31, 32, 33, 100, 128, 256, 1000}) {
                for (const bool vector : {false, true}) {
                    if (vector && width % 4 != 0) {
                        continue;
                    }
                    for (const auto& ranges : standard_ranges(a.num_rows)) {
                        check_spmm(*gpu.backend, *plan, a, width, vector, ranges, ++seed);
                    }
                }
            }
        }
    }
}

// int64 offsets compute the same fma sequence: bit-identical to the int32 plan.
TEST(RowsplitSpmm, SixtyFourBitOffsetsGiveTheSameBits)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 4000;
    for (const bool valued : {false, true}) {
        const auto a = graph_csr("rmat", 10, ++seed, valued);
        const auto plan64 =
            halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 256, halo::cuda::IndexWidth::bits64);
        EXPECT_EQ(plan64->algorithm(), "rowsplit-i64");
        const auto plan32 = halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 256);
        const auto n = a.num_rows;
        for (const std::int64_t width : {1, 33, 64, 256}) {
            for (const bool vector : {false, true}) {
                if (vector && width % 4 != 0) {
                    continue;
                }
                for (const auto& ranges : standard_ranges(n)) {
                    const auto s = ++seed;
                    HostMatrix wide(0, 0, 0);
                    HostMatrix narrow(0, 0, 0);
                    check_spmm(*gpu.backend, *plan64, a, width, vector, ranges, s, &wide);
                    check_spmm(*gpu.backend, *plan32, a, width, vector, ranges, s, &narrow);
                    ASSERT_EQ(wide.data.size(), narrow.data.size());
                    for (std::size_t k = 0; k < wide.data.size(); ++k) {
                        ASSERT_TRUE(wide.data[k] == narrow.data[k] ||
                                    (std::isnan(wide.data[k]) && std::isnan(narrow.data[k])))
                            << "element " << k;
                    }
                }
            }
        }
    }
}

// One owner per row and no atomics: repeated runs, and the interior/boundary split, give the same
// bits as one full run.
TEST(RowsplitSpmm, RepeatedRunsAndSplitsAreBitIdentical)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = graph_csr("rmat", 12, 77, true);
    const auto plan = halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 64);
    const auto n = a.num_rows;
    for (const std::int64_t width : {33, 64}) {
        const auto x = random_matrix(a.num_cols, width, width, 78);
        auto dx = upload(*gpu.backend, x);
        auto dy = upload(*gpu.backend, HostMatrix(n, width, width));
        plan->run(dx.view, dy.view, {0, n});
        const auto first = download(*gpu.backend, dy);
        for (int r = 0; r < 5; ++r) {
            auto poisoned = upload(*gpu.backend, HostMatrix(n, width, width));
            if (r % 2 == 0) {
                plan->run(dx.view, poisoned.view, {0, n});
            } else {
                plan->run(dx.view, poisoned.view, {n / 3, n});
                plan->run(dx.view, poisoned.view, {0, n / 3});
            }
            const auto again = download(*gpu.backend, poisoned);
            for (std::size_t k = 0; k < first.data.size(); ++k) {
                ASSERT_EQ(again.data[k], first.data[k])
                    << "width " << width << " run " << r << " element " << k;
            }
        }
    }
}

TEST(RowsplitSpmm, EmptyRowsAndMatricesWithoutNonzeros)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    // 50 x 40; rows 10 .. 29 empty; the others hold a few seeded columns.
    halo::Csr a;
    a.num_rows = 50;
    a.num_cols = 40;
    std::uint64_t state = 5000;
    for (std::int64_t i = 0; i < 50; ++i) {
        if (i < 10 || i >= 30) {
            for (auto c = static_cast<halo::local_id>(i % 7); c < 40; c += 9) {
                a.indices.push_back(c);
            }
        }
        a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));
    }
    for (const bool valued : {false, true}) {
        if (valued) {
            a.values = halo::testing::random_floats(a.indices.size(), ++state);
        }
        const auto plan = halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 64);
        for (const std::int64_t width : {1, 33, 64}) {
            check_spmm(*gpu.backend, *plan, a, width, false, {{12, 20}}, ++state);  // no nonzero
            check_spmm(*gpu.backend, *plan, a, width, width % 4 == 0, {{10, 30}, {0, 10}, {30, 50}},
                       ++state);
            check_spmm(*gpu.backend, *plan, a, width, false, {{5, 35}, {0, 5}, {35, 50}}, ++state);
        }
    }
    halo::Csr zero;  // 8 x 8 without any nonzero: zeros
    zero.num_rows = 8;
    zero.num_cols = 8;
    zero.indptr.assign(9, 0);
    const auto zero_plan = halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, zero, 8);
    check_spmm(*gpu.backend, *zero_plan, zero, 5, false, {{0, 8}}, 9);
    check_spmm(*gpu.backend, *zero_plan, zero, 8, true, {{2, 5}}, 10);
    halo::Csr none;  // no rows
    const auto none_plan = halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, none, 8);
    check_spmm(*gpu.backend, *none_plan, none, 5, false, {{0, 0}}, 11);
}

TEST(RowsplitSpmm, OneRowOfAMillionNonzeros)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto a = million_nonzero_row();
    for (const bool valued : {false, true}) {
        if (valued) {
            a.values = halo::testing::random_floats(a.indices.size(), 31);
        }
        const auto plan = halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 64);
        for (const std::int64_t width : {1, 32, 33}) {
            const bool vector = width % 4 == 0;
            check_spmm(*gpu.backend, *plan, a, width, vector, {{0, 4}}, 40 + width);
            check_spmm(*gpu.backend, *plan, a, width, vector, {{1, 2}, {3, 4}, {0, 1}, {2, 3}},
                       50 + width);
        }
    }
}

// A real graph, GCN-normalized with self-loops (valued), full range and the engine's split.
void check_shared_graph(const std::filesystem::path& path, std::uint64_t seed)
{
    Gpu gpu;
    const auto a = read_gcn_graph(path);
    const auto plan = halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 128);
    const auto n = a.num_rows;
    for (const std::int64_t width : {16, 33, 64, 128}) {
        const bool vector = width % 4 == 0;
        check_spmm(*gpu.backend, *plan, a, width, vector, {{0, n}}, ++seed);
        check_spmm(*gpu.backend, *plan, a, width, vector, {{0, n / 3}, {n / 3, n}}, ++seed);
    }
}

TEST(RowsplitSpmm, CoraWithGcnNormalization)
{
    HALO_REQUIRE_GPUS(1);
    HALO_REQUIRE_SHARED_FILE(path, "cora.el.gz");
    check_shared_graph(path, 6000);
}

TEST(RowsplitSpmm, BlogCatalogWithGcnNormalization)
{
    HALO_REQUIRE_GPUS(1);
    HALO_REQUIRE_SHARED_FILE(path, "BlogCatalog.el.gz");
    check_shared_graph(path, 7000);
}

TEST(RowsplitSpmm, CudaBackendRunsItWhenAsked)
{
    HALO_REQUIRE_GPUS(1);
    halo::cuda::Context ctx;
    const auto backend = halo::cuda::make_cuda_backend(ctx, "rowsplit");
    const auto a = graph_csr("rmat", 9, 7, true);
    const auto plan = backend->make_spmm_plan(a);
    EXPECT_EQ(plan->algorithm(), "rowsplit");
    check_spmm(*backend, *plan, a, 48, true, {{0, a.num_rows / 2}, {a.num_rows / 2, a.num_rows}},
               8);
    const auto default_backend = halo::cuda::make_cuda_backend(ctx);
    EXPECT_EQ(default_backend->make_spmm_plan(a)->algorithm(), "cusparse-csr-alg2");
}

// The chunked variant: rows longer than the unit length cut into units whose sums the last unit
// adds in order, bit for bit the host's loop (fma_spmm with the chunk), for unit lengths from one
// nonzero up to the automatic one, every width class, and the standard row-range splits (a range
// holds only its own long rows' units).
TEST(RowchunkSpmm, RandomGraphsUnitLengthsWidthsAndRowRanges)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    std::uint64_t seed = 9000;
    for (const std::string kind : {"rmat", "er"}) {
        for (const bool valued : {false, true}) {
            const auto a = graph_csr(kind, kind == "rmat" ? 10 : 11, ++seed, valued);
            for (const std::int64_t length : {1, 5, 32, 0}) {
                const std::int64_t used =
                    length > 0 ? length : halo::cuda::rowchunk_length(a.nnz());
                const auto plan =
                    halo::cuda::make_rowchunk_spmm_plan(gpu.ctx, a, 1000, {.length = length});
                EXPECT_EQ(plan->algorithm(), "rowchunk-" + std::to_string(used));
                for (const std::int64_t width : {1, 4, 33, 128, 256, 1000}) {
                    for (const bool vector : {false, true}) {
                        if (vector && width % 4 != 0) {
                            continue;
                        }
                        for (const auto& ranges : standard_ranges(a.num_rows)) {
                            check_spmm(*gpu.backend, *plan, a, width, vector, ranges, ++seed,
                                       nullptr, used);
                        }
                    }
                }
            }
        }
    }
}

// The counters start from 0 in every launch and the sum order is fixed: repeated runs, splits
// and the int64-offset path give the same bits; a row of a million nonzeros (1000 units of 1000)
// and empty rows beside it; the memory report holds the workspace.
TEST(RowchunkSpmm, RepeatedRunsSplitsWideOffsetsAndAMillionNonzeroRow)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = graph_csr("rmat", 12, 77, true);
    const auto plan = halo::cuda::make_rowchunk_spmm_plan(gpu.ctx, a, 64, {.length = 8});
    const auto wide = halo::cuda::make_rowchunk_spmm_plan(
        gpu.ctx, a, 64, {.length = 8, .offsets = halo::cuda::IndexWidth::bits64});
    EXPECT_EQ(wide->algorithm(), "rowchunk-8-i64");
    // The units' partial sums are sized by the widths run, on the first run (not for max_dim).
    EXPECT_EQ(plan->memory().workspace, 0);
    const auto n = a.num_rows;
    for (const std::int64_t width : {33, 64}) {
        HostMatrix first(0, 0, 0);
        check_spmm(*gpu.backend, *plan, a, width, width % 4 == 0, {{0, n}}, 78, &first, 8);
        for (int r = 0; r < 5; ++r) {
            HostMatrix again(0, 0, 0);
            auto& p = r == 4 ? *wide : *plan;
            if (r % 2 == 0) {
                check_spmm(*gpu.backend, p, a, width, width % 4 == 0, {{0, n}}, 78, &again, 8);
            } else {
                check_spmm(*gpu.backend, p, a, width, width % 4 == 0, {{n / 3, n}, {0, n / 3}}, 78,
                           &again, 8);
            }
            // Byte for byte: the padding holds the same NaN poison in both.
            ASSERT_EQ(again.data.size(), first.data.size());
            ASSERT_EQ(std::memcmp(again.data.data(), first.data.data(),
                                  first.data.size() * sizeof(float)),
                      0)
                << "width " << width << " run " << r;
        }
        // Units x the run's width rounded up to 4, never max_dim's when it ran narrower.
        EXPECT_GT(plan->memory().workspace, 0) << width;
        EXPECT_EQ(plan->memory().workspace % (4 * ((width + 3) / 4 * 4)), 0) << width;
    }

    auto hub = million_nonzero_row();
    EXPECT_EQ(halo::cuda::rowsplit::unit_length(hub.row_nnz(1), 32), 1000);
    for (const bool valued : {false, true}) {
        if (valued) {
            hub.values = halo::testing::random_floats(hub.indices.size(), 31);
        }
        const auto hub_plan = halo::cuda::make_rowchunk_spmm_plan(gpu.ctx, hub, 64);
        const auto used = halo::cuda::rowchunk_length(hub.nnz());
        for (const std::int64_t width : {1, 32, 33}) {
            const bool vector = width % 4 == 0;
            check_spmm(*gpu.backend, *hub_plan, hub, width, vector, {{0, 4}}, 40 + width, nullptr,
                       used);
            check_spmm(*gpu.backend, *hub_plan, hub, width, vector,
                       {{1, 2}, {3, 4}, {0, 1}, {2, 3}}, 50 + width, nullptr, used);
        }
    }
}

TEST(RowchunkSpmm, BlogCatalogWithGcnNormalization)
{
    HALO_REQUIRE_GPUS(1);
    HALO_REQUIRE_SHARED_FILE(path, "BlogCatalog.el.gz");
    Gpu gpu;
    const auto a = read_gcn_graph(path);
    const auto used = halo::cuda::rowchunk_length(a.nnz());
    const auto plan = halo::cuda::make_rowchunk_spmm_plan(gpu.ctx, a, 256);
    const auto n = a.num_rows;
    std::uint64_t seed = 9500;
    for (const std::int64_t width : {16, 33, 128, 256}) {
        const bool vector = width % 4 == 0;
        check_spmm(*gpu.backend, *plan, a, width, vector, {{0, n}}, ++seed, nullptr, used);
        check_spmm(*gpu.backend, *plan, a, width, vector, {{0, n / 3}, {n / 3, n}}, ++seed, nullptr,
                   used);
    }
}

// The automatic unit length: 8, 32 or 64 by size, and at least nnz / 32768.
TEST(RowchunkSpmm, AutomaticUnitLengths)
{
    EXPECT_EQ(halo::cuda::rowchunk_length(0), 8);
    EXPECT_EQ(halo::cuda::rowchunk_length(10556), 8);         // Cora
    EXPECT_EQ(halo::cuda::rowchunk_length(201524), 32);       // wiki-Vote
    EXPECT_EQ(halo::cuda::rowchunk_length(667966), 64);       // BlogCatalog
    EXPECT_EQ(halo::cuda::rowchunk_length(128314020), 3916);  // R-MAT 22: nnz / 32768
    EXPECT_EQ(halo::cuda::rowchunk_length(std::int64_t{1} << 33), std::int64_t{1} << 18);
}

TEST(RowchunkSpmm, RejectsANegativeUnitLength)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const auto a = graph_csr("rmat", 6, 1, true);
    EXPECT_THROW(halo::cuda::make_rowchunk_spmm_plan(gpu.ctx, a, 8, {.length = -3}),
                 halo::InputError);
}

TEST(RowsplitSpmm, RejectsBadOperatorsAndOperands)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    halo::Csr bad;
    bad.num_rows = 2;
    bad.num_cols = 2;
    bad.indptr = {0, 1, 2};
    bad.indices = {0, 5};  // column outside the matrix
    EXPECT_THROW(halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, bad, 8), halo::InputError);
    EXPECT_THROW(halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, bad, 0), halo::LogicError);

    const auto a = graph_csr("rmat", 6, 5, false);
    const auto plan = halo::cuda::make_rowsplit_spmm_plan(gpu.ctx, a, 8);
    auto x = gpu.backend->allocate(a.num_cols, 9);
    auto y = gpu.backend->allocate(a.num_rows, 9);
    EXPECT_THROW(plan->run(x.view(), y.view(), {0, a.num_rows}), halo::LogicError);  // > max_dim
    auto y8 = gpu.backend->allocate(a.num_rows, 8);
    EXPECT_THROW(plan->run(x.view(), y8.view(), {0, a.num_rows}), halo::LogicError);  // widths
    auto x8 = gpu.backend->allocate(a.num_cols, 8);
    EXPECT_THROW(plan->run(x8.view(), y8.view(), {0, a.num_rows + 1}), halo::LogicError);
    EXPECT_THROW(plan->run(x8.view(), y8.view(), {3, 2}), halo::LogicError);
    EXPECT_THROW(plan->run(x8.rows_view(1, a.num_cols), y8.view(), {0, a.num_rows}),
                 halo::LogicError);  // x too short
    EXPECT_NO_THROW(plan->run(x8.view(), y8.view(), {0, a.num_rows}));
    gpu.ctx.synchronize();
}

}  // namespace
