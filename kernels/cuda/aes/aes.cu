// AES-SpMM kernels (paper 004, Algorithm 1; include/halo/kernels/cuda/aes.hpp) with fp32 or int8
// features.
//
// Choices:
// - A group of G lanes (8, 16 or a warp of 32: the smallest that spans the width's lanes) owns a
//   row. Lines 5-14 of Algorithm 1: the group computes the row's strategy (Table 1) and loads the
//   sampled (column, value) pairs, slot by slot, into its shared-memory staging area: slot k
//   holds position start(k mod sample_cnt) + k / sample_cnt (Eq. 3), as halo::aes_slot_position
//   says. Lines 16-19: each lane sums its columns over the slots in slot order, one fmaf per
//   product, gathering feature rows through the read-only cache (eight gathers per lane issued
//   before their products, so that they are in flight together), then stores each element once,
//   scaled by the row's factor (1 unless rescaled). One owner per row, no atomics: the same bits
//   every run and for every row range, equal to the CPU reference's.
// - Staging: 32 KiB per 256-thread block, 16 slots per lane of a group (512 for a warp), never
//   more than the longest row (or W) needs (aes_kernels.hpp, aes_layout).
// - Rows with more slots than a group stages (W = 1024 with narrow groups, long rows of the exact
//   kernel) would serialize on one group while the rest of the device idles. They are cut into
//   pieces of `capacity` slots, each piece a work item of its own that writes its partial row to a
//   workspace; a second kernel sums each split row's partials in piece order and applies the
//   factor. Still no atomics and the same bits every run; split rows differ from the CPU
//   reference's single chain only by rounding.
// - Lanes take 4 consecutive columns (float4, or char4 of int8) when the width, the leading
//   dimensions and the base pointers allow 16-byte fp32 (4-byte int8) accesses; else one column.
// - int8 features: a lane loads its columns' scale and zero point once per column chunk and
//   dequantizes each gathered value to halo::dequantize_int8's bits (one rounded product, as the
//   CPU reference): sampled AES by halo::dequantize_int8_byte (a byte permute and an add in place
//   of the quarter-rate int-to-float conversion), the exact kernel by dequantize_int8 itself.
// - The exact kernel is the same code with every row's strategy "the whole row" (W = infinity).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/aes/aes_kernels.hpp"
#include "cuda/primitives/feature_load.cuh"
#include "cuda/primitives/grid_stride.cuh"
#include "cuda/primitives/warp_reduce.cuh"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/aes.hpp"

namespace halo::cuda::detail {
namespace {

constexpr int kBlock = kAesBlock;
constexpr int kWarp = 32;
// Gathers in flight per lane in the product loop.
constexpr int kBatch = 8;
// Grid cap: enough resident groups for any device; the grid-stride loops cover the rest.
constexpr std::int64_t kMaxBlocks = 65536;

struct Args {
    const std::int64_t* indptr;
    const std::int32_t* indices;
    const float* values;
    std::int64_t row_begin;
    std::int64_t row_end;
    std::int64_t sample_width;
    bool rescaled;
    int capacity;  // staging slots per group
    std::int64_t dim;
    std::int64_t chunks;  // column chunks of G * Vec columns
    float* y;
    std::int64_t ldy;
    AesSplit split;
};

template <int Vec>
struct Fp32Gather {
    const float* x;
    std::int64_t ld;

    struct Raw {
        float v[Vec];
    };

    __device__ void prepare(std::int64_t) {}
    __device__ Raw fetch(std::int32_t row, std::int64_t col) const
    {
        Raw r;
        load_features<float, Vec>(x + static_cast<std::int64_t>(row) * ld + col, r.v);
        return r;
    }
    __device__ void convert(const Raw& r, float (&v)[Vec]) const
    {
#pragma unroll
        for (int t = 0; t < Vec; ++t) {
            v[t] = r.v[t];
        }
    }
    __device__ void load(std::int32_t row, std::int64_t col, float (&v)[Vec]) const
    {
        convert(fetch(row, col), v);
    }
};

// kBytes: dequantize_int8's bits from halo::dequantize_int8_byte (a byte permute and an add per
// value) instead of an int-to-float conversion (a quarter of the fp32 rate on sm_90). Measured
// (docs/AES.md): 5-7% faster for sampled AES on R-MAT 22/64 at d = 64 and 128; the exact kernel
// 2% faster at d = 128 but 16% slower at d = 64, so it keeps the conversion.
template <int Vec, bool kBytes>
struct Int8Gather {
    const std::int8_t* q;
    std::int64_t ld;
    const float* scale;
    const std::int32_t* zero_point;
    float scales[Vec];         // the lane's columns' scales
    float bias[Vec];           // kBytes: int8_bias of their zero points
    std::int32_t zeros[Vec];   // else: the zero points

