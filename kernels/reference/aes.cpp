// AES-SpMM on the host (include/halo/kernels_host/aes.hpp): options, the sampled positions of a
// row, sampling statistics and the CPU reference, written as plain loops over the positions the
// rule gives.
#include "halo/kernels_host/aes.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "halo/core/error.hpp"

namespace halo {
namespace {

void check_operands(const CsrView& a, std::int64_t x_rows, std::int64_t x_cols, DenseView<float> y,
                    RowRange rows)
{
    HALO_EXPECTS(x_cols == y.cols, "x has ", x_cols, " columns, y has ", y.cols);
    HALO_EXPECTS(x_rows >= a.num_cols, "x has ", x_rows, " rows, A has ", a.num_cols, " columns");
    HALO_EXPECTS(y.rows >= a.num_rows, "y has ", y.rows, " rows, A has ", a.num_rows);
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= a.num_rows, "row range [",
                 rows.begin, ", ", rows.end, ") outside [0, ", a.num_rows, ")");
}

// y[i, :] = factor * sum_k value(p_k) * feature(col(p_k), :) over the given positions of row i,
// one std::fma per product in the order given. `feature(c, j)` reads one (dequantized) element.
template <typename Feature>
void sum_positions(const CsrView& a, std::int64_t i, const std::vector<std::int64_t>& positions,
                   float factor, std::int64_t dim, Feature feature, DenseView<float> y)
{
    const auto begin = a.indptr[i];
    for (std::int64_t j = 0; j < dim; ++j) {
        float acc = 0.0f;
        for (const auto p : positions) {
            const float v = a.values != nullptr ? a.values[begin + p] : 1.0f;
            acc = std::fma(v, feature(a.indices[begin + p], j), acc);
        }
        y(i, j) = acc * factor;
    }
}

template <typename Feature>
void aes_rows(const CsrView& a, std::int64_t dim, Feature feature, DenseView<float> y,
              RowRange rows, const AesOptions& options)
{
    validate(options);
    const bool rescaled = options.scaling == AesScaling::rescaled;
#pragma omp parallel for schedule(dynamic, 64)
    for (std::int64_t i = rows.begin; i < rows.end; ++i) {
        const auto nnz = a.indptr[i + 1] - a.indptr[i];
        const auto strategy = aes_row_strategy(nnz, options.sample_width);
        sum_positions(a, i, aes_sample_positions(nnz, options.sample_width),
                      aes_row_factor(nnz, strategy, rescaled), dim, feature, y);
    }
}

}  // namespace

AesScaling parse_aes_scaling(std::string_view text)
{
    if (text == "sample_sum") {
        return AesScaling::sample_sum;
    }
    if (text == "rescaled") {
        return AesScaling::rescaled;
    }
    HALO_THROW(InputError, "unknown AES scaling '", text, "' (expected sample_sum or rescaled)");
}

std::string to_string(AesScaling scaling)
{
    return scaling == AesScaling::rescaled ? "rescaled" : "sample_sum";
}

void validate(const AesOptions& options)
{
    if (options.sample_width < kAesMinWidth || options.sample_width > kAesMaxWidth) {
        HALO_THROW(InputError, "AES sample width W = ", options.sample_width, " outside [",
                   kAesMinWidth, ", ", kAesMaxWidth, "]");
    }
}

std::vector<std::int64_t> aes_sample_positions(std::int64_t row_nnz, std::int64_t width)
{
    HALO_EXPECTS(row_nnz >= 0 && width >= 1, "row of ", row_nnz, " nonzeros, W = ", width);
    const auto strategy = aes_row_strategy(row_nnz, width);
    std::vector<std::int64_t> positions(static_cast<std::size_t>(strategy.count()));
    for (std::int64_t k = 0; k < strategy.count(); ++k) {
        positions[k] = aes_slot_position(k, row_nnz, strategy);
    }
    return positions;
}

AesSampleStats aes_sample_stats(const CsrView& a, RowRange rows, std::int64_t width)
{
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= a.num_rows, "row range [",
                 rows.begin, ", ", rows.end, ") outside [0, ", a.num_rows, ")");
    AesSampleStats s;
    s.rows = rows.size();
    std::vector<std::int64_t> positions;
    for (std::int64_t i = rows.begin; i < rows.end; ++i) {
        const auto nnz = a.indptr[i + 1] - a.indptr[i];
        s.nonzeros += nnz;
        if (nnz <= width) {
            s.slots += nnz;
            s.distinct += nnz;
            continue;
        }
        ++s.sampled_rows;
        positions = aes_sample_positions(nnz, width);
        s.slots += static_cast<std::int64_t>(positions.size());
        std::sort(positions.begin(), positions.end());
        s.distinct += std::unique(positions.begin(), positions.end()) - positions.begin();
    }
    return s;
}

namespace reference {

void aes_spmm(const CsrView& a, DenseView<const float> x, DenseView<float> y, RowRange rows,
              const AesOptions& options)
{
    check_operands(a, x.rows, x.cols, y, rows);
    aes_rows(
        a, x.cols, [&](std::int32_t c, std::int64_t j) { return x(c, j); }, y, rows, options);
}

void aes_spmm(const CsrView& a, const QuantizedView& x, DenseView<float> y, RowRange rows,
              const AesOptions& options)
{
    check_operands(a, x.rows, x.cols, y, rows);
    aes_rows(
        a, x.cols,
        [&](std::int32_t c, std::int64_t j) {
            return dequantize_int8(x.data[c * x.ld + j], x.params(j));
        },
        y, rows, options);
}

void spmm_int8(const CsrView& a, const QuantizedView& x, DenseView<float> y, RowRange rows)
{
    check_operands(a, x.rows, x.cols, y, rows);
    const auto feature = [&](std::int32_t c, std::int64_t j) {
        return dequantize_int8(x.data[c * x.ld + j], x.params(j));
    };
#pragma omp parallel for schedule(dynamic, 64)
    for (std::int64_t i = rows.begin; i < rows.end; ++i) {
        const auto nnz = a.indptr[i + 1] - a.indptr[i];
        std::vector<std::int64_t> positions(static_cast<std::size_t>(nnz));
        for (std::int64_t k = 0; k < nnz; ++k) {
            positions[k] = k;
        }
        sum_positions(a, i, positions, 1.0f, x.cols, feature, y);
    }
}

}  // namespace reference
}  // namespace halo
