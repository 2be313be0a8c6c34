// CUDA device discovery, usable from host-only code (no CUDA headers). Without a CUDA build
// (HALO_ENABLE_CUDA=OFF) device_count() is always 0.
#pragma once

#include <cstdint>
#include <string>

namespace halo::cuda {

/// Number of usable CUDA devices; 0 when there is no device or no driver (never throws for that).
int device_count();

/// Properties of a device that logs and benchmark reports name.
struct DeviceInfo {
    int index = 0;
    std::string name;
    int compute_major = 0;
    int compute_minor = 0;
    std::int64_t global_memory_bytes = 0;
    std::int64_t l2_cache_bytes = 0;
    int multiprocessors = 0;
};

/// Properties of device `index`; throws halo::CudaError for an invalid index.
DeviceInfo device_info(int index);

/// Whether a kernel that adds into rows zeroed by the kernel before it starts while that zeroing
/// runs on device `index` (a programmatic dependent launch: compute capability 9.0 and later,
/// unless HALO_DEPENDENT_LAUNCH=0 in the environment). MergePath, Accel-GCN and the MaxK SSD
/// then pay no launch of their own for it; the SpMM cost model's rule 4 depends on it.
bool zeroing_overlapped(int index);

/// Copies `count` floats host -> device -> host through a device kernel that adds `offset` to each
/// element: a self-test that the runtime, the driver and code generation for this architecture
/// work. Throws halo::CudaError on any failure.
void self_test(const float* in, float* out, std::int64_t count, float offset);

}  // namespace halo::cuda
