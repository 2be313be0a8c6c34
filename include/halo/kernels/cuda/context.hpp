// The CUDA execution context (docs/ARCHITECTURE.md "Core types and conventions"): one device, a
// compute stream and a communication stream, cuSPARSE and cuBLAS handles bound to the compute
// stream, and a stream-ordered memory pool (cudaMallocAsync). It comes first in every call that
// touches the device; there are no globals. Host-only code may include this header (it needs the
// CUDA runtime's headers, not nvcc).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace halo::cuda {

struct ContextOptions {
    /// Device index; -1 picks local_rank modulo the number of visible devices.
    int device = -1;
    /// This process's rank among the ranks of its node (MpiWorld::local_rank()).
    int local_rank = 0;
    /// Number of ranks on this node, for the out-of-memory advice.
    int local_size = 1;
};

/// Creating a Context selects its device (cudaSetDevice) for the calling thread. The pool's release
/// threshold is raised so that memory freed between layers is reused rather than returned to the
/// driver. cuBLAS runs in plain fp32 (no TF32), so results stay within fp32 tolerance of the CPU.
/// Everything allocated through a Context must be freed before the Context is destroyed.
class Context {
public:
    /// Throws halo::CudaError when there is no device or options.device is out of range.
    explicit Context(const ContextOptions& options = {});
    /// Waits for the device, then destroys handles and streams; never throws.
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    int device() const noexcept { return device_; }
    cudaStream_t compute_stream() const noexcept { return compute_; }
    cudaStream_t comm_stream() const noexcept { return comm_; }
    cusparseHandle_t cusparse() const noexcept { return cusparse_; }
    cublasHandle_t cublas() const noexcept { return cublas_; }

    /// Stream-ordered allocation on `stream` (default: the compute stream) from the device's
    /// pool. Running out throws halo::CudaError saying how much was asked for, how much is free
    /// and in use, and suggesting more ranks (a smaller shard per GPU).
    /// Zero bytes return null.
    void* allocate(std::size_t bytes, cudaStream_t stream = nullptr);
    /// Stream-ordered free of a pointer from allocate(); null is ignored.
    void deallocate(void* ptr, cudaStream_t stream = nullptr) noexcept;

    /// Bytes currently allocated through this context, and the high-water mark.
    std::size_t bytes_in_use() const noexcept;
    std::size_t peak_bytes() const noexcept;
    /// "device 0 (NVIDIA H100): 1.2 GiB in use, peak 3.4 GiB, 70.1 GiB free of 79.2 GiB"
    std::string memory_report() const;

    /// Waits for all work on both streams.
    void synchronize() const;

private:
    void release() noexcept;

    int device_ = 0;
    int local_size_ = 1;
    std::string name_;
    cudaStream_t compute_ = nullptr;
    cudaStream_t comm_ = nullptr;
    cusparseHandle_t cusparse_ = nullptr;
    cublasHandle_t cublas_ = nullptr;
    cudaMemPool_t pool_ = nullptr;
    // Sizes of live allocations, so that deallocate() can keep the counters exact; guarded by
    // mutex_ because a communication thread may free buffers too.
    mutable std::mutex mutex_;
    std::unordered_map<void*, std::size_t> sizes_;
    std::size_t in_use_ = 0;
    std::size_t peak_ = 0;
};

/// RAII device buffer of T from a Context's pool (freed stream-ordered on the compute stream).
template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(Context& ctx, std::size_t count)
        : ctx_(&ctx),
          count_(count),
          data_(count > 0 ? static_cast<T*>(ctx.allocate(count * sizeof(T))) : nullptr)
    {
    }
    DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept
    {
        DeviceBuffer(std::move(other)).swap(*this);
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer()
    {
        if (data_ != nullptr) {
            ctx_->deallocate(data_);
        }
    }

    T* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return count_; }
    std::size_t bytes() const noexcept { return count_ * sizeof(T); }

    void swap(DeviceBuffer& other) noexcept
    {
        std::swap(ctx_, other.ctx_);
        std::swap(count_, other.count_);
        std::swap(data_, other.data_);
    }

private:
    Context* ctx_ = nullptr;
    std::size_t count_ = 0;
    T* data_ = nullptr;
};

/// RAII pinned host buffer, for staging copies, host-staged MPI exchange and the out-of-core
/// engine's layer inputs and outputs. Below 64 MiB cudaMallocHost; from 64 MiB, plain memory
/// whose pages are made resident on every core (detail::populate_pages) and then page-locked
/// with cudaHostRegister: cudaMallocHost faults and locks its pages on one thread, which took
/// seconds for the 17 GB input of R-MAT 26 (docs/NOTEBOOK.md).
template <typename T>
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(std::size_t count);
    PinnedBuffer(PinnedBuffer&& other) noexcept
        : count_(std::exchange(other.count_, 0)),
          data_(std::exchange(other.data_, nullptr)),
          registered_(std::exchange(other.registered_, false))
    {
    }
    PinnedBuffer& operator=(PinnedBuffer&& other) noexcept
    {
        std::swap(count_, other.count_);
        std::swap(data_, other.data_);
        std::swap(registered_, other.registered_);
        return *this;
    }
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    ~PinnedBuffer();

    T* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return count_; }

private:
    std::size_t count_ = 0;
    T* data_ = nullptr;
    bool registered_ = false;  // plain memory page-locked with cudaHostRegister
};

}  // namespace halo::cuda
