// Host arrays copied into device buffers of a Context's pool, on its compute stream: the upload
// every plan makes of its operator and preprocessing. Internal to halo_kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {

/// A buffer of `count` elements holding host[0, count), copied asynchronously on the compute
/// stream (none for count 0). A pageable source is staged before cudaMemcpyAsync returns, so it
/// may go away afterwards; plans synchronize once at setup so that a failed copy surfaces there.
template <typename T>
DeviceBuffer<T> upload(Context& ctx, const T* host, std::size_t count)
{
    DeviceBuffer<T> buffer(ctx, count);
    if (count > 0) {
        HALO_CUDA_TRY(cudaMemcpyAsync(buffer.data(), host, buffer.bytes(), cudaMemcpyHostToDevice,
                                      ctx.compute_stream()));
    }
    return buffer;
}

template <typename T>
DeviceBuffer<T> upload(Context& ctx, const std::vector<T>& host)
{
    return upload(ctx, host.data(), host.size());
}

}  // namespace halo::cuda::detail
