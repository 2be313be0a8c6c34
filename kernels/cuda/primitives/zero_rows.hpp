// Zeroing the listed rows of an output: the rows that a kernel then adds into atomically (split
// rows of Accel-GCN and MergePath, MaxK's shared rows). Internal to halo_kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace halo::cuda::detail {

/// y[rows[i], 0:width] = 0 for i in [0, count), asynchronous on `stream`, the launch checked;
/// nothing for count 0 or width 0. True when it launched a kernel: the kernel that adds into the
/// rows may then be launched as its programmatic dependent (dependent_launch.cuh), which waits
/// for the zeros before its first atomic add.
bool zero_rows(cudaStream_t stream, const std::int32_t* rows, std::int64_t count,
               std::int64_t width, float* y, std::int64_t ld);
bool zero_rows(cudaStream_t stream, const std::int64_t* rows, std::int64_t count,
               std::int64_t width, float* y, std::int64_t ld);

}  // namespace halo::cuda::detail
