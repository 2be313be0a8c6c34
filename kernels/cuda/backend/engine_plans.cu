// Device side of the CUDA backend's engine plans (engine_plans.hpp): row normalization, and the
// MaxK exchange records (halo/kernels_host/backend.hpp, MaxkPlan) packed from and unpacked into a
// device CBSR.
//
// Choices:
// - normalize_rows: a warp per row, the squares summed in double like the CPU backend, so the
//   norm differs from the host's only by the order of the sum; the quotient is the host's fp32
//   division.
// - Records move as 32-bit words (values by their bits, never through float arithmetic, so NaN
//   payloads and signed zeros survive), the int16 indices as the halves of words (little-endian,
//   the host's memcpy layout), the padding half-word written as zero: a record's every byte is
//   defined.
// - Unpacking checks each entry against its record neighbour (in range, strictly ascending) and
//   keeps the first bad entry (lowest row, then entry) with atomicMin, for the host to report.

#include <climits>
#include <cstdint>

#include "cuda/backend/engine_plans.hpp"
#include "cuda/primitives/grid_stride.cuh"
#include "cuda/primitives/warp_reduce.cuh"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/maxk.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kBlock = 256;
constexpr std::int64_t kMaxBlocks = 65536;

using detail::first_index;
using detail::stride;

unsigned grid_for(std::int64_t threads)
{
    return detail::grid_blocks(threads, kBlock, kMaxBlocks);
}

__global__ void __launch_bounds__(kBlock)
    normalize_rows_kernel(const float* __restrict__ x, std::int64_t ldx, float* __restrict__ y,
                          std::int64_t ldy, std::int64_t rows, std::int64_t cols)
{
    const int lane = static_cast<int>(threadIdx.x) % kWarp;
    const std::int64_t warps = stride() / kWarp;
    for (std::int64_t i = first_index() / kWarp; i < rows; i += warps) {
        const float* xi = x + i * ldx;
        double sq = 0.0;
        for (std::int64_t j = lane; j < cols; j += kWarp) {
            const double v = xi[j];
            sq += v * v;
        }
        sq = detail::warp_sum(sq);
        const float norm = fmaxf(static_cast<float>(sqrt(sq)), 1e-12f);
        float* yi = y + i * ldy;
        for (std::int64_t j = lane; j < cols; j += kWarp) {
            yi[j] = xi[j] / norm;
        }
    }
}

// Thread per (row, record word).
__global__ void __launch_bounds__(kBlock)
    pack_records_kernel(const float* __restrict__ values, const std::int16_t* __restrict__ indices,
                        std::int64_t k, std::int64_t words, std::int64_t row_begin,
                        std::int64_t count, std::uint32_t* __restrict__ records, std::int64_t ld)
{
    for (std::int64_t t = first_index(); t < count * words; t += stride()) {
        const std::int64_t i = row_begin + t / words;
        const std::int64_t w = t % words;
        std::uint32_t word;
        if (w < k) {
            word = __float_as_uint(values[i * k + w]);
        } else {
            // Half-words 2w and 2w + 1 of the record; those past the indices are padding.
            const std::int64_t e0 = 2 * w - 2 * k;
            const std::int64_t e1 = e0 + 1;
            const std::uint32_t lo = e0 < k ? static_cast<std::uint16_t>(indices[i * k + e0]) : 0u;
            const std::uint32_t hi = e1 < k ? static_cast<std::uint16_t>(indices[i * k + e1]) : 0u;
            word = lo | (hi << 16);
        }
        records[i * ld + w] = word;
    }
}

__device__ std::int16_t record_index(const std::uint32_t* record, std::int64_t k, std::int64_t e)
{
    const std::int64_t h = 2 * k + e;  // half-word position in the record
    const std::uint32_t word = record[h / 2];
    return static_cast<std::int16_t>(static_cast<std::uint16_t>(h % 2 == 0 ? word : word >> 16));
}

