// The CUDA backend's engine plans (kernels/cuda/backend/engine_plans.hpp) against the CPU backend's, plan
// by plan, on fresh seeded inputs: random operators of more columns than rows (owned then halo
// rows) with empty rows, views with leading dimensions beyond their width, outputs poisoned with
// NaN so that rows outside a range and padding must stay NaN.
//
// - MaxK: top-k + aggregation within tolerance<float>(nnz + 4, sum |a|) of the CPU SSD per
//   element (rows of one edge group are bit-identical in the kernel; shared rows use atomics);
//   records equal to the CPU backend's bit for bit, padding zero and the words past record_words
//   untouched; unpack + pack reproduces the records; corrupt records (index out of range, negative,
//   not ascending) throw InputError naming row and entry.
// - Attention: per-head column slices of wider Q, KV and O, interior and boundary row ranges;
//   exact within tolerance<float>(8 (d + nnz + 8), 1) per element (|v| < 1), fused (d = 64) within
//   a relative row error of 1e-2 as in test_fused3s_cuda.cpp; d = 16 falls back to the exact path
//   and algorithm() says so; additive scores from strided el / er columns.
// - normalize_rows within tolerance<float>(4, 1) of the CPU backend, zero rows stay zero.
// - Stored kernel metadata (edge groups, BSB) is used when it names the plan's operator, and
//   algorithm() says so; metadata of another operator name is ignored, of another pattern rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/fused3s.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/fused3s.hpp"
#include "halo/kernels_host/fused3s_metadata.hpp"
#include "halo/kernels_host/maxk.hpp"
#include "halo/kernels_host/maxk_metadata.hpp"
#include "halo_test.hpp"
#include "spmm_device_fixtures.hpp"
#include "spmm_fixtures.hpp"

