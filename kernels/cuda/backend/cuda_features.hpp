// Device kernels of the CUDA backend's matrices stored in 16 bits (halo/core/feature_view.hpp;
// Backend::store_features, gemm_features, widen_features, implemented in cuda_features.cpp):
// each one launch on `stream`, with no synchronization nor allocation, so that they can be
// recorded in a CUDA graph. Range checks go into the backend's overflow record
// (cuda_overflow.cuh). Views are device views that passed the callers' shape checks, nonempty.
// Internal to halo_kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "halo/core/dense.hpp"
#include "halo/core/feature_view.hpp"

namespace halo::cuda::detail {

struct OverflowRecord;  // cuda_overflow.cuh

/// dst = round(act(round(src) + bias)) (bias may be null; relu or none; round: to dst's type to
/// nearest even, none for fp32). The first 16-bit rounding that turns a finite element infinite
/// is recorded where the record is empty: any element's first rounding before any element's
/// second (as the CPU backend checks the whole first rounding before the second), row-major
/// within each; its value is the fp32 value rounded.
void launch_store_features(cudaStream_t stream, DenseView<const float> src, const float* bias,
                           bool relu, MutableFeatureView dst, OverflowRecord* rec,
                           std::int32_t store);

/// Records the first (row-major) infinite element of the 16-bit matrix c, with its value (+-inf)
/// and `store`, where the record is empty: gemm_features' range check after cuBLAS has stored c.
void launch_find_infinite(cudaStream_t stream, FeatureView c, OverflowRecord* rec,
                          std::int32_t store);

/// dst = src widened exactly to fp32 (fp32 src: copied).
void launch_widen_features(cudaStream_t stream, FeatureView src, DenseView<float> dst);

}  // namespace halo::cuda::detail
