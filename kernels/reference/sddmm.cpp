#include "halo/kernels_host/sddmm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "halo/core/error.hpp"

namespace halo::reference {

void sddmm(const CsrView& a, DenseView<const float> q, DenseView<const float> k, float* out,
           RowRange rows)
{
    HALO_EXPECTS(q.cols == k.cols, "Q has ", q.cols, " columns, K has ", k.cols);
    HALO_EXPECTS(q.rows >= a.num_rows, "Q has ", q.rows, " rows, A has ", a.num_rows);
    HALO_EXPECTS(k.rows >= a.num_cols, "K has ", k.rows, " rows, A has ", a.num_cols, " columns");
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= a.num_rows, "row range [",
                 rows.begin, ", ", rows.end, ") outside [0, ", a.num_rows, ")");
#pragma omp parallel for schedule(dynamic, 64)
    for (std::int64_t i = rows.begin; i < rows.end; ++i) {
        for (auto nz = a.indptr[i]; nz < a.indptr[i + 1]; ++nz) {
            const auto j = a.indices[nz];
            float dot = 0.0f;
            for (std::int64_t d = 0; d < q.cols; ++d) {
                dot += q(i, d) * k(j, d);
            }
            out[nz] = (a.values != nullptr ? a.values[nz] : 1.0f) * dot;
        }
    }
}

void sddmm(const CsrView& a, DenseView<const float> q, DenseView<const float> k, float* out)
{
    sddmm(a, q, k, out, a.all_rows());
}

void csr_row_softmax(const CsrView& a, float* values)
{
#pragma omp parallel for schedule(dynamic, 64)
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        const auto begin = a.indptr[i];
        const auto end = a.indptr[i + 1];
        float max = -std::numeric_limits<float>::infinity();
        for (auto nz = begin; nz < end; ++nz) {
            max = std::max(max, values[nz]);
        }
        float sum = 0.0f;
        for (auto nz = begin; nz < end; ++nz) {
            values[nz] = std::exp(values[nz] - max);
            sum += values[nz];
        }
        for (auto nz = begin; nz < end; ++nz) {
            values[nz] /= sum;
        }
    }
}

}  // namespace halo::reference
