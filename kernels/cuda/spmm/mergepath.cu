// MergePath-SpMM's kernels (paper 003, Algorithm 2 with section III-C's thread mapping) and their
// launchers (mergepath_kernels.hpp); the plan is host code, in mergepath.cpp.
//
// Choices:
// - Schedule: the merge-path partition comes from the host (mergepath_schedule.cpp): only each
//   segment's start row is stored; its start nonzero follows from the diagonal. A row range and a
//   cost make one schedule, prepared once and cached (the full range at plan creation).
// - Split rows: a row whose nonzeros lie in several segments is zeroed by a small kernel over the
//   split rows only, then each segment adds its part with one atomicAdd per element (the paper's
//   T[0, :] / T[1, :] accumulate in registers first). Every other row gets one plain store from
//   the segment holding its start and end, so no other row of y is read or zeroed. run_add
//   (y += A x) skips the zeroing and adds where run() stores. The kernel is launched as the
//   zeroing's programmatic dependent (dependent_launch.cuh): it starts while the zeroing runs and
//   waits for it only before an atomic add.
// - Mapping by width d: a lane owns the columns of one 16-byte load (4 fp32 or 8 fp16/bf16; one or
//   two float4 stores of y) when d, both leading dimensions and both base pointers allow it, else
//   1 column (feature_vec.hpp); fp16/bf16 features are widened at the load, sums stay fp32; with c
//   columns of lanes, a segment gets L lanes, L = the next power of two >= c when c <= 32
//   (32 / L segments share a warp: independent thread scheduling lets them diverge), else c
//   rounded up to 32 (ceil(c / 32) warps per segment, each warp one slice); every x row read by a
//   group is a contiguous slice of it. The lanes of a segment read the same
//   indptr/indices/values: broadcast loads that L1 serves.
// - The walk: rows are consumed in merge order as in Merrill & Garland's SpMV, which gives the
//   same writes as Algorithm 2's case analysis (partial start row, complete rows, partial end row)
//   without its early return.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/primitives/dependent_launch.cuh"
#include "cuda/primitives/feature_load.cuh"
#include "cuda/primitives/feature_vec.hpp"
#include "cuda/primitives/grid_stride.cuh"
#include "cuda/spmm/mergepath_kernels.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "preprocess/hot_columns.hpp"  // kColdMark

