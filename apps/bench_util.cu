#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "bench_util.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::bench {
namespace {

constexpr int kBlock = 256;
// Grid-stride loops: enough blocks to fill any current GPU, few enough that each thread does
// several elements of a multi-GiB buffer.
constexpr std::size_t kMaxBlocks = 16384;
constexpr std::size_t kMiB = std::size_t{1} << 20;

unsigned grid_for(std::size_t count)
{
    return static_cast<unsigned>(
        std::clamp<std::size_t>((count + kBlock - 1) / kBlock, 1, kMaxBlocks));
}

__host__ __device__ inline std::uint64_t splitmix64(std::uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

constexpr std::uint64_t kGamma = 0x9e3779b97f4a7c15ULL;

__global__ void fill_uniform_kernel(float* data, std::size_t count, std::uint64_t key, float lo,
                                    float span)
{
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += stride) {
        // Element i is the (i + 1)-th output of the splitmix64 sequence started at `key`.
        const std::uint64_t bits = splitmix64(key + (i + 1) * kGamma);
        const float u = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // 24 bits
        data[i] = lo + span * u;
    }
}

__global__ void fill_value_kernel(float* data, std::size_t count, float value)
{
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += stride) {
        data[i] = value;
    }
}

// cudaMalloc'd scratch memory. release() frees with a checked call on the normal path; the
// destructor only frees what an exception left behind (and cannot report a failure).
class DeviceMemory {
public:
    explicit DeviceMemory(std::size_t bytes) { HALO_CUDA_TRY(cudaMalloc(&ptr_, bytes)); }
    DeviceMemory(const DeviceMemory&) = delete;
    DeviceMemory& operator=(const DeviceMemory&) = delete;
    ~DeviceMemory()
    {
        if (ptr_ != nullptr) {
            (void)cudaFree(ptr_);
        }
    }

    template <typename T>
    T* as() const noexcept
    {
        return static_cast<T*>(ptr_);
    }

    void release()
    {
        void* ptr = std::exchange(ptr_, nullptr);
        HALO_CUDA_TRY(cudaFree(ptr));
    }

private:
    void* ptr_ = nullptr;
};

double median_of(std::vector<double> values)
{
    std::sort(values.begin(), values.end());
    const auto n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

DeviceArray::DeviceArray(std::size_t count) : count_(count)
{
    if (count > 0) {
        HALO_CUDA_TRY(cudaMalloc(&data_, count * sizeof(float)));
    }
}

DeviceArray::~DeviceArray()
{
    // A destructor cannot report; cudaFree fails only after an earlier error that already threw.
    if (data_ != nullptr) {
        (void)cudaFree(data_);
    }
}

DeviceArray::DeviceArray(DeviceArray&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0))
{
}

DeviceArray& DeviceArray::operator=(DeviceArray&& other) noexcept
{
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
}

EventTimer::EventTimer(cudaStream_t stream, int count) : stream_(stream)
{
    HALO_EXPECTS(count >= 0, "event pair count ", count, " is negative");
    start_.reserve(count);
    stop_.reserve(count);
    try {
        for (int i = 0; i < count; ++i) {
            cudaEvent_t start = nullptr;
            HALO_CUDA_TRY(cudaEventCreate(&start));
            start_.push_back(start);
            cudaEvent_t stop = nullptr;
            HALO_CUDA_TRY(cudaEventCreate(&stop));
            stop_.push_back(stop);
        }
    } catch (...) {
        for (auto e : start_) {
            (void)cudaEventDestroy(e);
        }
        for (auto e : stop_) {
            (void)cudaEventDestroy(e);
        }
        throw;
    }
}

EventTimer::~EventTimer()
{
    // A destructor cannot report: a failure here means an earlier call already failed and threw.
    for (auto e : start_) {
        (void)cudaEventDestroy(e);
    }
    for (auto e : stop_) {
        (void)cudaEventDestroy(e);
    }
}

void EventTimer::start(int i)
{
    HALO_EXPECTS(i >= 0 && i < size(), "event pair ", i, " outside [0, ", size(), ")");
    HALO_CUDA_TRY(cudaEventRecord(start_[i], stream_));
}

void EventTimer::stop(int i)
{
    HALO_EXPECTS(i >= 0 && i < size(), "event pair ", i, " outside [0, ", size(), ")");
    HALO_CUDA_TRY(cudaEventRecord(stop_[i], stream_));
}

std::vector<double> EventTimer::elapsed_ms() const
{
    HALO_CUDA_TRY(cudaStreamSynchronize(stream_));
    std::vector<double> times(start_.size());
    for (std::size_t i = 0; i < start_.size(); ++i) {
        float ms = 0;
        HALO_CUDA_TRY(cudaEventElapsedTime(&ms, start_[i], stop_[i]));
        times[i] = ms;
    }
    return times;
}

