// AES-SpMM on the GPU (paper 004, Algorithm 1): per row, the nonzeros chosen by the sampling rule
// of halo/kernels_host/aes.hpp (Table 1 + Eq. 3; rows with row_nnz <= W whole) are staged in shared
// memory, then multiplied with the gathered feature rows. Features are fp32, or int8 with a scale
// and zero point per column (halo/quantize/quantize.hpp) dequantized in the gather, so only a
// quarter of the feature bytes move. The exact int8 SpMM (no sampling, W = infinity) is the same
// kernel staging whole rows. A row's products are summed in staging-slot order with one fused
// multiply-add each, the order of halo::reference::aes_spmm, so the two agree bit for bit; rows too
// long for one staging piece are summed piece by piece (rounding differs). No atomics: the same
// bits every run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/aes.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo::cuda {

/// AES-SpMM with fp32 features, usable wherever an SpmmPlan is (the engine's aggregation):
/// run(x, y, rows) writes y's rows in `rows` (others untouched) for dense widths up to max_dim
/// (wider throws halo::LogicError). The upload happens here; run() is asynchronous on
/// ctx.compute_stream() and takes device views. Rows with more sampled nonzeros than one group
/// stages are summed in pieces (docs/AES.md): the first run with a given lane-group size (set by
/// the width) lists those rows, uploads the list and allocates their workspace (host work once,
/// then cached); later runs only launch. algorithm() is "aes-w<W>-<scaling>", report() the share
/// of nonzeros sampled. Throws halo::InputError when `a` is not a valid CSR matrix or the options
/// are invalid.
std::unique_ptr<SpmmPlan> make_aes_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                             const AesOptions& options = {});

/// A prepared SpMM whose dense input is a column-quantized int8 matrix (device pointers):
/// y[rows] = A[rows] * dequantize(x), rows of y outside `rows` untouched.
class Int8SpmmPlan {
public:
    virtual ~Int8SpmmPlan() = default;
    virtual void run(const QuantizedView& x, DenseView<float> y, RowRange rows) = 0;
    virtual std::string algorithm() const = 0;
    virtual std::string report() const { return {}; }
};

/// AES-SpMM over int8 features (same rule, same sampled nonzeros as the fp32 plan).
/// algorithm(): "aes-int8-w<W>-<scaling>".
std::unique_ptr<Int8SpmmPlan> make_aes_int8_spmm_plan(Context& ctx, const Csr& a,
                                                      std::int64_t max_dim,
                                                      const AesOptions& options = {});

/// Exact SpMM over int8 features (every nonzero, CSR order): the "exact kernels read int8" option.
/// algorithm(): "int8-exact".
std::unique_ptr<Int8SpmmPlan> make_int8_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim);

/// A column-quantized matrix in device memory (one upload of the int8 feature format).
struct DeviceQuantizedMatrix {
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    DeviceBuffer<std::int8_t> data;
    DeviceBuffer<float> scale;
    DeviceBuffer<std::int32_t> zero_point;

    QuantizedView view() const noexcept
    {
        return {data.data(), rows, cols, cols, scale.data(), zero_point.data()};
    }
};

/// Checks `q` (halo::validate, naming `what`) and uploads it on ctx.compute_stream(); returns when
/// the copy is complete.
DeviceQuantizedMatrix upload_quantized(Context& ctx, const QuantizedMatrix& q, const char* what);

/// out = dequantize(q) element by element (kernels/cuda/backend/engine_plans.cu): device views,
/// out.rows
/// == q.rows, out.cols == q.cols, any ld; asynchronous on `stream`; bit-identical to
/// halo::dequantize on the host.
void dequantize(cudaStream_t stream, const QuantizedView& q, DenseView<float> out);

/// Sums over every element of two equally shaped device matrices, in double: the squared
/// difference and the squared reference, so that sqrt(diff_sq / ref_sq) is the relative
/// Frobenius error of an approximation. Synchronizes ctx.compute_stream().
struct FrobeniusSums {
    double diff_sq = 0;
    double ref_sq = 0;
};
FrobeniusSums frobenius_sums(Context& ctx, DenseView<const float> approx,
                             DenseView<const float> exact);

}  // namespace halo::cuda