namespace {

using halo::AttentionKernel;
using halo::AttentionPlan;
using halo::Csr;
using halo::DenseView;
using halo::MaxkPlan;
using halo::RowRange;
using halo::SpmmPlanHints;
using halo::testing::download;
using halo::testing::Gpu;
using halo::testing::HostMatrix;
using halo::testing::kNaN;
using halo::testing::random_matrix;
using halo::testing::upload;

constexpr double kFusedTolerance = 1e-2;

// rows x cols, each row empty with probability 1/4, else 1 .. 40 distinct sorted columns with
// values in [-1, 1): owned rows and halo columns like a shard's operator.
Csr random_operator(std::int64_t rows, std::int64_t cols, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int64_t> length(1, 40);
    std::uniform_int_distribution<std::int64_t> column(0, cols - 1);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    Csr a;
    a.num_rows = rows;
    a.num_cols = cols;
    for (std::int64_t i = 0; i < rows; ++i) {
        std::vector<halo::local_id> row;
        if (rng() % 4 != 0) {
            const auto n = length(rng);
            for (std::int64_t t = 0; t < n; ++t) {
                row.push_back(static_cast<halo::local_id>(column(rng)));
            }
            std::sort(row.begin(), row.end());
            row.erase(std::unique(row.begin(), row.end()), row.end());
        }
        for (const auto j : row) {
            a.indices.push_back(j);
            a.values.push_back(value(rng));
        }
        a.indptr.push_back(static_cast<halo::offset_t>(a.indices.size()));
    }
    return a;
}

std::int64_t row_nnz(const Csr& a, std::int64_t i)
{
    return static_cast<std::int64_t>(a.indptr[i + 1] - a.indptr[i]);
}

double row_abs_sum(const Csr& a, std::int64_t i)
{
    double s = 0.0;
    for (auto t = a.indptr[i]; t < a.indptr[i + 1]; ++t) {
        s += std::abs(a.values[t]);
    }
    return s;
}

// Column slice [c0, c0 + width) of all rows of a view.
template <typename T>
DenseView<T> columns(DenseView<T> m, std::int64_t c0, std::int64_t width)
{
    return {m.data + c0, m.rows, width, m.ld};
}

DenseView<const float> as_const(DenseView<float> m)
{
    return {m.data, m.rows, m.cols, m.ld};
}

// Every element outside columns [c0, c0 + width) of rows `rows` must still be NaN.
void expect_untouched(const HostMatrix& m, RowRange rows, std::int64_t c0, std::int64_t width,
                      const std::string& what)
{
    for (std::int64_t i = 0; i < m.rows; ++i) {
        for (std::int64_t j = 0; j < m.ld; ++j) {
            const bool written = i >= rows.begin && i < rows.end && j >= c0 && j < c0 + width;
            if (!written && !std::isnan(m.data[i * m.ld + j])) {
                ADD_FAILURE() << what << ": row " << i << " column " << j << " (outside rows ["
                              << rows.begin << ", " << rows.end << ") x columns [" << c0 << ", "
                              << c0 + width << ")) was written: got " << m.data[i * m.ld + j]
                              << ", expected the NaN poison";
                return;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// MaxK.

struct MaxkCase {
    std::int64_t dim;
    std::int64_t k;
};

const std::vector<MaxkCase> kMaxkCases = {{64, 8}, {100, 7}, {256, 32}, {16, 16}};

// out (CUDA, downloaded) against the CPU plan's output on rows `rows`, columns [0, dim).
void expect_maxk_close(const Csr& a, const HostMatrix& expected, const HostMatrix& got,
                       RowRange rows, const std::string& what)
{
    int failures = 0;
    for (std::int64_t i = rows.begin; i < rows.end && failures < 5; ++i) {
        const float tol = halo::testing::tolerance<float>(static_cast<double>(row_nnz(a, i) + 4),
                                                          row_abs_sum(a, i));
        for (std::int64_t j = 0; j < expected.cols; ++j) {
            const float e = expected(i, j);
            const float g = got(i, j);
            if (!(std::abs(e - g) <= tol)) {
                ADD_FAILURE() << what << ": row " << i << " (" << row_nnz(a, i)
                              << " nonzeros) column " << j << ": expected " << e << ", got " << g
                              << " (tolerance " << tol << ")";
                ++failures;
                break;
            }
        }
    }
}

TEST(EngineMaxkPlanCuda, TopkAndAggregateMatchCpuOnRowRanges)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    std::uint64_t seed = 9100;
    for (const auto& c : kMaxkCases) {
        const std::string what =
            "maxk plan dim " + std::to_string(c.dim) + " k " + std::to_string(c.k);
        const Csr a = random_operator(300, 420, ++seed);
        const auto x = random_matrix(a.num_cols, c.dim, c.dim + 5, ++seed);
        auto cplan = cpu->make_maxk_plan(a, c.dim, c.k, {});
        auto gplan = gpu.backend->make_maxk_plan(a, c.dim, c.k, {});
        EXPECT_NE(gplan->algorithm().find("maxk-ssd decoupled"), std::string::npos)
            << gplan->algorithm();
        EXPECT_NE(gplan->algorithm().find("edge groups built here"), std::string::npos)
            << gplan->algorithm();
        cplan->topk(x.cview());
        const auto dx = upload(*gpu.backend, x);
        gplan->topk(as_const(dx.view));

        HostMatrix expected(a.num_rows, c.dim, c.dim + 3);
        cplan->aggregate(expected.view(), {0, a.num_rows});

        // Boundary rows first: interior rows and the padding must stay NaN.
        const RowRange interior{0, 137};
        const RowRange boundary{137, a.num_rows};
        const auto dout = upload(*gpu.backend, HostMatrix(a.num_rows, c.dim, c.dim + 3));
        gplan->aggregate(dout.view, boundary);
        gpu.backend->synchronize();
        const auto after_boundary = download(*gpu.backend, dout);
        expect_untouched(after_boundary, boundary, 0, c.dim, what + " boundary aggregate");
        expect_maxk_close(a, expected, after_boundary, boundary, what + " boundary aggregate");
        gplan->aggregate(dout.view, interior);
        gpu.backend->synchronize();
        const auto all = download(*gpu.backend, dout);
        expect_untouched(all, {0, a.num_rows}, 0, c.dim, what + " aggregate");
        expect_maxk_close(a, expected, all, {0, a.num_rows}, what + " aggregate");
    }
}

// Records of rows `rows` as the CPU backend packs them (ld > cols, NaN elsewhere).
HostMatrix cpu_records(MaxkPlan& plan, std::int64_t rows, std::int64_t k, RowRange range)
{
    HostMatrix r(rows, MaxkPlan::record_words(k), MaxkPlan::record_words(k) + 3);
    plan.pack(range, r.view());
    return r;
}

void expect_same_bits(const HostMatrix& expected, const HostMatrix& got, RowRange rows,
                      const std::string& what)
{
    for (std::int64_t i = rows.begin; i < rows.end; ++i) {
        for (std::int64_t w = 0; w < expected.cols; ++w) {
            const auto e = std::bit_cast<std::uint32_t>(expected(i, w));
            const auto g = std::bit_cast<std::uint32_t>(got(i, w));
            if (e != g) {
                ADD_FAILURE() << what << ": row " << i << " word " << w << ": expected 0x"
                              << std::hex << e << ", got 0x" << g << std::dec;
                return;
            }
        }
    }
}

TEST(EngineMaxkPlanCuda, RecordsMatchCpuAndRoundTrip)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    std::uint64_t seed = 9200;
    for (const auto& c : kMaxkCases) {
        const std::string what =
            "maxk records dim " + std::to_string(c.dim) + " k " + std::to_string(c.k);
        const Csr a = random_operator(200, 260, ++seed);
        const auto x = random_matrix(a.num_cols, c.dim, c.dim, ++seed);
        auto cplan = cpu->make_maxk_plan(a, c.dim, c.k, {});
        auto gplan = gpu.backend->make_maxk_plan(a, c.dim, c.k, {});
        cplan->topk(x.cview());
        const auto dx = upload(*gpu.backend, x);
        gplan->topk(as_const(dx.view));

        const RowRange sent{31, 222};
        const auto expected = cpu_records(*cplan, a.num_cols, c.k, sent);
        const std::int64_t words = MaxkPlan::record_words(c.k);
        auto drec = upload(*gpu.backend, HostMatrix(a.num_cols, words, words + 3));
        gplan->pack(sent, drec.view);
        gpu.backend->synchronize();
        const auto got = download(*gpu.backend, drec);
        expect_same_bits(expected, got, sent, what + " pack");
        expect_untouched(got, sent, 0, words, what + " pack");

        // Unpacked into a fresh plan (as halo rows are) and packed again: the same records.
        auto receiver = gpu.backend->make_maxk_plan(a, c.dim, c.k, {});
        receiver->unpack(as_const(drec.view), sent);
        auto drec2 = upload(*gpu.backend, HostMatrix(a.num_cols, words, words + 1));
        receiver->pack(sent, drec2.view);
        gpu.backend->synchronize();
        expect_same_bits(expected, download(*gpu.backend, drec2), sent, what + " unpack + pack");
    }
}

// Writes index `value` into entry `entry` of row `row`'s record.
void set_record_index(HostMatrix& r, std::int64_t k, std::int64_t row, std::int64_t entry,
                      std::int16_t value)
{
    auto* bytes = reinterpret_cast<char*>(&r.data[static_cast<std::size_t>(row * r.ld)]);
    std::memcpy(bytes + 4 * k + 2 * entry, &value, sizeof(value));
}

std::int16_t record_index(const HostMatrix& r, std::int64_t k, std::int64_t row, std::int64_t entry)
{
    std::int16_t value = 0;
    const auto* bytes =
        reinterpret_cast<const char*>(&r.data[static_cast<std::size_t>(row * r.ld)]);
    std::memcpy(&value, bytes + 4 * k + 2 * entry, sizeof(value));
    return value;
}

TEST(EngineMaxkPlanCuda, CorruptRecordsThrowNamingRowAndEntry)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    const std::int64_t dim = 64;
    const std::int64_t k = 7;
    const Csr a = random_operator(100, 150, 9301);
    const auto x = random_matrix(a.num_cols, dim, dim, 9302);
    auto cplan = cpu->make_maxk_plan(a, dim, k, {});
    cplan->topk(x.cview());
    const RowRange halo_rows{100, 150};
    const auto good = cpu_records(*cplan, a.num_cols, k, {0, a.num_cols});

    struct Damage {
        std::int64_t row;
        std::int64_t entry;
        int value;  // < -1000: copy of the previous entry
        const char* why;
    };
    const std::vector<Damage> damages = {{120, 3, static_cast<int>(dim), "outside"},
                                         {149, 0, -1, "outside"},
                                         {104, 5, -2000, "ascend"},
                                         {100, 6, 32767, "outside"}};
    for (const auto& d : damages) {
        auto bad = good;
        const auto value = d.value < -1000 ? record_index(bad, k, d.row, d.entry - 1)
                                           : static_cast<std::int16_t>(d.value);
        set_record_index(bad, k, d.row, d.entry, value);
        // A second damage later in the range: the first one must be reported.
        set_record_index(bad, k, 149, k - 1, -5);
        const auto drec = upload(*gpu.backend, bad);
        auto gplan = gpu.backend->make_maxk_plan(a, dim, k, {});
        const std::string expect_where =
            "row " + std::to_string(d.row) + " entry " + std::to_string(d.entry);
        try {
            gplan->unpack(as_const(drec.view), halo_rows);
            ADD_FAILURE() << "maxk unpack: record damaged at " << expect_where << " (index "
                          << value << ") was accepted";
        } catch (const halo::InputError& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find(expect_where), std::string::npos)
                << "maxk unpack: expected the message to name " << expect_where << ", got: " << msg;
            EXPECT_NE(msg.find(d.why), std::string::npos)
                << "maxk unpack: expected '" << d.why << "' in: " << msg;
        }
    }
    // The undamaged records are accepted.
    const auto drec = upload(*gpu.backend, good);
    auto gplan = gpu.backend->make_maxk_plan(a, dim, k, {});
    EXPECT_NO_THROW(gplan->unpack(as_const(drec.view), halo_rows));
}

TEST(EngineMaxkPlanCuda, StoredEdgeGroupsAreUsedWhenTheyNameTheOperator)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    const std::int64_t dim = 128;
    const std::int64_t k = 16;
    const Csr a = random_operator(250, 330, 9401);
    const auto x = random_matrix(a.num_cols, dim, dim, 9402);
    halo::EdgeGroupOptions options;
    options.group_size = 16;  // not the default: the plan must take the stored groups as they are
    const auto groups = halo::build_edge_groups(a.view(), options);

