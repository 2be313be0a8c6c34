// Row-split SpMM's kernels (include/halo/kernels/cuda/rowsplit.hpp) and their launchers
// (rowsplit_kernels.hpp); the plan is host code, in rowsplit.cpp. A group of lanes per row,
// lanes across the dense columns, the row's nonzeros loaded cooperatively and broadcast with warp
// shuffles.
//
// Choices:
// - The lane/column mapping lives in rowsplit_layout.hpp, shared with the CPU emulation test.
// - A group loads `Group` (column, value) pairs at once, one per lane (coalesced), then every lane
//   takes them one by one from its neighbours with __shfl_sync, so the CSR arrays are read once
//   per row and pass, and each X row once per nonzero and pass.
// - Shuffles use the group's own lane mask: groups of one warp own different rows, so their loop
//   trip counts differ, and a full-warp mask would name lanes that are elsewhere.
// - Each output element sums its row's nonzeros in CSR order with fmaf and is stored once (or,
//   by run_add, added to y's element once): no atomics, the same bits every run, for any row
//   range and any layout.
// - Pattern matrices keep a null value array (1.0f is substituted at load): no array of ones.
// - fp16/bf16 features: 8 columns per 16-byte load where aligned, widened to fp32 at the load;
//   the sums are the fp32 path's, in the same order.
// - Offsets are int32 when nnz + a warp stays below 2^31 (the lane index is added to offsets
//   before the bound check), else int64; columns are int32 (local ids) in both.
//
// The chunked variant (make_rowchunk_spmm_plan) is the same inner loop for rows of at most
// `length` nonzeros, and cuts every longer row into units (rowsplit::unit_length: `length`, or
// ceil(sqrt(degree)) where larger), a group each, so that a hub row no longer holds one group for
// its whole length (on an H100 a row of 168 nonzeros made the whole Cora product 3.5x slower than
// MergePath, rows of up to 4,000 made BlogCatalog's 17x slower):
// - One launch: the units' items come first in the grid, then the rows' (the long rows' own
//   items return at once); an item is a (unit or row, column pass) pair, so that the passes of a
//   width above one group's columns run side by side, not one after the other. No pre-pass
//   zeroes y: the smallest graphs, where a launch costs as much as the product, pay for one
//   kernel (MergePath pays for two, cuSPARSE for three).
// - A unit's item stores its sums in a workspace slot of the unit, then counts itself in its
//   row's arrival counter (a fence first: the classic last-block reduction); the item that arrives
//   last adds the row's slots in unit order for every pass, scales, stores y's row and sets the
//   counter back to 0 for the next launch. No spinning, no atomics on y, and the same bits every
//   run whichever item arrives last; a long row's sum is the units' sums added in order, so not
//   the CSR-order bits of the plain kernel.
// - The automatic unit length: 8 below 2^16 nonzeros, 32 below 2^19, else 64 (measured on an
//   H100: the small graphs are bound by the gathers' latency along a group's nonzeros, the larger
//   ones by the slots' traffic, a write and a read per unit), and at least nnz / 32768, so that
//   the workspace stays below 65536 slots of max_dim floats.
// - Runs of one plan must be ordered on one stream (they are: the context's compute stream),
//   since they share the workspace and the counters.

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/primitives/feature_load.cuh"
#include "cuda/primitives/feature_vec.hpp"
#include "cuda/spmm/rowsplit_kernels.hpp"
#include "cuda/spmm/rowsplit_layout.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda {
namespace {

using detail::load_features;
using detail::store_results;
using detail::write_results;
using rowsplit::kWarp;

constexpr int kBlock = 256;
// Grid cap: enough blocks (over 500k rows per sweep with a warp per row) that the hardware block
// scheduler balances skewed rows; beyond it the grid-stride loop takes over.
constexpr std::int64_t kMaxBlocks = 65536;

template <typename T>
struct Args {
    const T* x;
    std::int64_t ldx;
    float* y;
    std::int64_t ldy;
    std::int64_t row_begin;
    std::int64_t row_end;
    std::int64_t width;
    std::int64_t chunks;
    const std::int32_t* columns;
    const float* values;     // null: pattern matrix
    const float* row_scale;  // null, or each row sum scaled by row_scale[row] (OperatorScaling)
    const float* col_scale;  // null, or x's row j scaled by col_scale[j] (when values is null)
    bool add;                // y += the sums (SpmmPlan::run_add) instead of y = the sums
};

// A lane's Vec fp32 sums; x read as T, Vec columns per load (feature_load.cuh).
template <typename T, int Vec>
struct Acc {
    float v[Vec] = {};
    __device__ void fma(float a, const T* x)
    {
        float b[Vec];
        load_features<T, Vec>(x, b);
#pragma unroll
        for (int i = 0; i < Vec; ++i) {
            v[i] = fmaf(a, b[i], v[i]);
        }
    }
    __device__ void scale(float s)
    {
#pragma unroll
        for (int i = 0; i < Vec; ++i) {
            v[i] *= s;
        }
    }
    __device__ void write(float* y, bool add) const
    {
        write_results<Vec>(y, v, add);
    }
};

// A thread's place among the lane groups of the grid: its lane, its group's shuffle mask (groups
// of one warp own different rows or units, so their trip counts differ), its group and the
// grid's number of groups (the grid-stride step).
struct GroupPlace {
    int lane;
    unsigned mask;
    std::int64_t group;
    std::int64_t groups;
};

template <int Group>
__device__ __forceinline__ GroupPlace group_place()
{
    static_assert(kBlock % kWarp == 0 && kWarp % Group == 0, "groups must tile warps");
    const int lane = static_cast<int>(threadIdx.x) % Group;
    const int group_base = static_cast<int>(threadIdx.x) % kWarp - lane;
    const unsigned mask =
        Group == kWarp ? 0xffffffffu : ((1u << (Group % kWarp)) - 1u) << group_base;
    const std::int64_t thread = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    return {lane, mask, thread / Group, static_cast<std::int64_t>(gridDim.x) * blockDim.x / Group};
}

// A group's sums of nonzeros [start, stop) of one row over its columns x_col (added to acc):
// Group (column, value) pairs loaded at once (coalesced), then taken one by one from the lanes
// with shuffles, one fused multiply-add per nonzero in CSR order. Both kernels' inner loop. (A
// version issuing 8 x loads before their multiply-adds took 86 registers a thread instead of 32
// and ran the chunked kernel 1.6x slower on 4elt, an H100 at a quarter of the occupancy.)
template <typename Offset, int Group, int Vec, typename T>
__device__ __forceinline__ void group_sum(const Args<T>& a, Offset start, Offset stop, int lane,
                                          unsigned mask, bool active, const T* x_col,
                                          Acc<T, Vec>& acc)
{
    const std::int32_t* __restrict__ columns = a.columns;
    const float* __restrict__ values = a.values;
    const float* __restrict__ col_scale = a.col_scale;
    for (Offset base = start; base < stop; base += Group) {
        const Offset k = base + lane;
        std::int32_t c = 0;
        float v = 0.0f;
        if (k < stop) {
            c = __ldg(columns + k);
            v = values != nullptr      ? __ldg(values + k)
                : col_scale != nullptr ? __ldg(col_scale + c)
                                       : 1.0f;
        }
        const int n = stop - base < Group ? static_cast<int>(stop - base) : Group;
#pragma unroll 4
        for (int j = 0; j < n; ++j) {
            const std::int32_t cj = __shfl_sync(mask, c, j, Group);
            const float vj = __shfl_sync(mask, v, j, Group);
            if (active) {
                acc.fma(vj, x_col + static_cast<std::int64_t>(cj) * a.ldx);
            }
        }
    }
}

// A whole row's column pass: its sums, scaled, stored in (or added to) y. Both kernels' rows.
template <typename Offset, int Group, int Vec, typename T>
__device__ __forceinline__ void row_pass(const Args<T>& a, std::int64_t row, Offset start,
                                         Offset stop, int lane, unsigned mask, std::int64_t col,
                                         bool active)
{
    Acc<T, Vec> acc;
    group_sum<Offset, Group, Vec>(a, start, stop, lane, mask, active, a.x + col, acc);
    if (active) {
        if (a.row_scale != nullptr) {
            acc.scale(__ldg(a.row_scale + row));
        }
        acc.write(a.y + row * a.ldy + col, a.add);
    }
}

template <typename Offset, int Group, int Vec, typename T>
__global__ void __launch_bounds__(kBlock)
    rowsplit_kernel(const Offset* __restrict__ offsets, Args<T> a)
{
    const auto [lane, mask, first_group, groups] = group_place<Group>();
    for (std::int64_t row = a.row_begin + first_group; row < a.row_end; row += groups) {
        const Offset start = offsets[row];
        const Offset stop = offsets[row + 1];
        for (std::int64_t chunk = 0; chunk < a.chunks; ++chunk) {
            const std::int64_t col = rowsplit::first_column(Group, Vec, chunk, lane);
            const bool active = col < a.width;
            row_pass<Offset, Group, Vec>(a, row, start, stop, lane, mask, col, active);
        }
    }
}

using rowsplit_kernels::Chunks;

template <int Vec>
__device__ __forceinline__ void load_partial(const float* p, float (&out)[Vec])
{
    if constexpr (Vec == 1) {
        out[0] = __ldcg(p);
    } else {
#pragma unroll
        for (int i = 0; i < Vec; i += 4) {
            const float4 v = __ldcg(reinterpret_cast<const float4*>(p + i));
            out[i] = v.x;
            out[i + 1] = v.y;
            out[i + 2] = v.z;
            out[i + 3] = v.w;
        }
    }
}

// Eight blocks of kBlock threads per SM, as the plain kernel reaches at 32 registers: the gathers
// are latency-bound, and the long rows' extra code would otherwise cost a quarter of the warps.
template <typename Offset, int Group, int Vec, typename T>
__global__ void __launch_bounds__(kBlock, 8)
    rowchunk_kernel(const Offset* __restrict__ offsets, Args<T> a, Chunks ch)
{
    const auto [lane, mask, first_group, groups] = group_place<Group>();
    const std::int64_t units = ch.unit_end - ch.unit_begin;
    // An item is a (unit or row, column pass) pair: the passes of a wide row run side by side.
    const std::int64_t items = (units + (a.row_end - a.row_begin)) * a.chunks;

    for (std::int64_t item = first_group; item < items; item += groups) {
        const std::int64_t index = item / a.chunks;
        const std::int64_t chunk = item - index * a.chunks;
        const std::int64_t col = rowsplit::first_column(Group, Vec, chunk, lane);
        const bool active = col < a.width;
        if (index < units) {
            const std::int64_t u = ch.unit_begin + index;
            const std::int32_t k = __ldg(ch.unit_row + u);
            const std::int64_t row = __ldg(ch.rows + k);
            const std::int32_t first = __ldg(ch.first_unit + k);
            const std::int32_t count = __ldg(ch.first_unit + k + 1) - first;
            const std::int64_t length = __ldg(ch.lengths + k);
            const Offset start = offsets[row] + static_cast<Offset>((u - first) * length);
            const Offset row_stop = offsets[row + 1];
            const Offset stop =
                row_stop - start < length ? row_stop : start + static_cast<Offset>(length);
            Acc<T, Vec> acc;
            group_sum<Offset, Group, Vec>(a, start, stop, lane, mask, active, a.x + col, acc);
            if (active) {
                store_results<Vec>(ch.partial + u * ch.ldp + col, acc.v);
            }
            // Last-block reduction: every lane's slot writes are visible device-wide before the
            // group counts itself; the last of the row's (unit, pass) items sums every pass's
            // slots (read from L2).
            __threadfence();
            __syncwarp(mask);
            unsigned last = 0;
            if (lane == 0) {
                const auto arrivals = static_cast<unsigned>(count * a.chunks);
                last = atomicAdd(ch.arrivals + k, 1u) == arrivals - 1 ? 1u : 0u;
            }
            last = __shfl_sync(mask, last, 0, Group);
            if (last != 0) {
                __threadfence();
                for (std::int64_t pass = 0; pass < a.chunks; ++pass) {
                    const std::int64_t c = rowsplit::first_column(Group, Vec, pass, lane);
                    if (c >= a.width) {
                        continue;
                    }
                    float sum[Vec];
                    load_partial<Vec>(ch.partial + first * ch.ldp + c, sum);
#pragma unroll 4
                    for (std::int32_t v = 1; v < count; ++v) {
                        float part[Vec];
                        load_partial<Vec>(ch.partial + (first + v) * ch.ldp + c, part);
#pragma unroll
                        for (int i = 0; i < Vec; ++i) {
                            sum[i] += part[i];
                        }
                    }
                    if (a.row_scale != nullptr) {
                        const float s = __ldg(a.row_scale + row);
#pragma unroll
                        for (int i = 0; i < Vec; ++i) {
                            sum[i] *= s;
                        }
                    }
                    write_results<Vec>(a.y + row * a.ldy + c, sum, a.add);
                }
                if (lane == 0) {
                    ch.arrivals[k] = 0;  // the next launch on this stream starts from 0
                }
            }
            continue;
        }
        const std::int64_t row = a.row_begin + (index - units);
        const Offset start = offsets[row];
        const Offset stop = offsets[row + 1];
        if (stop - start > ch.length) {
            continue;  // a long row: its units sum it
        }
        row_pass<Offset, Group, Vec>(a, row, start, stop, lane, mask, col, active);
    }
}

// The plain kernel, or the chunked one when `chunks` is not null.
template <typename Offset, int Group, int Vec, typename T>
void launch(cudaStream_t stream, const Offset* offsets, const Args<T>& args, const Chunks* chunks)
{
    const std::int64_t rows = args.row_end - args.row_begin;
    const std::int64_t items =
        chunks != nullptr ? (rows + chunks->unit_end - chunks->unit_begin) * args.chunks : rows;
    const std::int64_t items_per_block = kBlock / Group;
    const std::int64_t blocks =
        std::min((items + items_per_block - 1) / items_per_block, kMaxBlocks);
    if (chunks != nullptr) {
        rowchunk_kernel<Offset, Group, Vec, T>
            <<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(offsets, args, *chunks);
    } else {
        rowsplit_kernel<Offset, Group, Vec, T>
            <<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(offsets, args);
    }
    HALO_CUDA_CHECK_LAUNCH();
}

template <typename Offset, int Vec, typename T>
void launch_group(cudaStream_t stream, int group, const Offset* offsets, const Args<T>& args,
                  const Chunks* chunks)
{
    switch (group) {
        case 4:
            return launch<Offset, 4, Vec>(stream, offsets, args, chunks);
        case 8:
            return launch<Offset, 8, Vec>(stream, offsets, args, chunks);
        case 16:
            return launch<Offset, 16, Vec>(stream, offsets, args, chunks);
        case 32:
            return launch<Offset, 32, Vec>(stream, offsets, args, chunks);
        default:
            HALO_EXPECTS(false, "row-split group of ", group, " lanes is not instantiated");
    }
}

// fp32 features: 1 or 4 columns per lane; fp16/bf16: 1 or 8 (16-byte loads either way).
template <typename Offset, typename T>
void launch_layout(cudaStream_t stream, const rowsplit::Layout& layout, const Offset* offsets,
                   const Args<T>& args, const Chunks* chunks)
{
    constexpr int kWide = std::is_same_v<T, float> ? 4 : 8;
    HALO_EXPECTS(layout.vec == 1 || layout.vec == kWide, "row-split lanes of ", layout.vec,
                 " columns are not instantiated for this feature type");
    if (layout.vec == kWide) {
        launch_group<Offset, kWide>(stream, layout.group, offsets, args, chunks);
    } else {
        launch_group<Offset, 1>(stream, layout.group, offsets, args, chunks);
    }
}

template <typename T>
void launch_typed(cudaStream_t stream, const rowsplit_kernels::Launch& l, const Chunks* chunks)
{
    const Args<T> args{.x = static_cast<const T*>(l.x.data),
                       .ldx = l.x.ld,
                       .y = l.y.data,
                       .ldy = l.y.ld,
                       .row_begin = l.rows.begin,
                       .row_end = l.rows.end,
                       .width = l.x.cols,
                       .chunks = l.layout.chunks,
                       .columns = l.columns,
                       .values = l.values,
                       .row_scale = l.row_scale,
                       .col_scale = l.col_scale,
                       .add = l.add};
    if (l.offsets64 != nullptr) {
        launch_layout(stream, l.layout, l.offsets64, args, chunks);
    } else {
        launch_layout(stream, l.layout, l.offsets32, args, chunks);
    }
}

}  // namespace

namespace rowsplit_kernels {

void launch_spmm(cudaStream_t stream, const Launch& launch, const Chunks* chunks)
{
    switch (launch.x.type) {
        case FeatureType::fp32:
            return launch_typed<float>(stream, launch, chunks);
        case FeatureType::fp16:
            return launch_typed<__half>(stream, launch, chunks);
        case FeatureType::bf16:
            return launch_typed<__nv_bfloat16>(stream, launch, chunks);
    }
    HALO_EXPECTS(false, "unknown feature type ", static_cast<int>(launch.x.type));
}

}  // namespace rowsplit_kernels
}  // namespace halo::cuda
