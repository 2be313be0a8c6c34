// halo-bench's SpMM check (bench_spmm.hpp): the checked rows, their reference and the comparison.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "bench_spmm.hpp"
#include "halo/kernels_host/spmm.hpp"

namespace halo::bench_app::spmm {

CheckSet make_check_set(const halo::Csr& a, std::int64_t sample_rows, std::uint64_t seed)
{
    CheckSet cs{bench_app::make_check_set(a, sample_rows, seed), {}};
    cs.abs_values.reserve(cs.sub.values.size());
    for (const float v : cs.sub.values) {
        cs.abs_values.push_back(std::fabs(v));
    }
    return cs;
}

Reference make_reference(const CheckSet& cs, const float* x, std::int64_t x_rows, std::int64_t dim,
                         cudaStream_t stream, halo::FeatureType type)
{
    auto xs = gather_rows({x, x_rows, dim, dim}, cs.columns, stream);
    halo::round_features(xs, type);
    Reference ref;
    ref.values.resize(cs.rows.size() * dim);
    ref.scale.resize(cs.rows.size() * dim);
    const auto sub_rows = cs.sub.num_rows;
    const auto sub_cols = cs.sub.num_cols;
    halo::reference::spmm(cs.sub.view(), halo::dense_view<const float>(xs.data(), sub_cols, dim),
                          halo::dense_view(ref.values.data(), sub_rows, dim));
    for (auto& v : xs) {
        v = std::fabs(v);
    }
    auto abs_view = cs.sub.view();
    abs_view.values = cs.abs_values.empty() ? nullptr : cs.abs_values.data();
    halo::reference::spmm(abs_view, halo::dense_view<const float>(xs.data(), sub_cols, dim),
                          halo::dense_view(ref.scale.data(), sub_rows, dim));
    return ref;
}

CheckResult compare(const CheckSet& cs, const Reference& ref, const std::vector<float>& y,
                    std::int64_t dim)
{
    constexpr double eps = std::numeric_limits<float>::epsilon();
    CheckResult result;
    result.runs = 1;
    result.rows = static_cast<std::int64_t>(cs.rows.size());
    for (std::int64_t r = 0; r < result.rows; ++r) {
        const double k = std::min(2.0 * cs.sub.row_nnz(r), kMaxToleranceTerms);
        for (std::int64_t j = 0; j < dim; ++j) {
            const auto e = r * dim + j;
            ++result.elements;
            if (!std::isfinite(y[e])) {
                ++result.nonfinite;
                ++result.bad;
                continue;
            }
            const double expected = ref.values[e];
            const double scale = ref.scale[e];
            const double diff = std::fabs(static_cast<double>(y[e]) - expected);
            const double tolerance = k * eps * scale;
            if (diff > tolerance) {
                ++result.bad;
            }
            if (diff > 0) {
                // An empty row has scale 0 and must be exactly 0: any difference is unbounded.
                constexpr double unbounded = std::numeric_limits<double>::max();
                result.max_rel_error =
                    std::max(result.max_rel_error, scale > 0 ? diff / scale : unbounded);
                result.max_tolerance_used = std::max(result.max_tolerance_used,
                                                     tolerance > 0 ? diff / tolerance : unbounded);
            }
            result.err_sq += diff * diff;
            result.ref_sq += expected * expected;
        }
    }
    return result;
}

CheckResult checked_run(const std::function<void()>& run_once, const CheckSet& cs,
                        const Reference& ref, float* y, const halo::Csr& a, std::int64_t dim,
                        cudaStream_t stream)
{
    bench::fill_value(y, static_cast<std::size_t>(a.num_rows * dim),
                      std::numeric_limits<float>::quiet_NaN(), stream);
    run_once();
    return compare(cs, ref, gather_rows({y, a.num_rows, dim, dim}, cs.rows, stream), dim);
}

}  // namespace halo::bench_app::spmm
