// The CUDA execution context: device selection, streams, library handles and the stream-ordered
// memory pool with its usage counters.
#include "halo/kernels/cuda/context.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>

#include "halo/core/detail/resident_memory.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda {
namespace {

// "512.0 MiB" below 1 GiB, "3.4 GiB" above: one decimal is what a memory report needs.
std::string format_bytes(std::size_t bytes)
{
    constexpr double mib = 1024.0 * 1024.0;
    constexpr double gib = 1024.0 * mib;
    char text[64];
    if (static_cast<double>(bytes) < gib) {
        std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / mib);
    } else {
        std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / gib);
    }
    return text;
}

// Makes `device` current for one scope and restores the previous one: device queries of one
// Context must not depend on which device another Context left current.
class DeviceScope {
public:
    explicit DeviceScope(int device) noexcept
    {
        if (cudaGetDevice(&previous_) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
            (void)cudaGetLastError();
            previous_ = -1;
        }
    }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;
    ~DeviceScope()
    {
        if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) {
            (void)cudaGetLastError();
        }
    }

private:
    int previous_ = -1;
};

// Free and total memory of `device` where cudaMemGetInfo answers (its error cleared either way).
struct MemoryInfo {
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    bool known = false;
};

MemoryInfo memory_info(int device) noexcept
{
    const DeviceScope scope(device);
    MemoryInfo info;
    info.known = cudaMemGetInfo(&info.free_bytes, &info.total_bytes) == cudaSuccess;
    (void)cudaGetLastError();
    return info;
}

}  // namespace

Context::Context(const ContextOptions& options) : local_size_(options.local_size)
{
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0) {
        (void)cudaGetLastError();  // clear the error state of a missing driver or device
        HALO_THROW(CudaError, "no CUDA device is visible to this process (cudaGetDeviceCount: ",
                   status == cudaSuccess ? "0 devices" : cudaGetErrorString(status),
                   "); check CUDA_VISIBLE_DEVICES and the driver, or use --backend cpu");
    }
    HALO_EXPECTS(options.device >= -1, "device index ", options.device,
                 " is invalid (-1 picks local_rank modulo the device count)");
    if (options.device >= count) {
        HALO_THROW(CudaError, "device ", options.device, " requested, but only ", count,
                   " CUDA device", count == 1 ? " is" : "s are", " visible (0 .. ", count - 1, ")");
    }
    HALO_EXPECTS(options.local_rank >= 0, "local rank ", options.local_rank, " is negative");
    device_ = options.device >= 0 ? options.device : options.local_rank % count;

    try {
        HALO_CUDA_TRY(cudaSetDevice(device_));
        cudaDeviceProp prop{};
        HALO_CUDA_TRY(cudaGetDeviceProperties(&prop, device_));
        name_ = prop.name;

        HALO_CUDA_TRY(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
        HALO_CUDA_TRY(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));

        HALO_CUSPARSE_TRY(cusparseCreate(&cusparse_));
        HALO_CUSPARSE_TRY(cusparseSetStream(cusparse_, compute_));

        HALO_CUBLAS_TRY(cublasCreate(&cublas_));
        HALO_CUBLAS_TRY(cublasSetStream(cublas_, compute_));
        // Default math with CUBLAS_COMPUTE_32F keeps at least fp32 mantissas throughout: no TF32
        // (which would need CUBLAS_TF32_TENSOR_OP_MATH or a FAST_TF32 compute type).
        HALO_CUBLAS_TRY(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));

        HALO_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool_, device_));
        // Keep freed blocks in the pool: layers free and reallocate work buffers of similar sizes,
        // and returning memory to the driver at every synchronization would cost a remap each time.
        std::uint64_t threshold = std::numeric_limits<std::uint64_t>::max();
        HALO_CUDA_TRY(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold));
    } catch (...) {
        release();
        throw;
    }
}

Context::~Context()
{
    release();
}

void Context::release() noexcept
{
    // Errors here cannot be reported (destructor); each step still runs so nothing leaks more
    // than it must, and the error state is cleared for whoever uses the device next.
    const DeviceScope scope(device_);
    for (const cudaStream_t stream : {compute_, comm_}) {
        if (stream != nullptr) {
            (void)cudaStreamSynchronize(stream);
        }
    }
    const auto destroy_handle = [](auto& handle, auto destroy) {
        if (handle != nullptr) {
            (void)destroy(handle);
            handle = nullptr;
        }
    };
    destroy_handle(cublas_, cublasDestroy);
    destroy_handle(cusparse_, cusparseDestroy);
    destroy_handle(comm_, cudaStreamDestroy);
    destroy_handle(compute_, cudaStreamDestroy);
    if (pool_ != nullptr) {
        // Hand the pool's unused memory back to the driver (other Contexts' live blocks stay);
        // the frees issued on our streams completed with the synchronizations above.
        (void)cudaMemPoolTrimTo(pool_, 0);
        pool_ = nullptr;
    }
    (void)cudaGetLastError();
}

