// CPU references of sparse attention over a CSR pattern, the oracle of the fused (Fused3S) and
// unfused attention kernels: plain loops in double precision, written to be checked by eye.
//
//   O[i, :] = sum_{j in row i} softmax_j(e_ij) V[j, :],   softmax over the row's nonzeros only,
//
// with e_ij = scale * Q[i, :] . K[j, :] (graph transformer, AGNN with cosine inputs) or
// e_ij = LeakyReLU(el[i] + er[j]) (GAT's additive scores, el = X a_l and er = X a_r precomputed).
// The pattern's values are ignored (the mask is binary, as in Fused3S). Rows without a nonzero
// produce zeros. The softmax subtracts the row's maximum before exponentiating, so large scores
// stay finite.
#pragma once

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"

namespace halo::reference {

/// Dot-product sparse attention; out is a.num_rows x v.cols. Requires q.cols == k.cols,
/// q.rows >= a.num_rows, k.rows and v.rows >= a.num_cols, out.cols == v.cols. Only rows in
/// `rows` are written.
void sparse_attention(const CsrView& a, DenseView<const float> q, DenseView<const float> k,
                      DenseView<const float> v, double scale, DenseView<double> out, RowRange rows);
void sparse_attention(const CsrView& a, DenseView<const float> q, DenseView<const float> k,
                      DenseView<const float> v, double scale, DenseView<double> out);

/// GAT-style additive attention: e_ij = LeakyReLU(el[i] + er[j]) with the given negative slope;
/// el has a.num_rows entries, er a.num_cols.
void additive_attention(const CsrView& a, const float* el, const float* er, double negative_slope,
                        DenseView<const float> v, DenseView<double> out);
/// The same for the rows of `rows`, el (rows x 1) and er (columns x 1) as views with their own
/// leading dimension (a column of a nodes x heads matrix).
void additive_attention(const CsrView& a, DenseView<const float> el, DenseView<const float> er,
                        double negative_slope, DenseView<const float> v, DenseView<double> out,
                        RowRange rows);

}  // namespace halo::reference
