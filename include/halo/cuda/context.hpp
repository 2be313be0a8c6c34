// The CUDA execution context (DESIGN.md "Core types"): one device, a compute stream and a
// communication stream, cuSPARSE and cuBLAS handles bound to the compute stream, and a
// stream-ordered memory pool (cudaMallocAsync). It comes first in every call that touches the
// device; there are no globals. Host-only code may include this header (it needs the CUDA
// runtime's headers, not nvcc).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
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

class Context {
public:
    explicit Context(const ContextOptions& options = {});
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
    void* allocate(std::size_t bytes, cudaStream_t stream = nullptr);
    void deallocate(void* ptr, cudaStream_t stream = nullptr) noexcept;

    /// Bytes currently allocated through this context, and the high-water mark.
    std::size_t bytes_in_use() const noexcept { return in_use_; }
    std::size_t peak_bytes() const noexcept { return peak_; }
    /// "device 0 (NVIDIA H100): 1.2 GiB in use, peak 3.4 GiB, 70.1 GiB free of 79.2 GiB"
    std::string memory_report() const;

    void synchronize() const;

private:
    int device_ = 0;
    int local_size_ = 1;
    std::string name_;
    cudaStream_t compute_ = nullptr;
    cudaStream_t comm_ = nullptr;
    cusparseHandle_t cusparse_ = nullptr;
    cublasHandle_t cublas_ = nullptr;
    std::size_t in_use_ = 0;
    std::size_t peak_ = 0;
};

/// RAII device buffer of T from a Context's pool (freed stream-ordered on the compute stream).
template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(Context& ctx, std::size_t count)
        : ctx_(&ctx), count_(count),
          data_(count > 0 ? static_cast<T*>(ctx.allocate(count * sizeof(T))) : nullptr)
    {}
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

/// RAII pinned host buffer (cudaMallocHost), for staging copies and host-staged MPI exchange.
template <typename T>
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(std::size_t count);
    PinnedBuffer(PinnedBuffer&& other) noexcept
        : count_(std::exchange(other.count_, 0)), data_(std::exchange(other.data_, nullptr))
    {}
    PinnedBuffer& operator=(PinnedBuffer&& other) noexcept
    {
        std::swap(count_, other.count_);
        std::swap(data_, other.data_);
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
};

}  // namespace halo::cuda
