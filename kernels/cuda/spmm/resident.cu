// The resident-slice SpMM's kernel (include/halo/kernels/cuda/resident.hpp) and its launcher
// (resident_kernels.hpp); the plan is host code, in resident.cpp. X's slices of 4 columns
// held in shared memory, A read once per slice in the chunk layout of
// kernels/preprocess/resident_layout.
//
// Why: where X fits in L2 and rows are long (BlogCatalog, facebook-combined, wiki-Vote: 30-65
// nonzeros a row), every kernel that gathers X rows per nonzero is bound by the L2's bandwidth:
// BlogCatalog at d = 256 gathers 684 MB of X rows from L2 per product (0.67M nonzeros, 1 KB
// each), and cuSPARSE and MergePath take 84 and 78 us on an H200. Here a nonzero costs a
// 16-byte shared-memory load per slice and its 6 bytes of A (2-byte column, 4-byte value) per
// slice from L2: 384 bytes of L2 traffic per nonzero at d = 256 instead of 1 KB. Measured
// (docs/NOTEBOOK.md "X slices resident in shared memory"): 72 us there, L2 traffic 221 MB
// against MergePath's 680 MB, but bound by the latency of its loads of A (32 warps an SM, the
// shared-memory pipe 42% busy), so slower than MergePath on the other graphs it fits.
//
// Choices:
// - One block of 1024 threads per (row part, slice); the grid is one wave (row parts = the
//   resident blocks over the slices, at least 1). The block first loads its slice of every X
//   row (scaled by the column scaling of a pattern-scaled plan) into shared memory, 16 bytes a
//   row, then its warps take the part's chunks in turn.
// - A lane sums its entries with fmaf in the layout's order, reading the column and value of
//   step k at chunk_start + 32 k + lane (coalesced) and X's row from shared memory; a row split
//   over a group of lanes is added by a butterfly of shuffles (every lane of the warp shuffles;
//   a lane adds only partners inside its group), and the group's first lane stores (or adds)
//   the 4 sums. No atomics, nothing zeroed: every element of y[rows] is written once.
// - The layout orders each lane's nonzeros against bank conflicts (resident_layout.hpp): X row
//   j's 16 bytes lie in bank group j mod 8, and the 8 lanes of a phase of a 128-bit load that
//   read different rows of one group are serialized.
// - A row part is a contiguous run of chunks of about equal entries (a binary search over the
//   chunk starts, in the block). The split rows' chunks come first in the layout, so the first
//   part holds them; the parts are balanced by entries, not by rows.
// - A's arrays are read with __ldcg (L2, not L1): every slice's blocks read the same part of A,
//   and the L1 left beside 227 KB of shared memory is small.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/primitives/feature_load.cuh"
#include "cuda/spmm/resident_kernels.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "preprocess/resident_layout.hpp"

