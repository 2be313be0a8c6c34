// See bench_load_device.hpp.
#include <cstdint>

#include "bench_load_device.hpp"
#include "halo/cuda_error.hpp"

namespace halo::bench_app {
namespace {

__global__ void dequantize_kernel(QuantizedView q, float* out)
{
    const std::int64_t total = q.rows * q.cols;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
         e < total; e += stride) {
        const std::int64_t i = e / q.cols;
        const std::int64_t j = e - i * q.cols;
        out[e] = dequantize_int8(q.data[i * q.ld + j], q.params(j));
    }
}

}  // namespace

void dequantize_on_device(cudaStream_t stream, const QuantizedView& q, float* out)
{
    const std::int64_t total = q.rows * q.cols;
    if (total == 0) {
        return;
    }
    constexpr int kThreads = 256;
    constexpr std::int64_t kMaxBlocks = 65535;
    const std::int64_t wanted = (total + kThreads - 1) / kThreads;
    const auto blocks = static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
    dequantize_kernel<<<blocks, kThreads, 0, stream>>>(q, out);
    HALO_CUDA_TRY(cudaGetLastError());
}

}  // namespace halo::bench_app
