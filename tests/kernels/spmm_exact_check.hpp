// The strict SpMM check of the shape and low-precision GPU tests, CPU only: seeded features of
// random sign with magnitudes in [0.75, 1), a double-precision reference of chosen rows together
// with sum |a_ik x_kj| per element, and the comparison of rows a kernel produced against it.
//
// Tolerance: tolerance<float>(kSpmmK, sum_k |a_ik x_kj|) per element. A float sum of n terms in
// any order errs by at most (n - 1) u sum|terms| (u = eps / 2), so k = 6 is a hard bound for rows
// of up to 13 nonzeros. Longer rows of random-sign terms accumulate their roundings as a random
// walk: simulated fp32 fma sums stayed below 2.3 eps * sum|terms| over 10^7 rows of 10..40 terms
// and below 0.8 eps * sum|terms| for rows of 10^6 terms (sequential order, the worst of the
// kernels' orders), so k = 6 keeps a margin of 2.5x while staying tight on long rows: on a row of
// 10^6 products of magnitude >= 0.75 (values +-1), the tolerance is about 6 * eps * 0.875e6 = 0.63,
// so one dropped or repeated nonzero fails (the tests assert this margin where they rely on it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo_test.hpp"

namespace halo::testing {

inline constexpr double kSpmmK = 6.0;
inline constexpr float kFeatureMin = 0.75f;

// Counter-based (splitmix64) features: x(i, j) = +-[0.75, 1) from (seed, i * cols + j) only, so
// any thread count and any leading dimension give the same values. Padding [cols, ld) is NaN.
inline void signed_features(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                            std::uint64_t seed)
{
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < ld; ++j) {
            if (j >= cols) {
                x[i * ld + j] = std::numeric_limits<float>::quiet_NaN();
                continue;
            }
            std::uint64_t z = seed * 0x9E3779B97F4A7C15ull +
                              static_cast<std::uint64_t>(i * cols + j) + 0x632BE59BD9B4E019ull;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
            const float magnitude = kFeatureMin + (1.0f - kFeatureMin) * u;
            x[i * ld + j] = (z & 1u) != 0 ? -magnitude : magnitude;
        }
    }
}

// Reference rows of y = A x in double: value(r, j) and scale(r, j) = sum_k |a_ik x_kj| for the
// r-th listed row i = rows[r], j < d.
struct ExactRows {
    std::vector<std::int64_t> rows;
    std::int64_t d = 0;
    std::vector<double> value;
    std::vector<double> scale;
};

inline ExactRows exact_rows(const Csr& a, const float* x, std::int64_t ldx, std::int64_t d,
                            std::vector<std::int64_t> rows)
{
    ExactRows e;
    e.rows = std::move(rows);
    e.d = d;
    const auto n = static_cast<std::int64_t>(e.rows.size());
    e.value.assign(static_cast<std::size_t>(n * d), 0.0);
    e.scale.assign(static_cast<std::size_t>(n * d), 0.0);
#pragma omp parallel for schedule(dynamic, 16)
    for (std::int64_t r = 0; r < n; ++r) {
        const std::int64_t i = e.rows[static_cast<std::size_t>(r)];
        double* v = e.value.data() + r * d;
        double* s = e.scale.data() + r * d;
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            const double w = a.has_values() ? a.values[static_cast<std::size_t>(k)] : 1.0;
            const float* xr =
                x + static_cast<std::int64_t>(a.indices[static_cast<std::size_t>(k)]) * ldx;
            for (std::int64_t j = 0; j < d; ++j) {
                const double t = w * xr[j];
                v[j] += t;
                s[j] += std::abs(t);
            }
        }
    }
    return e;
}

// Compares rows gathered from a kernel's y (got: rows.size() x ld, padding included) with the
// reference: rows inside the ranges within tolerance, rows outside them and every padding column
// still NaN. Reports the first few failures with row, column, expected, got and tolerance.
inline ::testing::AssertionResult rows_match(const ExactRows& e, const std::vector<float>& got,
                                             std::int64_t ld, const std::vector<char>& in_range)
{
    std::int64_t bad = 0;
    std::ostringstream out;
    out << std::setprecision(9);
    const auto n = static_cast<std::int64_t>(e.rows.size());
    for (std::int64_t r = 0; r < n; ++r) {
        const std::int64_t i = e.rows[static_cast<std::size_t>(r)];
        const bool inside = in_range[static_cast<std::size_t>(r)] != 0;
        for (std::int64_t j = 0; j < ld; ++j) {
            const float g = got[static_cast<std::size_t>(r * ld + j)];
            bool ok = true;
            double want = std::numeric_limits<double>::quiet_NaN();
            double tol = 0.0;
            if (!inside || j >= e.d) {
                ok = std::isnan(g);
            } else {
                want = e.value[static_cast<std::size_t>(r * e.d + j)];
                tol = tolerance<float>(kSpmmK, e.scale[static_cast<std::size_t>(r * e.d + j)]);
                ok = std::abs(static_cast<double>(g) - want) <= tol;  // NaN fails
            }
            if (!ok && ++bad <= 5) {
                out << "\n  row " << i << " col " << j
                    << (inside ? (j >= e.d ? " (padding)" : "") : " (outside the ranges)")
                    << ": expected " << want << ", got " << g << ", tolerance " << tol;
            }
        }
    }
    if (bad == 0) {
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << bad << " wrong elements in " << n << " checked rows" << out.str();
}

}  // namespace halo::testing