namespace halo::cuda {
namespace {

using detail::atomic_add_results;
using detail::load_features;
using detail::vector_columns;
using detail::write_results;

constexpr int kBlockThreads = 256;
// Grid-stride loops beyond this many blocks (any larger grid only adds block scheduling).
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 22;

template <typename T>
struct KernelArgs {
    const std::int64_t* indptr;
    const std::int32_t* indices;
    const float* values;     // null: pattern matrix
    const float* row_scale;  // null, or y's row i scaled by row_scale[i] (OperatorScaling)
    const float* col_scale;  // null, or x's row j scaled by col_scale[j] in the gather
    const std::int64_t* segment_rows;
    std::int64_t num_segments;
    std::int64_t cost;
    std::int64_t items;
    std::int64_t range_begin;
    std::int64_t first_nonzero;
    std::int64_t lanes;  // per segment
    std::int64_t width;
    const T* x;
    std::int64_t ldx;
    float* y;
    std::int64_t ldy;
    bool add;  // y += A x (SpmmPlan::run_add): whole rows add, split rows are not zeroed first
};

// The cold marks of L2 hints (mergepath_kernels.hpp).
using mergepath::kColdMark;
using mergepath_kernels::Hints;
using mergepath_kernels::kHinted;
using mergepath_kernels::kMarked;
using mergepath_kernels::kPlain;

struct HintPolicies {
    unsigned long long cold = 0;
    unsigned long long hot = 0;
};

// What a nonzero multiplies its x row by: 1 (a pattern), its stored value, or the column scaling
// of a pattern operator (a[i, j] = row_scale[i] * col_scale[j]: no values array is stored or
// read; the row scaling is applied once per row sum, at the end of row_sum).
enum Entries : int { kPattern = 0, kValues = 1, kColumnScaled = 2 };

// Nonzeros per batch of row_sum (fp32 x with values): every index, x gather and value of a batch
// is issued before its first product, so that eight gathers per lane are in flight (AES's
// batches, docs/AES.md "Eight gathers in flight"). A loop unrolled by the compiler interleaved
// them: the SASS issued one x gather, then the four FFMAs that wait for it, then the next gather.
constexpr int kBatch = 8;

// x's kVec columns of row c (the cold mark, if any, cleared in c) into xv.
template <int kVec, int kHints, typename T>
__device__ __forceinline__ void gather_row(const KernelArgs<T>& k, std::int32_t& c,
                                           std::int64_t col, float (&xv)[kVec],
                                           const HintPolicies& policies)
{
    if constexpr (kHints == kPlain) {
        load_features<T, kVec>(k.x + static_cast<std::int64_t>(c) * k.ldx + col, xv);
    } else {
        const bool cold = c < 0;  // the mark
        c &= static_cast<std::int32_t>(~kColdMark);
        const T* p = k.x + static_cast<std::int64_t>(c) * k.ldx + col;
        if constexpr (kHints == kHinted && std::is_same_v<T, float>) {
            detail::load_features_with_policy<kVec>(p, xv, cold ? policies.cold : policies.hot);
        } else {
            load_features<T, kVec>(p, xv);
        }
    }
}

// The multiplier of nonzero j (column c, the mark cleared); 1 for a pattern.
template <int kEntries, typename T>
__device__ __forceinline__ float entry(const KernelArgs<T>& k, std::int64_t j, std::int32_t c)
{
    if constexpr (kEntries == kValues) {
        return __ldg(k.values + j);
    } else if constexpr (kEntries == kColumnScaled) {
        return __ldg(k.col_scale + c);
    } else {
        return 1.0f;
    }
}

template <int kEntries, int kVec>
__device__ __forceinline__ void accumulate(float a, const float (&xv)[kVec], float (&acc)[kVec])
{
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
        if constexpr (kEntries == kPattern) {
            acc[i] += xv[i];
        } else {
            acc[i] = fmaf(a, xv[i], acc[i]);
        }
    }
}

// A lane's kVec columns: kVec == 1, or one 16-byte load of x (4 fp32 or 8 fp16/bf16 columns)
// when feature_vec.hpp's lane_columns() allows it; fp32 accumulators and fp32 y either way.
// Nonzeros are summed in storage order (full batches, then the rest one at a time); x, the
// matrix and the schedule are read-only for the whole kernel (read-only cache loads).
template <int kEntries, int kVec, int kHints, typename T>
__device__ __forceinline__ void row_sum(const KernelArgs<T>& k, std::int64_t from, std::int64_t to,
                                        std::int64_t col, std::int64_t row, float (&acc)[kVec],
                                        const HintPolicies& policies)
{
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
        acc[i] = 0.0f;
    }
    // Batches only for fp32 x with stored values, where they were measured faster; the pattern
    // and fp16 / bf16 instances ran 1-2% slower batched in geomean, up to 7% (docs/NOTEBOOK.md,
    // "MergePath in batches of eight"), and the column-scaled ones were not measured.
    constexpr bool kBatched = std::is_same_v<T, float> && kEntries == kValues;
    for (; kBatched && from + kBatch <= to; from += kBatch) {
        std::int32_t c[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            c[b] = __ldg(k.indices + from + b);
        }
        float xv[kBatch][kVec];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            gather_row<kVec, kHints>(k, c[b], col, xv[b], policies);
        }
        float a[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            a[b] = entry<kEntries>(k, from + b, c[b]);
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            accumulate<kEntries>(a[b], xv[b], acc);
        }
    }
#pragma unroll 4
    for (std::int64_t j = from; j < to; ++j) {
        float xv[kVec];
        std::int32_t c = __ldg(k.indices + j);
        gather_row<kVec, kHints>(k, c, col, xv, policies);
        accumulate<kEntries>(entry<kEntries>(k, j, c), xv, acc);
    }
    if (k.row_scale != nullptr) {  // a part of a split row too: the parts' sum scales alike
        const float s = __ldg(k.row_scale + row);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
            acc[i] *= s;
        }
    }
}

