// The Fused3S kernel (include/halo/kernels/cuda/fused3s.hpp; paper 002, Algorithm 1): sparse
// attention O = softmax_row(mask(Q K^T * scale)) V in one kernel on tensor cores, over the BSB
// format.
//
// Choices (paper sections in brackets):
// - Node-parallel fusion [3.2]: one thread block of kWarps warps per row window of 16 rows, so
//   the row-wise softmax needs no global synchronization. Blocks take windows in the BSB's
//   window_order (decreasing block count, [3.2] row-window reordering) or in natural order.
// - Q's 16 x D block is staged in shared memory once per window and reused by every block of S;
//   K and V rows are gathered straight from global memory into mma fragments, never staged [3.4].
// - Split-column warp partitioning [3.3]: each iteration covers kWarps blocks of the window; in
//   S = Q K^T warp w computes block w (16 x 8) with mma.m16n8k16 over D / 16 k-steps; in O += P V
//   warp w owns output columns [w D / kWarps, (w + 1) D / kWarps) and reads the whole P tile (16 x
//   kGroupCols, fp16) from shared memory. The only exchanges are the per-row maxima and sums of
//   the online softmax, through shared memory: two barriers per iteration; the buffers are double
//   buffered so that no third barrier is needed before the next iteration overwrites them.
// - Online softmax in fp32 [3.5], FlashAttention-2 style, in the log2 domain (scores times
//   scale * log2 e, exp2f): a running max m and sum l per row, the accumulator rescaled by
//   exp2(m_old - m_new) before each P V. Masked entries are -inf and give p = 0. A row whose
//   entries so far are all masked keeps m = -inf; it then exponentiates against 0 instead, so no
//   -inf - -inf = NaN appears; rows with l = 0 at the end (no neighbours) are written as zeros.
//   l sums the fp16-rounded p that P V multiplies, so the weights of a row sum to one.
// - Register remapping [3.4] (template switch): per 32 features each lane reads its K row with one
//   128-bit load, Q is stored permuted in shared memory to match, and V's columns are permuted so
//   a lane's n-tiles of one V row are one contiguous load; the permutation of O is undone in
//   shared memory before the coalesced fp32 store (fused3s_layout.hpp has the mappings).
// - Padding slots of a block (column -1) and blocks past a window's end read zeros, so garbage
//   never meets a zero weight (0 * NaN); a whole k-step of P V past the window's end is skipped.
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/attention/fused3s_kernels.hpp"
#include "cuda/attention/fused3s_layout.hpp"
#include "cuda/primitives/grid_stride.cuh"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {
namespace {

using namespace halo::cuda::fused3s;

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float neg_inf()
{
    return __int_as_float(0xff800000);
}

// D (fp32) += A (fp16, 16 x 16) * B (fp16, 16 x 8).
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4],
                                          std::uint32_t b0, std::uint32_t b1)
{
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t ld_shared32(const __half* p)
{
    return *reinterpret_cast<const std::uint32_t*>(p);
}

__device__ __forceinline__ std::uint32_t ld_global32(const __half* p)
{
    return __ldg(reinterpret_cast<const unsigned int*>(p));
}

// The A fragment of the 16 x 16 tile at column col0 of a row-major shared-memory matrix.
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const __half* s, int ld, int col0,
                                       int lane)
{
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const Coord c = a_coord(lane, 2 * r);
        a[r] = ld_shared32(s + c.row * ld + col0 + c.col);
    }
}

