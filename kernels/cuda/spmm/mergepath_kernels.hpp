// The launchers of MergePath-SpMM's kernels (mergepath.cu), called by its plan
// (mergepath.cpp): plain host declarations, so that the plan is host code and the .cu file
// holds only kernels and their launch. Private to halo_kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "halo/core/dense.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"

namespace halo::cuda::mergepath_kernels {

// Indices of a plan with L2 hints carry a cold mark in bit 31 (MergePathOptions::hint_hot_bytes):
// kPlain: no marks; kMarked: marks, plain loads; kHinted: marks, cold X rows loaded evict_first
// and hot ones evict_last (fp32 only).
enum Hints : int { kPlain = 0, kMarked = 1, kHinted = 2 };

// One launch over a prepared schedule (mergepath_schedule.hpp) of a row range.
struct Launch {
    const std::int64_t* indptr = nullptr;
    const std::int32_t* indices = nullptr;
    const float* values = nullptr;     // null: pattern matrix
    const float* row_scale = nullptr;  // null, or y's row i scaled by row_scale[i]
    const float* col_scale = nullptr;  // null, or x's row j scaled by col_scale[j] in the gather
    const std::int64_t* segment_rows = nullptr;
    std::int64_t num_segments = 0;
    std::int64_t cost = 0;
    std::int64_t items = 0;
    std::int64_t range_begin = 0;
    std::int64_t first_nonzero = 0;
    FeatureView x{};
    DenseView<float> y{};
    bool add = false;        // y += A x: whole rows add, split rows are not zeroed first
    bool dependent = false;  // the programmatic dependent of the zeroing just launched
    int vec = 1;             // columns per lane (detail::lane_columns)
    Hints hints = kPlain;
};

/// The SpMM kernel of `launch` on `stream`, the launch checked.
void launch_spmm(cudaStream_t stream, const Launch& launch);

/// L2 hints' setup: reads[c] += the nonzeros of column c (reads zeroed by the caller).
void count_column_reads(cudaStream_t stream, const std::int32_t* indices, std::int64_t nnz,
                        std::uint32_t* reads);

/// L2 hints' setup: marks (mergepath::kColdMark) the indices whose column is not hot.
void mark_cold_indices(cudaStream_t stream, std::int32_t* indices, std::int64_t nnz,
                       const std::uint8_t* is_hot);

}  // namespace halo::cuda::mergepath_kernels