    SpmmPlanHints hints;
    hints.op = std::string(halo::kernel_operator_gcn);
    hints.stored.push_back(
        halo::edge_groups_to_metadata(groups, a.view(), std::string(halo::kernel_operator_gcn)));
    auto gplan = gpu.backend->make_maxk_plan(a, dim, k, hints);
    EXPECT_NE(gplan->algorithm().find("(stored edge groups)"), std::string::npos)
        << gplan->algorithm();
    EXPECT_NE(gplan->algorithm().find("-g16"), std::string::npos) << gplan->algorithm();

    auto cplan = cpu->make_maxk_plan(a, dim, k, {});
    cplan->topk(x.cview());
    HostMatrix expected(a.num_rows, dim);
    cplan->aggregate(expected.view(), {0, a.num_rows});
    const auto dx = upload(*gpu.backend, x);
    gplan->topk(as_const(dx.view));
    const auto dout = upload(*gpu.backend, HostMatrix(a.num_rows, dim));
    gplan->aggregate(dout.view, {0, a.num_rows});
    gpu.backend->synchronize();
    expect_maxk_close(a, expected, download(*gpu.backend, dout), {0, a.num_rows},
                      "maxk plan with stored edge groups");

    // Metadata of another operator name is not this plan's.
    SpmmPlanHints other = hints;
    other.op = std::string(halo::kernel_operator_adjacency);
    auto built = gpu.backend->make_maxk_plan(a, dim, k, other);
    EXPECT_NE(built->algorithm().find("(edge groups built here)"), std::string::npos)
        << built->algorithm();