// N consecutive fp16 values (as raw bits) from global memory in one load (N = 1, 2, 4 or 8).
template <int N>
__device__ __forceinline__ void load_bits(unsigned short (&dst)[N], const __half* src)
{
    const auto* p = reinterpret_cast<const unsigned short*>(src);
    if constexpr (N == 1) {
        dst[0] = __ldg(p);
    } else {
        std::uint32_t w[N / 2];
        if constexpr (N == 2) {
            w[0] = __ldg(reinterpret_cast<const unsigned int*>(p));
        } else if constexpr (N == 4) {
            const uint2 x = __ldg(reinterpret_cast<const uint2*>(p));
            w[0] = x.x;
            w[1] = x.y;
        } else {
            static_assert(N == 8, "1, 2, 4 or 8 halves");
            const uint4 x = __ldg(reinterpret_cast<const uint4*>(p));
            w[0] = x.x;
            w[1] = x.y;
            w[2] = x.z;
            w[3] = x.w;
        }
#pragma unroll
        for (int i = 0; i < N / 2; ++i) {
            dst[2 * i] = static_cast<unsigned short>(w[i] & 0xffffu);
            dst[2 * i + 1] = static_cast<unsigned short>(w[i] >> 16);
        }
    }
}

__device__ __forceinline__ std::uint32_t pack(unsigned short lo, unsigned short hi)
{
    return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}

// Q's block of rows row0.. into shared memory (fp16, row stride kQLd), zero rows past the matrix;
// permuted when remapping.
template <int D, bool Remap, int kQLd>
__device__ __forceinline__ void load_q_block(__half* q_s, const Fused3sArgs& p, std::int64_t row0)
{
    for (int idx = static_cast<int>(threadIdx.x); idx < kRows * D / 8; idx += kThreads) {
        const int r = idx / (D / 8);
        const int c8 = idx % (D / 8);
        uint4 x = make_uint4(0, 0, 0, 0);
        if (row0 + r < p.num_rows) {
            x = __ldg(reinterpret_cast<const uint4*>(p.q + (row0 + r) * p.ldq + 8 * c8));
        }
        if constexpr (Remap) {
            auto* row = reinterpret_cast<std::uint32_t*>(q_s + r * kQLd);
            row[remap_q_word(4 * c8 + 0)] = x.x;
            row[remap_q_word(4 * c8 + 1)] = x.y;
            row[remap_q_word(4 * c8 + 2)] = x.z;
            row[remap_q_word(4 * c8 + 3)] = x.w;
        } else {
            *reinterpret_cast<uint4*>(q_s + r * kQLd + 8 * c8) = x;
        }
    }
}

// S = Q K^T for block b of the window (scaled by scale_log2 where its bitmap has the entry, -inf
// elsewhere; all -inf without a block): lane's B column is slot g of the block.
template <int D, bool Remap, int kQLd>
__device__ __forceinline__ void block_scores(float (&s)[4], const Fused3sArgs& p,
                                             const __half* q_s, bool has_block, std::int64_t b,
                                             int lane, int g, int t, float scale_log2)
{
    constexpr int kChunks = D / 32;
    if (has_block) {
        const std::int32_t col = __ldg(p.block_columns + b * kBlockCols + g);
        const __half* krow = p.k + static_cast<std::int64_t>(col < 0 ? 0 : col) * p.ldk;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
            std::uint32_t kb[4] = {0, 0, 0, 0};
            if (col >= 0) {
                if constexpr (Remap) {
                    const uint4 x =
                        __ldg(reinterpret_cast<const uint4*>(krow + 32 * c + 8 * t));
                    kb[0] = x.x;
                    kb[1] = x.y;
                    kb[2] = x.z;
                    kb[3] = x.w;
                } else {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        kb[2 * h] = ld_global32(krow + k_feature(lane, 2 * c + h, 0, false));
                        kb[2 * h + 1] =
                            ld_global32(krow + k_feature(lane, 2 * c + h, 2, false));
                    }
                }
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                std::uint32_t a[4];
                load_a(a, q_s, kQLd, 16 * (2 * c + h), lane);
                mma_16816(s, a, kb[2 * h], kb[2 * h + 1]);
            }
        }
        const std::uint64_t lo = __ldg(p.block_bitmaps + 2 * b);
        const std::uint64_t hi = __ldg(p.block_bitmaps + 2 * b + 1);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const Coord c = c_coord(lane, i);
            const std::uint64_t word = c.row < 8 ? lo : hi;
            const bool present = ((word >> bitmap_shift(c.row, c.col)) & 1u) != 0;
            s[i] = present ? s[i] * scale_log2 : neg_inf();
        }
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            s[i] = neg_inf();
        }
    }
}

