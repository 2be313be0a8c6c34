// Programmatic dependent launch (compute capability 9.0 and later; CUDA programming guide,
// "Programmatic Dependent Launch and Synchronization"): a kernel launched as the dependent of the
// kernel before it in its stream may be scheduled as soon as every block of that prerequisite has
// called allow_dependent_launch() (or exited), and runs whatever does not read or write what the
// prerequisite writes before wait_for_prerequisite() returns.
//
// Used where a small kernel zeroes the rows that the next kernel then adds into atomically
// (zero_rows.hpp): the SpMM or SSD kernel gathers and sums while the zeroing runs, and waits only
// before its first atomic add. Its plain stores go to rows the zeroing does not touch. On older
// devices, or with HALO_DEPENDENT_LAUNCH=0 in the environment, the launch is an ordinary one and
// both device calls do nothing. Internal to halo_kernels.
//
// Kernels with shared memory are launched so only when their grid fills the device at least once
// (fills_device): the zeroing (no shared memory) holds SMs in a configuration with little shared
// memory when the dependent's first blocks arrive, and a grid of less than one wave then piles
// onto the other SMs. Measured on an H200: the decoupled SSD on BlogCatalog at k = 8 (360 blocks
// of 48 KiB, 0.7 of a wave) took 37.5 us instead of 26.2 us, bimodal (min 24.3 us); at k >= 16
// (1.1 waves and more), and on ego-Twitter at every k, it gained 1-3 us (docs/MAXK.md).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {

/// In a prerequisite kernel, first thing: its dependent may be scheduled once every block of it
/// has called this. Says nothing about its writes (the dependent waits for those).
__device__ __forceinline__ void allow_dependent_launch()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// In a dependent kernel: returns once the prerequisite grid has completed and its writes are
/// visible; at once in a kernel that was not launched as a dependent, and after the first call.
__device__ __forceinline__ void wait_for_prerequisite()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// In a dependent kernel, first thing: block 0 waits for the prerequisite, so that the grid
/// never completes before it (launch()'s rule), whatever the other blocks need.
__device__ __forceinline__ void end_after_prerequisite()
{
    if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) {
        wait_for_prerequisite();
    }
}

/// Whether launch() may make dependents: not when HALO_DEPENDENT_LAUNCH is "0" (read once), the
/// switch that measures what the overlap is worth and rules it out when debugging.
inline bool dependent_launch_enabled()
{
    static const bool enabled = [] {
        const char* v = std::getenv("HALO_DEPENDENT_LAUNCH");
        return v == nullptr || std::strcmp(v, "0") != 0;
    }();
    return enabled;
}

/// Whether `blocks` blocks of `kernel` (`threads` each, `shared_bytes` of dynamic shared memory,
/// whose attribute allowing it is already set) fill every SM of the current device's resident
/// block slots at least once. The occupancy is asked once per kernel, shape and device and kept:
/// asked at every launch it delayed the launch behind the zeroing by about a microsecond of host
/// time, a gap on the device for the smallest graphs.
template <typename... Params>
bool fills_device(void (*kernel)(Params...), std::int64_t blocks, int threads,
                  std::size_t shared_bytes)
{
    int device = 0;
    HALO_CUDA_TRY(cudaGetDevice(&device));
    const auto key =
        std::make_tuple(reinterpret_cast<const void*>(kernel), threads, shared_bytes, device);
    static std::mutex mutex;
    static std::map<decltype(key), std::int64_t> slots;  // resident blocks on the whole device
    std::lock_guard<std::mutex> lock(mutex);
    auto it = slots.find(key);
    if (it == slots.end()) {
        int sms = 0;
        HALO_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        int per_sm = 0;
        HALO_CUDA_TRY(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared_bytes));
        it = slots.emplace(key, std::int64_t{per_sm} * sms).first;
    }
    return blocks >= it->second;
}

/// kernel<<<grid, block, shared_bytes, stream>>>(args...), checked; when `dependent` (and
/// enabled), as the programmatic dependent of the kernel launched just before it on `stream`.
/// Such a kernel must call wait_for_prerequisite() before it touches anything that kernel
/// writes, and end_after_prerequisite() first, so that this kernel's completion implies the
/// prerequisite's whatever the later work on the stream assumes.
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
            cudaStream_t stream, bool dependent, Args&&... args)
{
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = dependent && dependent_launch_enabled() ? 1 : 0;
    HALO_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace halo::cuda::detail