    // Metadata of another pattern under this name is an error, not a wrong product.
    const Csr b = random_operator(250, 330, 9403);
    EXPECT_THROW(gpu.backend->make_maxk_plan(b, dim, k, hints), halo::InputError);
}

TEST(EngineMaxkPlanCuda, RejectsWidthsBeyondTheCbsrLimit)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    const Csr a = random_operator(10, 10, 9501);
    EXPECT_THROW(gpu.backend->make_maxk_plan(a, halo::kMaxkMaxDim + 1, 8, {}), halo::InputError);
    EXPECT_THROW(gpu.backend->make_maxk_plan(a, 64, 65, {}), halo::InputError);
}

// ---------------------------------------------------------------------------------------------
// Attention.

// Expected (CPU plan) vs got (CUDA plan) on rows `rows`, columns [c0, c0 + d) of both.
void expect_attention_close(const Csr& a, const HostMatrix& expected, const HostMatrix& got,
                            RowRange rows, std::int64_t c0, std::int64_t d, bool fused,
                            const std::string& what)
{
    int failures = 0;
    for (std::int64_t i = rows.begin; i < rows.end && failures < 5; ++i) {
        if (fused) {
            double err = 0.0;
            double norm = 0.0;
            std::int64_t worst = c0;
            double worst_diff = -1.0;
            for (std::int64_t j = c0; j < c0 + d; ++j) {
                const double diff = static_cast<double>(got(i, j)) - expected(i, j);
                err += diff * diff;
                norm += static_cast<double>(expected(i, j)) * expected(i, j);
                if (!(std::abs(diff) <= worst_diff)) {
                    worst_diff = std::abs(diff);
                    worst = j;
                }
            }
            const bool ok = row_nnz(a, i) == 0
                                ? err == 0.0
                                : std::sqrt(err) <= kFusedTolerance * std::sqrt(norm);
            if (!ok) {
                ADD_FAILURE() << what << ": row " << i << " (" << row_nnz(a, i)
                              << " nonzeros): relative error " << std::sqrt(err / norm) << " above "
                              << kFusedTolerance << "; worst column " << worst - c0 << ": expected "
                              << expected(i, worst) << ", got " << got(i, worst);
                ++failures;
            }
            continue;
        }
        const float tol =
            halo::testing::tolerance<float>(8.0 * static_cast<double>(d + row_nnz(a, i) + 8), 1.0);
        for (std::int64_t j = c0; j < c0 + d; ++j) {
            if (!(std::abs(expected(i, j) - got(i, j)) <= tol)) {
                ADD_FAILURE() << what << ": row " << i << " (" << row_nnz(a, i)
                              << " nonzeros) column " << j - c0 << ": expected " << expected(i, j)
                              << ", got " << got(i, j) << " (tolerance " << tol << ")";
                ++failures;
                break;
            }
        }
    }
}

