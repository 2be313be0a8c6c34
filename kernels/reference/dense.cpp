#include <algorithm>
#include <cmath>
#include <limits>

#include "halo/core/error.hpp"
#include "halo/kernels_host/dense_ops.hpp"

namespace halo {

namespace reference {

void gemm(DenseView<const float> a, DenseView<const float> b, DenseView<float> c, float alpha,
          float beta)
{
    HALO_EXPECTS(a.cols == b.rows, "A is ", a.rows, " x ", a.cols, ", B is ", b.rows, " x ",
                 b.cols);
    HALO_EXPECTS(c.rows == a.rows && c.cols == b.cols, "C is ", c.rows, " x ", c.cols,
                 ", expected ", a.rows, " x ", b.cols);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < a.rows; ++i) {
        for (std::int64_t j = 0; j < b.cols; ++j) {
            float sum = 0.0f;
            for (std::int64_t p = 0; p < a.cols; ++p) {
                sum += a(i, p) * b(p, j);
            }
            c(i, j) = beta == 0.0f ? alpha * sum : alpha * sum + beta * c(i, j);
        }
    }
}

void bias_activation(DenseView<float> y, const float* bias, Activation act, RowRange rows)
{
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= y.rows, "row range [",
                 rows.begin, ", ", rows.end, ") outside [0, ", y.rows, ")");
#pragma omp parallel for schedule(static)
    for (std::int64_t i = rows.begin; i < rows.end; ++i) {
        for (std::int64_t j = 0; j < y.cols; ++j) {
            float v = y(i, j) + (bias != nullptr ? bias[j] : 0.0f);
            if (act == Activation::relu) {
                v = v > 0.0f ? v : 0.0f;
            }
            y(i, j) = v;
        }
    }
}

void bias_activation(DenseView<float> y, const float* bias, Activation act)
{
    bias_activation(y, bias, act, {0, y.rows});
}

void softmax_rows(DenseView<float> y)
{
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < y.rows; ++i) {
        float max = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = 0; j < y.cols; ++j) {
            max = std::max(max, y(i, j));
        }
        float sum = 0.0f;
        for (std::int64_t j = 0; j < y.cols; ++j) {
            y(i, j) = std::exp(y(i, j) - max);
            sum += y(i, j);
        }
        for (std::int64_t j = 0; j < y.cols; ++j) {
            y(i, j) /= sum;
        }
    }
}

}  // namespace reference
}  // namespace halo