namespace halo::cuda {
namespace {

using resident::kGroupShift;
using resident::kLanes;
using resident::kSliceColumns;

constexpr int kBlock = 1024;
constexpr int kWarps = kBlock / kLanes;
using resident_kernels::kRowBytes;
// Entries a lane loads ahead (two batches in flight), X rows a thread loads at once.
constexpr int kBatch = 8;
constexpr int kFill = 4;

template <typename T>
struct Args {
    const T* x;
    std::int64_t ldx;
    float* y;
    std::int64_t ldy;
    std::int64_t width;
    std::int64_t num_cols;
    // The range's layout on the device.
    const std::int64_t* chunk_start;  // chunks + 1
    std::int64_t chunks;
    const std::int32_t* lane_row;
    const std::int32_t* lane_info;
    const std::uint16_t* columns;
    const float* values;     // null: a pattern (ones), or a pattern-scaled plan
    const float* row_scale;  // null, or the sums times row_scale[row]
    const float* col_scale;  // null, or X's row j times col_scale[j] as the slice is loaded
    bool x_vectors;          // fp32 x, 16-byte aligned rows and slices: float4 loads
    bool y_vectors;          // y's slices 16-byte aligned and whole: float4 stores
    bool add;                // y += the sums (SpmmPlan::run_add)
};

// The first chunk of row part `part` of `parts`: the first chunk whose start reaches the part's
// share of the entries (the last part ends at the last chunk).
__device__ std::int64_t part_begin(const std::int64_t* chunk_start, std::int64_t chunks,
                                   std::int64_t part, std::int64_t parts)
{
    if (part >= parts) {
        return chunks;
    }
    const std::int64_t target =
        chunk_start[chunks] / parts * part + chunk_start[chunks] % parts * part / parts;
    std::int64_t lo = 0;
    std::int64_t hi = chunks;
    while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        if (chunk_start[mid] < target) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// X row j's slice [col0, col0 + 4) as fp32, zero past the width, times the column scaling.
template <typename T>
__device__ __forceinline__ float4 load_slice(const Args<T>& a, std::int64_t j, std::int64_t col0)
{
    float v[kSliceColumns];
    const T* p = a.x + j * a.ldx + col0;
    if constexpr (std::is_same_v<T, float>) {
        if (a.x_vectors) {
            detail::load_features<T, kSliceColumns>(p, v);
        } else {
#pragma unroll
            for (int i = 0; i < kSliceColumns; ++i) {
                v[i] = col0 + i < a.width ? detail::load_feature(p + i) : 0.0f;
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < kSliceColumns; ++i) {
            v[i] = col0 + i < a.width ? detail::load_feature(p + i) : 0.0f;
        }
    }
    if (a.col_scale != nullptr) {
        const float s = __ldg(a.col_scale + j);
#pragma unroll
        for (int i = 0; i < kSliceColumns; ++i) {
            v[i] = __fmul_rn(v[i], s);
        }
    }
    return make_float4(v[0], v[1], v[2], v[3]);
}

// A lane's entries [k, k + kBatch) of its chunk: columns and values (padding reads the zero row).
template <bool kValues>
struct Batch {
    int col[kBatch];
    float val[kValues ? kBatch : 1];

    __device__ __forceinline__ void load(const std::uint16_t* columns, const float* values, int k)
    {
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
            const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(k + i) * kLanes;
            col[i] = __ldcg(columns + at);
            if constexpr (kValues) {
                val[i] = __ldcg(values + at);
            }
        }
    }
};

// acc += v * (X row `col`'s slice), one fmaf per column.
__device__ __forceinline__ void add_entry(float4& acc, float v, const float4* slice, int col)
{
    const float4 xv = slice[col];
    acc.x = fmaf(v, xv.x, acc.x);
    acc.y = fmaf(v, xv.y, acc.y);
    acc.z = fmaf(v, xv.z, acc.z);
    acc.w = fmaf(v, xv.w, acc.w);
}

template <typename T, bool kValues>
__global__ void __launch_bounds__(kBlock, 1) resident_kernel(Args<T> a)
{
    extern __shared__ float4 slice[];
    __shared__ std::int64_t bounds[2];

    const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.y) * kSliceColumns;
    // kFill rows a thread at once: their loads in flight together, then the stores.
    for (std::int64_t j0 = threadIdx.x; j0 < a.num_cols; j0 += std::int64_t{kBlock} * kFill) {
        float4 v[kFill];
#pragma unroll
        for (int i = 0; i < kFill; ++i) {
            const std::int64_t j = j0 + std::int64_t{i} * kBlock;
            if (j < a.num_cols) {
                v[i] = load_slice(a, j, col0);
            }
        }
#pragma unroll
        for (int i = 0; i < kFill; ++i) {
            const std::int64_t j = j0 + std::int64_t{i} * kBlock;
            if (j < a.num_cols) {
                slice[j] = v[i];
            }
        }
    }
    if (threadIdx.x == 0) {
        slice[a.num_cols] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // the padding's zero row
    }
    if (threadIdx.x < 2) {
        bounds[threadIdx.x] =
            part_begin(a.chunk_start, a.chunks, blockIdx.x + threadIdx.x, gridDim.x);
    }
    __syncthreads();

    const int warp = static_cast<int>(threadIdx.x) / kLanes;
    const int lane = static_cast<int>(threadIdx.x) % kLanes;
    for (std::int64_t c = bounds[0] + warp; c < bounds[1]; c += kWarps) {
        const std::int64_t base = __ldg(a.chunk_start + c);
        const std::int64_t at = c * kLanes + lane;
        const std::int32_t info = __ldg(a.lane_info + at);
        const int log_group = info >> kGroupShift;
        const int steps = static_cast<int>((__ldg(a.chunk_start + c + 1) - base) / kLanes);
        const std::uint16_t* columns = a.columns + base + lane;
        const float* values = kValues ? a.values + base + lane : nullptr;
        // Every lane runs the chunk's steps (warp-uniform, unpredicated: padding adds v * 0),
        // in batches of kBatch whose next batch's loads are in flight while this one sums.
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        int k = 0;
        if (steps >= kBatch) {
            Batch<kValues> cur;
            cur.load(columns, values, 0);
            for (; k + kBatch <= steps; k += kBatch) {
                Batch<kValues> next;
                if (k + 2 * kBatch <= steps) {
                    next.load(columns, values, k + kBatch);
                }
#pragma unroll
                for (int i = 0; i < kBatch; ++i) {
                    add_entry(acc, kValues ? cur.val[i] : 1.0f, slice, cur.col[i]);
                }
                cur = next;
            }
        }
        for (; k < steps; ++k) {
            const std::ptrdiff_t entry = static_cast<std::ptrdiff_t>(k) * kLanes;
            add_entry(acc, kValues ? __ldcg(values + entry) : 1.0f, slice, __ldcg(columns + entry));
        }
        float s0 = acc.x;
        float s1 = acc.y;
        float s2 = acc.z;
        float s3 = acc.w;
        // The butterfly over the split rows' groups (warp-uniform bound: every lane shuffles).
#if __CUDA_ARCH__ >= 800
        const int widest = static_cast<int>(__reduce_max_sync(0xffffffffu, log_group));
#else
        int widest = log_group;
        for (int off = 1; off < kLanes; off *= 2) {
            widest = max(widest, __shfl_xor_sync(0xffffffffu, widest, off));
        }
#endif
        for (int off = 1; off < (1 << widest); off *= 2) {
            const float o0 = __shfl_xor_sync(0xffffffffu, s0, off);
            const float o1 = __shfl_xor_sync(0xffffffffu, s1, off);
            const float o2 = __shfl_xor_sync(0xffffffffu, s2, off);
            const float o3 = __shfl_xor_sync(0xffffffffu, s3, off);
            if (off < (1 << log_group)) {
                s0 = __fadd_rn(s0, o0);
                s1 = __fadd_rn(s1, o1);
                s2 = __fadd_rn(s2, o2);
                s3 = __fadd_rn(s3, o3);
            }
        }
        const std::int32_t row = __ldg(a.lane_row + at);
        if (row < 0 || (lane & ((1 << log_group) - 1)) != 0) {
            continue;
        }
        float r[kSliceColumns] = {s0, s1, s2, s3};
        if (a.row_scale != nullptr) {
            const float s = __ldg(a.row_scale + row);
#pragma unroll
            for (int i = 0; i < kSliceColumns; ++i) {
                r[i] = __fmul_rn(r[i], s);
            }
        }
        float* out = a.y + static_cast<std::int64_t>(row) * a.ldy + col0;
        if (a.y_vectors) {
            detail::write_results<kSliceColumns>(out, r, a.add);
        } else {
#pragma unroll
            for (int i = 0; i < kSliceColumns; ++i) {
                if (col0 + i < a.width) {
                    out[i] = a.add ? __fadd_rn(out[i], r[i]) : r[i];
                }
            }
        }
    }
}

bool aligned16(const void* p)
{
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

template <typename T>
Args<T> args(const resident_kernels::Launch& l)
{
    Args<T> a{};
    a.x = static_cast<const T*>(l.x.data);
    a.ldx = l.x.ld;
    a.y = l.y.data;
    a.ldy = l.y.ld;
    a.width = l.x.cols;
    a.num_cols = l.num_cols;
    a.chunk_start = l.chunk_start;
    a.chunks = l.chunks;
    a.lane_row = l.lane_row;
    a.lane_info = l.lane_info;
    a.columns = l.columns;
    a.values = l.values;
    a.row_scale = l.row_scale;
    a.col_scale = l.col_scale;
    a.x_vectors = std::is_same_v<T, float> && l.x.cols % kSliceColumns == 0 &&
                  l.x.ld % kSliceColumns == 0 && aligned16(l.x.data);
    a.y_vectors =
        l.x.cols % kSliceColumns == 0 && l.y.ld % kSliceColumns == 0 && aligned16(l.y.data);
    a.add = l.add;
    return a;
}

// Resident blocks per SM of `kernel` at the plan's shared memory, asked once per kernel (after
// allowing it that much dynamic shared memory).
int blocks_per_sm(const void* kernel, resident_kernels::Occupancy& o)
{
    const auto found = o.per_sm.find(kernel);
    if (found != o.per_sm.end()) {
        return found->second;
    }
    HALO_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(o.shared_bytes)));
    int per_sm = 0;
    HALO_CUDA_TRY(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlock, o.shared_bytes));
    HALO_EXPECTS(per_sm >= 1, "resident SpMM: no block of ", kBlock, " threads and ",
                 o.shared_bytes, " bytes of shared memory fits an SM of device ", o.device);
    o.per_sm.emplace(kernel, per_sm);
    return per_sm;
}