struct AttentionInputs {
    HostMatrix q;   // n x heads d
    HostMatrix kv;  // m x 2 heads d: K of head h at h d, V at (heads + h) d
};

void check_dot_attention(Gpu& gpu, halo::Backend& cpu, const Csr& a, std::int64_t d,
                         AttentionKernel kernel, const SpmmPlanHints& hints, std::uint64_t seed,
                         const std::string& expect_algorithm)
{
    const std::int64_t heads = 2;
    const std::string what = std::string(kernel == AttentionKernel::fused ? "fused" : "exact") +
                             " attention d " + std::to_string(d);
    AttentionInputs in{random_matrix(a.num_rows, heads * d, heads * d, seed),
                       random_matrix(a.num_cols, 2 * heads * d, 2 * heads * d, seed + 1)};
    const auto dq = upload(*gpu.backend, in.q);
    const auto dkv = upload(*gpu.backend, in.kv);
    auto cplan = cpu.make_attention_plan(a, heads * d, kernel, {});
    auto gplan = gpu.backend->make_attention_plan(a, heads * d, kernel, hints);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const RowRange interior{0, a.num_rows / 2 + 3};
    const RowRange boundary{interior.end, a.num_rows};
    const bool fused = kernel == AttentionKernel::fused && halo::cuda::fused3s_padded_dim(d) > 0;

    HostMatrix expected(a.num_rows, heads * d);
    for (std::int64_t h = 0; h < heads; ++h) {
        cplan->run(columns(in.q.cview(), h * d, d), columns(in.kv.cview(), h * d, d),
                   columns(in.kv.cview(), (heads + h) * d, d), scale,
                   columns(expected.view(), h * d, d), {0, a.num_rows});
    }
    const auto dout = upload(*gpu.backend, HostMatrix(a.num_rows, heads * d, heads * d + 4));
    for (std::int64_t h = 0; h < heads; ++h) {
        const auto head = what + " head " + std::to_string(h);
        auto run = [&](RowRange rows) {
            gplan->run(columns(as_const(dq.view), h * d, d), columns(as_const(dkv.view), h * d, d),
                       columns(as_const(dkv.view), (heads + h) * d, d), scale,
                       columns(dout.view, h * d, d), rows);
        };
        run(boundary);
        gpu.backend->synchronize();
        if (h == 0) {
            const auto partial = download(*gpu.backend, dout);
            expect_untouched(partial, boundary, 0, d, head + " boundary rows");
            expect_attention_close(a, expected, partial, boundary, 0, d, fused,
                                   head + " boundary rows");
        }
        run(interior);
    }
    gpu.backend->synchronize();
    const auto got = download(*gpu.backend, dout);
    expect_untouched(got, {0, a.num_rows}, 0, heads * d, what);
    for (std::int64_t h = 0; h < heads; ++h) {
        expect_attention_close(a, expected, got, {0, a.num_rows}, h * d, d, fused,
                               what + " head " + std::to_string(h));
    }

    // Every head at once (K and V adjacent in one matrix, as in the engine), range by range: the
    // fused kernel gives the same bits as its per-head runs; the exact path (cuSPARSE inside,
    // not bit-reproducible from run to run) the reference within the tolerance.
    const auto dall = upload(*gpu.backend, HostMatrix(a.num_rows, heads * d, heads * d + 4));
    const auto kv_view = as_const(dkv.view);
    for (const RowRange rows : {boundary, interior}) {
        gplan->run_heads(as_const(dq.view), columns(kv_view, 0, heads * d),
                         columns(kv_view, heads * d, heads * d), heads, scale, dall.view, rows);
    }
    gpu.backend->synchronize();
    const auto all = download(*gpu.backend, dall);
    expect_untouched(all, {0, a.num_rows}, 0, heads * d, what + " (run_heads)");
    for (std::int64_t h = 0; h < heads && !fused; ++h) {
        expect_attention_close(a, expected, all, {0, a.num_rows}, h * d, d, fused,
                               what + " (run_heads) head " + std::to_string(h));
    }
    for (std::int64_t i = 0; i < a.num_rows && fused; ++i) {
        for (std::int64_t j = 0; j < heads * d; ++j) {
            ASSERT_EQ(all(i, j), got(i, j))
                << what << " (run_heads): row " << i << " column " << j << " differs from the "
                << "per-head run";
        }
    }
    EXPECT_NE(gplan->algorithm().find(expect_algorithm), std::string::npos)
        << what << ": algorithm() is '" << gplan->algorithm() << "', expected it to contain '"
        << expect_algorithm << "'";
}