void* Context::allocate(std::size_t bytes, cudaStream_t stream)
{
    if (bytes == 0) {
        return nullptr;
    }
    if (stream == nullptr) {
        stream = compute_;
    }
    void* ptr = nullptr;
    const cudaError_t status = cudaMallocFromPoolAsync(&ptr, bytes, pool_, stream);
    if (status == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // not sticky, but a later launch check must not see it
        const auto info = memory_info(device_);
        const std::size_t in_use = bytes_in_use();
        HALO_THROW(CudaError, "out of memory on device ", device_, " (", name_, "): requested ",
                   format_bytes(bytes), " (", bytes, " bytes) with ",
                   info.known ? format_bytes(info.free_bytes) : std::string("an unknown amount"),
                   " free of ", info.known ? format_bytes(info.total_bytes) : std::string("?"),
                   " and ", format_bytes(in_use), " in use by this rank (", local_size_, " rank",
                   local_size_ == 1 ? "" : "s",
                   " on this node); try more ranks (a smaller shard per GPU)");
    }
    HALO_CUDA_TRY(status);
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_[ptr] = bytes;
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return ptr;
}

void Context::deallocate(void* ptr, cudaStream_t stream) noexcept
{
    if (ptr == nullptr) {
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        const auto it = sizes_.find(ptr);
        if (it != sizes_.end()) {
            in_use_ -= it->second;
            sizes_.erase(it);
        }
    }
    if (cudaFreeAsync(ptr, stream != nullptr ? stream : compute_) != cudaSuccess) {
        (void)cudaGetLastError();
    }
}

std::size_t Context::bytes_in_use() const noexcept
{
    std::lock_guard<std::mutex> lock(mutex_);
    return in_use_;
}

std::size_t Context::peak_bytes() const noexcept
{
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_;
}

std::string Context::memory_report() const
{
    const auto info = memory_info(device_);
    std::string report = "device " + std::to_string(device_) + " (" + name_ +
                         "): " + format_bytes(bytes_in_use()) + " in use, peak " +
                         format_bytes(peak_bytes());
    if (info.known) {
        report +=
            ", " + format_bytes(info.free_bytes) + " free of " + format_bytes(info.total_bytes);
    }
    return report;
}

void Context::synchronize() const
{
    HALO_CUDA_TRY(cudaStreamSynchronize(compute_));
    HALO_CUDA_TRY(cudaStreamSynchronize(comm_));
}

template <typename T>
PinnedBuffer<T>::PinnedBuffer(std::size_t count) : count_(count)
{
    if (count == 0) {
        return;
    }
    HALO_EXPECTS(count <= std::numeric_limits<std::size_t>::max() / sizeof(T), "pinned buffer of ",
                 count, " elements overflows size_t");
    const std::size_t bytes = count * sizeof(T);
    constexpr std::size_t large = std::size_t{64} << 20;
    constexpr std::size_t page = 4096;
    if (bytes >= large) {
        // Resident on every core, then locked: the registration of resident pages ran at about
        // 17 GB/s on the GPU machine (the streamed operator's arrays).
        void* ptr = std::aligned_alloc(page, (bytes + page - 1) / page * page);
        if (ptr != nullptr) {
            halo::detail::populate_pages(ptr, bytes);
            if (cudaHostRegister(ptr, bytes, cudaHostRegisterDefault) == cudaSuccess) {
                data_ = static_cast<T*>(ptr);
                registered_ = true;
                return;
            }
            (void)cudaGetLastError();  // cudaMallocHost below may still succeed
            std::free(ptr);
        }
    }
    void* ptr = nullptr;
    const cudaError_t status = cudaMallocHost(&ptr, bytes);
    if (status != cudaSuccess) {
        (void)cudaGetLastError();
        HALO_THROW(CudaError, "cudaMallocHost of ", format_bytes(count * sizeof(T)), " (", count,
                   " elements of ", sizeof(T), " bytes) failed: ", cudaGetErrorName(status), ": ",
                   cudaGetErrorString(status));
    }
    data_ = static_cast<T*>(ptr);
}

template <typename T>
PinnedBuffer<T>::~PinnedBuffer()
{
    if (data_ == nullptr) {
        return;
    }
    if (registered_) {
        if (cudaHostUnregister(data_) != cudaSuccess) {
            (void)cudaGetLastError();
        }
        std::free(data_);
        return;
    }
    if (cudaFreeHost(data_) != cudaSuccess) {
        (void)cudaGetLastError();
    }
}

template class PinnedBuffer<float>;
template class PinnedBuffer<std::int32_t>;
template class PinnedBuffer<std::int64_t>;
template class PinnedBuffer<char>;

}  // namespace halo::cuda
