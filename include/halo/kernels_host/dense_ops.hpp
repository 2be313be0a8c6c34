// Dense operations of a GNN layer: the combination GEMM, bias plus activation, and the row-wise
// softmax of classifier outputs.
#pragma once

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"

namespace halo::reference {

/// C = alpha * A * B + beta * C for row-major A [m, k], B [k, n], C [m, n]. Each C(i, j) is
/// accumulated in float over p = 0 .. k-1 in order (deterministic, thread-count independent).
/// With beta == 0, C is not read (it may hold NaN).
void gemm(DenseView<const float> a, DenseView<const float> b, DenseView<float> c,
          float alpha = 1.0f, float beta = 0.0f);

/// Y[i, j] = act(Y[i, j] + bias[j]) for i in `rows`; bias may be null (no bias).
void bias_activation(DenseView<float> y, const float* bias, Activation act, RowRange rows);

/// bias_activation over all rows of y.
void bias_activation(DenseView<float> y, const float* bias, Activation act);

/// Numerically stable softmax of each row of y, in place (max subtracted before exp).
void softmax_rows(DenseView<float> y);

}  // namespace halo::reference
