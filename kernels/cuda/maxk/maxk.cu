// MaxK-GNN kernels (paper 000; include/halo/kernels/cuda/maxk.hpp): the top-k activation into CBSR
// and the SSD operator's MaxK baseline (section III) and decoupled variants (section IV). The plan
// that launches them is maxk.cpp.
//
// Top-k, one warp per row: lane l holds the order keys of columns l, l + 32, ... in registers
// (coalesced loads; columns beyond the width get key 0, which no threshold selects). The k-th
// largest key comes from maxk_select.hpp's bitwise search, each count a warp-wide sum. Winners
// are compacted in column order with two ballots per register slot (one for the keys above the
// threshold, one to rank the ties by column), and their values re-read from x so that the bits,
// NaN payloads included, are the input's.
//
// SSD: every group accumulates in a D-wide shared buffer: the lanes of its team take entries t,
// t + team, ... of each neighbour's CBSR row, add a * s into buffer[column] with fmaf, nonzero
// after nonzero. Two neighbours may keep the same column in different entries (different lanes),
// so the warp synchronizes (__syncwarp) after each nonzero step: without it independent thread
// scheduling lets one lane run ahead and race another on that column. The teams (slots) of a warp
// run in lockstep, predicated by their own group's length, so a warp issues one instruction
// stream for all its slots. The loads of a batch of nonzeros, and the next batch's A entries, are
// issued before its accumulation steps so that they overlap. Registers are capped at 40 per
// thread (__maxnreg__) so that four blocks of 12 warps fit an SM.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "cuda/maxk/maxk_kernels.hpp"
#include "cuda/maxk/maxk_select.hpp"
#include "cuda/primitives/dependent_launch.cuh"
#include "cuda/primitives/warp_reduce.cuh"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {
namespace {

constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kTopkWarps = 8;
// Nonzeros whose loads are issued together before their accumulation steps.
constexpr int kBatch = 4;

template <int kSlots>
__global__ void __launch_bounds__(kTopkWarps * 32)
    topk_kernel(const float* __restrict__ x, long long rows, int dim, long long ldx, int k,
                float* __restrict__ values, short* __restrict__ indices)
{
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const long long row = static_cast<long long>(blockIdx.x) * kTopkWarps + threadIdx.x / 32;
    if (row >= rows) {
        return;  // the whole warp: rows are per warp
    }
    const float* xr = x + row * ldx;
    unsigned keys[kSlots];
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
        const int col = s * 32 + lane;
        keys[s] = col < dim ? maxk::order_key(__float_as_uint(__ldg(xr + col))) : 0u;
    }
    auto count_at_least = [&](unsigned t) {
        unsigned c = 0;
#pragma unroll
        for (int s = 0; s < kSlots; ++s) {
            c += keys[s] >= t ? 1u : 0u;
        }
        return warp_sum(c);
    };
    const maxk::Threshold th = maxk::select_threshold(static_cast<unsigned>(k), count_at_least);

    const unsigned below = (1u << lane) - 1u;
    unsigned taken = 0;
    unsigned ties_seen = 0;
    float* vr = values + row * k;
    short* ir = indices + row * k;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
        const bool tie = keys[s] == th.key;
        const unsigned tie_mask = __ballot_sync(kFullMask, tie);
        const bool take =
            keys[s] > th.key || (tie && ties_seen + __popc(tie_mask & below) < th.ties);
        const unsigned take_mask = __ballot_sync(kFullMask, take);
        if (take) {
            const int col = s * 32 + lane;
            const unsigned pos = taken + __popc(take_mask & below);
            vr[pos] = xr[col];
            ir[pos] = static_cast<short>(col);
        }
        taken += __popc(take_mask);
        ties_seen += __popc(tie_mask);
    }
}

