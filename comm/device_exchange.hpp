// Private to comm/: the pieces the two device exchangers (NCCL, MPI over device buffers) share.
// The pack kernel gathers send rows on the GPU; the rest keeps the exchangers' device, stream and
// plan handling in one place. Host-only code may include this header (pack.cu holds the kernel).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "halo/core/dense.hpp"
#include "halo/core/shard.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "mpi_messages.hpp"

namespace halo::detail {

/// Gathers rows `rows[0, num_rows)` of `x` (row-major, leading dimension `ld`, `cols` floats
/// wide) into `out` (num_rows x cols, contiguous) on `stream`. Checks the launch.
void pack_rows(const float* x, std::int64_t ld, const std::int32_t* rows, std::int64_t num_rows,
               std::int64_t cols, float* out, cudaStream_t stream);

/// Makes `device` current for a scope and restores the previous one, so that an exchanger works
/// whichever device the caller left current (its streams and buffers belong to the Context's).
class DeviceGuard {
public:
    explicit DeviceGuard(int device);
    ~DeviceGuard();
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int previous_ = -1;
};

/// An event without timing (the cheap kind) of one device, for ordering one stream after another.
class CudaEvent {
public:
    explicit CudaEvent(int device);
    ~CudaEvent();
    CudaEvent(const CudaEvent&) = delete;
    CudaEvent& operator=(const CudaEvent&) = delete;

    /// Everything issued to `later` from now on runs after everything issued to `earlier` so far.
    void order(cudaStream_t earlier, cudaStream_t later);
    /// The same, for a destructor: errors are ignored.
    void order_noexcept(cudaStream_t earlier, cudaStream_t later) noexcept;

private:
    cudaEvent_t event_ = nullptr;
};

/// A non-blocking stream of one device of the exchanger's own (the Context's streams are shared),
/// of the device's greatest priority where asked (its kernels' blocks are dispatched before those
/// of streams of lower priority that wait). Destroying it does not wait: work still queued
/// completes first (cudaStreamDestroy).
class CudaStream {
public:
    CudaStream(int device, bool greatest_priority);
    ~CudaStream();
    CudaStream(const CudaStream&) = delete;
    CudaStream& operator=(const CudaStream&) = delete;

    cudaStream_t get() const { return stream_; }

private:
    cudaStream_t stream_ = nullptr;
};

/// Checks a matrix handed to a device exchanger's start(): num_owned + num_halo rows, 0 to max_dim
/// columns, ld >= cols, and (when it holds anything) memory of device `device`, not host memory.
/// Throws halo::LogicError.
void check_device_matrix(const DenseView<float>& x, std::int64_t num_owned, std::int64_t num_halo,
                         std::int64_t max_dim, int device);

/// The send rows of `plan` in device memory of `ctx` (uploaded on its compute stream).
cuda::DeviceBuffer<std::int32_t> upload_send_rows(cuda::Context& ctx, const HaloPlan& plan);

/// `floats` floats of ctx's pool as a shared pointer (freed stream-ordered when the last owner
/// goes), where an exchanger's own memory (HaloExchanger::allocate) may take their place.
std::shared_ptr<float> shared_floats(cuda::Context& ctx, std::int64_t floats);

}  // namespace halo::detail
