// Host parts shared by the device exchangers: device scope, events, and the local checks that keep
// every index an exchanger uses inside the shard and its buffers.
#include "device_exchange.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::detail {
namespace {

}  // namespace

DeviceGuard::DeviceGuard(int device)
{
    HALO_CUDA_TRY(cudaGetDevice(&previous_));
    if (previous_ == device) {
        previous_ = -1;
        return;
    }
    HALO_CUDA_TRY(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard()
{
    if (previous_ >= 0) {
        static_cast<void>(cudaSetDevice(previous_));  // a destructor must not throw
    }
}

CudaEvent::CudaEvent(int device)
{
    const DeviceGuard guard(device);  // an event belongs to the device current at its creation
    HALO_CUDA_TRY(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}

CudaEvent::~CudaEvent()
{
    static_cast<void>(cudaEventDestroy(event_));
}

void CudaEvent::order(cudaStream_t earlier, cudaStream_t later)
{
    HALO_CUDA_TRY(cudaEventRecord(event_, earlier));
    HALO_CUDA_TRY(cudaStreamWaitEvent(later, event_, 0));
}

void CudaEvent::order_noexcept(cudaStream_t earlier, cudaStream_t later) noexcept
{
    if (cudaEventRecord(event_, earlier) == cudaSuccess) {
        static_cast<void>(cudaStreamWaitEvent(later, event_, 0));
    }
}

CudaStream::CudaStream(int device, bool greatest_priority)
{
    const DeviceGuard guard(device);
    int least = 0;
    int greatest = 0;
    HALO_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    HALO_CUDA_TRY(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking,
                                               greatest_priority ? greatest : least));
}

CudaStream::~CudaStream()
{
    static_cast<void>(cudaStreamDestroy(stream_));
}

void check_device_matrix(const DenseView<float>& x, std::int64_t num_owned, std::int64_t num_halo,
                         std::int64_t max_dim, int device)
{
    check_exchanged_matrix(x, num_owned, num_halo, 0, max_dim, "the exchanger");
    if (x.rows * x.cols == 0) {
        return;
    }
    // A host pointer would fail deep inside NCCL or MPI, or corrupt memory; name it here instead.
    cudaPointerAttributes attributes{};
    HALO_CUDA_TRY(cudaPointerGetAttributes(&attributes, x.data));
    const bool on_device =
        attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
    HALO_EXPECTS(on_device && attributes.device == device, "x (", static_cast<const void*>(x.data),
                 ") is not memory of device ", device, " (CUDA memory type ",
                 static_cast<int>(attributes.type), ", device ", attributes.device, ')');
}

cuda::DeviceBuffer<std::int32_t> upload_send_rows(cuda::Context& ctx, const HaloPlan& plan)
{
    cuda::DeviceBuffer<std::int32_t> rows(ctx, plan.send_rows.size());
    if (rows.size() > 0) {
        HALO_CUDA_TRY(cudaMemcpyAsync(rows.data(), plan.send_rows.data(), rows.bytes(),
                                      cudaMemcpyHostToDevice, ctx.compute_stream()));
        // The shard (and its send_rows) may go away once the exchanger is built.
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
    }
    return rows;
}

std::shared_ptr<float> shared_floats(cuda::Context& ctx, std::int64_t floats)
{
    auto* block = new cuda::DeviceBuffer<float>(ctx, static_cast<std::size_t>(floats));
    return {block->data(), [block](float*) { delete block; }};
}

}  // namespace halo::detail