template <typename T>
void launch_kernel(cudaStream_t stream, void (*kernel)(Args<T>), const Args<T>& a,
                   resident_kernels::Occupancy& o)
{
    const int per_sm = blocks_per_sm(reinterpret_cast<const void*>(kernel), o);
    const std::int64_t slices = (a.width + kSliceColumns - 1) / kSliceColumns;
    HALO_EXPECTS(slices <= 65535, "resident SpMM: width ", a.width, " needs ", slices,
                 " slices, above the grid's 65535");
    const std::int64_t resident = std::int64_t{o.multiprocessors} * per_sm;
    const std::int64_t parts =
        std::clamp<std::int64_t>(resident / slices, 1, std::max<std::int64_t>(a.chunks, 1));
    const dim3 grid(static_cast<unsigned>(parts), static_cast<unsigned>(slices));
    kernel<<<grid, kBlock, o.shared_bytes, stream>>>(a);
    HALO_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_typed(cudaStream_t stream, const resident_kernels::Launch& l,
                  resident_kernels::Occupancy& o)
{
    const Args<T> a = args<T>(l);
    if (a.values != nullptr) {
        launch_kernel(stream, resident_kernel<T, true>, a, o);
    } else {
        launch_kernel(stream, resident_kernel<T, false>, a, o);
    }
}

}  // namespace

namespace resident_kernels {

void launch_spmm(cudaStream_t stream, const Launch& launch, Occupancy& occupancy)
{
    switch (launch.x.type) {
        case FeatureType::fp32:
            return launch_typed<float>(stream, launch, occupancy);
        case FeatureType::fp16:
            return launch_typed<__half>(stream, launch, occupancy);
        case FeatureType::bf16:
            return launch_typed<__nv_bfloat16>(stream, launch, occupancy);
    }
    HALO_EXPECTS(false, "unknown feature type ", static_cast<int>(launch.x.type));
}

}  // namespace resident_kernels
}  // namespace halo::cuda
