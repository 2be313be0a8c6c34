// Device-side helpers of halo-bench (apps/halo_bench.cpp, bench/README.md): CUDA-event timing,
// the measured device-to-device copy bandwidth that roofline figures divide by, seeded fill and
// NaN-poison kernels; the row gather that brings back only the rows a correctness check reads
// is halo_kernels' (halo/kernels/cuda/gather_rows.hpp), shared with the GPU tests.
// They are measurement tools, not library kernels: they allocate with cudaMalloc (outside any
// Context pool, so nothing stays reserved after a measurement) and synchronize where they say.
// Host-only code may include this header (it needs the CUDA runtime's headers, not nvcc).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "halo/core/dense.hpp"
#include "halo/kernels/cuda/gather_rows.hpp"

namespace halo::cuda::bench {

/// A cudaMalloc'd array of floats for benchmark inputs and outputs. It lives outside any Context
/// pool, so freeing it returns the memory at once and free_device_memory() counts it again.
class DeviceArray {
public:
    DeviceArray() = default;
    explicit DeviceArray(std::size_t count);
    ~DeviceArray();
    DeviceArray(DeviceArray&& other) noexcept;
    DeviceArray& operator=(DeviceArray&& other) noexcept;
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;

    float* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return count_; }

private:
    float* data_ = nullptr;
    std::size_t count_ = 0;
};

/// `count` pairs of CUDA events on one stream: start(i) and stop(i) bracket timed run i. Nothing
/// waits on the host until the times are read, so runs are issued back to back and each time is
/// device time between the two events.
class EventTimer {
public:
    EventTimer(cudaStream_t stream, int count);
    ~EventTimer();
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;

    int size() const noexcept { return static_cast<int>(start_.size()); }
    void start(int i);
    void stop(int i);
    /// Milliseconds from start(i) to stop(i) for every i; waits for the last stop event and
    /// throws halo::CudaError if any work on the stream failed.
    std::vector<double> elapsed_ms() const;

private:
    cudaStream_t stream_ = nullptr;
    std::vector<cudaEvent_t> start_;
    std::vector<cudaEvent_t> stop_;
};

/// A device-to-device copy bandwidth measurement: `runs` cudaMemcpyAsync calls of `copy_bytes`
/// each, after warm-up; bandwidth counts the bytes read plus the bytes written (2 * copy_bytes).
struct CopyBandwidth {
    std::size_t copy_bytes = 0;
    int runs = 0;
    double median_ms = 0;
    double min_ms = 0;
    double max_ms = 0;

    double gb_per_s(double ms) const noexcept { return 2.0 * copy_bytes / (ms * 1e6); }
    double median_gb_per_s() const noexcept { return gb_per_s(median_ms); }
};

/// Copies one buffer of `max_bytes` (or, when the two buffers do not fit in free device memory,
/// the largest size that leaves 256 MiB free) on `stream`, `warmup` times untimed and `runs`
/// times timed one by one with events. Throws halo::CudaError when less than 64 MiB can be
/// copied or on any CUDA failure.
CopyBandwidth measure_copy_bandwidth(cudaStream_t stream, std::size_t max_bytes, int warmup,
                                     int runs);

/// Host <-> device copy bandwidth: one direction's bytes over the median time of
/// `runs` cudaMemcpyAsync calls of `bytes` each, from and to page-locked (cudaMallocHost) and
/// pageable (std::vector) host memory. The bus's speed is the pinned figure; halo-infer's
/// uploads, downloads and streamed row blocks are compared with it.
struct HostCopyBandwidth {
    std::size_t copy_bytes = 0;
    int runs = 0;
    double pinned_h2d_gb_per_s = 0;
    double pinned_d2h_gb_per_s = 0;
    double pageable_h2d_gb_per_s = 0;
    double pageable_d2h_gb_per_s = 0;
};

/// Measures HostCopyBandwidth with buffers of `bytes` (rounded down to 2 MiB), `warmup` untimed
/// copies first. Throws halo::CudaError on any CUDA failure.
HostCopyBandwidth measure_host_copy_bandwidth(cudaStream_t stream, std::size_t bytes, int warmup,
                                              int runs);

/// data[i] = lo + (hi - lo) * u_i with u_i in [0, 1) from a counter-based hash of (seed, i): the
/// same values for the same seed on any device and launch configuration. Asynchronous on stream.
void fill_uniform(float* data, std::size_t count, std::uint64_t seed, float lo, float hi,
                  cudaStream_t stream);

/// data[i] = value for every i (NaN poisons an output before a checked run). Asynchronous.
void fill_value(float* data, std::size_t count, float value, cudaStream_t stream);

/// The checks' row gather (halo_kernels, include/halo/kernels/cuda/gather_rows.hpp).
using halo::cuda::gather_rows_to_host;

/// Makes `device` current for this thread (the helpers above allocate on the current device).
void set_device(int device);

/// Free memory of the current device, in bytes (cudaMemGetInfo).
std::size_t free_device_memory();

/// Throws halo::CudaError if a launch since the last check failed (cudaGetLastError).
void check_last_error();

/// Waits for `stream` and throws halo::CudaError if any of its work failed.
void synchronize(cudaStream_t stream);

}  // namespace halo::cuda::bench
