#include "halo/kernels_host/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "halo/core/error.hpp"

namespace halo::reference {
namespace {

void check_rows(const CsrView& a, RowRange rows)
{
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= a.num_rows, "row range [",
                 rows.begin, ", ", rows.end, ") outside [0, ", a.num_rows, ")");
}

void check_values(const CsrView& a, DenseView<const float> v, DenseView<double> out)
{
    HALO_EXPECTS(v.rows >= a.num_cols, "V has ", v.rows, " rows, A has ", a.num_cols, " columns");
    HALO_EXPECTS(out.rows >= a.num_rows, "O has ", out.rows, " rows, A has ", a.num_rows);
    HALO_EXPECTS(out.cols == v.cols, "O has ", out.cols, " columns, V has ", v.cols);
}

// out[i, :] = sum_k softmax(e)_k V[cols[k], :] for one row whose scores are in e.
void softmax_aggregate(const local_id* cols, std::vector<double>& e, DenseView<const float> v,
                       double* out_row)
{
    std::fill(out_row, out_row + v.cols, 0.0);
    if (e.empty()) {
        return;
    }
    const double max = *std::max_element(e.begin(), e.end());
    double sum = 0.0;
    for (auto& x : e) {
        x = std::exp(x - max);
        sum += x;
    }
    for (std::size_t k = 0; k < e.size(); ++k) {
        const double p = e[k] / sum;
        for (std::int64_t c = 0; c < v.cols; ++c) {
            out_row[c] += p * static_cast<double>(v(cols[k], c));
        }
    }
}

// out[i, :] for rows i: the row's scores e_k = score(i, j_k) over its nonzeros, then
// softmax_aggregate.
template <typename Score>
void attend(const CsrView& a, RowRange rows, DenseView<const float> v, DenseView<double> out,
            const Score& score)
{
#pragma omp parallel
    {
        std::vector<double> e;
#pragma omp for schedule(dynamic, 64)
        for (std::int64_t i = rows.begin; i < rows.end; ++i) {
            const auto begin = a.indptr[i];
            const auto end = a.indptr[i + 1];
            e.assign(static_cast<std::size_t>(end - begin), 0.0);
            for (auto nz = begin; nz < end; ++nz) {
                e[nz - begin] = score(i, a.indices[nz]);
            }
            softmax_aggregate(a.indices + begin, e, v, out.row(i));
        }
    }
}

}  // namespace

void sparse_attention(const CsrView& a, DenseView<const float> q, DenseView<const float> k,
                      DenseView<const float> v, double scale, DenseView<double> out, RowRange rows)
{
    HALO_EXPECTS(q.cols == k.cols, "Q has ", q.cols, " columns, K has ", k.cols);
    HALO_EXPECTS(q.rows >= a.num_rows, "Q has ", q.rows, " rows, A has ", a.num_rows);
    HALO_EXPECTS(k.rows >= a.num_cols, "K has ", k.rows, " rows, A has ", a.num_cols, " columns");
    check_values(a, v, out);
    check_rows(a, rows);
    attend(a, rows, v, out, [&](std::int64_t i, local_id j) {
        double dot = 0.0;
        for (std::int64_t d = 0; d < q.cols; ++d) {
            dot += static_cast<double>(q(i, d)) * static_cast<double>(k(j, d));
        }
        return scale * dot;
    });
}

void sparse_attention(const CsrView& a, DenseView<const float> q, DenseView<const float> k,
                      DenseView<const float> v, double scale, DenseView<double> out)
{
    sparse_attention(a, q, k, v, scale, out, a.all_rows());
}

void additive_attention(const CsrView& a, DenseView<const float> el, DenseView<const float> er,
                        double negative_slope, DenseView<const float> v, DenseView<double> out,
                        RowRange rows)
{
    check_values(a, v, out);
    check_rows(a, rows);
    HALO_EXPECTS(el.rows >= a.num_rows && er.rows >= a.num_cols, "el has ", el.rows,
                 " rows and er ", er.rows, " for A of ", a.num_rows, " x ", a.num_cols);
    attend(a, rows, v, out, [&](std::int64_t i, local_id j) {
        const double x = static_cast<double>(el(i, 0)) + static_cast<double>(er(j, 0));
        return x > 0.0 ? x : negative_slope * x;
    });
}

void additive_attention(const CsrView& a, const float* el, const float* er, double negative_slope,
                        DenseView<const float> v, DenseView<double> out)
{
    additive_attention(a, {el, a.num_rows, 1, 1}, {er, a.num_cols, 1, 1}, negative_slope, v, out,
                       a.all_rows());
}

}  // namespace halo::reference