// O += P V over one iteration's kGroupCols gathered rows (P in p_s, their rows of V in col_s),
// 16 per k-step, for this warp's columns n0.. of V.
template <int D, bool Remap, int kPLd, int kNt>
__device__ __forceinline__ void accumulate_pv(float (&acc)[kNt][4], const Fused3sArgs& p,
                                              const __half* p_s, const std::int32_t* col_s,
                                              std::int64_t it, std::int64_t num_blocks, int lane,
                                              int n0)
{
#pragma unroll
    for (int ks = 0; ks < kGroupCols / 16; ++ks) {
        if (it * kWarps + 2 * ks >= num_blocks) {
            break;  // the rest of P is zero: no blocks left in the window
        }
        std::uint32_t a[4];
        load_a(a, p_s, kPLd, 16 * ks, lane);
        unsigned short vb[4][kNt];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const std::int32_t vrow = col_s[16 * ks + b_coord(lane, i).row];
            if (vrow < 0) {
#pragma unroll
                for (int j = 0; j < kNt; ++j) {
                    vb[i][j] = 0;
                }
            } else {
                const __half* src = p.v + static_cast<std::int64_t>(vrow) * p.ldv + n0;
                if constexpr (Remap) {
                    load_bits<kNt>(vb[i], src + v_column(lane, 0, kNt, true));
                } else {
#pragma unroll
                    for (int j = 0; j < kNt; ++j) {
                        unsigned short one[1];
                        load_bits<1>(one, src + v_column(lane, j, kNt, false));
                        vb[i][j] = one[0];
                    }
                }
            }
        }
#pragma unroll
        for (int j = 0; j < kNt; ++j) {
            mma_16816(acc[j], a, pack(vb[0][j], vb[1][j]), pack(vb[2][j], vb[3][j]));
        }
    }
}

// Normalizes the accumulators by the row sums, un-permutes them through shared memory (o_s, row
// stride kOLd) and stores the window's rows inside [row_begin, row_end) coalesced.
template <int D, bool Remap, int kOLd, int kNt>
__device__ __forceinline__ void store_output(float* o_s, const float (&acc)[kNt][4],
                                             const float (&l_run)[2], const Fused3sArgs& p,
                                             std::int64_t row0, int lane, int n0)
{
    const float inv[2] = {l_run[0] > 0.0f ? 1.0f / l_run[0] : 0.0f,
                          l_run[1] > 0.0f ? 1.0f / l_run[1] : 0.0f};
#pragma unroll
    for (int j = 0; j < kNt; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const Coord c = c_coord(lane, i);
            o_s[c.row * kOLd + n0 + o_column(c.col, j, kNt, Remap)] = acc[j][i] * inv[i >> 1];
        }
    }
    __syncthreads();
    const std::int64_t lo_row = row0 > p.row_begin ? row0 : p.row_begin;
    std::int64_t hi_row = row0 + kRows < p.row_end ? row0 + kRows : p.row_end;
    hi_row = hi_row < p.num_rows ? hi_row : p.num_rows;
    const int first = static_cast<int>(lo_row - row0);
    const int count = static_cast<int>(hi_row - lo_row);
    const int cols = p.out_cols;
    if (p.vector_out) {
        const int quads = cols / 4;
        for (int idx = static_cast<int>(threadIdx.x); idx < count * quads; idx += kThreads) {
            const int r = first + idx / quads;
            const int c4 = idx % quads;
            *reinterpret_cast<float4*>(p.out + (row0 + r) * p.ldo + 4 * c4) =
                *reinterpret_cast<const float4*>(o_s + r * kOLd + 4 * c4);
        }
    } else {
        for (int idx = static_cast<int>(threadIdx.x); idx < count * cols; idx += kThreads) {
            const int r = first + idx / cols;
            const int c = idx % cols;
            p.out[(row0 + r) * p.ldo + c] = o_s[r * kOLd + c];
        }
    }
}

