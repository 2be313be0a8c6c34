// Backend-generic test helpers (any halo::Backend, host or device memory; no CUDA headers):
// padded matrices moved to and from spmm_fixtures.hpp's HostMatrix whole, padding included, so
// padding that starts as NaN and is written comes back; the checks of a padded result; and the
// SpMM check that runs a plan range by range on a NaN-poisoned output.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo_test.hpp"
#include "spmm_fixtures.hpp"

namespace halo::testing {

// A backend matrix of rows x ld elements seen as rows x cols.
struct DeviceMatrix {
    Matrix storage;
    DenseView<float> view;
};

inline DeviceMatrix upload(Backend& backend, const HostMatrix& h)
{
    auto storage = backend.allocate(h.rows, h.ld);
    backend.copy_from_host(h.data.data(), storage.view());
    const DenseView<float> view{storage.data(), h.rows, h.cols, h.ld};
    return {std::move(storage), view};
}

inline HostMatrix download(Backend& backend, const DeviceMatrix& d)
{
    HostMatrix h(d.view.rows, d.view.cols, d.view.ld);
    backend.copy_to_host(d.storage.view(), h.data.data());
    return h;
}

// NaN equals NaN here: "unchanged" includes a poisoned element staying poisoned.
inline bool same(float a, float b)
{
    return (std::isnan(a) && std::isnan(b)) || a == b;
}

inline void expect_padding_nan(const HostMatrix& m, const std::string& what)
{
    for (std::int64_t i = 0; i < m.rows; ++i) {
        for (std::int64_t j = m.cols; j < m.ld; ++j) {
            ASSERT_TRUE(std::isnan(m.data[i * m.ld + j]))
                << what << ": padding (" << i << ", " << j << ") was written";
        }
    }
}

// Per-row tolerance of an SpMM row: a sum of nnz products |a| * |x| in some order.
inline float spmm_row_tolerance(const Csr& a, std::int64_t i, float max_x)
{
    return tolerance<float>(4, std::max<double>(1.0, a.row_nnz(i)) * row_max_abs(a, i) * max_x);
}

// Runs the plan over `ranges` in order on a NaN-poisoned y; after each run, rows not yet covered
// (and the padding) must still be NaN and covered rows must match the reference.
inline void check_spmm(Backend& backend, SpmmPlan& plan, const Csr& a, std::int64_t width,
                       const std::vector<RowRange>& ranges, std::uint64_t seed)
{
    SCOPED_TRACE(::testing::Message()
                 << a.num_rows << " rows, " << a.nnz() << " nonzeros, "
                 << (a.has_values() ? "valued" : "pattern") << ", width " << width);
    const auto x = random_matrix(a.num_cols, width, width + 3, seed);
    HostMatrix want(a.num_rows, width, width + 1);
    reference::spmm(a.view(), x.cview(), want.view());
    auto dx = upload(backend, x);
    auto dy = upload(backend, HostMatrix(a.num_rows, width, width + 1));
    const float max_x = x.max_abs();
    std::vector<char> covered(static_cast<std::size_t>(a.num_rows), 0);
    for (const auto& range : ranges) {
        SCOPED_TRACE(::testing::Message()
                     << "after rows [" << range.begin << ", " << range.end << ")");
        plan.run(dx.view, dy.view, range);
        for (auto i = range.begin; i < range.end; ++i) {
            covered[i] = 1;
        }
        const auto got = download(backend, dy);
        expect_padding_nan(got, "spmm y");
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            const float tol = spmm_row_tolerance(a, i, max_x);
            for (std::int64_t j = 0; j < width; ++j) {
                if (covered[i] == 0) {
                    ASSERT_TRUE(std::isnan(got(i, j))) << "row " << i << " outside the ranges "
                                                       << "was written: " << got(i, j);
                } else {
                    ASSERT_TRUE(std::isfinite(got(i, j))) << "(" << i << ", " << j << ")";
                    ASSERT_NEAR(got(i, j), want(i, j), tol) << "(" << i << ", " << j << ")";
                }
            }
        }
    }
}

// run_add over `ranges` in order on y = random values (NaN padding) y0: after each run, rows
// covered so far hold y0 + A x (within the row tolerance; with `bitwise`, exactly y0 plus what
// run() writes for the row), the other rows keep y0's bits and the padding stays NaN. `a` is the
// product the plan computes (its operator with any scaling applied).
inline void check_spmm_add(Backend& backend, SpmmPlan& plan, const Csr& a, std::int64_t width,
                           const std::vector<RowRange>& ranges, std::uint64_t seed, bool bitwise)
{
    SCOPED_TRACE(::testing::Message()
                 << "run_add: " << a.num_rows << " rows, " << a.nnz() << " nonzeros, "
                 << (a.has_values() ? "valued" : "pattern") << ", width " << width);
    ASSERT_TRUE(plan.adds_in_place());
    const auto x = random_matrix(a.num_cols, width, width + 3, seed);
    auto y0 = random_matrix(a.num_rows, width, width + 1, seed + 1);
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        y0.data[static_cast<std::size_t>(i * y0.ld + width)] = kNaN;
    }
    HostMatrix sums(a.num_rows, width, width + 1);
    reference::spmm(a.view(), x.cview(), sums.view());
    auto dx = upload(backend, x);
    auto dy = upload(backend, y0);
    auto dsums = upload(backend, HostMatrix(a.num_rows, width, width + 1));
    const float max_x = x.max_abs();
    std::vector<char> covered(static_cast<std::size_t>(a.num_rows), 0);
    for (const auto& range : ranges) {
        SCOPED_TRACE(::testing::Message()
                     << "after rows [" << range.begin << ", " << range.end << ")");
        plan.run_add(dx.view, dy.view, range);
        if (bitwise) {
            plan.run(dx.view, dsums.view, range);
        }
        for (auto i = range.begin; i < range.end; ++i) {
            covered[static_cast<std::size_t>(i)] = 1;
        }
        const auto got = download(backend, dy);
        const auto run_sums = bitwise ? download(backend, dsums) : HostMatrix(0, 0, 0);
        expect_padding_nan(got, "run_add y");
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            const float tol = spmm_row_tolerance(a, i, max_x);
            for (std::int64_t j = 0; j < width; ++j) {
                if (covered[static_cast<std::size_t>(i)] == 0) {
                    ASSERT_TRUE(same(got(i, j), y0(i, j)))
                        << "row " << i << " outside the ranges changed: " << got(i, j);
                } else if (bitwise) {
                    const float have = got(i, j);
                    const float want = y0(i, j) + run_sums(i, j);
                    ASSERT_EQ(std::memcmp(&have, &want, sizeof(float)), 0)
                        << "(" << i << ", " << j << "): " << have << " != " << want;
                } else {
                    // The sum's tolerance and the rounding of the addition to y0 (twice: here
                    // and where the plan adds).
                    const float add_tol = 2 * std::numeric_limits<float>::epsilon() *
                                          (std::abs(y0(i, j)) + std::abs(sums(i, j)));
                    ASSERT_NEAR(got(i, j), y0(i, j) + sums(i, j), tol + add_tol)
                        << "(" << i << ", " << j << ")";
                }
            }
        }
    }
}

}  // namespace halo::testing