TEST(EngineAttentionPlanCuda, ExactMatchesCpuOnHeadSlicesAndRowRanges)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    for (const std::int64_t d : {16, 64}) {
        const Csr a = random_operator(333, 410, 9600 + static_cast<std::uint64_t>(d));
        check_dot_attention(gpu, *cpu, a, d, AttentionKernel::exact, {}, 9700 + d, "unfused-fp32");
    }
}

TEST(EngineAttentionPlanCuda, FusedMatchesCpuAndFallsBackForUnsupportedWidths)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    const Csr a16 = random_operator(333, 410, 9801);
    check_dot_attention(gpu, *cpu, a16, 16, AttentionKernel::fused, {}, 9802,
                        "fused3s (d=16 padded to 32, BSB built here)");
    const Csr a7 = random_operator(333, 410, 9805);
    check_dot_attention(gpu, *cpu, a7, 7, AttentionKernel::fused, {}, 9806,
                        "fused3s (d=7 padded to 32, BSB built here)");
    const Csr a300 = random_operator(120, 150, 9807);
    check_dot_attention(gpu, *cpu, a300, 300, AttentionKernel::fused, {}, 9808,
                        "unfused-fp32 (fused has no d=300 instance)");
    const Csr a64 = random_operator(333, 410, 9803);
    check_dot_attention(gpu, *cpu, a64, 64, AttentionKernel::fused, {}, 9804,
                        "fused3s (d=64, BSB built here)");
}