template <int D, bool Remap>
__global__ void __launch_bounds__(kThreads) fused3s_kernel(Fused3sArgs p)
{
    static_assert(D % 32 == 0 && D / kWarps % 8 == 0, "D must be a multiple of 32");
    constexpr int kQLd = D + kHalfPad;
    constexpr int kPLd = kGroupCols + kHalfPad;
    constexpr int kOLd = D + kFloatPad;
    constexpr int kWarpCols = D / kWarps;
    constexpr int kNt = kWarpCols / 8;
    __shared__ alignas(16) __half q_s[kRows * kQLd];
    __shared__ alignas(16) __half p_s[2][kRows * kPLd];
    __shared__ alignas(16) float o_s[kRows * kOLd];
    __shared__ float max_s[2][kWarps][kRows];
    __shared__ float sum_s[2][kWarps][kRows];
    __shared__ std::int32_t col_s[2][kGroupCols];

    const int warp = static_cast<int>(threadIdx.x) / kWarp;
    const int lane = static_cast<int>(threadIdx.x) % kWarp;
    const int g = group_of(lane);
    const int t = thread_in_group(lane);

    std::int64_t window = 0;
    if (p.window_order != nullptr) {
        window = p.window_order[blockIdx.x];
    } else {
        window = p.row_begin / kRows + blockIdx.x;
    }
    const std::int64_t row0 = window * kRows;
    // The whole block leaves together, before any barrier.
    if (row0 + kRows <= p.row_begin || row0 >= p.row_end) {
        return;
    }
    // This block's head: its columns of Q, K, V and O.
    const auto head = static_cast<std::int64_t>(blockIdx.y);
    p.q += head * p.q_head;
    p.k += head * p.k_head;
    p.v += head * p.v_head;
    p.out += head * p.out_head;
    const std::int64_t first_block = p.window_blocks[window];
    const std::int64_t num_blocks = p.window_blocks[window + 1] - first_block;

    // Q's block into shared memory (fp16), zero rows past the matrix; permuted when remapping.
    load_q_block<D, Remap, kQLd>(q_s, p, row0);
    __syncthreads();

    const float scale_log2 = p.scale * kLog2e;
    float m_run[2] = {neg_inf(), neg_inf()};  // rows g and g + 8
    float l_run[2] = {0.0f, 0.0f};
    float acc[kNt][4];
#pragma unroll
    for (int j = 0; j < kNt; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            acc[j][i] = 0.0f;
        }
    }
    const int n0 = warp * kWarpCols;

    const std::int64_t iterations = (num_blocks + kWarps - 1) / kWarps;
    for (std::int64_t it = 0; it < iterations; ++it) {
        const int buf = static_cast<int>(it & 1);
        const std::int64_t local = it * kWarps + warp;
        const bool has_block = local < num_blocks;
        const std::int64_t b = first_block + local;
        if (lane < kBlockCols) {
            col_s[buf][warp * kBlockCols + lane] =
                has_block ? __ldg(p.block_columns + b * kBlockCols + lane) : -1;
        }

        // S = Q K^T for this warp's block: lane's B column is slot g of the block.
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        block_scores<D, Remap, kQLd>(s, p, q_s, has_block, b, lane, g, t, scale_log2);

        // Row maxima of this warp's block: the 4 lanes of a group hold one row pair.
        float mx[2] = {fmaxf(s[0], s[1]), fmaxf(s[2], s[3])};
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        }
        if (t == 0) {
            max_s[buf][warp][g] = mx[0];
            max_s[buf][warp][g + 8] = mx[1];
        }
        __syncthreads();

        float m_use[2];
        float alpha[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float m_new = m_run[r];
#pragma unroll
            for (int w = 0; w < kWarps; ++w) {
                m_new = fmaxf(m_new, max_s[buf][w][g + 8 * r]);
            }
            m_use[r] = m_new == neg_inf() ? 0.0f : m_new;
            alpha[r] = exp2f(m_run[r] - m_use[r]);
            m_run[r] = m_new;
        }
        const __half2 p01 = __floats2half2_rn(exp2f(s[0] - m_use[0]), exp2f(s[1] - m_use[0]));
        const __half2 p23 = __floats2half2_rn(exp2f(s[2] - m_use[1]), exp2f(s[3] - m_use[1]));
        {
            const Coord c0 = c_coord(lane, 0);
            const Coord c2 = c_coord(lane, 2);
            *reinterpret_cast<__half2*>(&p_s[buf][c0.row * kPLd + warp * kBlockCols + c0.col]) =
                p01;
            *reinterpret_cast<__half2*>(&p_s[buf][c2.row * kPLd + warp * kBlockCols + c2.col]) =
                p23;
        }
        float sm[2] = {__low2float(p01) + __high2float(p01), __low2float(p23) + __high2float(p23)};
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            sm[r] += __shfl_xor_sync(0xffffffffu, sm[r], 1);
            sm[r] += __shfl_xor_sync(0xffffffffu, sm[r], 2);
        }
        if (t == 0) {
            sum_s[buf][warp][g] = sm[0];
            sum_s[buf][warp][g + 8] = sm[1];
        }
        __syncthreads();

