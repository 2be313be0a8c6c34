// MaxK-GNN kernels (paper 000; include/halo/cuda/maxk.hpp): the top-k activation into CBSR and
// the SSD operator's MaxK baseline (section III) and decoupled variants (section IV). The plan
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
// so the team synchronizes (__syncwarp on its mask) after each nonzero: without it independent
// thread scheduling lets one lane run ahead and race another on that column. The loads of a batch
// of nonzeros are issued before its accumulation steps so that they overlap.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "halo/cuda_error.hpp"
#include "halo/error.hpp"
#include "maxk_kernels.hpp"
#include "maxk_select.hpp"

namespace halo::cuda::detail {
namespace {

constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kTopkWarps = 8;
// Nonzeros whose loads are issued together before their accumulation steps.
constexpr int kBatch = 4;

__device__ __forceinline__ unsigned warp_sum(unsigned v)
{
#if __CUDA_ARCH__ >= 800
    return __reduce_add_sync(kFullMask, v);
#else
    for (int offset = 16; offset > 0; offset /= 2) {
        v += __shfl_xor_sync(kFullMask, v, offset);
    }
    return v;
#endif
}

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

__device__ __forceinline__ int group_count(const SsdGroup& m)
{
    return m.count_mode & 0x7FFFFFFF;
}

__device__ __forceinline__ bool group_shared(const SsdGroup& m)
{
    return m.count_mode < 0;
}

// The accumulation phase of one group by a team of `team` lanes (this lane is number t of it,
// `mask` names the team's lanes): buffer[column] += a * s for every kept entry of every
// neighbour, nonzero after nonzero, in storage order.
template <bool kValued>
__device__ __forceinline__ void accumulate(float* buffer, const SsdGroup& m, int t, int team,
                                           unsigned mask, const SsdArgs& args)
{
    const int nnz = group_count(m);
    const int k = args.k;
    const int* __restrict__ a_indices = args.a_indices + m.first;
    const float* __restrict__ a_values = kValued ? args.a_values + m.first : nullptr;
    const float* __restrict__ s_values = args.s_values;
    const short* __restrict__ s_indices = args.s_indices;
    if (k <= team) {
        // One entry per lane at most (entry t): the batch's S loads all go out first.
        const bool active = t < k;
        for (int e0 = 0; e0 < nnz; e0 += kBatch) {
            float a[kBatch];
            float v[kBatch];
            int col[kBatch];
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
                a[u] = 0.0f;
                v[u] = 0.0f;
                col[u] = 0;
                if (e0 + u < nnz) {
                    const long long c = __ldg(a_indices + e0 + u);
                    a[u] = kValued ? __ldg(a_values + e0 + u) : 1.0f;
                    if (active) {
                        v[u] = __ldg(s_values + c * k + t);
                        col[u] = __ldg(s_indices + c * k + t);
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
                if (e0 + u < nnz) {  // uniform across the team
                    if (active) {
                        buffer[col[u]] = fmaf(a[u], v[u], buffer[col[u]]);
                    }
                    __syncwarp(mask);
                }
            }
        }
    } else {
        // k > team (k > 32 with a whole warp): entries t, t + team, ... of each neighbour.
        for (int e = 0; e < nnz; ++e) {
            const long long c = __ldg(a_indices + e);
            const float a = kValued ? __ldg(a_values + e) : 1.0f;
            const float* sv = s_values + c * k;
            const short* si = s_indices + c * k;
            for (int l = t; l < k; l += team) {
                const int col = __ldg(si + l);
                buffer[col] = fmaf(a, __ldg(sv + l), buffer[col]);
            }
            __syncwarp(mask);
        }
    }
}

__device__ __forceinline__ unsigned team_mask(int team, int index)
{
    return team >= 32 ? kFullMask : ((1u << team) - 1u) << (index * team);
}

// MaxK's operator (section III, Fig. 5). Block b takes groups [b * warps, (b + 1) * warps), one
// D-wide buffer each. k < 32: the groups are accumulated by k-lane slots, 32 / k per warp, packed
// into the first warps (the others idle); k >= 32: warp w accumulates group w. A block-wide
// barrier, then warp w adds buffer w to its row with atomics.
template <bool kValued>
__global__ void ssd_maxk_kernel(SsdArgs args)
{
    extern __shared__ float shared[];
    const int warps = static_cast<int>(blockDim.x) / 32;
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int dim = args.dim;
    const int k = args.k;
    const long long g0 = static_cast<long long>(blockIdx.x) * warps;
    const int valid = static_cast<int>(min(static_cast<long long>(warps), args.group_count - g0));

    for (int i = static_cast<int>(threadIdx.x); i < warps * dim;
         i += static_cast<int>(blockDim.x)) {
        shared[i] = 0.0f;
    }
    __syncthreads();
    if (k < 32) {
        const int per_warp = 32 / k;
        const int slot = warp * per_warp + lane / k;
        if (lane < per_warp * k && slot < valid) {
            const SsdGroup m = load_group(args.groups + g0 + slot);
            accumulate<kValued>(shared + slot * dim, m, lane % k, k, team_mask(k, lane / k), args);
        }
    } else if (warp < valid) {
        const SsdGroup m = load_group(args.groups + g0 + warp);
        accumulate<kValued>(shared + warp * dim, m, lane, 32, kFullMask, args);
    }
    __syncthreads();
    if (warp < valid) {
        const SsdGroup m = load_group(args.groups + g0 + warp);
        if (group_count(m) > 0) {
            float* y = args.out + static_cast<long long>(m.row) * args.ldo;
            const float* buffer = shared + warp * dim;
            for (int j = lane; j < dim; j += 32) {
                atomicAdd(y + j, buffer[j]);
            }
        }
    }
}

// The decoupled operator (section IV, Fig. 7). Warp w of the grid takes groups
// [w * slots, (w + 1) * slots), one per slot of 32 / slots lanes, each with its own buffer.
// A slot zeroes its buffer, synchronizes its lanes and accumulates; then the warp synchronizes and
// writes its groups' buffers one after the other with all 32 lanes (coalesced). kAtomicAware:
// update_mode 0 stores, 1 adds atomically; otherwise every group adds atomically.
template <bool kValued, bool kAtomicAware>
__global__ void ssd_decoupled_kernel(SsdArgs args, int slots)
{
    extern __shared__ float shared[];
    const int warps = static_cast<int>(blockDim.x) / 32;
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int dim = args.dim;
    const int team = 32 / slots;
    const int slot = lane / team;
    const long long g0 = (static_cast<long long>(blockIdx.x) * warps + warp) * slots;
    float* warp_buffers = shared + static_cast<long long>(warp) * slots * dim;

    if (slot < slots && g0 + slot < args.group_count) {
        const int t = lane - slot * team;
        const unsigned mask = team_mask(team, slot);
        float* buffer = warp_buffers + slot * dim;
        for (int j = t; j < dim; j += team) {
            buffer[j] = 0.0f;
        }
        __syncwarp(mask);
        const SsdGroup m = load_group(args.groups + g0 + slot);
        accumulate<kValued>(buffer, m, t, team, mask, args);
    }
    __syncwarp();
    for (int s = 0; s < slots && g0 + s < args.group_count; ++s) {
        const SsdGroup m = load_group(args.groups + g0 + s);
        float* y = args.out + static_cast<long long>(m.row) * args.ldo;
        const float* buffer = warp_buffers + s * dim;
        if (kAtomicAware && !group_shared(m)) {
            for (int j = lane; j < dim; j += 32) {
                y[j] = buffer[j];
            }
        } else if (group_count(m) > 0) {
            for (int j = lane; j < dim; j += 32) {
                atomicAdd(y + j, buffer[j]);
            }
        }
    }
}

__global__ void zero_rows_kernel(const int* __restrict__ rows, long long count, int dim, float* out,
                                 long long ldo)
{
    const long long total = count * dim;
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        out[static_cast<long long>(rows[i / dim]) * ldo + i % dim] = 0.0f;
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

template <bool kValued, bool kAtomicAware>
void launch_decoupled(cudaStream_t stream, const SsdArgs& args, int warps, int slots)
{
    const auto blocks = grid_blocks(args.group_count, std::int64_t{warps} * slots);
    const auto bytes = ssd_decoupled_shared_bytes(warps, slots, args.dim);
    auto kernel = ssd_decoupled_kernel<kValued, kAtomicAware>;
    allow_shared(kernel, bytes);
    kernel<<<static_cast<unsigned>(blocks), warps * 32, bytes, stream>>>(args, slots);
    HALO_CUDA_CHECK_LAUNCH();
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

void ssd_maxk(cudaStream_t stream, const SsdArgs& args, int warps)
{
    check_args(args, warps);
    if (args.group_count == 0) {
        return;
    }
    const auto blocks = grid_blocks(args.group_count, warps);
    const auto bytes = ssd_maxk_shared_bytes(warps, args.dim);
    auto kernel = args.a_values != nullptr ? ssd_maxk_kernel<true> : ssd_maxk_kernel<false>;
    allow_shared(kernel, bytes);
    kernel<<<static_cast<unsigned>(blocks), warps * 32, bytes, stream>>>(args);
    HALO_CUDA_CHECK_LAUNCH();
}

void ssd_decoupled(cudaStream_t stream, const SsdArgs& args, int warps, int slots,
                   bool atomic_aware)
{
    check_args(args, warps);
    HALO_EXPECTS(slots >= 1 && slots <= 32 && (slots == 1 || args.k <= 32 / slots), "slots ", slots,
                 " for k = ", args.k);
    if (args.group_count == 0) {
        return;
    }
    const bool valued = args.a_values != nullptr;
    if (valued && atomic_aware) {
        launch_decoupled<true, true>(stream, args, warps, slots);
    } else if (valued) {
        launch_decoupled<true, false>(stream, args, warps, slots);
    } else if (atomic_aware) {
        launch_decoupled<false, true>(stream, args, warps, slots);
    } else {
        launch_decoupled<false, false>(stream, args, warps, slots);
    }
}

void zero_rows(cudaStream_t stream, const std::int32_t* rows, std::int64_t count, int dim,
               float* out, std::int64_t ldo)
{
    if (count == 0 || dim == 0) {
        return;
    }
    constexpr int threads = 256;
    const std::int64_t blocks =
        std::min<std::int64_t>((count * dim + threads - 1) / threads, 65536);
    zero_rows_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(rows, count, dim, out,
                                                                            ldo);
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace halo::cuda::detail