template <int kSlots>
void launch_topk(cudaStream_t stream, const float* x, std::int64_t rows, int dim, std::int64_t ldx,
                 int k, float* values, std::int16_t* indices)
{
    const std::int64_t blocks = (rows + kTopkWarps - 1) / kTopkWarps;
    HALO_EXPECTS(blocks <= INT_MAX, "top-k grid of ", blocks, " blocks");
    topk_kernel<kSlots><<<static_cast<unsigned>(blocks), kTopkWarps * 32, 0, stream>>>(
        x, rows, dim, ldx, k, values, indices);
    HALO_CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------------------------
// SSD.

__device__ __forceinline__ SsdGroup load_group(const SsdGroup* g)
{
    const int4 v = __ldg(reinterpret_cast<const int4*>(g));
    SsdGroup m;
    m.row = v.x;
    m.count_mode = v.y;
    m.first =
        static_cast<long long>(static_cast<unsigned long long>(static_cast<unsigned>(v.z)) |
                               (static_cast<unsigned long long>(static_cast<unsigned>(v.w)) << 32));
    return m;
}

// Group g of a launch: by row, or through the longest-first order.
__device__ __forceinline__ SsdGroup run_group(const SsdArgs& args, long long g)
{
    return load_group(args.groups + (args.order != nullptr ? __ldg(args.order + g) : g));
}

__device__ __forceinline__ int group_count(const SsdGroup& m)
{
    return m.count_mode & 0x7FFFFFFF;
}

__device__ __forceinline__ bool group_shared(const SsdGroup& m)
{
    return m.count_mode < 0;
}

// The accumulation phase, all 32 lanes of a warp together. Each lane belongs to the team of one
// group (its slot; count 0 for lanes without a group) and takes that group's CBSR entries t,
// t + team, ... (kEntries of them; 0: as many as k needs). The teams of a warp step through their
// nonzeros in lockstep, up to the warp's longest group, each lane predicated by its own group's
// count: one instruction stream for all the slots of the warp instead of one per slot, and one
// __syncwarp per nonzero step (two teams never share a buffer, so a warp-wide barrier is also the
// slot-level one). Batches of kBatch nonzeros: the batch's S loads go out together, then the next
// batch's A loads, and only then the accumulation steps wait.
template <bool kValued, int kEntries>
__device__ __forceinline__ void accumulate(float* buffer, const SsdArgs& args, long long first,
                                           int nnz, int t, int team)
{
    const int k = args.k;
    const int steps = static_cast<int>(warp_max(static_cast<unsigned>(nnz)));
    const int* __restrict__ a_indices = args.a_indices + first;
    const float* __restrict__ a_values = kValued ? args.a_values + first : nullptr;
    const float* __restrict__ s_values = args.s_values + t;
    const short* __restrict__ s_indices = args.s_indices + t;
    if constexpr (kEntries > 0) {
        constexpr int kB = kEntries == 1 ? kBatch : kBatch / 2;
        // Addresses: a CBSR row's by one 32 x 32 -> 64-bit multiply-add from its column (c >= 0,
        // k <= 1024), A's entries at constant offsets from a pointer that moves by a batch.
        const unsigned value_row_bytes = static_cast<unsigned>(k) * sizeof(float);
        const unsigned index_row_bytes = static_cast<unsigned>(k) * sizeof(short);
        const char* s_value_base = reinterpret_cast<const char*>(s_values);
        const char* s_index_base = reinterpret_cast<const char*>(s_indices);
        int c[kB];
        float a[kB];
#pragma unroll
        for (int u = 0; u < kB; ++u) {
            c[u] = u < nnz ? __ldg(a_indices + u) : 0;
            a[u] = kValued && u < nnz ? __ldg(a_values + u) : 1.0f;
        }
        for (int e0 = 0; e0 < steps; e0 += kB) {
            float v[kB][kEntries];
            int col[kB][kEntries];
            float a_now[kB];
#pragma unroll
            for (int u = 0; u < kB; ++u) {
                a_now[u] = a[u];
                const auto column = static_cast<unsigned long long>(static_cast<unsigned>(c[u]));
                const auto* v_row =
                    reinterpret_cast<const float*>(s_value_base + column * value_row_bytes);
                const auto* i_row =
                    reinterpret_cast<const short*>(s_index_base + column * index_row_bytes);
#pragma unroll
                for (int i = 0; i < kEntries; ++i) {
                    v[u][i] = 0.0f;
                    col[u][i] = -1;
                    if (e0 + u < nnz && t + i * team < k) {
                        v[u][i] = __ldg(v_row + i * team);
                        col[u][i] = __ldg(i_row + i * team);
                    }
                }
            }
            a_indices += kB;
            if constexpr (kValued) {
                a_values += kB;
            }
#pragma unroll
            for (int u = 0; u < kB; ++u) {
                if (e0 + kB + u < nnz) {
                    c[u] = __ldg(a_indices + u);
                    a[u] = kValued ? __ldg(a_values + u) : 1.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < kB; ++u) {
                if (e0 + u < steps) {  // uniform across the warp
#pragma unroll
                    for (int i = 0; i < kEntries; ++i) {
                        if (col[u][i] >= 0) {
                            buffer[col[u][i]] = fmaf(a_now[u], v[u][i], buffer[col[u][i]]);
                        }
                    }
                    __syncwarp();
                }
            }
        }
    } else {
        for (int e = 0; e < steps; ++e) {
            if (e < nnz) {
                const long long row = static_cast<long long>(__ldg(a_indices + e)) * k;
                const float a = kValued ? __ldg(a_values + e) : 1.0f;
                for (int l = 0; t + l < k; l += team) {
                    const int col = __ldg(s_indices + row + l);
                    buffer[col] = fmaf(a, __ldg(s_values + row + l), buffer[col]);
                }
            }
            __syncwarp();
        }
    }
}

// Zeroes n floats at buffer (16-byte aligned, n a multiple of 4 when vec4) with the lanes of a
// warp.
__device__ __forceinline__ void zero_buffer(float* buffer, int n, int lane, bool vec4)
{
    if (vec4) {
        float4* b4 = reinterpret_cast<float4*>(buffer);
        for (int j = lane; j < n / 4; j += 32) {
            b4[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    } else {
        for (int j = lane; j < n; j += 32) {
            buffer[j] = 0.0f;
        }
    }
}

__device__ __forceinline__ void atomic_add4(float* y, float4 v)
{
#if __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float4*>(y), v);
#else
    atomicAdd(y, v.x);
    atomicAdd(y + 1, v.y);
    atomicAdd(y + 2, v.z);
    atomicAdd(y + 3, v.w);
#endif
}

// The update phase of one group by the 32 lanes of a warp: the D-wide buffer to output row y,
// added atomically or stored (float4 accesses when args.vec4).
__device__ __forceinline__ void update(float* y, const float* buffer, int dim, int lane,
                                       bool atomic, bool vec4)
{
    if (vec4) {
        const float4* b4 = reinterpret_cast<const float4*>(buffer);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (int j = lane; j < dim / 4; j += 32) {
            if (atomic) {
                atomic_add4(y + 4 * j, b4[j]);
            } else {
                y4[j] = b4[j];
            }
        }
    } else {
        for (int j = lane; j < dim; j += 32) {
            if (atomic) {
                atomicAdd(y + j, buffer[j]);
            } else {
                y[j] = buffer[j];
            }
        }
    }
}

// A thread of an SSD kernel's block: the block's dynamic shared memory (its warps' buffers), the
// block's warps, and this thread's warp and lane.
struct SsdThread {
    float* shared;
    int warps;
    int warp;
    int lane;
};

__device__ __forceinline__ SsdThread ssd_thread()
{
    extern __shared__ float4 shared4[];
    return {reinterpret_cast<float*>(shared4), static_cast<int>(blockDim.x) / 32,
            static_cast<int>(threadIdx.x) / 32, static_cast<int>(threadIdx.x) & 31};
}

// MaxK's operator (section III, Fig. 5). Block b takes groups [b * warps, (b + 1) * warps), one
// D-wide buffer each. k < 32: the groups are accumulated by k-lane slots, 32 / k per warp, packed
// into the first warps (the others idle); k >= 32: warp w accumulates group w. A block-wide
// barrier, then warp w adds buffer w to its row with atomics.
template <bool kValued, int kEntries>
__global__ void __maxnreg__(40) ssd_maxk_kernel(SsdArgs args)
{
    const auto [shared, warps, warp, lane] = ssd_thread();
    const int dim = args.dim;
    const int k = args.k;
    const long long g0 = static_cast<long long>(blockIdx.x) * warps;
    const int valid = static_cast<int>(min(static_cast<long long>(warps), args.group_count - g0));

    zero_buffer(shared + warp * dim, dim, lane, args.vec4);
    __syncthreads();
    if (k < 32) {
        const int per_warp = 32 / k;
        if (warp * per_warp < valid) {  // a warp with at least one group accumulates
            const int slot = warp * per_warp + lane / k;
            const bool mine = lane < per_warp * k && slot < valid;
            SsdGroup m{};
            if (mine) {
                m = run_group(args, g0 + slot);
            }
            accumulate<kValued, 1>(shared + (mine ? slot : 0) * dim, args, m.first,
                                   mine ? group_count(m) : 0, lane % k, k);
        }
    } else if (warp < valid) {
        const SsdGroup m = run_group(args, g0 + warp);
        accumulate<kValued, kEntries>(shared + warp * dim, args, m.first, group_count(m), lane, 32);
    }
    __syncthreads();
    if (warp < valid) {
        const SsdGroup m = run_group(args, g0 + warp);
        if (group_count(m) > 0) {
            update(args.out + static_cast<long long>(m.row) * args.ldo, shared + warp * dim, dim,
                   lane, true, args.vec4);
        }
    }
}

// The decoupled operator (section IV, Fig. 7). Warp w of the grid takes groups
// [w * slots, (w + 1) * slots), one per slot of 32 / slots lanes, each with its own buffer, and
// runs without any block-wide barrier: it zeroes its buffers, accumulates its slots in lockstep,
// synchronizes, and writes its groups' buffers one after the other with all 32 lanes (the fused,
// coalesced update). kAtomicAware: update_mode 0 stores, 1 adds atomically; otherwise every group
// adds atomically.
// kOneSlot: slots == 1 known at compile time (k >= 32, the no_slots variants), as the MaxK
// kernel knows its team of 32 lanes for k >= 32. With the slot count a run-time value this
// kernel issued about 21% more instructions than the MaxK kernel for the same groups at k = 32;
// with it, 27.03M against 27.20M (Nsight Compute, BlogCatalog, docs/MAXK.md).
template <bool kValued, bool kAtomicAware, int kEntries, bool kOneSlot>
__global__ void __maxnreg__(40) ssd_decoupled_kernel(SsdArgs args, int slots_in)
{
    const auto [shared, warps, warp, lane] = ssd_thread();
    end_after_prerequisite();  // the grid ends after the zeroing it may depend on
    const int dim = args.dim;
    const int slots = kOneSlot ? 1 : slots_in;
    const int team = kOneSlot ? 32 : 32 / slots;
    const int slot = kOneSlot ? 0 : lane / team;
    const long long g0 = (static_cast<long long>(blockIdx.x) * warps + warp) * slots;
    if (g0 >= args.group_count) {
        return;  // the whole warp: no block-wide barrier follows
    }
    float* buffers = shared + static_cast<long long>(warp) * slots * dim;
    zero_buffer(buffers, slots * dim, lane, args.vec4);
    __syncwarp();
    const bool mine = slot < slots && g0 + slot < args.group_count;
    SsdGroup m{};
    if (mine) {
        m = run_group(args, g0 + slot);
    }
    accumulate<kValued, kEntries>(buffers + (mine ? slot : 0) * dim, args, m.first,
                                  mine ? group_count(m) : 0, lane - slot * team, team);
    // Atomic-aware runs: the shared rows' zeros (the zeroing kernel, this kernel's prerequisite,
    // ran during the accumulation). One wait before the whole update: the plain stores, to rows
    // the zeroing does not touch, need not wait, but sorting them out per group costs more.
    wait_for_prerequisite();
    __syncwarp();
    for (int s = 0; s < slots && g0 + s < args.group_count; ++s) {
        const SsdGroup g = run_group(args, g0 + s);
        const bool atomic = !kAtomicAware || group_shared(g);
        if (!atomic || group_count(g) > 0) {  // atomic-always rows were zeroed: skip empty groups
            update(args.out + static_cast<long long>(g.row) * args.ldo, buffers + s * dim, dim,
                   lane, atomic, args.vec4);
        }
    }
}

// Kernels whose block needs more than the default 48 KiB of dynamic shared memory must say so.
template <typename Kernel>
void allow_shared(Kernel kernel, std::size_t bytes)
{
    if (bytes > 48 * 1024) {
        HALO_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(bytes)));
    }
}

std::int64_t grid_blocks(std::int64_t groups, std::int64_t groups_per_block)
{
    const std::int64_t blocks = (groups + groups_per_block - 1) / groups_per_block;
    HALO_EXPECTS(blocks <= INT_MAX, "SSD grid of ", blocks, " blocks");
    return blocks;
}

template <bool kValued, bool kAtomicAware, int kEntries, bool kOneSlot>
void launch_decoupled(cudaStream_t stream, bool dependent, const SsdArgs& args, int warps,
                      int slots)
{
    const auto blocks = grid_blocks(args.group_count, std::int64_t{warps} * slots);
    const auto bytes = ssd_decoupled_shared_bytes(warps, slots, args.dim);
    auto kernel = ssd_decoupled_kernel<kValued, kAtomicAware, kEntries, kOneSlot>;
    allow_shared(kernel, bytes);
    dependent = dependent && fills_device(kernel, blocks, warps * 32, bytes);
    launch(kernel, static_cast<unsigned>(blocks), warps * 32, bytes, stream, dependent, args,
           slots);
}

template <bool kValued, bool kAtomicAware>
void launch_decoupled_entries(cudaStream_t stream, bool dependent, const SsdArgs& args, int warps,
                              int slots)
{
    if (slots == 1) {
        if (args.k <= 32) {
            launch_decoupled<kValued, kAtomicAware, 1, true>(stream, dependent, args, warps, 1);
        } else if (args.k <= 64) {
            launch_decoupled<kValued, kAtomicAware, 2, true>(stream, dependent, args, warps, 1);
        } else {
            launch_decoupled<kValued, kAtomicAware, 0, true>(stream, dependent, args, warps, 1);
        }
    } else {  // k <= team (ssd_decoupled checks it): one entry per lane
        launch_decoupled<kValued, kAtomicAware, 1, false>(stream, dependent, args, warps, slots);
    }
}

template <bool kValued, int kEntries>
void launch_maxk(cudaStream_t stream, const SsdArgs& args, int warps)
{
    const auto blocks = grid_blocks(args.group_count, warps);
    const auto bytes = ssd_maxk_shared_bytes(warps, args.dim);
    auto kernel = ssd_maxk_kernel<kValued, kEntries>;
    allow_shared(kernel, bytes);
    kernel<<<static_cast<unsigned>(blocks), warps * 32, bytes, stream>>>(args);
    HALO_CUDA_CHECK_LAUNCH();
}

template <bool kValued>
void launch_maxk_entries(cudaStream_t stream, const SsdArgs& args, int warps)
{
    if (args.k <= 32) {
        launch_maxk<kValued, 1>(stream, args, warps);
    } else if (args.k <= 64) {
        launch_maxk<kValued, 2>(stream, args, warps);
    } else {
        launch_maxk<kValued, 0>(stream, args, warps);
    }
}

// float4 buffers and output rows: the width and the output's leading dimension multiples of 4
// and the output 16-byte aligned.
SsdArgs with_vec4(SsdArgs args)
{
    args.vec4 = args.dim % 4 == 0 && args.ldo % 4 == 0 &&
                reinterpret_cast<std::uintptr_t>(args.out) % 16 == 0;
    return args;
}

void check_args(const SsdArgs& args, int warps)
{
    HALO_EXPECTS(warps >= 1 && warps <= 32, "warps per block ", warps, " outside [1, 32]");
    HALO_EXPECTS(args.dim >= 1 && args.k >= 1 && args.k <= args.dim, "k = ", args.k, ", width ",
                 args.dim);
}

}  // namespace

void maxk_topk(cudaStream_t stream, const float* x, std::int64_t rows, int dim, std::int64_t ldx,
               int k, float* values, std::int16_t* indices)
{
    HALO_EXPECTS(dim >= 1 && dim <= 1024, "top-k width ", dim, " outside [1, 1024]");
    HALO_EXPECTS(k >= 1 && k <= dim, "k = ", k, " outside [1, ", dim, "]");
    if (rows == 0) {
        return;
    }
    const int slots = (dim + 31) / 32;
    if (slots <= 1) {
        launch_topk<1>(stream, x, rows, dim, ldx, k, values, indices);
    } else if (slots <= 2) {
        launch_topk<2>(stream, x, rows, dim, ldx, k, values, indices);
    } else if (slots <= 4) {
        launch_topk<4>(stream, x, rows, dim, ldx, k, values, indices);
    } else if (slots <= 8) {
        launch_topk<8>(stream, x, rows, dim, ldx, k, values, indices);
    } else if (slots <= 16) {
        launch_topk<16>(stream, x, rows, dim, ldx, k, values, indices);
    } else {
        launch_topk<32>(stream, x, rows, dim, ldx, k, values, indices);
    }
}

std::size_t ssd_maxk_shared_bytes(int warps, int dim)
{
    return static_cast<std::size_t>(warps) * dim * sizeof(float);
}

std::size_t ssd_decoupled_shared_bytes(int warps, int slots, int dim)
{
    return static_cast<std::size_t>(warps) * slots * dim * sizeof(float);
}

void ssd_maxk(cudaStream_t stream, const SsdArgs& args_in, int warps)
{
    check_args(args_in, warps);
    if (args_in.group_count == 0) {
        return;
    }
    const SsdArgs args = with_vec4(args_in);
    if (args.a_values != nullptr) {
        launch_maxk_entries<true>(stream, args, warps);
    } else {
        launch_maxk_entries<false>(stream, args, warps);
    }
}

void ssd_decoupled(cudaStream_t stream, const SsdArgs& args_in, int warps, int slots,
                   bool atomic_aware, bool dependent)
{
    check_args(args_in, warps);
    HALO_EXPECTS(slots >= 1 && slots <= 32 && (slots == 1 || args_in.k <= 32 / slots), "slots ",
                 slots, " for k = ", args_in.k);
    if (args_in.group_count == 0) {
        return;
    }
    const SsdArgs args = with_vec4(args_in);
    const bool valued = args.a_values != nullptr;
    dependent = dependent && atomic_aware;
    if (valued && atomic_aware) {
        launch_decoupled_entries<true, true>(stream, dependent, args, warps, slots);
    } else if (valued) {
        launch_decoupled_entries<true, false>(stream, dependent, args, warps, slots);
    } else if (atomic_aware) {
        launch_decoupled_entries<false, true>(stream, dependent, args, warps, slots);
    } else {
        launch_decoupled_entries<false, false>(stream, dependent, args, warps, slots);
    }
}

}  // namespace halo::cuda::detail
