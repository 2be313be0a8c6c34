// The CUDA backend's MaxK and attention plans (halo/kernels_host/backend.hpp's MaxkPlan and
// AttentionPlan) and its row normalization, over the kernels of
// include/halo/kernels/cuda/{maxk,fused3s}.hpp. Internal to halo_kernels: the backend
// (cuda_backend.cpp) calls these.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/aes.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo::cuda {

/// Device CBSR of a.num_cols rows, top-k by maxk_topk, records packed/unpacked on the compute
/// stream, aggregation by the decoupled SSD plan (edge groups from hints.stored kernel "maxk" when
/// they were built for `a`, else built here).
std::unique_ptr<MaxkPlan> make_cuda_maxk_plan(Context& ctx, const Csr& a, std::int64_t dim,
                                              std::int64_t k, const SpmmPlanHints& hints);

/// AttentionKernel::fused: Fused3S (BSB from hints.stored kernel "fused3s" when it was built for
/// `a`, else built here) for widths it supports, the unfused exact plan otherwise (algorithm()
/// names what ran); AttentionKernel::exact: the unfused fp32 plan. run_additive is always unfused.
std::unique_ptr<AttentionPlan> make_cuda_attention_plan(Context& ctx, const Csr& a,
                                                        std::int64_t max_dim,
                                                        AttentionKernel kernel,
                                                        const SpmmPlanHints& hints);

/// The int8-input SpMM of the backend: the exact int8 plan, or AES over int8 when `aes` is set
/// (include/halo/kernels/cuda/aes.hpp).
std::unique_ptr<QuantizedSpmmPlan> make_cuda_quantized_spmm_plan(Context& ctx, const Csr& a,
                                                                 std::int64_t max_dim,
                                                                 const AesOptions* aes);

/// y = x / max(||x_row||_2, 1e-12) row by row, asynchronous on `stream` (equal shapes, any ld).
void normalize_rows(cudaStream_t stream, DenseView<const float> x, DenseView<float> y);

}  // namespace halo::cuda