    __device__ void prepare(std::int64_t col)
    {
#pragma unroll
        for (int t = 0; t < Vec; ++t) {
            scales[t] = __ldg(scale + col + t);
            const std::int32_t z = __ldg(zero_point + col + t);
            if constexpr (kBytes) {
                bias[t] = int8_bias(z);
            } else {
                zeros[t] = z;
            }
        }
    }
    // The gathered bytes as loaded: four columns' bytes in one word, or one column's byte.
    using Raw = std::conditional_t<Vec == 4, std::conditional_t<kBytes, std::uint32_t, char4>,
                                   std::int8_t>;

    __device__ Raw fetch(std::int32_t row, std::int64_t col) const
    {
        const std::int8_t* p = q + static_cast<std::int64_t>(row) * ld + col;
        if constexpr (Vec == 4 && kBytes) {
            return __ldg(reinterpret_cast<const unsigned int*>(p));
        } else if constexpr (Vec == 4) {
            return __ldg(reinterpret_cast<const char4*>(p));
        } else {
            return __ldg(p);
        }
    }
    __device__ void convert(Raw r, float (&v)[Vec]) const
    {
        if constexpr (kBytes && Vec == 4) {
            const std::uint32_t u = r ^ 0x80808080u;
            v[0] = dequantize_int8_byte<0>(u, bias[0], scales[0]);
            v[1] = dequantize_int8_byte<1>(u, bias[1], scales[1]);
            v[2] = dequantize_int8_byte<2>(u, bias[2], scales[2]);
            v[3] = dequantize_int8_byte<3>(u, bias[3], scales[3]);
        } else if constexpr (kBytes) {
            const std::uint32_t u = static_cast<std::uint32_t>(static_cast<std::uint8_t>(r)) ^ 0x80u;
            v[0] = dequantize_int8_byte<0>(u, bias[0], scales[0]);
        } else if constexpr (Vec == 4) {
            v[0] = dequantize_int8(r.x, {scales[0], zeros[0]});
            v[1] = dequantize_int8(r.y, {scales[1], zeros[1]});
            v[2] = dequantize_int8(r.z, {scales[2], zeros[2]});
            v[3] = dequantize_int8(r.w, {scales[3], zeros[3]});
        } else {
            v[0] = dequantize_int8(r, {scales[0], zeros[0]});
        }
    }
    __device__ void load(std::int32_t row, std::int64_t col, float (&v)[Vec]) const
    {
        convert(fetch(row, col), v);
    }
};

// halo::aes_slot_position in 32-bit arithmetic: an AES slot is below W <= 1024, its sample below
// 32 and Eq. 3's product below 32 * 1429, so nothing overflows; the modulus is taken only when it
// is smaller than the product (no wrap otherwise).
__device__ __forceinline__ std::int64_t slot_position(std::int64_t slot, std::int64_t row_nnz,
                                                      AesRowStrategy s)
{
    if (s.samples == 1) {
        return slot;
    }
    const auto k = static_cast<std::uint32_t>(slot);
    const auto n = static_cast<std::uint32_t>(s.samples);
    const std::uint32_t product = (k % n) * static_cast<std::uint32_t>(kAesPrime);
    const std::int64_t modulus = row_nnz - s.run + 1;
    const std::uint32_t start =
        product < modulus ? product : product % static_cast<std::uint32_t>(modulus);
    return static_cast<std::int64_t>(start) + k / n;
}

// What a group works on: its lanes, its staging area and its barrier mask.
template <int G>
struct Group {
    int lane;
    unsigned mask;
    std::int32_t* sh_col;
    float* sh_val;

