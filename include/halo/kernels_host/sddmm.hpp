// Sampled dense-dense matrix product (SDDMM) and the sparse row softmax: the score and
// normalization steps of attention layers (GAT, AGNN, graph transformer).
#pragma once

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"

namespace halo::reference {

/// out[k] = scale_k * dot(Q[i, :], K[j, :]) for every nonzero k = (i, j) of `a` in `rows`, where
/// scale_k is a.values[k] (1 for a pattern matrix). out has a.nnz() entries, indexed like
/// a.indices; entries of rows outside the range are untouched. Requires q.cols == k.cols,
/// q.rows >= a.num_rows, k.rows >= a.num_cols. Dot products accumulate in float in order.
void sddmm(const CsrView& a, DenseView<const float> q, DenseView<const float> k, float* out,
           RowRange rows);

/// sddmm over all rows of `a`.
void sddmm(const CsrView& a, DenseView<const float> q, DenseView<const float> k, float* out);

/// Softmax over the nonzeros of each row, in place on `values` (a.nnz() entries, indexed like
/// a.indices): values[k] = exp(values[k] - max_row) / sum_row. Empty rows stay empty.
void csr_row_softmax(const CsrView& a, float* values);

}  // namespace halo::reference
