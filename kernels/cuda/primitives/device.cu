#include "cuda/primitives/dependent_launch.cuh"
#include "halo/kernels/cuda/device.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda {
namespace {

__global__ void add_offset(const float* in, float* out, std::int64_t count, float offset)
{
    const auto i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) {
        out[i] = in[i] + offset;
    }
}

}  // namespace

int device_count()
{
    int count = 0;
    const auto status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        // No device or no driver: report zero devices, and clear the sticky error state.
        (void)cudaGetLastError();
        return 0;
    }
    return count;
}

bool zeroing_overlapped(int index)
{
    int major = 0;
    HALO_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
    return major >= 9 && detail::dependent_launch_enabled();
}

DeviceInfo device_info(int index)
{
    cudaDeviceProp prop{};
    HALO_CUDA_TRY(cudaGetDeviceProperties(&prop, index));
    DeviceInfo info;
    info.index = index;
    info.name = prop.name;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    info.global_memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
    info.l2_cache_bytes = prop.l2CacheSize;
    info.multiprocessors = prop.multiProcessorCount;
    return info;
}

void self_test(const float* in, float* out, std::int64_t count, float offset)
{
    if (count <= 0) {
        return;
    }
    const auto bytes = static_cast<std::size_t>(count) * sizeof(float);
    float* d_in = nullptr;
    float* d_out = nullptr;
    HALO_CUDA_TRY(cudaMalloc(&d_in, bytes));
    try {
        HALO_CUDA_TRY(cudaMalloc(&d_out, bytes));
        HALO_CUDA_TRY(cudaMemcpy(d_in, in, bytes, cudaMemcpyHostToDevice));
        HALO_CUDA_TRY(cudaMemset(d_out, 0xff, bytes));  // poison: NaN if a thread never writes
        constexpr int block = 256;
        const auto grid = static_cast<unsigned>((count + block - 1) / block);
        add_offset<<<grid, block>>>(d_in, d_out, count, offset);
        HALO_CUDA_TRY(cudaGetLastError());
        HALO_CUDA_TRY(cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost));
    } catch (...) {
        cudaFree(d_in);
        cudaFree(d_out);
        throw;
    }
    HALO_CUDA_TRY(cudaFree(d_out));
    HALO_CUDA_TRY(cudaFree(d_in));
}

}  // namespace halo::cuda
