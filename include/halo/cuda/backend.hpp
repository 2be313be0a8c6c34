// The CUDA execution backend and its sparse operators: device memory from the Context's pool,
// cuSPARSE SpMM (CSR, row ranges for the interior/boundary split), cuBLAS GEMM in fp32, and
// element-wise kernels, all issued on the Context's compute stream.
#pragma once

#include <cstdint>
#include <memory>

#include "halo/aes.hpp"
#include "halo/backend.hpp"
#include "halo/cuda/context.hpp"

namespace halo::cuda {

/// Which kernel the backend's SpMM plans run: cuSPARSE (the baseline), the row-split kernel
/// (include/halo/cuda/rowsplit.hpp), both exact and deterministic from run to run, or the fastest
/// exact kernel per (row range, width), timed on the first run of each
/// (include/halo/cuda/autotune.hpp): exact, but when it picks a kernel with atomics (Accel-GCN,
/// MergePath) results may differ in the last bits from run to run.
enum class SpmmAlgorithm {
    cusparse,
    rowsplit,
    mergepath,  // include/halo/cuda/mergepath.hpp
    accel_gcn,  // include/halo/cuda/accel_gcn.hpp; uses a stored partition when the hints carry one
    autotune,
    aes,  // AES-SpMM (include/halo/cuda/aes.hpp): approximate, sampling by the backend's options
    /// halo-infer's default: the autotuner's choices where the operator's hints carry usable
    /// stored ones (this device, this operator, these candidates), so nothing is timed again;
    /// cuSPARSE otherwise.
    stored_or_cusparse,
};

/// A Backend whose matrices live on ctx's device. The Context must outlive it.
/// `aes` configures SpmmAlgorithm::aes (ignored otherwise).
std::unique_ptr<Backend> make_cuda_backend(Context& ctx,
                                           SpmmAlgorithm spmm = SpmmAlgorithm::cusparse,
                                           const AesOptions& aes = {});

/// Index width of the device CSR that cuSPARSE reads. `automatic` is 32-bit while nnz, rows and
/// columns fit in int32 and 64-bit beyond; `bits64` forces 64-bit (to test that path on small
/// matrices).
enum class IndexWidth {
    automatic,
    bits64,
};

/// cuSPARSE SpMM (cusparseSpMM, CSR_ALG2, row-major dense operands) over a device copy of `a`,
/// for dense widths up to `max_dim` (wider runs throw halo::LogicError). The upload happens here;
/// the descriptor of a row range and the workspace of a (range, width) are made on their first
/// run and reused, never rebuilt. run() is asynchronous on ctx.compute_stream(); x and y are
/// device views. Throws halo::InputError when `a` is not a valid CSR matrix.
std::unique_ptr<SpmmPlan> make_cusparse_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                  IndexWidth indices = IndexWidth::automatic);

}  // namespace halo::cuda
