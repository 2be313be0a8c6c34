// The CUDA backend's kernels over matrices stored in 16 bits (cuda_features.hpp): the store of
// a step's output (two roundings around the bias and activation, in one pass), the range check
// of a 16-bit GEMM output, and the exact widening to fp32. Rounding as convert_features rounds
// (feature_store.cuh), overflows into the backend's record (cuda_overflow.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/backend/cuda_features.hpp"
#include "cuda/backend/cuda_overflow.cuh"
#include "cuda/primitives/feature_load.cuh"
#include "cuda/primitives/feature_store.cuh"
#include "cuda/primitives/grid_stride.cuh"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {
namespace {

constexpr int kBlock = 256;
constexpr std::int64_t kMaxBlocks = 8192;
// Order keys of store_features' overflows: the second rounding's after every first rounding's.
constexpr unsigned long long kSecondRounding = 1ull << 62;

// Two consecutive T stored as one 2-element vector (4 bytes for 16-bit T, 8 for fp32).
template <typename T>
__device__ __forceinline__ void store_pair(T* p, T lo, T hi)
{
    if constexpr (std::is_same_v<T, __half>) {
        *reinterpret_cast<__half2*>(p) = __halves2half2(lo, hi);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        *reinterpret_cast<__nv_bfloat162*>(p) = __halves2bfloat162(lo, hi);
    } else {
        *reinterpret_cast<float2*>(p) = make_float2(lo, hi);
    }
}

__device__ __forceinline__ float activate(float v, bool relu)
{
    return relu ? (v > 0.0f ? v : 0.0f) : v;  // reference::bias_activation's ReLU (NaN: 0)
}

__device__ __forceinline__ void offer(unsigned long long& mine, unsigned long long order)
{
    const unsigned long long key = ~order;
    mine = key > mine ? key : mine;
}

// What dst stores for src value v and bias b (element `index`, row-major); overflows offered.
template <typename T>
__device__ __forceinline__ T store_one(float v, float b, bool relu, std::int64_t index,
                                       unsigned long long& mine)
{
    if constexpr (std::is_same_v<T, float>) {
        return activate(v + b, relu);
    } else {
        const float r = widen_feature(narrow_feature<T>(v));
        if (isinf(r) && isfinite(v)) {
            offer(mine, static_cast<unsigned long long>(index));
        }
        const float t = activate(r + b, relu);
        const T q = narrow_feature<T>(t);
        if (isinf(widen_feature(q)) && isfinite(t)) {
            offer(mine, kSecondRounding | static_cast<unsigned long long>(index));
        }
        return q;
    }
}

// A block covers kBlock / tpr rows at a time (tpr threads a row), grid-stride over rows; Pairs:
// each thread stores two columns at once (dst and its ld allow 2-element vectors). The last
// block to finish fills the record from the launch's first overflow (16-bit dst only).
template <typename T, bool Pairs>
__global__ void __launch_bounds__(kBlock)
    store_kernel(const float* __restrict__ src, std::int64_t lds, const float* __restrict__ bias,
                 bool relu, T* __restrict__ dst, std::int64_t ldd, std::int64_t rows,
                 std::int64_t cols, int tpr, OverflowRecord* rec, int store)
{
    const int rows_per_block = kBlock / tpr;
    const int lane = static_cast<int>(threadIdx.x) % tpr;
    unsigned long long mine = 0;
    const auto b = [bias](std::int64_t j) { return bias != nullptr ? __ldg(bias + j) : 0.0f; };
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * rows_per_block +
                          static_cast<int>(threadIdx.x) / tpr;
         i < rows; i += static_cast<std::int64_t>(gridDim.x) * rows_per_block) {
        const float* s = src + i * lds;
        T* d = dst + i * ldd;
        const std::int64_t base = i * cols;
        if constexpr (Pairs) {
            std::int64_t j = 2 * static_cast<std::int64_t>(lane);
            for (; j + 1 < cols; j += 2 * static_cast<std::int64_t>(tpr)) {
                const T lo = store_one<T>(s[j], b(j), relu, base + j, mine);
                const T hi = store_one<T>(s[j + 1], b(j + 1), relu, base + j + 1, mine);
                store_pair(d + j, lo, hi);
            }
            if (j == cols - 1) {  // an odd width's last column, by the lane that reached it
                d[j] = store_one<T>(s[j], b(j), relu, base + j, mine);
            }
        } else {
            for (std::int64_t j = lane; j < cols; j += tpr) {
                d[j] = store_one<T>(s[j], b(j), relu, base + j, mine);
            }
        }
    }
    if constexpr (!std::is_same_v<T, float>) {
        unsigned long long first = 0;
        if (!last_block_of_launch(rec, mine, first)) {
            return;
        }
        if (first != 0 && threadIdx.x == 0 && rec->set == 0) {
            const unsigned long long order = ~first;
            const auto index = static_cast<std::int64_t>(order & (kSecondRounding - 1));
            const std::int64_t r = index / cols;
            const std::int64_t c = index % cols;
            float v = src[r * lds + c];
            if ((order & kSecondRounding) != 0) {
                v = activate(widen_feature(narrow_feature<T>(v)) + b(c), relu);
            }
            rec->row = r;
            rec->col = c;
            rec->value = v;
            rec->store = store;
            rec->set = 1;
        }
        end_launch(rec);
    }
}

