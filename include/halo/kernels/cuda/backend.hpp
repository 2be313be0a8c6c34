// The CUDA execution backend and its sparse operators: device memory from the Context's pool,
// cuSPARSE SpMM (CSR, row ranges for the interior/boundary split), cuBLAS GEMM in fp32, and
// element-wise kernels, all issued on the Context's compute stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/spmm_cost_model.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo::cuda {

/// A Backend whose matrices live on ctx's device; its SpMM plans run the registry's kernel
/// `spmm` (halo/kernels_host/spmm_registry.hpp), AES-SpMM with the choice's sampling. The Context
/// must outlive it. Throws halo::LogicError for a kernel without a factory.
std::unique_ptr<Backend> make_cuda_backend(Context& ctx, const SpmmChoice& spmm);

/// The same for a kernel as halo-infer --spmm writes it ("cusparse", "auto", "aes:64", ...;
/// parse_spmm_choice). "cusparse" is the baseline; "auto" takes the autotuner's choices stored for
/// the operator and this device, the cost model's kernels where there are none (nothing timed:
/// make_modeled_spmm_plan); "autotune" times
/// the exact kernels per (row range, width) on first use, which gives results that may differ
/// in the last bits from run to run when it picks a kernel with atomics (Accel-GCN, MergePath).
/// Throws halo::InputError for an unknown kernel or bad arguments.
std::unique_ptr<Backend> make_cuda_backend(Context& ctx, std::string_view spmm = "cusparse");

/// Index width of the device CSR that cuSPARSE reads. `automatic` is 32-bit: columns int32 and
/// each cuSPARSE call over rows of at most 2^31 - 1 nonzeros, with its offsets rebased (more than
/// one call past 2^31 nonzeros). `bits64` forces 64-bit offsets and columns, `small_pieces`
/// cuts runs into calls of at most 1000 nonzeros (both to test those paths on small matrices).
enum class IndexWidth {
    automatic,
    bits64,
    small_pieces,
};

/// How a MergePath or row-split plan holds a scaled operator (OperatorScaling). `automatic`: where
/// only the rows are scaled (the mean operator D^-1 A), the pattern and the row scaling alone (no
/// values array; one multiply per row sum, as fast as stored values); where the columns are
/// scaled too (gcn's D^-1/2 (A + I) D^-1/2), the values r_i c_j made on the device, because a
/// gathered c_j per nonzero is slower than streamed values (R-MAT 22, 3-layer gcn on an H100:
/// 63.8 against 58.3 ms). `pattern`: the pattern and both scalings in every case, 4 bytes per
/// nonzero less device memory for that time.
enum class ScaledForm {
    automatic,
    pattern,
};

/// The form a request asks of a scaled plan (SpmmPlanRequest::pattern_operators).
inline ScaledForm scaled_form(const SpmmPlanRequest& request)
{
    return request.pattern_operators ? ScaledForm::pattern : ScaledForm::automatic;
}

/// cuSPARSE SpMM (cusparseSpMM, CSR_ALG2, row-major dense operands) over a device copy of `a`,
/// for dense widths up to `max_dim` (wider runs throw halo::LogicError). The upload happens here;
/// the descriptor of a row range and the workspace of a (range, width) are made on their first
/// run and reused, never rebuilt. run() is asynchronous on ctx.compute_stream(); x and y are
/// device views. Throws halo::InputError when `a` is not a valid CSR matrix.
std::unique_ptr<SpmmPlan> make_cusparse_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                  IndexWidth indices = IndexWidth::automatic);
/// The same over the operator whose pattern is `pattern` (values ignored) and whose values are
/// scaling.row[i] * scaling.col[j] (empty: ones), made on the device from the scalings, which are
/// freed once they are (Backend::make_scaled_spmm_plan). Throws halo::LogicError for scalings of
/// the wrong length.
std::unique_ptr<SpmmPlan> make_scaled_cusparse_spmm_plan(
    Context& ctx, const Csr& pattern, std::int64_t max_dim, const OperatorScaling& scaling,
    IndexWidth indices = IndexWidth::automatic);

/// The cost model's plan (halo/kernels_host/spmm_cost_model.hpp; the default `auto` where no
/// autotuner choices are stored): each run() takes the kernel the model picks for the operator's
/// shape and the run's width, nothing timed; report() gives each width's decision and rule. The
/// kernels that widths 1..request.max_dim can pick are built here, one operator copy each
/// (MergePath once, with the larger cost from the width the model names); a kernel that rejects `a`
/// is replaced by cuSPARSE. With `scaling`, `a` is a pattern and the values scaling.row[i] *
/// scaling.col[j] are made on the device by each kernel: the model then picks only kernels whose
/// registry entry takes that form (spmm_form(scaling, request.pattern_operators)), so a scaled plan
/// exists for every operator shape. request.hints go to Accel-GCN (its stored partition).
std::unique_ptr<SpmmPlan> make_modeled_spmm_plan(Context& ctx, const Csr& a,
                                                 const SpmmPlanRequest& request,
                                                 const OperatorScaling* scaling = nullptr);

}  // namespace halo::cuda
