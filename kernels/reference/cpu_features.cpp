// Matrices of 16-bit elements in host memory (halo/core/feature_view.hpp): the CPU backend's
// gemm_features, store_features, widen_features and its plans' run_features. Each widens its
// 16-bit operands exactly to fp32, computes as the fp32 operation does, and rounds what it
// stores as halo::round_feature: so a step stored in 16 bits gives, bit for bit, what the same
// step gives with its stores rounded in fp32 memory (the definition, docs/KERNELS.md).
// Also Backend's and SpmmPlan's defaults of those calls (fp32 alone).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "cpu_plans.hpp"
#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/feature_view.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/dense_ops.hpp"

namespace halo {
namespace {

DenseView<const float> as_fp32(FeatureView x)
{
    return {static_cast<const float*>(x.data), x.rows, x.cols, x.ld};
}

// One row's conversions, element by element: the callers run rows in parallel, and the span
// functions of feature_type.hpp open a parallel region of their own per call (one per row
// costs milliseconds each on a loaded machine).
void encode_row(const float* v, std::int64_t n, FeatureType type, std::uint16_t* bits)
{
    for (std::int64_t j = 0; j < n; ++j) {
        bits[j] = type == FeatureType::fp16 ? float_to_half_bits(v[j]) : float_to_bf16_bits(v[j]);
    }
}

void decode_row(const std::uint16_t* bits, std::int64_t n, FeatureType type, float* v)
{
    for (std::int64_t j = 0; j < n; ++j) {
        v[j] = type == FeatureType::fp16 ? half_bits_to_float(bits[j]) : bf16_bits_to_float(bits[j]);
    }
}

}  // namespace

void check_feature_view(FeatureView x, const char* what)
{
    HALO_EXPECTS(x.rows >= 0 && x.cols >= 0 && x.ld >= x.cols, what, ": bad shape ", x.rows, "x",
                 x.cols, " ld ", x.ld);
    HALO_EXPECTS(x.data != nullptr || x.rows == 0 || x.cols == 0, what, ": no data");
}

void check_gemm_features(FeatureView a, FeatureView b, FeatureView c, float beta)
{
    HALO_EXPECTS(beta == 0.0f || beta == 1.0f, "gemm_features: beta ", beta, " (0 or 1)");
    check_feature_view(a, "gemm_features a");
    check_feature_view(b, "gemm_features b");
    check_feature_view(c, "gemm_features c");
    HALO_EXPECTS(a.type == b.type && (c.type == a.type || c.type == FeatureType::fp32),
                 "gemm_features: a ", to_string(a.type), ", b ", to_string(b.type), ", c ",
                 to_string(c.type), " (a and b of one type, c of it or fp32)");
    HALO_EXPECTS(a.cols == b.rows && c.rows == a.rows && c.cols == b.cols,
                 "gemm_features: shapes ", a.rows, "x", a.cols, " * ", b.rows, "x", b.cols,
                 " into ", c.rows, "x", c.cols);
}

void SpmmPlan::run_features(FeatureView x, DenseView<float> y, RowRange rows)
{
    HALO_EXPECTS(x.type == FeatureType::fp32, "the SpMM plan ", algorithm(), " does not read ",
                 to_string(x.type), " X");
    run(as_fp32(x), y, rows);
}

std::optional<ActivationOverflow> Backend::gemm_features(FeatureView a, FeatureView b,
                                                         MutableFeatureView c, std::int32_t store,
                                                         float beta)
{
    static_cast<void>(store);
    HALO_EXPECTS(a.type == FeatureType::fp32 && b.type == FeatureType::fp32 &&
                     c.type == FeatureType::fp32,
                 "the ", name(), " backend does not store 16-bit matrices");
    gemm(as_fp32(a), as_fp32(b), {static_cast<float*>(c.data), c.rows, c.cols, c.ld}, 1.0f, beta);
    return std::nullopt;
}

std::optional<ActivationOverflow> Backend::store_features(DenseView<const float> src,
                                                          const float* bias, Activation act,
                                                          MutableFeatureView dst,
                                                          std::int32_t store)
{
    static_cast<void>(store);
    HALO_EXPECTS(dst.type == FeatureType::fp32, "the ", name(), " backend does not store ",
                 to_string(dst.type), " matrices");
    const DenseView<float> out{static_cast<float*>(dst.data), dst.rows, dst.cols, dst.ld};
    HALO_EXPECTS(src.rows == out.rows && src.cols == out.cols, "store_features shapes differ");
    axpby(1.0f, src, 0.0f, out);
    bias_activation(out, bias, act, {0, out.rows});
    return std::nullopt;
}

void Backend::widen_features(FeatureView src, DenseView<float> dst)
{
    HALO_EXPECTS(src.type == FeatureType::fp32, "the ", name(), " backend does not store ",
                 to_string(src.type), " matrices");
    axpby(1.0f, as_fp32(src), 0.0f, dst);
}

namespace reference {

void widen_host(FeatureView x, DenseView<float> dst)
{
    check_feature_view(x, "widen");
    HALO_EXPECTS(dst.rows == x.rows && dst.cols == x.cols, "widen: shapes differ: ", x.rows, "x",
                 x.cols, " into ", dst.rows, "x", dst.cols);
#pragma omp parallel for schedule(static) if (x.rows > (1 << 10))
    for (std::int64_t i = 0; i < x.rows; ++i) {
        const auto n = static_cast<std::size_t>(x.cols);
        if (x.type == FeatureType::fp32) {
            std::memcpy(dst.row(i), static_cast<const float*>(x.data) + i * x.ld, n * 4);
        } else {
            decode_row(static_cast<const std::uint16_t*>(x.data) + i * x.ld, x.cols, x.type,
                       dst.row(i));
        }
    }
}

std::vector<float> widened(FeatureView x)
{
    std::vector<float> out(static_cast<std::size_t>(x.rows * x.cols));
    widen_host(x, dense_view(out.data(), x.rows, x.cols));
    return out;
}

// The first element of rows [0, v.rows) that `type` stores as infinity, or nullopt.
std::optional<ActivationOverflow> first_overflow(DenseView<const float> v, FeatureType type,
                                                 std::int32_t store)
{
    if (type == FeatureType::fp32) {
        return std::nullopt;  // an fp32 store rounds nothing
    }
    // The first element (row-major) that is finite and rounds to infinity.
    std::int64_t first = v.rows * v.cols;
#pragma omp parallel for schedule(static) reduction(min : first) if (v.rows > (1 << 10))
    for (std::int64_t i = 0; i < v.rows; ++i) {
        for (std::int64_t j = 0; j < v.cols; ++j) {
            const float x = v(i, j);
            if (std::isfinite(x) && std::isinf(round_feature(x, type))) {
                first = std::min(first, i * v.cols + j);
                break;
            }
        }
    }
    if (first == v.rows * v.cols) {
        return std::nullopt;
    }
    const auto row = first / v.cols;
    const auto col = first % v.cols;
    return ActivationOverflow{row, col, v(row, col), store};
}

namespace {

void round_rows(DenseView<float> v, FeatureType type)
{
#pragma omp parallel for schedule(static) if (v.rows > (1 << 10))
    for (std::int64_t i = 0; i < v.rows; ++i) {
        round_features({v.row(i), static_cast<std::size_t>(v.cols)}, type);
    }
}

}  // namespace

std::optional<ActivationOverflow> store_host(DenseView<const float> src, const float* bias,
                                             Activation act, MutableFeatureView dst,
                                             std::int32_t store)
{
    check_feature_view(dst, "store_features");
    HALO_EXPECTS(src.rows == dst.rows && src.cols == dst.cols, "store_features: shapes differ: ",
                 src.rows, "x", src.cols, " into ", dst.rows, "x", dst.cols);
    const auto type = dst.type;
    std::vector<float> work(static_cast<std::size_t>(src.rows * src.cols));
    const auto w = dense_view(work.data(), src.rows, src.cols);
#pragma omp parallel for schedule(static) if (src.rows > (1 << 10))
    for (std::int64_t i = 0; i < src.rows; ++i) {
        std::copy_n(src.row(i), src.cols, w.row(i));
    }
    auto overflow = first_overflow(w, type, store);
    round_rows(w, type);
    reference::bias_activation(w, bias, act, {0, w.rows});
    if (!overflow) {
        overflow = first_overflow(w, type, store);
    }
#pragma omp parallel for schedule(static) if (src.rows > (1 << 10))
    for (std::int64_t i = 0; i < w.rows; ++i) {
        const auto n = static_cast<std::size_t>(w.cols);
        if (type == FeatureType::fp32) {
            std::memcpy(static_cast<float*>(dst.data) + i * dst.ld, w.row(i), n * 4);
        } else {
            encode_row(w.row(i), w.cols, type, static_cast<std::uint16_t*>(dst.data) + i * dst.ld);
        }
    }
    return overflow;
}

std::optional<ActivationOverflow> gemm_host(FeatureView a, FeatureView b, MutableFeatureView c,
                                            std::int32_t store, float beta)
{
    check_gemm_features(a, b, c, beta);
    const auto wa = widened(a);
    const auto wb = widened(b);
    if (c.type == FeatureType::fp32) {
        reference::gemm(dense_view(wa.data(), a.rows, a.cols), dense_view(wb.data(), b.rows, b.cols),
                        {static_cast<float*>(c.data), c.rows, c.cols, c.ld}, 1.0f, beta);
        return std::nullopt;
    }
    // A 16-bit c: its elements widened where they are added to.
    std::vector<float> wc = beta == 0.0f ? std::vector<float>(static_cast<std::size_t>(c.rows * c.cols))
                                         : widened(c);
    const auto out = dense_view(wc.data(), c.rows, c.cols);
    reference::gemm(dense_view(wa.data(), a.rows, a.cols), dense_view(wb.data(), b.rows, b.cols),
                    out, 1.0f, beta);
    const auto overflow = first_overflow(out, c.type, store);
#pragma omp parallel for schedule(static) if (c.rows > (1 << 10))
    for (std::int64_t i = 0; i < c.rows; ++i) {
        encode_row(out.row(i), c.cols, c.type, static_cast<std::uint16_t*>(c.data) + i * c.ld);
    }
    return overflow;
}

}  // namespace reference
}  // namespace halo
