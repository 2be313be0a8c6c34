// Adversarial shapes for every exact SpMM kernel: cuSPARSE, Accel-GCN,
// MergePath and row-split on every shared graph of ../shared/data/MANIFEST.tsv (GCN-normalized
// and pattern matrices, alternately) and on synthetic shapes (rows left empty, a row of 10^6
// nonzeros, a one-row matrix, a matrix without nonzeros), at widths 1, 3, 31, 33, 100, 256 and
// 1000, for the full row range, the interior/boundary split and a middle range, y NaN-poisoned
// before each run. Results are compared against a double reference (spmm_exact_check.hpp) on
// every row of small problems and on a seeded sample of rows (plus the longest rows and the rows
// at range bounds) of large ones, so the whole test stays within about two minutes on a GPU host.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "halo/kernels/cuda/accel_gcn.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/gather_rows.hpp"
#include "halo/kernels/cuda/mergepath.hpp"
#include "halo/kernels/cuda/rowsplit.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo_test.hpp"
#include "spmm_exact_check.hpp"
#include "spmm_fixtures.hpp"

namespace {

using halo::Csr;
using halo::RowRange;
using halo::cuda::Context;

const std::vector<std::int64_t> kWidths = {1, 3, 31, 33, 100, 256, 1000};
constexpr std::int64_t kMaxDim = 1000;
// Problems up to this many nonzero-column products are checked on every row; larger on a sample.
constexpr double kFullCheckProducts = 4e7;
constexpr std::int64_t kSampleRows = 2000;
constexpr std::int64_t kLongestRows = 32;

using Factory = std::function<std::unique_ptr<halo::SpmmPlan>(Context&, const Csr&,
                                                              const std::vector<RowRange>&)>;

struct Kernel {
    const char* name;
    Factory make;
};

const std::vector<Kernel>& kernels()
{
    static const std::vector<Kernel> list = {
        {"cusparse",
         [](Context& ctx, const Csr& a, const std::vector<RowRange>&) {
             return halo::cuda::make_cusparse_spmm_plan(ctx, a, kMaxDim);
         }},
        {"accel_gcn",
         [](Context& ctx, const Csr& a, const std::vector<RowRange>& ranges) {
             halo::cuda::AccelGcnOptions o;
             o.ranges = ranges;  // the split runs from the prepared segments
             return halo::cuda::make_accel_gcn_spmm_plan(ctx, a, kMaxDim, o);
         }},
        {"mergepath",
         [](Context& ctx, const Csr& a, const std::vector<RowRange>&) {
             return halo::cuda::make_mergepath_spmm_plan(ctx, a, kMaxDim);
         }},
        {"rowsplit",
         [](Context& ctx, const Csr& a, const std::vector<RowRange>&) {
             return halo::cuda::make_rowsplit_spmm_plan(ctx, a, kMaxDim);
         }},
        {"rowchunk",  // units of 4 nonzeros: most rows of the shapes are cut
         [](Context& ctx, const Csr& a, const std::vector<RowRange>&) {
             return halo::cuda::make_rowchunk_spmm_plan(ctx, a, kMaxDim, {.length = 4});
         }},
    };
    return list;
}

// Every row of small problems; else a seeded sample, the longest rows, and the rows at the
// bounds of the tested ranges (where range bugs show).
std::vector<std::int64_t> rows_to_check(const Csr& a, std::int64_t d, std::uint64_t seed)
{
    const std::int64_t n = a.num_rows;
    std::vector<std::int64_t> rows;
    if (static_cast<double>(a.nnz()) * d <= kFullCheckProducts || n <= kSampleRows) {
        rows.resize(static_cast<std::size_t>(n));
        std::iota(rows.begin(), rows.end(), std::int64_t{0});
        return rows;
    }
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int64_t> pick(0, n - 1);
    for (std::int64_t k = 0; k < kSampleRows; ++k) {
        rows.push_back(pick(rng));
    }
    std::vector<std::int64_t> by_degree(static_cast<std::size_t>(n));
    std::iota(by_degree.begin(), by_degree.end(), std::int64_t{0});
    std::partial_sort(by_degree.begin(), by_degree.begin() + kLongestRows, by_degree.end(),
                      [&](std::int64_t u, std::int64_t v) { return a.row_nnz(u) > a.row_nnz(v); });
    rows.insert(rows.end(), by_degree.begin(), by_degree.begin() + kLongestRows);
    for (const std::int64_t b : {std::int64_t{0}, n / 5, n / 3, n / 2, n}) {
        for (const std::int64_t r : {b - 1, b}) {
            if (r >= 0 && r < n) {
                rows.push_back(r);
            }
        }
    }
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    return rows;
}

// Runs every kernel on `a` at every width over three range sets and compares the checked rows.
// `min_product` > 0: the caller promises every product |a_ik x_kj| of row `tight_row` is at least
// that large; the test then asserts that its tolerance is below it (one dropped nonzero fails).
void check_all_kernels(Context& ctx, const std::string& label, const Csr& a, std::uint64_t seed,
                       std::int64_t tight_row = -1, double min_product = 0.0)
{
    const auto started = std::chrono::steady_clock::now();
    const std::int64_t n = a.num_rows;
    const std::vector<RowRange> split = {{0, n / 3}, {n / 3, n}};
    const std::vector<std::vector<RowRange>> range_sets = {{{0, n}}, split, {{n / 5, n / 2}}};
    std::vector<std::unique_ptr<halo::SpmmPlan>> plans;
    for (const Kernel& k : kernels()) {
        plans.push_back(k.make(ctx, a, split));
    }
    const cudaStream_t stream = ctx.compute_stream();
    for (const std::int64_t d : kWidths) {
        // Multiples of 4: 16-byte-aligned rows (the vector paths) with padding in y; otherwise
        // padded, unaligned rows (the scalar paths).
        const std::int64_t ldx = d % 4 == 0 ? d : d + 1;
        const std::int64_t ldy = d % 4 == 0 ? d + 4 : d + 1;
        std::vector<float> x(static_cast<std::size_t>(a.num_cols * ldx));
        halo::testing::signed_features(x.data(), a.num_cols, d, ldx, seed + d);
        const auto exact =
            halo::testing::exact_rows(a, x.data(), ldx, d, rows_to_check(a, d, seed + 7 * d));
        if (tight_row >= 0) {
            const auto at = std::find(exact.rows.begin(), exact.rows.end(), tight_row);
            ASSERT_NE(at, exact.rows.end());
            const auto r = at - exact.rows.begin();
            double worst = 0.0;
            for (std::int64_t j = 0; j < d; ++j) {
                worst = std::max<double>(
                    worst,
                    halo::testing::tolerance<float>(
                        halo::testing::kSpmmK, exact.scale[static_cast<std::size_t>(r * d + j)]));
            }
            ASSERT_LT(worst, min_product) << label << " d " << d << ": the tolerance of row "
                                          << tight_row << " would hide a dropped nonzero";
        }
        halo::cuda::DeviceBuffer<float> xd(ctx, std::max<std::size_t>(1, x.size()));
        halo::cuda::DeviceBuffer<float> yd(
            ctx, static_cast<std::size_t>(std::max<std::int64_t>(1, n * ldy)));
        if (!x.empty()) {
            HALO_CUDA_TRY(cudaMemcpyAsync(xd.data(), x.data(), x.size() * sizeof(float),
                                          cudaMemcpyHostToDevice, stream));
        }
        const halo::DenseView<const float> xv{xd.data(), a.num_cols, d, ldx};
        const halo::DenseView<float> yv{yd.data(), n, d, ldy};
        std::vector<float> got(exact.rows.size() * static_cast<std::size_t>(ldy));
        for (std::size_t k = 0; k < plans.size(); ++k) {
            for (const auto& ranges : range_sets) {
                std::vector<char> inside(exact.rows.size(), 0);
                std::ostringstream what;
                what << kernels()[k].name << " (" << plans[k]->algorithm() << ") on " << label
                     << ", d " << d << ", ranges";
                for (const RowRange& r : ranges) {
                    what << " [" << r.begin << ", " << r.end << ")";
                    for (std::size_t i = 0; i < exact.rows.size(); ++i) {
                        inside[i] |= exact.rows[i] >= r.begin && exact.rows[i] < r.end ? 1 : 0;
                    }
                }
                // All bytes 0xFF: a NaN in every element, padding included.
                HALO_CUDA_TRY(cudaMemsetAsync(yd.data(), 0xFF, yd.bytes(), stream));
                for (const RowRange& r : ranges) {
                    plans[k]->run(xv, yv, r);
                }
                halo::cuda::gather_rows_to_host({yd.data(), n, ldy, ldy}, exact.rows.data(),
                                                static_cast<std::int64_t>(exact.rows.size()),
                                                got.data(), stream);
                EXPECT_TRUE(halo::testing::rows_match(exact, got, ldy, inside)) << what.str();
            }
        }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::cout << "[ shapes   ] " << label << ": " << n << " rows, " << a.nnz() << " nonzeros, "
              << seconds << " s\n";
}

// The data files that ../shared/data/MANIFEST.tsv lists (first column, header skipped).
std::vector<std::string> manifest_graphs()
{
    std::vector<std::string> names;
    std::ifstream in(halo::testing::shared_data_dir() / "MANIFEST.tsv");
    std::string line;
    bool header = true;
    while (std::getline(in, line)) {
        if (header) {
            header = false;
            continue;
        }
        const std::string name = line.substr(0, line.find('\t'));
        if (!name.empty()) {
            names.push_back(name);
        }
    }
    return names;
}

TEST(SpmmShapes, EverySharedGraph)
{
    HALO_REQUIRE_GPUS(1);
    const auto names = manifest_graphs();
    if (names.empty()) {
        GTEST_SKIP() << "no MANIFEST.tsv under " << halo::testing::shared_data_dir()
                     << " (set HALO_DATA_DIR to the directory holding ../shared/data)";
    }
    Context ctx;
    std::uint64_t seed = 1;
    int index = 0;
    for (const std::string& name : names) {
        const auto path = halo::testing::shared_data_file(name);
        if (path.empty()) {
            ADD_FAILURE() << name << " is listed in MANIFEST.tsv but absent";
            continue;
        }
        // Alternately as a GCN layer sees it (valued, self-loops) and as a symmetric pattern.
        const bool gcn = index++ % 2 == 0;
        const Csr a =
            gcn ? halo::testing::read_gcn_graph(path) : halo::testing::read_symmetric_graph(path);
        check_all_kernels(ctx, name + (gcn ? " (gcn)" : " (pattern)"), a, seed += 1000);
    }
}

// Values +-1 with random signs, drawn from `seed`.
Csr with_signs(Csr a, std::uint64_t seed)
{
    const auto u = halo::testing::random_floats(a.indices.size(), seed);
    a.values.resize(a.indices.size());
    for (std::size_t k = 0; k < u.size(); ++k) {
        a.values[k] = u[k] < 0.0f ? -1.0f : 1.0f;
    }
    return a;
}

TEST(SpmmShapes, EmptyRows)
{
    HALO_REQUIRE_GPUS(1);
    Context ctx;
    // Directed Erdos-Renyi with a third as many edges as rows: most rows empty.
    const Csr a = halo::testing::erdos_renyi_csr(30000, 11, true);
    check_all_kernels(ctx, "Erdos-Renyi 30000 rows, 10000 edges", a, 20000);
    Csr none;
    none.num_rows = 7;
    none.num_cols = 3;
    none.indptr.assign(8, 0);
    check_all_kernels(ctx, "7 x 3 without nonzeros", none, 21000);
}

TEST(SpmmShapes, RowOfAMillionNonzeros)
{
    HALO_REQUIRE_GPUS(1);
    Context ctx;
    // Row 1: 10^6 distinct columns; rows 0 and 3 short, row 2 empty. Values +-1, features
    // +-[0.75, 1): every product of row 1 is at least 0.75 in magnitude, and the check asserts
    // that its tolerance is smaller.
    constexpr std::int64_t kLong = 1000000;
    Csr a = halo::testing::csr_with_rows({3, kLong, 0, 5}, kLong);
    std::iota(a.indices.begin() + 3, a.indices.begin() + 3 + kLong, 0);
    check_all_kernels(ctx, "row of 10^6 nonzeros (values +-1)", with_signs(a, 31), 30000, 1,
                      halo::testing::kFeatureMin);
    check_all_kernels(ctx, "row of 10^6 nonzeros (pattern)", a, 31000, 1,
                      halo::testing::kFeatureMin);
}

TEST(SpmmShapes, OneRow)
{
    HALO_REQUIRE_GPUS(1);
    Context ctx;
    Csr a;
    a.num_rows = 1;
    a.num_cols = 40;
    a.indices = {0, 1, 7, 39, 7};
    a.indptr = {0, 5};
    a.values = {0.5f, -2.0f, 1.0f, 3.0f, -0.25f};
    check_all_kernels(ctx, "one row of 5 nonzeros", a, 40000);
    Csr b = a;
    b.values.clear();
    check_all_kernels(ctx, "one pattern row", b, 41000);
}

}  // namespace
