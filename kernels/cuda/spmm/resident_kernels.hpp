// The launcher of the resident-slice SpMM kernel (resident.cu), called by its plan
// (resident.cpp): plain host declarations, so that the plan is host code and the .cu file
// holds only the kernel and its launch. Private to halo_kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>

#include "halo/core/dense.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"
#include "preprocess/resident_layout.hpp"

namespace halo::cuda::resident_kernels {

// Shared memory per X row of a slice (4 fp32 columns).
inline constexpr std::size_t kRowBytes = resident::kSliceColumns * sizeof(float);

// One launch over a row range's layout (resident::build_layout, on the device).
struct Launch {
    FeatureView x{};
    DenseView<float> y{};
    std::int64_t num_cols = 0;
    const std::int64_t* chunk_start = nullptr;  // chunks + 1
    std::int64_t chunks = 0;
    const std::int32_t* lane_row = nullptr;
    const std::int32_t* lane_info = nullptr;
    const std::uint16_t* columns = nullptr;
    const float* values = nullptr;     // null: a pattern (ones), or a pattern-scaled plan
    const float* row_scale = nullptr;  // null, or the sums times row_scale[row]
    const float* col_scale = nullptr;  // null, or X's row j times col_scale[j]
    bool add = false;                  // y += the sums
};

// What a plan's launches keep: its device, the device's SMs, the shared memory of a block, and
// per kernel instance the resident blocks per SM (asked once, after allowing the kernel that
// much dynamic shared memory).
struct Occupancy {
    int device = 0;
    int multiprocessors = 0;
    std::size_t shared_bytes = 0;
    std::map<const void*, int> per_sm;
};

/// The kernel over `launch` on `stream`, one wave of blocks, the launch checked.
void launch_spmm(cudaStream_t stream, const Launch& launch, Occupancy& occupancy);

}  // namespace halo::cuda::resident_kernels