// Thread per (row, entry).
__global__ void __launch_bounds__(kBlock)
    unpack_records_kernel(const std::uint32_t* __restrict__ records, std::int64_t ld,
                          std::int64_t k, std::int64_t dim, std::int64_t row_begin,
                          std::int64_t count, float* __restrict__ values,
                          std::int16_t* __restrict__ indices,
                          unsigned long long* __restrict__ first_bad)
{
    for (std::int64_t t = first_index(); t < count * k; t += stride()) {
        const std::int64_t i = row_begin + t / k;
        const std::int64_t e = t % k;
        const std::uint32_t* record = records + i * ld;
        const std::int16_t j = record_index(record, k, e);
        values[i * k + e] = __uint_as_float(record[e]);
        indices[i * k + e] = j;
        const bool bad = j < 0 || j >= dim || (e > 0 && j <= record_index(record, k, e - 1));
        if (bad) {
            atomicMin(first_bad, static_cast<unsigned long long>(t));
        }
    }
}

// One element per thread (grid-stride), with the host's dequantize_int8: equal bit for bit.
__global__ void dequantize_kernel(QuantizedView q, DenseView<float> out)
{
    const std::int64_t total = q.rows * q.cols;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
         e < total; e += stride) {
        const std::int64_t i = e / q.cols;
        const std::int64_t j = e - i * q.cols;
        out.data[i * out.ld + j] = dequantize_int8(q.data[i * q.ld + j], q.params(j));
    }
}

}  // namespace

void dequantize(cudaStream_t stream, const QuantizedView& q, DenseView<float> out)
{
    const std::int64_t total = q.rows * q.cols;
    if (total == 0) {
        return;
    }
    constexpr int kThreads = 256;
    constexpr std::int64_t kMaxBlocks = 65535;
    const std::int64_t wanted = (total + kThreads - 1) / kThreads;
    const auto blocks = static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
    dequantize_kernel<<<blocks, kThreads, 0, stream>>>(q, out);
    HALO_CUDA_CHECK_LAUNCH();
}

void normalize_rows(cudaStream_t stream, DenseView<const float> x, DenseView<float> y)
{
    HALO_EXPECTS(x.rows == y.rows && x.cols == y.cols, "normalize_rows shapes differ: ", x.rows,
                 "x", x.cols, " vs ", y.rows, "x", y.cols);
    HALO_EXPECTS(x.ld >= x.cols && y.ld >= y.cols, "leading dimensions ", x.ld, " and ", y.ld,
                 " below the width ", x.cols);
    if (x.rows == 0 || x.cols == 0) {
        return;
    }
    normalize_rows_kernel<<<grid_for(x.rows * kWarp), kBlock, 0, stream>>>(x.data, x.ld, y.data,
                                                                           y.ld, x.rows, x.cols);
    HALO_CUDA_CHECK_LAUNCH();
}

namespace detail {

// Declared where they are used (engine_plans.cpp), the only caller.
void pack_maxk_records(cudaStream_t stream, CbsrView<const float> s, RowRange rows,
                       std::int64_t words, float* records, std::int64_t ld);
void unpack_maxk_records(cudaStream_t stream, const float* records, std::int64_t ld, RowRange rows,
                         CbsrView<float> s, unsigned long long* first_bad);

void pack_maxk_records(cudaStream_t stream, CbsrView<const float> s, RowRange rows,
                       std::int64_t words, float* records, std::int64_t ld)
{
    const std::int64_t count = rows.end - rows.begin;
    if (count == 0) {
        return;
    }
    pack_records_kernel<<<grid_for(count * words), kBlock, 0, stream>>>(
        s.values, s.indices, s.k, words, rows.begin, count,
        reinterpret_cast<std::uint32_t*>(records), ld);
    HALO_CUDA_CHECK_LAUNCH();
}

void unpack_maxk_records(cudaStream_t stream, const float* records, std::int64_t ld, RowRange rows,
                         CbsrView<float> s, unsigned long long* first_bad)
{
    const std::int64_t count = rows.end - rows.begin;
    HALO_CUDA_TRY(cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), stream));
    if (count == 0) {
        return;
    }
    unpack_records_kernel<<<grid_for(count * s.k), kBlock, 0, stream>>>(
        reinterpret_cast<const std::uint32_t*>(records), ld, s.k, s.dim, rows.begin, count,
        s.values, s.indices, first_bad);
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace detail
}  // namespace halo::cuda