#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float total = 0.0f;
#pragma unroll
            for (int w = 0; w < kWarps; ++w) {
                total += sum_s[buf][w][g + 8 * r];
            }
            l_run[r] = alpha[r] * l_run[r] + total;
        }
#pragma unroll
        for (int j = 0; j < kNt; ++j) {
            acc[j][0] *= alpha[0];
            acc[j][1] *= alpha[0];
            acc[j][2] *= alpha[1];
            acc[j][3] *= alpha[1];
        }

        // O += P V over this iteration's kGroupCols gathered rows, 16 per k-step.
        accumulate_pv<D, Remap, kPLd, kNt>(acc, p, p_s[buf], col_s[buf], it, num_blocks, lane, n0);
    }

    // Normalize, un-permute through shared memory, store coalesced.
    store_output<D, Remap, kOLd, kNt>(o_s, acc, l_run, p, row0, lane, n0);
}

template <int D, bool Remap>
void launch(cudaStream_t stream, const Fused3sArgs& args)
{
    std::int64_t blocks = 0;
    if (args.window_order != nullptr) {
        blocks = args.num_windows;
    } else {
        const std::int64_t first = args.row_begin / kRows;
        const std::int64_t last = (args.row_end + kRows - 1) / kRows;
        blocks = last - first;
    }
    if (blocks <= 0) {
        return;
    }
    HALO_EXPECTS(blocks <= 0x7fffffff, "too many row windows for one launch: ", blocks);
    HALO_EXPECTS(args.heads >= 1 && args.heads <= 65535, "heads ", args.heads,
                 " outside [1, 65535]");
    HALO_EXPECTS(args.out_cols >= 1 && args.out_cols <= D, "out_cols ", args.out_cols,
                 " outside [1, ", D, "]");
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(args.heads));
    fused3s_kernel<D, Remap><<<grid, kThreads, 0, stream>>>(args);
    HALO_CUDA_CHECK_LAUNCH();
}

template <int D>
void launch_remap(cudaStream_t stream, bool remap, const Fused3sArgs& args)
{
    if (remap) {
        launch<D, true>(stream, args);
    } else {
        launch<D, false>(stream, args);
    }
}

__global__ void convert_kernel(const float* src, std::int64_t lds, __half* dst, std::int64_t ldd,
                               std::int64_t rows, std::int64_t cols)
{
    const std::int64_t count = rows * cols;
    for (std::int64_t k = first_index(); k < count; k += stride()) {
        const std::int64_t i = k / cols;
        const std::int64_t j = k - i * cols;
        dst[i * ldd + j] = __float2half_rn(src[i * lds + j]);
    }
}

