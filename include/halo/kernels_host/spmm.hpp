// Sparse x dense matrix product (SpMM), the aggregation step of every GNN layer:
//   Y[i, :] = sum_k A[i, k] * X[k, :]   for the rows i of a row range.
// Rows outside the range are left untouched, so interior rows can be aggregated while the halo
// exchange is in flight and boundary rows after it (docs/ENGINE.md "One layer").
#pragma once

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"

namespace halo::reference {

/// Plain CPU SpMM: for each row in `rows` (OpenMP across rows), the nonzeros of that row in
/// storage order, accumulated in float. Pattern matrices (a.values == null) use 1 for each
/// nonzero. Requires x.rows >= a.num_cols, y.rows >= a.num_rows, x.cols == y.cols and rows inside
/// [0, a.num_rows). The fixed per-row order makes the result independent of the thread count.
void spmm(const CsrView& a, DenseView<const float> x, DenseView<float> y, RowRange rows);

/// spmm over all rows of `a`.
void spmm(const CsrView& a, DenseView<const float> x, DenseView<float> y);

/// y[rows] += A[rows] * x: each row summed as spmm() sums it, then added to y's row (bit for bit
/// spmm() into a buffer followed by y += buffer). Same requirements as spmm().
void spmm_add(const CsrView& a, DenseView<const float> x, DenseView<float> y, RowRange rows);

}  // namespace halo::reference