template <int kEntries, int kVec, int kHints, typename T>
__global__ void __launch_bounds__(kBlockThreads) mergepath_spmm_kernel(const KernelArgs<T> k)
{
    // Launched as the dependent of the split rows' zeroing (dependent_launch.cuh): the atomic
    // adds wait for it; the rest of the walk (gathers, sums, plain stores of whole rows) runs
    // while it does. Block 0 waits in any case, so that this grid ends after the zeroing.
    detail::end_after_prerequisite();
    HintPolicies policies;
    if constexpr (kHints == kHinted) {
        policies.cold = detail::l2_evict_first_policy();
        policies.hot = detail::l2_evict_last_policy();
    }
    const std::int64_t total = k.num_segments * k.lanes;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
         t < total; t += stride) {
        const std::int64_t s = t / k.lanes;
        const std::int64_t col = (t - s * k.lanes) * kVec;
        if (col >= k.width) {
            continue;
        }
        const std::int64_t d0 = s * k.cost < k.items ? s * k.cost : k.items;
        const std::int64_t d1 = (s + 1) * k.cost < k.items ? (s + 1) * k.cost : k.items;
        const std::int64_t row_begin = __ldg(k.segment_rows + s);
        const std::int64_t row_end = __ldg(k.segment_rows + s + 1);
        std::int64_t j = k.first_nonzero + d0 - (row_begin - k.range_begin);
        const std::int64_t nz_end = k.first_nonzero + d1 - (row_end - k.range_begin);
        float acc[kVec];
        for (std::int64_t r = row_begin; r < row_end; ++r) {
            const std::int64_t next = __ldg(k.indptr + r + 1);
            float* out = k.y + r * k.ldy + col;
            if (r == row_begin && j > __ldg(k.indptr + r)) {
                // Partial start row (Algorithm 2, lines 2-10): zeroed by the pre-pass.
                if (j < next) {
                    row_sum<kEntries, kVec, kHints>(k, j, next, col, r, acc, policies);
                    detail::wait_for_prerequisite();
                    atomic_add_results<kVec>(out, acc);
                }
            } else {
                row_sum<kEntries, kVec, kHints>(k, j, next, col, r, acc, policies);
                write_results<kVec>(out, acc, k.add);
            }
            j = next;
        }
        if (j < nz_end) {
            // Partial end row (lines 11-13), continued by the next segment(s).
            row_sum<kEntries, kVec, kHints>(k, j, nz_end, col, row_end, acc, policies);
            detail::wait_for_prerequisite();
            atomic_add_results<kVec>(k.y + row_end * k.ldy + col, acc);
        }
    }
}

unsigned int grid_for(std::int64_t threads)
{
    const std::int64_t blocks = (threads + kBlockThreads - 1) / kBlockThreads;
    return static_cast<unsigned int>(std::clamp<std::int64_t>(blocks, 1, kMaxBlocks));
}

// L2 hints' setup (MergePathSpmmPlan::mark_cold_columns): reads per column, then the marks.
__global__ void count_column_reads_kernel(const std::int32_t* __restrict__ indices,
                                          std::int64_t nnz, std::uint32_t* __restrict__ reads)
{
    for (std::int64_t k = detail::first_index(); k < nnz; k += detail::stride()) {
        atomicAdd(reads + indices[k], 1u);
    }
}

__global__ void mark_cold_indices_kernel(std::int32_t* __restrict__ indices, std::int64_t nnz,
                                         const std::uint8_t* __restrict__ is_hot)
{
    for (std::int64_t k = detail::first_index(); k < nnz; k += detail::stride()) {
        const std::int32_t c = indices[k];
        if (is_hot[c] == 0) {
            indices[k] = static_cast<std::int32_t>(static_cast<std::uint32_t>(c) | kColdMark);
        }
    }
}

std::int64_t lanes_per_segment(std::int64_t width)
{
    if (width > 32) {
        return (width + 31) / 32 * 32;
    }
    std::int64_t lanes = 1;
    while (lanes < width) {
        lanes *= 2;
    }
    return lanes;
}