TEST(EngineAttentionPlanCuda, FusedUsesTheStoredBsb)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    const Csr a = random_operator(300, 380, 9901);
    SpmmPlanHints hints;
    hints.op = std::string(halo::kernel_operator_adjacency);
    hints.stored.push_back(
        halo::bsb_to_metadata(halo::build_bsb(a), a, std::string(halo::kernel_operator_adjacency)));
    auto plan = gpu.backend->make_attention_plan(a, 64, AttentionKernel::fused, hints);
    EXPECT_NE(plan->algorithm().find("stored BSB"), std::string::npos) << plan->algorithm();
    check_dot_attention(gpu, *cpu, a, 64, AttentionKernel::fused, hints, 9902,
                        "fused3s (d=64, stored BSB)");

    // A BSB of another pattern under this operator's name is rejected when the plan is made.
    const Csr b = random_operator(300, 380, 9903);
    EXPECT_THROW(gpu.backend->make_attention_plan(b, 64, AttentionKernel::fused, hints),
                 halo::InputError);
}

TEST(EngineAttentionPlanCuda, AdditiveWithStridedScoreColumns)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    const std::int64_t heads = 3;
    const std::int64_t d = 24;
    const float slope = 0.2f;
    const Csr a = random_operator(280, 350, 10001);
    // el and er: columns of n x heads matrices; scores up to +-4 so the softmax is not flat.
    auto el = random_matrix(a.num_rows, heads, heads, 10002);
    auto er = random_matrix(a.num_cols, heads, heads, 10003);
    for (auto* m : {&el, &er}) {
        for (auto& v : m->data) {
            v *= 4.0f;
        }
    }
    const auto v = random_matrix(a.num_cols, heads * d, heads * d + 2, 10004);
    const auto del = upload(*gpu.backend, el);
    const auto der = upload(*gpu.backend, er);
    const auto dv = upload(*gpu.backend, v);
    for (const auto kernel : {AttentionKernel::exact, AttentionKernel::fused}) {
        const std::string what = std::string("additive attention (") +
                                 (kernel == AttentionKernel::fused ? "fused" : "exact") + " plan)";
        auto cplan = cpu->make_attention_plan(a, d, kernel, {});
        auto gplan = gpu.backend->make_attention_plan(a, d, kernel, {});
        HostMatrix expected(a.num_rows, heads * d);
        const auto dout = upload(*gpu.backend, HostMatrix(a.num_rows, heads * d, heads * d + 1));
        const RowRange interior{0, 101};
        const RowRange boundary{101, a.num_rows};
        for (std::int64_t h = 0; h < heads; ++h) {
            cplan->run_additive(columns(el.cview(), h, 1), columns(er.cview(), h, 1), slope,
                                columns(v.cview(), h * d, d), columns(expected.view(), h * d, d),
                                {0, a.num_rows});
            for (const auto rows : {boundary, interior}) {
                gplan->run_additive(
                    columns(as_const(del.view), h, 1), columns(as_const(der.view), h, 1), slope,
                    columns(as_const(dv.view), h * d, d), columns(dout.view, h * d, d), rows);
            }
        }
        gpu.backend->synchronize();
        const auto got = download(*gpu.backend, dout);
        expect_untouched(got, {0, a.num_rows}, 0, heads * d, what);
        for (std::int64_t h = 0; h < heads; ++h) {
            expect_attention_close(a, expected, got, {0, a.num_rows}, h * d, d, false,
                                   what + " head " + std::to_string(h));
        }
        EXPECT_NE(gplan->algorithm().find("unfused-fp32 additive"), std::string::npos)
            << what << ": " << gplan->algorithm();
    }
}

