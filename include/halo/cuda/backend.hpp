// The CUDA execution backend and its sparse operators: device memory from the Context's pool,
// cuSPARSE SpMM (CSR, row ranges for the interior/boundary split), cuBLAS GEMM in fp32, and
// element-wise kernels, all issued on the Context's compute stream.
#pragma once

#include <cstdint>
#include <memory>

#include "halo/backend.hpp"
#include "halo/cuda/context.hpp"

namespace halo::cuda {

/// A Backend whose matrices live on ctx's device. The Context must outlive it.
std::unique_ptr<Backend> make_cuda_backend(Context& ctx);

/// cuSPARSE SpMM (cusparseSpMM, CSR, row-major dense operands) over a device copy of `a`, for
/// dense widths up to `max_dim`. Preprocessing (upload, descriptors for all rows and for any
/// range asked before, workspace for max_dim) happens here or on the first run of a range, never
/// again; run() is asynchronous on ctx.compute_stream(); x and y are device views.
std::unique_ptr<SpmmPlan> make_cusparse_spmm_plan(Context& ctx, const Csr& a,
                                                  std::int64_t max_dim);

}  // namespace halo::cuda