// dependent: launched as the programmatic dependent of the zeroing just before it.
template <int kEntries, int kHints, typename T>
void launch_entries(cudaStream_t stream, bool dependent, unsigned int grid, int vec,
                    const KernelArgs<T>& args)
{
    constexpr int kWide =
        vector_columns(std::is_same_v<T, float> ? FeatureType::fp32 : FeatureType::fp16);
    auto kernel = vec > 1 ? mergepath_spmm_kernel<kEntries, kWide, kHints, T>
                          : mergepath_spmm_kernel<kEntries, 1, kHints, T>;
    detail::launch(kernel, grid, kBlockThreads, 0, stream, dependent, args);
}

template <int kHints, typename T>
void launch_hinted(cudaStream_t stream, bool dependent, unsigned int grid, int vec,
                   const KernelArgs<T>& args)
{
    if (args.values != nullptr) {
        launch_entries<kValues, kHints>(stream, dependent, grid, vec, args);
    } else if (args.col_scale != nullptr) {
        launch_entries<kColumnScaled, kHints>(stream, dependent, grid, vec, args);
    } else {
        launch_entries<kPattern, kHints>(stream, dependent, grid, vec, args);
    }
}

template <typename T>
void launch_kernel(cudaStream_t stream, bool dependent, unsigned int grid, int vec, Hints hints,
                   const KernelArgs<T>& args)
{
    if (hints == kPlain) {
        launch_hinted<kPlain>(stream, dependent, grid, vec, args);
    } else if (hints == kHinted && std::is_same_v<T, float>) {
        launch_hinted<kHinted>(stream, dependent, grid, vec, args);
    } else {
        launch_hinted<kMarked>(stream, dependent, grid, vec, args);
    }
}

template <typename T>
KernelArgs<T> kernel_args(const mergepath_kernels::Launch& l)
{
    return {.indptr = l.indptr,
            .indices = l.indices,
            .values = l.values,
            .row_scale = l.row_scale,
            .col_scale = l.col_scale,
            .segment_rows = l.segment_rows,
            .num_segments = l.num_segments,
            .cost = l.cost,
            .items = l.items,
            .range_begin = l.range_begin,
            .first_nonzero = l.first_nonzero,
            .lanes = lanes_per_segment(l.x.cols / l.vec),
            .width = l.x.cols,
            .x = static_cast<const T*>(l.x.data),
            .ldx = l.x.ld,
            .y = l.y.data,
            .ldy = l.y.ld,
            .add = l.add};
}

template <typename T>
void launch_typed(cudaStream_t stream, const mergepath_kernels::Launch& l)
{
    const KernelArgs<T> args = kernel_args<T>(l);
    launch_kernel(stream, l.dependent, grid_for(l.num_segments * args.lanes), l.vec, l.hints, args);
}

}  // namespace

namespace mergepath_kernels {

void launch_spmm(cudaStream_t stream, const Launch& launch)
{
    switch (launch.x.type) {
        case FeatureType::fp32:
            return launch_typed<float>(stream, launch);
        case FeatureType::fp16:
            return launch_typed<__half>(stream, launch);
        case FeatureType::bf16:
            return launch_typed<__nv_bfloat16>(stream, launch);
    }
    HALO_EXPECTS(false, "unknown feature type ", static_cast<int>(launch.x.type));
}

void count_column_reads(cudaStream_t stream, const std::int32_t* indices, std::int64_t nnz,
                        std::uint32_t* reads)
{
    if (nnz > 0) {
        count_column_reads_kernel<<<grid_for(nnz), kBlockThreads, 0, stream>>>(indices, nnz, reads);
        HALO_CUDA_CHECK_LAUNCH();
    }
}

void mark_cold_indices(cudaStream_t stream, std::int32_t* indices, std::int64_t nnz,
                       const std::uint8_t* is_hot)
{
    if (nnz > 0) {
        mark_cold_indices_kernel<<<grid_for(nnz), kBlockThreads, 0, stream>>>(indices, nnz, is_hot);
        HALO_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace mergepath_kernels
}  // namespace halo::cuda
