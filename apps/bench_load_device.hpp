// The device half of halo-bench load (apps/bench_load.cpp): int8 features dequantized to fp32 on
// the GPU, one element per thread, with the same dequantize_int8 as the host (so the result equals
// halo::dequantize bit for bit). A .cu of its own because fmt and CLI11 stay out of nvcc.
#pragma once

#include <cuda_runtime.h>

#include "halo/quantize.hpp"

namespace halo::bench_app {

/// out[i * q.cols + j] = q.scale[j] * (q.data[i * q.ld + j] - q.zero_point[j]) for every element;
/// every pointer is device memory. Enqueued on `stream`; launch errors throw halo::CudaError.
void dequantize_on_device(cudaStream_t stream, const QuantizedView& q, float* out);

}  // namespace halo::bench_app
