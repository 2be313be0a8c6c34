// Host-callable launchers of the MaxK kernels (maxk.cu) for the plan beside them (maxk.cpp).
// Internal to halo_kernels. Each launcher issues its work on `stream`, checks the launch
// (HALO_CUDA_CHECK_LAUNCH) and returns at once; an empty launch launches nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace halo::cuda::detail {

/// One edge group as the kernels read it: a single 16-byte load. count_mode holds the nonzero
/// count in bits 0..30 and update_mode in bit 31.
struct alignas(16) SsdGroup {
    std::int32_t row;
    std::int32_t count_mode;
    std::int64_t first;
};
static_assert(sizeof(SsdGroup) == 16, "SsdGroup is read as an int4");

/// Top-k of rows x dim (leading dimension ldx) into values/indices (rows x k each).
void maxk_topk(cudaStream_t stream, const float* x, std::int64_t rows, int dim, std::int64_t ldx,
               int k, float* values, std::int16_t* indices);

/// Operands of one SSD launch: the range's groups, group g of the launch (0 <= g < group_count)
/// being groups[order[g]] when order is set (longest first), else groups[g] (by row).
struct SsdArgs {
    const SsdGroup* groups = nullptr;
    const std::int32_t* order = nullptr;
    std::int64_t group_count = 0;
    const std::int32_t* a_indices = nullptr;
    const float* a_values = nullptr;  // null: pattern matrix
    const float* s_values = nullptr;
    const std::int16_t* s_indices = nullptr;
    int k = 0;
    int dim = 0;
    float* out = nullptr;
    std::int64_t ldo = 0;
    bool vec4 = false;  // set by the launchers: float4 buffers and output rows
};

/// MaxK's operator: `warps` groups per block, atomics always (the rows must be zeroed first).
void ssd_maxk(cudaStream_t stream, const SsdArgs& args, int warps);

/// The decoupled operator: `warps` warps per block, `slots` groups per warp; atomic_aware: plain
/// stores for update_mode 0 (shared rows zeroed first), else atomics always (rows zeroed first).
/// dependent: the shared rows were zeroed by the kernel launched just before this one on
/// `stream` (zero_rows' answer), of which this kernel is then the programmatic dependent
/// (dependent_launch.cuh); atomic-aware runs only.
void ssd_decoupled(cudaStream_t stream, const SsdArgs& args, int warps, int slots,
                   bool atomic_aware, bool dependent);

/// Dynamic shared memory of one block of each kernel.
std::size_t ssd_maxk_shared_bytes(int warps, int dim);
std::size_t ssd_decoupled_shared_bytes(int warps, int slots, int dim);

}  // namespace halo::cuda::detail
