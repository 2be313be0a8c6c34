// The operand checks every CUDA SpMM plan (cuSPARSE, MergePath, row-split, Accel-GCN) makes at the
// top of run(): written once so the plans reject the same operands with the same messages, which
// the autotuner reports when a candidate refuses a shape. Host code, private to halo_kernels.
#pragma once

#include <cstdint>
#include <limits>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"

namespace halo::cuda::detail {

// y[rows] = A[rows] x for A of num_rows x num_cols: x and y share a width of at most max_dim,
// cover A's columns and rows, their leading dimensions hold the width, and rows lies in A.
inline void check_spmm_operands(DenseView<const float> x, DenseView<float> y, RowRange rows,
                                std::int64_t num_rows, std::int64_t num_cols,
                                std::int64_t max_dim = std::numeric_limits<std::int64_t>::max())
{
    HALO_EXPECTS(x.cols == y.cols, "x has ", x.cols, " columns, y has ", y.cols);
    HALO_EXPECTS(x.cols <= max_dim, "dense width ", x.cols, " exceeds the plan's max_dim ",
                 max_dim);
    HALO_EXPECTS(x.rows >= num_cols, "x has ", x.rows, " rows, A has ", num_cols, " columns");
    HALO_EXPECTS(y.rows >= num_rows, "y has ", y.rows, " rows, A has ", num_rows);
    HALO_EXPECTS(x.ld >= x.cols && y.ld >= y.cols, "leading dimensions ", x.ld, " and ", y.ld,
                 " below the width ", x.cols);
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= num_rows, "row range [",
                 rows.begin, ", ", rows.end, ") outside [0, ", num_rows, ")");
}

// The same checks for a FeatureSpmmPlan's x of any element type (which does not enter them);
// true when there is work to do: a nonempty range of a nonzero width.
inline bool check_feature_operands(FeatureView x, DenseView<float> y, RowRange rows,
                                   std::int64_t num_rows, std::int64_t num_cols,
                                   std::int64_t max_dim)
{
    check_spmm_operands({static_cast<const float*>(nullptr), x.rows, x.cols, x.ld}, y, rows,
                        num_rows, num_cols, max_dim);
    return !rows.empty() && x.cols != 0;
}

}  // namespace halo::cuda::detail