// ---------------------------------------------------------------------------------------------
// Row normalization.

TEST(EngineNormalizeRowsCuda, MatchesCpuWithLeadingDimensions)
{
    HALO_REQUIRE_GPUS(1);
    Gpu gpu;
    auto cpu = halo::make_cpu_backend();
    for (const std::int64_t cols : {1, 7, 32, 100, 300}) {
        const std::string what = "normalize_rows cols " + std::to_string(cols);
        auto x = random_matrix(517, cols, cols + 3, 10100 + static_cast<std::uint64_t>(cols));
        for (std::int64_t j = 0; j < cols; ++j) {
            x(5, j) = 0.0f;    // a zero row stays zero
            x(9, j) = 1e-30f;  // a tiny row is scaled up, not divided by 1e-12
        }
        HostMatrix expected(x.rows, cols);
        cpu->normalize_rows(x.cview(), expected.view());
        const auto dx = upload(*gpu.backend, x);
        const auto dy = upload(*gpu.backend, HostMatrix(x.rows, cols, cols + 1));
        gpu.backend->normalize_rows(as_const(dx.view), dy.view);
        gpu.backend->synchronize();
        const auto got = download(*gpu.backend, dy);
        expect_untouched(got, {0, x.rows}, 0, cols, what);
        const float tol = halo::testing::tolerance<float>(4.0, 1.0);
        int failures = 0;
        for (std::int64_t i = 0; i < x.rows && failures < 5; ++i) {
            for (std::int64_t j = 0; j < cols; ++j) {
                if (!(std::abs(expected(i, j) - got(i, j)) <= tol)) {
                    ADD_FAILURE() << what << ": row " << i << " column " << j << ": expected "
                                  << expected(i, j) << ", got " << got(i, j);
                    ++failures;
                    break;
                }
            }
        }
        EXPECT_EQ(got(5, 0), 0.0f) << what << ": zero row";
    }
    // Empty shapes launch nothing.
    const auto dx = upload(*gpu.backend, HostMatrix(4, 8));
    EXPECT_NO_THROW(gpu.backend->normalize_rows(DenseView<const float>{dx.view.data, 0, 8, 8},
                                                DenseView<float>{dx.view.data, 0, 8, 8}));
    EXPECT_NO_THROW(gpu.backend->normalize_rows(DenseView<const float>{dx.view.data, 4, 0, 8},
                                                DenseView<float>{dx.view.data, 4, 0, 8}));
    gpu.backend->synchronize();
}

}  // namespace
