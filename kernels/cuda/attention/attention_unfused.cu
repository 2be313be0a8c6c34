// Score and softmax kernels of the unfused attention baseline (attention_unfused.cpp runs them,
// then cuSPARSE SpMM): all fp32, a warp per row.
//
// Choices:
// - Dot-product SDDMM: the warp's lanes are cut into groups of G lanes (4..32, the smallest power
//   of two whose lanes cover the width in float4 or scalar units, as the row-split SpMM does); a
//   group computes one nonzero's dot product, its lanes striding the width (coalesced reads of Q
//   and K rows) and summing with shuffles. Every lane of the warp runs the same number of loop
//   trips (inactive groups add zeros), so full-warp shuffles are safe.
// - Additive (GAT) scores need one load per nonzero: lanes take a row's nonzeros in turn.
// - Softmax: max, then exp(x - max) and its sum, then the division: three passes over the row's
//   scores in place (expf, not the fast approximation: the baseline is exact fp32).
#include <algorithm>
#include <cstdint>

#include "cuda/attention/fused3s_kernels.hpp"
#include "cuda/primitives/warp_reduce.cuh"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {
namespace {

constexpr int kWarp = 32;
constexpr int kBlock = 256;
constexpr int kRowsPerBlock = kBlock / kWarp;
// Grid cap: beyond it the row loop strides.
constexpr std::int64_t kMaxBlocks = 65536;

unsigned row_grid(std::int64_t rows)
{
    return static_cast<unsigned>(std::min((rows + kRowsPerBlock - 1) / kRowsPerBlock, kMaxBlocks));
}

__device__ std::int64_t first_row(std::int64_t row_begin)
{
    return row_begin + (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
}

__device__ std::int64_t row_stride()
{
    return static_cast<std::int64_t>(gridDim.x) * blockDim.x / kWarp;
}

template <int G, int Vec>
__global__ void __launch_bounds__(kBlock)
    sddmm_dot_kernel(SddmmArgs a, const float* __restrict__ q, std::int64_t ldq,
                     const float* __restrict__ k, std::int64_t ldk, std::int64_t width, float scale)
{
    constexpr int kGroups = kWarp / G;
    const int lane = static_cast<int>(threadIdx.x) % kWarp;
    const int group = lane / G;
    const int member = lane % G;
    for (std::int64_t row = first_row(a.row_begin); row < a.row_end; row += row_stride()) {
        const std::int64_t begin = a.offsets[row];
        const std::int64_t end = a.offsets[row + 1];
        const float* qrow = q + row * ldq;
        for (std::int64_t base = begin; base < end; base += kGroups) {
            const std::int64_t nz = base + group;
            const bool active = nz < end;
            float partial = 0.0f;
            if (active) {
                const float* krow = k + static_cast<std::int64_t>(a.columns[nz]) * ldk;
                for (std::int64_t f = std::int64_t{member} * Vec; f < width; f += G * Vec) {
                    if constexpr (Vec == 4) {
                        const float4 x = __ldg(reinterpret_cast<const float4*>(qrow + f));
                        const float4 y = __ldg(reinterpret_cast<const float4*>(krow + f));
                        partial = fmaf(x.x, y.x, partial);
                        partial = fmaf(x.y, y.y, partial);
                        partial = fmaf(x.z, y.z, partial);
                        partial = fmaf(x.w, y.w, partial);
                    } else {
                        partial = fmaf(__ldg(qrow + f), __ldg(krow + f), partial);
                    }
                }
            }
            partial = warp_sum<G>(partial);
            if (active && member == 0) {
                a.scores[nz] = scale * partial;
            }
        }
    }
}

__global__ void __launch_bounds__(kBlock)
    sddmm_additive_kernel(SddmmArgs a, const float* __restrict__ el, const float* __restrict__ er,
                          float negative_slope)
{
    const int lane = static_cast<int>(threadIdx.x) % kWarp;
    for (std::int64_t row = first_row(a.row_begin); row < a.row_end; row += row_stride()) {
        const float left = el[row];
        for (std::int64_t nz = a.offsets[row] + lane; nz < a.offsets[row + 1]; nz += kWarp) {
            const float x = left + __ldg(er + a.columns[nz]);
            a.scores[nz] = x > 0.0f ? x : negative_slope * x;
        }
    }
}

__global__ void __launch_bounds__(kBlock) csr_row_softmax_kernel(SddmmArgs a)
{
    const int lane = static_cast<int>(threadIdx.x) % kWarp;
    for (std::int64_t row = first_row(a.row_begin); row < a.row_end; row += row_stride()) {
        const std::int64_t begin = a.offsets[row];
        const std::int64_t end = a.offsets[row + 1];
        float max = -INFINITY;
        for (std::int64_t nz = begin + lane; nz < end; nz += kWarp) {
            max = fmaxf(max, a.scores[nz]);
        }
        max = warp_max(max);
        float sum = 0.0f;
        for (std::int64_t nz = begin + lane; nz < end; nz += kWarp) {
            const float e = expf(a.scores[nz] - max);
            a.scores[nz] = e;
            sum += e;
        }
        sum = warp_sum(sum);
        const float inv = 1.0f / sum;
        for (std::int64_t nz = begin + lane; nz < end; nz += kWarp) {
            a.scores[nz] *= inv;
        }
    }
}

template <int Vec>
void launch_dot_vec(cudaStream_t stream, int group, const SddmmArgs& args, const float* q,
                    std::int64_t ldq, const float* k, std::int64_t ldk, std::int64_t width,
                    float scale)
{
    const unsigned grid = row_grid(args.row_end - args.row_begin);
    switch (group) {
        case 4:
            sddmm_dot_kernel<4, Vec>
                <<<grid, kBlock, 0, stream>>>(args, q, ldq, k, ldk, width, scale);
            break;
        case 8:
            sddmm_dot_kernel<8, Vec>
                <<<grid, kBlock, 0, stream>>>(args, q, ldq, k, ldk, width, scale);
            break;
        case 16:
            sddmm_dot_kernel<16, Vec>
                <<<grid, kBlock, 0, stream>>>(args, q, ldq, k, ldk, width, scale);
            break;
        default:
            sddmm_dot_kernel<32, Vec>
                <<<grid, kBlock, 0, stream>>>(args, q, ldq, k, ldk, width, scale);
            break;
    }
    HALO_CUDA_CHECK_LAUNCH();
}

bool aligned16(const void* p)
{
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

}  // namespace

void sddmm_dot(cudaStream_t stream, const SddmmArgs& args, const float* q, std::int64_t ldq,
               const float* k, std::int64_t ldk, std::int64_t width, float scale)
{
    if (args.row_end <= args.row_begin) {
        return;
    }
    const bool vector =
        aligned16(q) && aligned16(k) && width % 4 == 0 && ldq % 4 == 0 && ldk % 4 == 0;
    const int vec = vector ? 4 : 1;
    const std::int64_t units = (width + vec - 1) / vec;
    int group = 4;
    while (group < kWarp && group < units) {
        group *= 2;
    }
    if (vector) {
        launch_dot_vec<4>(stream, group, args, q, ldq, k, ldk, width, scale);
    } else {
        launch_dot_vec<1>(stream, group, args, q, ldq, k, ldk, width, scale);
    }
}

void sddmm_additive(cudaStream_t stream, const SddmmArgs& args, const float* el, const float* er,
                    float negative_slope)
{
    if (args.row_end <= args.row_begin) {
        return;
    }
    sddmm_additive_kernel<<<row_grid(args.row_end - args.row_begin), kBlock, 0, stream>>>(
        args, el, er, negative_slope);
    HALO_CUDA_CHECK_LAUNCH();
}

void csr_row_softmax(cudaStream_t stream, const SddmmArgs& args)
{
    if (args.row_end <= args.row_begin) {
        return;
    }
    csr_row_softmax_kernel<<<row_grid(args.row_end - args.row_begin), kBlock, 0, stream>>>(args);
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace halo::cuda::detail