// Four elements per thread: one 16-byte load, one 8-byte store (cols, lds, ldd multiples of 4).
__global__ void convert4_kernel(const float* src, std::int64_t lds, __half* dst, std::int64_t ldd,
                                std::int64_t rows, std::int64_t cols)
{
    const std::int64_t quads = cols / 4;
    const std::int64_t count = rows * quads;
    for (std::int64_t k = first_index(); k < count; k += stride()) {
        const std::int64_t i = k / quads;
        const std::int64_t j = 4 * (k - i * quads);
        const float4 x = __ldg(reinterpret_cast<const float4*>(src + i * lds + j));
        const __half2 lo = __floats2half2_rn(x.x, x.y);
        const __half2 hi = __floats2half2_rn(x.z, x.w);
        uint2 packed;
        packed.x = *reinterpret_cast<const unsigned int*>(&lo);
        packed.y = *reinterpret_cast<const unsigned int*>(&hi);
        *reinterpret_cast<uint2*>(dst + i * ldd + j) = packed;
    }
}

__global__ void convert_groups_kernel(const float* src, std::int64_t lds, __half* dst,
                                      std::int64_t ldd, std::int64_t rows, std::int64_t groups,
                                      std::int64_t width, std::int64_t padded)
{
    const std::int64_t cols = groups * padded;
    const std::int64_t count = rows * cols;
    for (std::int64_t k = first_index(); k < count; k += stride()) {
        const std::int64_t i = k / cols;
        const std::int64_t c = k - i * cols;
        const std::int64_t g = c / padded;
        const std::int64_t j = c - g * padded;
        dst[i * ldd + c] = j < width ? __float2half_rn(src[i * lds + g * width + j]) : __half{};
    }
}

}  // namespace

void launch_fused3s(cudaStream_t stream, int dim, bool remap, const Fused3sArgs& args)
{
    switch (dim) {
        case 32:
            return launch_remap<32>(stream, remap, args);
        case 64:
            return launch_remap<64>(stream, remap, args);
        case 128:
            return launch_remap<128>(stream, remap, args);
        case 256:
            return launch_remap<256>(stream, remap, args);
        default:
            HALO_EXPECTS(false, "the fused kernel is instantiated for d = 32, 64, 128, 256, not ",
                         dim);
    }
}

void convert_to_half(cudaStream_t stream, const float* src, std::int64_t lds, __half* dst,
                     std::int64_t ldd, std::int64_t rows, std::int64_t cols)
{
    const std::int64_t count = rows * cols;
    if (count <= 0) {
        return;
    }
    constexpr int kBlock = 256;
    constexpr std::int64_t kMaxBlocks = 8192;
    const bool vector = cols % 4 == 0 && lds % 4 == 0 && ldd % 4 == 0 &&
                        reinterpret_cast<std::uintptr_t>(src) % 16 == 0 &&
                        reinterpret_cast<std::uintptr_t>(dst) % 8 == 0;
    const std::int64_t items = vector ? count / 4 : count;
    const std::int64_t wanted = (items + kBlock - 1) / kBlock;
    const auto blocks = static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
    if (vector) {
        convert4_kernel<<<blocks, kBlock, 0, stream>>>(src, lds, dst, ldd, rows, cols);
    } else {
        convert_kernel<<<blocks, kBlock, 0, stream>>>(src, lds, dst, ldd, rows, cols);
    }
    HALO_CUDA_CHECK_LAUNCH();
}

void convert_groups_to_half(cudaStream_t stream, const float* src, std::int64_t lds, __half* dst,
                            std::int64_t ldd, std::int64_t rows, std::int64_t groups,
                            std::int64_t width, std::int64_t padded)
{
    if (width == padded) {
        // No padding: the groups are one contiguous block of columns.
        return convert_to_half(stream, src, lds, dst, ldd, rows, groups * width);
    }
    const std::int64_t count = rows * groups * padded;
    if (count <= 0) {
        return;
    }
    constexpr int kBlock = 256;
    constexpr std::int64_t kMaxBlocks = 8192;
    const std::int64_t wanted = (count + kBlock - 1) / kBlock;
    const auto blocks = static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
    convert_groups_kernel<<<blocks, kBlock, 0, stream>>>(src, lds, dst, ldd, rows, groups, width,
                                                         padded);
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace halo::cuda::detail