    __device__ Group(std::int32_t* staging, int capacity)
    {
        constexpr int kGroups = kBlock / G;
        const int group = static_cast<int>(threadIdx.x) / G;
        lane = static_cast<int>(threadIdx.x) % G;
        mask = G == kWarp
                   ? 0xffffffffu
                   : ((1u << (G % kWarp)) - 1u) << (static_cast<int>(threadIdx.x) % kWarp - lane);
        sh_col = staging + group * capacity;
        sh_val = reinterpret_cast<float*>(staging + kGroups * capacity) + group * capacity;
    }
};

__device__ __forceinline__ AesRowStrategy strategy_of(const Args& a, std::int64_t nnz)
{
    return a.sample_width > 0 ? aes_row_strategy(nnz, a.sample_width) : AesRowStrategy{nnz, 1};
}

// Stages slots [from, from + n) of a row (Algorithm 1, lines 7-14), multiplies them with the
// gathered features (lines 16-18) and stores factor * sum to out[0:dim] (line 19). Every lane of
// the group calls it; it ends with the staging area free again.
template <typename Gather, int G, int Vec>
__device__ void stage_and_multiply(const Args& a, const Gather& gather, const Group<G>& g,
                                   std::int64_t begin, std::int64_t nnz, AesRowStrategy s,
                                   std::int64_t from, int n, float factor, float* out)
{
    const std::int32_t* __restrict__ indices = a.indices;
    const float* __restrict__ values = a.values;
    for (int t = g.lane; t < n; t += G) {
        const std::int64_t p = begin + slot_position(from + t, nnz, s);
        g.sh_col[t] = __ldg(indices + p);
        g.sh_val[t] = values != nullptr ? __ldg(values + p) : 1.0f;
    }
    __syncwarp(g.mask);
    for (std::int64_t chunk = 0; chunk < a.chunks; ++chunk) {
        const std::int64_t col = (chunk * G + g.lane) * Vec;
        if (col >= a.dim) {
            continue;
        }
        Gather lanes = gather;
        lanes.prepare(col);
        float acc[Vec];
#pragma unroll
        for (int t = 0; t < Vec; ++t) {
            acc[t] = 0.0f;
        }
        // kBatch gathers are issued (their raw words fetched) before any is converted or
        // multiplied, so that many loads per lane are in flight; the products still run in slot
        // order.
        int k = 0;
        for (; k + kBatch <= n; k += kBatch) {
            typename Gather::Raw raw[kBatch];
#pragma unroll
            for (int b = 0; b < kBatch; ++b) {
                raw[b] = lanes.fetch(g.sh_col[k + b], col);
            }
#pragma unroll
            for (int b = 0; b < kBatch; ++b) {
                float v[Vec];
                lanes.convert(raw[b], v);
                const float w = g.sh_val[k + b];
#pragma unroll
                for (int t = 0; t < Vec; ++t) {
                    acc[t] = fmaf(w, v[t], acc[t]);
                }
            }
        }
        for (; k < n; ++k) {
            float v[Vec];
            lanes.load(g.sh_col[k], col, v);
            const float w = g.sh_val[k];
#pragma unroll
            for (int t = 0; t < Vec; ++t) {
                acc[t] = fmaf(w, v[t], acc[t]);
            }
        }
        if constexpr (Vec == 4) {
            *reinterpret_cast<float4*>(out + col) =
                make_float4(acc[0] * factor, acc[1] * factor, acc[2] * factor, acc[3] * factor);
        } else {
            out[col] = acc[0] * factor;
        }
    }
    __syncwarp(g.mask);
}

// Every row of the range whose slots fit one staging piece.
//
// The minimum of one block per SM in the launch bounds changes ptxas's schedule of the product
// loop: with it, all eight gathers of a batch issue before the first conversion; without it,
// three did and the other five waited behind the first's data (SASS of the int8 W = 128
// instance, cuobjdump; 48 registers either way). Other instances take more registers with it
// (fp32 40 -> 63-64, int8 with groups of 8 or 16 lanes 47-48 -> 52-53). Measured on H200s,
// docs/AES.md "Eight gathers in flight": int8 at W = 128, d = 128 on R-MAT 22/64 5.83 -> 5.28 ms.
template <typename Gather, int G, int Vec>
__global__ void __launch_bounds__(kBlock, 1) aes_rows_kernel(const Args a, const Gather gather)
{
    extern __shared__ std::int32_t staging[];
    constexpr int kGroups = kBlock / G;
    const Group<G> g(staging, a.capacity);
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kGroups;
    for (std::int64_t row = a.row_begin + static_cast<std::int64_t>(blockIdx.x) * kGroups +
                            static_cast<int>(threadIdx.x) / G;
         row < a.row_end; row += stride) {
        const std::int64_t begin = __ldg(a.indptr + row);
        const std::int64_t nnz = __ldg(a.indptr + row + 1) - begin;
        const AesRowStrategy s = strategy_of(a, nnz);
        if (s.count() > a.capacity) {
            continue;  // a split row: aes_pieces_kernel and aes_combine_kernel
        }
        stage_and_multiply<Gather, G, Vec>(a, gather, g, begin, nnz, s, 0,
                                           static_cast<int>(s.count()),
                                           aes_row_factor(nnz, s, a.rescaled), a.y + row * a.ldy);
    }
}

// One piece of a split row per group: its partial sum (no factor) into the workspace.
template <typename Gather, int G, int Vec>
__global__ void __launch_bounds__(kBlock) aes_pieces_kernel(const Args a, const Gather gather)
{
    extern __shared__ std::int32_t staging[];
    constexpr int kGroups = kBlock / G;
    const Group<G> g(staging, a.capacity);
    const std::int64_t* __restrict__ first = a.split.first;
    const std::int64_t q_begin = first[a.split.begin];
    const std::int64_t q_end = first[a.split.end];
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kGroups;
    for (std::int64_t q = q_begin + static_cast<std::int64_t>(blockIdx.x) * kGroups +
                          static_cast<int>(threadIdx.x) / G;
         q < q_end; q += stride) {
        // The split row holding piece q: the last s with first[s] <= q.
        std::int64_t lo = a.split.begin;
        std::int64_t hi = a.split.end;
        while (hi - lo > 1) {
            const std::int64_t mid = lo + (hi - lo) / 2;
            if (__ldg(first + mid) <= q) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        const std::int64_t row = __ldg(a.split.rows + lo);
        const std::int64_t piece = q - __ldg(first + lo);
        const std::int64_t begin = __ldg(a.indptr + row);
        const std::int64_t nnz = __ldg(a.indptr + row + 1) - begin;
        const AesRowStrategy s = strategy_of(a, nnz);
        const std::int64_t from = piece * a.capacity;
        const auto n =
            static_cast<int>(s.count() - from < a.capacity ? s.count() - from : a.capacity);
        stage_and_multiply<Gather, G, Vec>(a, gather, g, begin, nnz, s, from, n, 1.0f,
                                           a.split.partials + q * a.dim);
    }
}

// Each split row: the sum of its pieces' partials in piece order, times the row's factor.
template <int G, int Vec>
__global__ void __launch_bounds__(kBlock) aes_combine_kernel(const Args a)
{
    constexpr int kGroups = kBlock / G;
    const int lane = static_cast<int>(threadIdx.x) % G;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kGroups;
    for (std::int64_t s = a.split.begin + static_cast<std::int64_t>(blockIdx.x) * kGroups +
                          static_cast<int>(threadIdx.x) / G;
         s < a.split.end; s += stride) {
        const std::int64_t row = __ldg(a.split.rows + s);
        const std::int64_t nnz = __ldg(a.indptr + row + 1) - __ldg(a.indptr + row);
        const float factor = aes_row_factor(nnz, strategy_of(a, nnz), a.rescaled);
        const std::int64_t q0 = __ldg(a.split.first + s);
        const std::int64_t q1 = __ldg(a.split.first + s + 1);
        for (std::int64_t col = static_cast<std::int64_t>(lane) * Vec; col < a.dim;
             col += static_cast<std::int64_t>(G) * Vec) {
            float acc[Vec];
#pragma unroll
            for (int t = 0; t < Vec; ++t) {
                acc[t] = 0.0f;
            }
            for (std::int64_t q = q0; q < q1; ++q) {
                const float* p = a.split.partials + q * a.dim + col;
#pragma unroll
                for (int t = 0; t < Vec; ++t) {
                    acc[t] += p[t];
                }
            }
            float* out = a.y + row * a.ldy + col;
#pragma unroll
            for (int t = 0; t < Vec; ++t) {
                out[t] = acc[t] * factor;
            }
        }
    }
}

bool aligned(const void* p, std::uintptr_t bytes)
{
    return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

unsigned blocks_for(std::int64_t items, int groups)
{
    return static_cast<unsigned>(std::min<std::int64_t>((items + groups - 1) / groups, kMaxBlocks));
}

template <typename Gather, int G, int Vec>
void launch(cudaStream_t stream, const AesLaunch& l, const AesLayout& layout, const AesSplit& split,
            const Gather& gather)
{
    constexpr int kGroups = kBlock / G;
    const std::int64_t lanes = (l.dim + Vec - 1) / Vec;
    const Args args{l.indptr,  l.indices,           l.values,   l.row_begin,
                    l.row_end, l.sample_width,      l.rescaled, layout.capacity,
                    l.dim,     (lanes + G - 1) / G, l.y,        l.ldy,
                    split};
    const auto shared = static_cast<std::size_t>(kGroups) * layout.capacity * kAesSlotBytes;
    aes_rows_kernel<Gather, G, Vec>
        <<<blocks_for(l.row_end - l.row_begin, kGroups), kBlock, shared, stream>>>(args, gather);
    HALO_CUDA_CHECK_LAUNCH();
    if (split.end > split.begin) {
        aes_pieces_kernel<Gather, G, Vec>
            <<<blocks_for(split.pieces, kGroups), kBlock, shared, stream>>>(args, gather);
        HALO_CUDA_CHECK_LAUNCH();
        aes_combine_kernel<G, Vec>
            <<<blocks_for(split.end - split.begin, kGroups), kBlock, 0, stream>>>(args);
        HALO_CUDA_CHECK_LAUNCH();
    }
}

template <typename Gather, int Vec>
void launch_group(cudaStream_t stream, const AesLaunch& l, const AesLayout& layout,
                  const AesSplit& split, const Gather& gather)
{
    switch (layout.group) {
        case 8:
            return launch<Gather, 8, Vec>(stream, l, layout, split, gather);
        case 16:
            return launch<Gather, 16, Vec>(stream, l, layout, split, gather);
        case 32:
            return launch<Gather, 32, Vec>(stream, l, layout, split, gather);
        default:
            HALO_EXPECTS(false, "AES group of ", layout.group, " lanes is not instantiated");
    }
}

bool nothing_to_do(const AesLaunch& l)
{
    return l.row_end <= l.row_begin || l.dim == 0;
}

__global__ void frobenius_kernel(const float* approx, std::int64_t lda, const float* exact,
                                 std::int64_t lde, std::int64_t rows, std::int64_t cols,
                                 double* out)
{
    double diff = 0.0;
    double ref = 0.0;
    const std::int64_t total = rows * cols;
    for (std::int64_t t = first_index(); t < total; t += stride()) {
        const std::int64_t i = t / cols;
        const std::int64_t j = t - i * cols;
        const double e = exact[i * lde + j];
        const double d = static_cast<double>(approx[i * lda + j]) - e;
        diff += d * d;
        ref += e * e;
    }
    diff = warp_sum(diff);
    ref = warp_sum(ref);
    if (threadIdx.x % kWarp == 0) {
        atomicAdd(out, diff);
        atomicAdd(out + 1, ref);
    }
}

}  // namespace

bool aes_vec4(const float* x, std::int64_t ldx, const float* y, std::int64_t ldy, std::int64_t dim)
{
    return dim % 4 == 0 && ldx % 4 == 0 && ldy % 4 == 0 && aligned(x, 16) && aligned(y, 16);
}

bool aes_vec4(const QuantizedView& x, const float* y, std::int64_t ldy, std::int64_t dim)
{
    return dim % 4 == 0 && x.ld % 4 == 0 && ldy % 4 == 0 && aligned(x.data, 4) && aligned(y, 16);
}

void aes_spmm(cudaStream_t stream, const AesLaunch& l, const AesLayout& layout,
              const AesSplit& split, const float* x, std::int64_t ldx)
{
    if (nothing_to_do(l)) {
        return;
    }
    if (layout.vec == 4) {
        launch_group<Fp32Gather<4>, 4>(stream, l, layout, split, Fp32Gather<4>{x, ldx});
    } else {
        launch_group<Fp32Gather<1>, 1>(stream, l, layout, split, Fp32Gather<1>{x, ldx});
    }
}

void aes_spmm(cudaStream_t stream, const AesLaunch& l, const AesLayout& layout,
              const AesSplit& split, const QuantizedView& x)
{
    if (nothing_to_do(l)) {
        return;
    }
    const bool sampled = l.sample_width > 0;
    if (layout.vec == 4 && sampled) {
        launch_group<Int8Gather<4, true>, 4>(
            stream, l, layout, split, Int8Gather<4, true>{x.data, x.ld, x.scale, x.zero_point});
    } else if (layout.vec == 4) {
        launch_group<Int8Gather<4, false>, 4>(
            stream, l, layout, split, Int8Gather<4, false>{x.data, x.ld, x.scale, x.zero_point});
    } else if (sampled) {
        launch_group<Int8Gather<1, true>, 1>(
            stream, l, layout, split, Int8Gather<1, true>{x.data, x.ld, x.scale, x.zero_point});
    } else {
        launch_group<Int8Gather<1, false>, 1>(
            stream, l, layout, split, Int8Gather<1, false>{x.data, x.ld, x.scale, x.zero_point});
    }
}

void frobenius_sums(cudaStream_t stream, DenseView<const float> approx,
                    DenseView<const float> exact, double* out)
{
    const std::int64_t total = approx.rows * approx.cols;
    if (total == 0) {
        return;
    }
    const auto blocks =
        static_cast<unsigned>(std::min<std::int64_t>((total + kBlock - 1) / kBlock, 4096));
    frobenius_kernel<<<blocks, kBlock, 0, stream>>>(approx.data, approx.ld, exact.data, exact.ld,
                                                    approx.rows, approx.cols, out);
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace halo::cuda::detail
