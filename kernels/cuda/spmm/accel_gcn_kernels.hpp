// Host-callable launchers of the Accel-GCN kernels (accel_gcn.cu) for the plan beside them
// (accel_gcn.cpp). Internal to halo_kernels. Each launcher issues its work on `stream`, checks the
// launch (HALO_CUDA_CHECK_LAUNCH) and returns at once; a count of zero launches nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "halo/core/feature_type.hpp"

namespace halo::cuda::detail {

/// The Accel-GCN launch geometry of one plan.
struct AccelGcnLaunch {
    int warps_per_block = 0;
    int deg_bound = 0;
    int warp_nonzeros = 0;  // deg_bound / warps_per_block
    int tile_cap = 0;       // widest column tile (a multiple of 32) the shared accumulator holds
    bool combined_warps = true;  // false: the paper's non-combined mapping (Fig. 4(a))
};

/// Widest column tile (multiple of 32) whose shared accumulator fits the default 48 KiB of a block.
int accel_gcn_tile_cap(int warps_per_block);

/// y[sorted_rows[...], :] for the `block_count` int4 metadata entries at `blocks` (the layout of
/// halo::AccelGcnBlock), x of `x_type` (fp32 accumulation). values == null: pattern matrix,
/// each entry then col_scale[j] (or 1 where col_scale is null) and each row's result times
/// row_scale[i] (where not null): a pattern with its OperatorScaling. Split rows must be zeroed
/// before: by the kernel launched just before this one when `dependent` (zero_rows' answer), of
/// which this kernel is then the programmatic dependent (dependent_launch.cuh).
void accel_gcn_spmm(cudaStream_t stream, bool dependent, const AccelGcnLaunch& launch,
                    const void* blocks, std::int64_t block_count, const std::int32_t* sorted_rows,
                    const std::int32_t* indices, const float* values, const float* row_scale,
                    const float* col_scale, const void* x, FeatureType x_type, std::int64_t ldx,
                    float* y, std::int64_t ldy, std::int64_t d);

}  // namespace halo::cuda::detail