// The first infinite element of c (row-major) into the record, as store_kernel's layout.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    find_infinite_kernel(const T* __restrict__ c, std::int64_t ld, std::int64_t rows,
                         std::int64_t cols, int tpr, OverflowRecord* rec, int store)
{
    const int rows_per_block = kBlock / tpr;
    const int lane = static_cast<int>(threadIdx.x) % tpr;
    unsigned long long mine = 0;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * rows_per_block +
                          static_cast<int>(threadIdx.x) / tpr;
         i < rows; i += static_cast<std::int64_t>(gridDim.x) * rows_per_block) {
        for (std::int64_t j = lane; j < cols; j += tpr) {
            if (isinf(load_feature(c + i * ld + j))) {
                offer(mine, static_cast<unsigned long long>(i * cols + j));
            }
        }
    }
    unsigned long long first = 0;
    if (!last_block_of_launch(rec, mine, first)) {
        return;
    }
    if (first != 0 && threadIdx.x == 0 && rec->set == 0) {
        const auto index = static_cast<std::int64_t>(~first);
        rec->row = index / cols;
        rec->col = index % cols;
        rec->value = widen_feature(c[rec->row * ld + rec->col]);
        rec->store = store;
        rec->set = 1;
    }
    end_launch(rec);
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    widen_kernel(const T* __restrict__ src, std::int64_t lds, std::int64_t rows, std::int64_t cols,
                 float* __restrict__ dst, std::int64_t ldd)
{
    const std::int64_t total = rows * cols;
    for (std::int64_t t = first_index(); t < total; t += stride()) {
        const std::int64_t i = t / cols;
        const std::int64_t j = t - i * cols;
        dst[i * ldd + j] = load_feature(src + i * lds + j);
    }
}

// Threads per row: a power of two covering `units` (columns or pairs), at most a block.
int threads_per_row(std::int64_t units)
{
    int tpr = 1;
    while (tpr < kBlock && tpr < units) {
        tpr *= 2;
    }
    return tpr;
}

template <typename T>
void launch_store(cudaStream_t stream, DenseView<const float> src, const float* bias, bool relu,
                  MutableFeatureView dst, OverflowRecord* rec, int store)
{
    auto* d = static_cast<T*>(dst.data);
    const bool pairs = dst.cols > 1 && dst.ld % 2 == 0 &&
                       reinterpret_cast<std::uintptr_t>(d) % (2 * sizeof(T)) == 0;
    const int tpr = threads_per_row(pairs ? (dst.cols + 1) / 2 : dst.cols);
    const auto blocks = grid_blocks(dst.rows, kBlock / tpr, kMaxBlocks);
    if (pairs) {
        store_kernel<T, true><<<blocks, kBlock, 0, stream>>>(
            src.data, src.ld, bias, relu, d, dst.ld, dst.rows, dst.cols, tpr, rec, store);
    } else {
        store_kernel<T, false><<<blocks, kBlock, 0, stream>>>(
            src.data, src.ld, bias, relu, d, dst.ld, dst.rows, dst.cols, tpr, rec, store);
    }
    HALO_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_find(cudaStream_t stream, FeatureView c, OverflowRecord* rec, int store)
{
    const int tpr = threads_per_row(c.cols);
    const auto blocks = grid_blocks(c.rows, kBlock / tpr, kMaxBlocks);
    find_infinite_kernel<T><<<blocks, kBlock, 0, stream>>>(static_cast<const T*>(c.data), c.ld,
                                                           c.rows, c.cols, tpr, rec, store);
    HALO_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_widen(cudaStream_t stream, FeatureView src, DenseView<float> dst)
{
    const auto blocks = grid_blocks(src.rows * src.cols, kBlock, kMaxBlocks);
    widen_kernel<T><<<blocks, kBlock, 0, stream>>>(static_cast<const T*>(src.data), src.ld,
                                                   src.rows, src.cols, dst.data, dst.ld);
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_store_features(cudaStream_t stream, DenseView<const float> src, const float* bias,
                           bool relu, MutableFeatureView dst, OverflowRecord* rec,
                           std::int32_t store)
{
    switch (dst.type) {
        case FeatureType::fp32:
            return launch_store<float>(stream, src, bias, relu, dst, rec, store);
        case FeatureType::fp16:
            return launch_store<__half>(stream, src, bias, relu, dst, rec, store);
        case FeatureType::bf16:
            return launch_store<__nv_bfloat16>(stream, src, bias, relu, dst, rec, store);
    }
    HALO_EXPECTS(false, "unknown feature type ", static_cast<int>(dst.type));
}

void launch_find_infinite(cudaStream_t stream, FeatureView c, OverflowRecord* rec,
                          std::int32_t store)
{
    HALO_EXPECTS(c.type != FeatureType::fp32, "the range check is of 16-bit matrices");
    if (c.type == FeatureType::fp16) {
        launch_find<__half>(stream, c, rec, store);
    } else {
        launch_find<__nv_bfloat16>(stream, c, rec, store);
    }
}

void launch_widen_features(cudaStream_t stream, FeatureView src, DenseView<float> dst)
{
    switch (src.type) {
        case FeatureType::fp32:
            return launch_widen<float>(stream, src, dst);
        case FeatureType::fp16:
            return launch_widen<__half>(stream, src, dst);
        case FeatureType::bf16:
            return launch_widen<__nv_bfloat16>(stream, src, dst);
    }
    HALO_EXPECTS(false, "unknown feature type ", static_cast<int>(src.type));
}

}  // namespace halo::cuda::detail
