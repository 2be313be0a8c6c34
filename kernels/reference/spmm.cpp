#include "halo/kernels_host/spmm.hpp"

#include <vector>

#include "halo/core/error.hpp"

namespace halo::reference {

namespace {

void check_operands(const CsrView& a, DenseView<const float> x, DenseView<float> y, RowRange rows)
{
    HALO_EXPECTS(x.cols == y.cols, "x has ", x.cols, " columns, y has ", y.cols);
    HALO_EXPECTS(x.rows >= a.num_cols, "x has ", x.rows, " rows, A has ", a.num_cols, " columns");
    HALO_EXPECTS(y.rows >= a.num_rows, "y has ", y.rows, " rows, A has ", a.num_rows);
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= a.num_rows, "row range [",
                 rows.begin, ", ", rows.end, ") outside [0, ", a.num_rows, ")");
}

// out[0, dim) = row i of A times x, the row's nonzeros in storage order.
void row_sum(const CsrView& a, DenseView<const float> x, std::int64_t i, float* out)
{
    const auto dim = x.cols;
    for (std::int64_t j = 0; j < dim; ++j) {
        out[j] = 0.0f;
    }
    for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
        const float v = a.values != nullptr ? a.values[k] : 1.0f;
        const float* in = x.row(a.indices[k]);
        for (std::int64_t j = 0; j < dim; ++j) {
            out[j] += v * in[j];
        }
    }
}

}  // namespace

void spmm(const CsrView& a, DenseView<const float> x, DenseView<float> y, RowRange rows)
{
    check_operands(a, x, y, rows);
#pragma omp parallel for schedule(dynamic, 64)
    for (std::int64_t i = rows.begin; i < rows.end; ++i) {
        row_sum(a, x, i, y.row(i));
    }
}

void spmm_add(const CsrView& a, DenseView<const float> x, DenseView<float> y, RowRange rows)
{
    check_operands(a, x, y, rows);
#pragma omp parallel
    {
        std::vector<float> sum(static_cast<std::size_t>(x.cols));
#pragma omp for schedule(dynamic, 64)
        for (std::int64_t i = rows.begin; i < rows.end; ++i) {
            row_sum(a, x, i, sum.data());
            float* out = y.row(i);
            for (std::int64_t j = 0; j < x.cols; ++j) {
                out[j] += sum[static_cast<std::size_t>(j)];
            }
        }
    }
}

void spmm(const CsrView& a, DenseView<const float> x, DenseView<float> y)
{
    spmm(a, x, y, a.all_rows());
}

}  // namespace halo::reference
