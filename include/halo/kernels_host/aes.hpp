// AES-SpMM (paper 004): approximate SpMM by adaptive edge sampling. Each row keeps at most W of
// its nonzeros, chosen by the row's strategy from Table 1 (runs of N consecutive nonzeros,
// sample_cnt runs, by R = row_nnz / W) at start indices from Eq. 3; rows with row_nnz <= W are
// exact. This header holds the rule (shared with the CUDA kernel, so both sample the same
// nonzeros) and the CPU reference, the options are in aes_options.hpp; the kernel is
// include/halo/kernels/cuda/aes.hpp and docs/AES.md describes the rule, its corner cases and the
// scaling modes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"
#include "halo/kernels_host/aes_options.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo {

/// A row's strategy (Table 1): `samples` runs (sample_cnt) of `run` consecutive nonzeros (N).
struct AesRowStrategy {
    std::int64_t run = 0;
    std::int64_t samples = 0;

    /// Sampled nonzeros (with repetition, see aes_sample_start): run * samples, at most W.
    HALO_HOST_DEVICE constexpr std::int64_t count() const { return run * samples; }
};

/// Table 1 for a row of row_nnz nonzeros and W = width (>= 1). R = row_nnz / W:
///   R <= 1:       N = row_nnz, sample_cnt = 1   (the whole row, exact)
///   1 < R <= 2:   N = W / 4,   sample_cnt = 4
///   2 < R <= 36:  N = W / 8,   sample_cnt = 8
///   36 < R <= 54: N = W / 16,  sample_cnt = 16
///   R > 54:       N = W / 32,  sample_cnt = 32
/// with section 3.3's constraints N >= 1 and sample_cnt <= W (integer division: W = 16 and
/// R > 54 give N = 1, sample_cnt = 16). The comparisons are exact integer ones (R <= k as
/// row_nnz <= k * W).
HALO_HOST_DEVICE constexpr AesRowStrategy aes_row_strategy(std::int64_t row_nnz, std::int64_t width)
{
    if (row_nnz <= width) {
        return {row_nnz, 1};
    }
    std::int64_t divisor = 32;
    if (row_nnz <= 2 * width) {
        divisor = 4;
    } else if (row_nnz <= 36 * width) {
        divisor = 8;
    } else if (row_nnz <= 54 * width) {
        divisor = 16;
    }
    const std::int64_t run = width / divisor > 1 ? width / divisor : 1;
    const std::int64_t samples = divisor < width ? divisor : width;
    return {run, samples};
}

/// Eq. 3: start_ind of sample `sample` (current_ind, 0-based) of a row, as a position inside the
/// row: (sample * 1429) mod (row_nnz - N + 1). Runs may overlap (nothing in Eq. 3 prevents it);
/// an overlapped nonzero is then sampled, and summed, more than once, as Algorithm 1 does.
HALO_HOST_DEVICE constexpr std::int64_t aes_sample_start(std::int64_t sample, std::int64_t row_nnz,
                                                         std::int64_t run)
{
    return sample * kAesPrime % (row_nnz - run + 1);
}

/// Position inside the row of the nonzero in staging slot `slot` (0 <= slot < count()):
/// Algorithm 1 stores element j of sample i at sh[i + j * sample_cnt], so slot k holds position
/// start(k mod sample_cnt) + k / sample_cnt.
HALO_HOST_DEVICE constexpr std::int64_t aes_slot_position(std::int64_t slot, std::int64_t row_nnz,
                                                          AesRowStrategy s)
{
    return s.samples == 1 ? slot
                          : aes_sample_start(slot % s.samples, row_nnz, s.run) + slot / s.samples;
}

/// The factor of a row's sampled sum: row_nnz / count() for `rescaled` rows that lost nonzeros,
/// 1 otherwise. Computed in float, as the kernel does.
HALO_HOST_DEVICE constexpr float aes_row_factor(std::int64_t row_nnz, AesRowStrategy s,
                                                bool rescaled)
{
    return rescaled && s.count() < row_nnz
               ? static_cast<float>(row_nnz) / static_cast<float>(s.count())
               : 1.0f;
}

/// The sampled positions of a row (0-based inside the row), in staging-slot order (the order in
/// which the kernel sums them), repeats included. Exact rows give 0, 1, ..., row_nnz - 1.
std::vector<std::int64_t> aes_sample_positions(std::int64_t row_nnz, std::int64_t width);

/// How much of a matrix AES keeps at one W (the paper's Fig. 5 sampling rate).
struct AesSampleStats {
    std::int64_t rows = 0;          // rows counted
    std::int64_t sampled_rows = 0;  // rows with row_nnz > W
    std::int64_t nonzeros = 0;      // nonzeros of those rows
    std::int64_t slots = 0;         // sampled nonzeros, repeats included
    std::int64_t distinct = 0;      // sampled nonzeros, each counted once

    double slot_fraction() const { return nonzeros > 0 ? double(slots) / double(nonzeros) : 1.0; }
    double distinct_fraction() const
    {
        return nonzeros > 0 ? double(distinct) / double(nonzeros) : 1.0;
    }
};

/// Counts over the rows of `rows` (distinct positions by sorting each sampled row's positions).
AesSampleStats aes_sample_stats(const CsrView& a, RowRange rows, std::int64_t width);

namespace reference {

/// y[i, :] = factor_i * sum over the slots k of row i of a[i, p_k] * x[col(p_k), :], for i in
/// `rows` (other rows untouched), p_k = aes_sample_positions(row_nnz, W)[k], each product
/// accumulated in slot order with one fused multiply-add, as the CUDA kernel does: the two agree
/// bit for bit. Pattern matrices use 1 for each nonzero. Throws halo::InputError for invalid
/// options.
void aes_spmm(const CsrView& a, DenseView<const float> x, DenseView<float> y, RowRange rows,
              const AesOptions& options);

/// The same with int8 features: x[c, j] is dequantize_int8(q(c, j), q.params(j)).
void aes_spmm(const CsrView& a, const QuantizedView& x, DenseView<float> y, RowRange rows,
              const AesOptions& options);

/// Exact SpMM with int8 features (no sampling: every nonzero in CSR order, fused multiply-adds),
/// the reference of the exact int8 kernel.
void spmm_int8(const CsrView& a, const QuantizedView& x, DenseView<float> y, RowRange rows);

}  // namespace reference
}  // namespace halo