CopyBandwidth measure_copy_bandwidth(cudaStream_t stream, std::size_t max_bytes, int warmup,
                                     int runs)
{
    HALO_EXPECTS(warmup >= 0 && runs >= 1, "warmup ", warmup, " runs ", runs);
    constexpr std::size_t reserve = 256 * kMiB;
    constexpr std::size_t min_bytes = 64 * kMiB;
    const std::size_t free = free_device_memory();
    std::size_t bytes = max_bytes;
    if (2 * bytes + reserve > free) {
        bytes = free > reserve ? (free - reserve) / 2 : 0;
    }
    bytes -= bytes % (2 * kMiB);
    if (bytes < min_bytes) {
        HALO_THROW(CudaError, "copy bandwidth: only ", free / kMiB,
                   " MiB of device memory free, too little for two buffers of at least ",
                   min_bytes / kMiB, " MiB");
    }

    DeviceMemory src(bytes);
    DeviceMemory dst(bytes);
    // Random contents, not zeros: nothing may run faster on special values.
    fill_uniform(src.as<float>(), bytes / sizeof(float), 0x5eedULL, -1.0f, 1.0f, stream);
    for (int w = 0; w < warmup; ++w) {
        HALO_CUDA_TRY(cudaMemcpyAsync(dst.as<void>(), src.as<void>(), bytes,
                                      cudaMemcpyDeviceToDevice, stream));
    }
    EventTimer timer(stream, runs);
    for (int r = 0; r < runs; ++r) {
        timer.start(r);
        HALO_CUDA_TRY(cudaMemcpyAsync(dst.as<void>(), src.as<void>(), bytes,
                                      cudaMemcpyDeviceToDevice, stream));
        timer.stop(r);
    }
    const auto times = timer.elapsed_ms();
    dst.release();
    src.release();

    CopyBandwidth result;
    result.copy_bytes = bytes;
    result.runs = runs;
    result.median_ms = median_of(times);
    result.min_ms = *std::min_element(times.begin(), times.end());
    result.max_ms = *std::max_element(times.begin(), times.end());
    return result;
}

HostCopyBandwidth measure_host_copy_bandwidth(cudaStream_t stream, std::size_t bytes, int warmup,
                                              int runs)
{
    HALO_EXPECTS(warmup >= 0 && runs >= 1, "warmup ", warmup, " runs ", runs);
    bytes -= bytes % (2 * kMiB);
    HALO_EXPECTS(bytes > 0, "host copy bandwidth needs at least 2 MiB");
    DeviceMemory device(bytes);
    void* pinned_ptr = nullptr;
    HALO_CUDA_TRY(cudaMallocHost(&pinned_ptr, bytes));
    std::unique_ptr<void, void (*)(void*)> pinned(pinned_ptr,
                                                  [](void* p) { (void)cudaFreeHost(p); });
    std::vector<char> pageable(bytes, 1);
    std::fill_n(static_cast<char*>(pinned.get()), bytes, 1);
    auto one_way = [&](void* dst, const void* src, cudaMemcpyKind kind) {
        for (int w = 0; w < warmup; ++w) {
            HALO_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, stream));
        }
        EventTimer timer(stream, runs);
        for (int r = 0; r < runs; ++r) {
            timer.start(r);
            HALO_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, stream));
            timer.stop(r);
        }
        const double ms = median_of(timer.elapsed_ms());
        return static_cast<double>(bytes) / (ms * 1e6);
    };
    HostCopyBandwidth result;
    result.copy_bytes = bytes;
    result.runs = runs;
    result.pinned_h2d_gb_per_s =
        one_way(device.as<void>(), pinned.get(), cudaMemcpyHostToDevice);
    result.pinned_d2h_gb_per_s =
        one_way(pinned.get(), device.as<void>(), cudaMemcpyDeviceToHost);
    result.pageable_h2d_gb_per_s =
        one_way(device.as<void>(), pageable.data(), cudaMemcpyHostToDevice);
    result.pageable_d2h_gb_per_s =
        one_way(pageable.data(), device.as<void>(), cudaMemcpyDeviceToHost);
    device.release();
    return result;
}

void fill_uniform(float* data, std::size_t count, std::uint64_t seed, float lo, float hi,
                  cudaStream_t stream)
{
    if (count == 0) {
        return;
    }
    fill_uniform_kernel<<<grid_for(count), kBlock, 0, stream>>>(data, count, splitmix64(seed), lo,
                                                                hi - lo);
    HALO_CUDA_CHECK_LAUNCH();
}

void fill_value(float* data, std::size_t count, float value, cudaStream_t stream)
{
    if (count == 0) {
        return;
    }
    fill_value_kernel<<<grid_for(count), kBlock, 0, stream>>>(data, count, value);
    HALO_CUDA_CHECK_LAUNCH();
}

void set_device(int device)
{
    HALO_CUDA_TRY(cudaSetDevice(device));
}

std::size_t free_device_memory()
{
    std::size_t free = 0;
    std::size_t total = 0;
    HALO_CUDA_TRY(cudaMemGetInfo(&free, &total));
    return free;
}

void check_last_error()
{
    HALO_CUDA_TRY(cudaGetLastError());
}

void synchronize(cudaStream_t stream)
{
    HALO_CUDA_TRY(cudaStreamSynchronize(stream));
    HALO_CUDA_TRY(cudaGetLastError());
}

}  // namespace halo::cuda::bench
