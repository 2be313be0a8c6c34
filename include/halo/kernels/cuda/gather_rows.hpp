// A row gather from a device matrix to host memory: brings back only the rows that a correctness
// check reads (halo-bench's checks, the GPU tests of every SpMM on large graphs), in chunks of
// bounded device memory, instead of the whole output. A checking tool, not a hot path: its scratch
// is cudaMalloc'd and freed before it returns (outside any Context pool, so nothing stays
// reserved after a measurement), and it synchronizes. Host-only code may include this header (it
// needs the CUDA runtime's headers, not nvcc).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "halo/core/dense.hpp"

namespace halo::cuda {

/// Copies rows rows[0..count) of the device matrix `src` to host memory, packed:
/// dst[r * src.cols + j] = src(rows[r], j). Works in chunks of at most 64 MiB of device memory and
/// returns when dst is complete (synchronizes `stream`). Every row id must lie in [0, src.rows)
/// (halo::LogicError otherwise); throws halo::CudaError on any CUDA failure.
void gather_rows_to_host(DenseView<const float> src, const std::int64_t* rows, std::int64_t count,
                         float* dst, cudaStream_t stream);

}  // namespace halo::cuda
