// MergePath-SpMM (paper 003, Algorithm 2 with section III-C's thread mapping) and its plan.
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
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda/primitives/cusparse_csr.hpp"  // upload_scaling, device_scaled_values
#include "cuda/primitives/dependent_launch.cuh"
#include "cuda/primitives/feature_load.cuh"
#include "cuda/primitives/feature_vec.hpp"
#include "cuda/primitives/grid_stride.cuh"
#include "cuda/primitives/spmm_checks.hpp"
#include "cuda/primitives/upload.hpp"
#include "cuda/primitives/zero_rows.hpp"
#include "halo/cuda/device.hpp"
#include "halo/cuda/lowp_spmm.hpp"
#include "halo/cuda/mergepath.hpp"
#include "halo/cuda_error.hpp"
#include "halo/error.hpp"
#include "halo/spmm_cost_model.hpp"
#include "halo/spmm_registry.hpp"
#include "preprocess/hot_columns.hpp"
#include "preprocess/mergepath_schedule.hpp"

namespace halo::cuda {
namespace {

using detail::atomic_add_results;
using detail::load_features;
using detail::vector_columns;
using detail::write_results;

constexpr int kBlockThreads = 256;
// Grid-stride loops beyond this many blocks (any larger grid only adds block scheduling).
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 22;
// Widths above this all share default_cost()'s last class, so scanning 1..kLastCostClass finds
// every default cost that a plan can use.
constexpr std::int64_t kLastCostClass = 65;

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

// Indices of a plan with L2 hints carry a cold mark in bit 31 (MergePathOptions::hint_hot_bytes):
// kPlain: no marks; kMarked: marks, plain loads; kHinted: marks, cold X rows loaded evict_first
// and hot ones evict_last (fp32 only).
enum Hints : int { kPlain = 0, kMarked = 1, kHinted = 2 };
using mergepath::kColdMark;

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
__global__ void count_column_reads(const std::int32_t* __restrict__ indices, std::int64_t nnz,
                                   std::uint32_t* __restrict__ reads)
{
    for (std::int64_t k = detail::first_index(); k < nnz; k += detail::stride()) {
        atomicAdd(reads + indices[k], 1u);
    }
}

__global__ void mark_cold_indices(std::int32_t* __restrict__ indices, std::int64_t nnz,
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

class MergePathSpmmPlan final : public FeatureSpmmPlan {
public:
    MergePathSpmmPlan(Context& ctx, const Csr& a, std::int64_t max_dim,
                      const MergePathOptions& options, const OperatorScaling* scaling)
        : ctx_(ctx),
          num_rows_(a.num_rows),
          num_cols_(a.num_cols),
          max_dim_(max_dim),
          options_(options),
          indptr_(a.indptr)
    {
        if (max_dim < 1) {
            HALO_THROW(InputError, "mergepath plan: max_dim ", max_dim, " must be at least 1");
        }
        if (options.cost < 0) {
            HALO_THROW(InputError, "mergepath plan: cost ", options.cost,
                       " must be positive (or 0 for the per-width default)");
        }
        if (options.min_segments < 0) {
            HALO_THROW(InputError, "mergepath plan: min_segments ", options.min_segments,
                       " must not be negative");
        }
        if (options.wide_from < 0 || (options.wide_from > 0 && options.wide_cost < 1)) {
            HALO_THROW(InputError, "mergepath plan: wide_from ", options.wide_from,
                       " needs a positive wide_cost (got ", options.wide_cost, ")");
        }
        validate(a, "the operator of a MergePath-SpMM plan");
        const cudaStream_t stream = ctx_.compute_stream();
        indptr_d_ = detail::upload(ctx_, indptr_);
        indices_d_ = detail::upload(ctx_, a.indices);
        if (scaling != nullptr && !scaling->col.empty() &&
            options.scaled_form == ScaledForm::automatic) {
            values_d_ = detail::device_scaled_values(ctx_, a, indptr_d_.data(), indices_d_.data(),
                                                     *scaling);
            scaled_ = true;
        } else if (scaling != nullptr) {
            // Pattern-only: the scalings (rows + columns floats) instead of a values array.
            // The pattern's own values, if any, are ignored (Backend::make_scaled_spmm_plan).
            scaling_d_ = detail::upload_scaling(ctx_, a, *scaling);
            pattern_scaled_ = true;
        } else if (a.has_values()) {
            values_d_ = detail::upload(ctx_, a.values);
        }
        std::set<std::int64_t> costs;
        for (std::int64_t w = 1; options.prepare_at_setup && w <= std::min(max_dim, kLastCostClass);
             ++w) {
            costs.insert(cost_for(w));
        }
        if (options.prepare_at_setup && options.wide_from > 0 && max_dim >= options.wide_from) {
            costs.insert(options.wide_cost);
        }
        for (const std::int64_t cost : costs) {
            (void)schedule(a.view().all_rows(), cost);
        }
        if (options.hint_hot_bytes > 0) {
            HALO_EXPECTS(options.hint_width >= 1, "hint_width ", options.hint_width);
            const std::int64_t hot = options.hint_hot_bytes / (4 * options.hint_width);
            // Marks only where some launch may hint and some column is cold: otherwise the
            // plan is the plain one.
            if (hot < a.num_cols && a.num_cols * max_dim * 4 >= options.hint_min_x_bytes) {
                mark_cold_columns(a, hot);
            }
        }
        // Once, at setup: a failed upload surfaces here rather than in a later run.
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
    }

    MergePathSpmmPlan(const MergePathSpmmPlan&) = delete;
    MergePathSpmmPlan& operator=(const MergePathSpmmPlan&) = delete;

    void run_features(FeatureView x, DenseView<float> y, RowRange rows) override
    {
        launch_rows(x, y, rows, false);
    }

    bool adds_in_place() const override { return true; }

    void run_add(DenseView<const float> x, DenseView<float> y, RowRange rows) override
    {
        launch_rows(fp32_features(x), y, rows, true);
    }

    std::string algorithm() const override
    {
        std::string name =
            options_.cost > 0 ? "mergepath-cost" + std::to_string(options_.cost) : "mergepath";
        if (options_.wide_from > 0) {
            name += " (cost " + std::to_string(options_.wide_cost) +
                    " from d = " + std::to_string(options_.wide_from) + ")";
        }
        if (marked_) {
            name += ", L2 hints (" + std::to_string(hot_columns_) + " hot columns, " +
                    std::to_string(static_cast<int>(100.0 * hot_share_ + 0.5)) + "% of reads)";
        }
        return pattern_scaled_ ? name + ", pattern with scalings"
               : scaled_       ? name + ", values made on the device"
                               : name;
    }

private:
    void launch_rows(FeatureView x, DenseView<float> y, RowRange rows, bool add)
    {
        if (!detail::check_feature_operands(x, y, rows, num_rows_, num_cols_, max_dim_)) {
            return;
        }
        const std::int64_t width = x.cols;
        const Prepared& p = schedule(rows, cost_for(width));
        const cudaStream_t stream = ctx_.compute_stream();
        const auto num_split = static_cast<std::int64_t>(p.host.split_rows.size());
        // Adding: the segments' atomics add to y's own values. Zeroing: the kernel is its
        // dependent and overlaps it.
        const bool dependent =
            !add && detail::zero_rows(stream, p.split_rows.data(), num_split, width, y.data, y.ld);
        // 16-byte lanes (4 fp32 or 8 fp16/bf16 columns) when every access of a lane is aligned.
        const int vec = detail::lane_columns(x.type, x.data, x.ld, y.data, y.ld, width);
        const std::int64_t lanes = lanes_per_segment(width / vec);
        const unsigned int grid = grid_for(p.host.num_segments() * lanes);
        const Hints hints = !marked_                                             ? kPlain
                            : num_cols_ * width * 4 >= options_.hint_min_x_bytes ? kHinted
                                                                                 : kMarked;
        switch (x.type) {
            case FeatureType::fp32:
                return launch_kernel(stream, dependent, grid, vec, hints,
                                     kernel_args<float>(p, lanes, x, y, add));
            case FeatureType::fp16:
                return launch_kernel(stream, dependent, grid, vec, hints,
                                     kernel_args<__half>(p, lanes, x, y, add));
            case FeatureType::bf16:
                return launch_kernel(stream, dependent, grid, vec, hints,
                                     kernel_args<__nv_bfloat16>(p, lanes, x, y, add));
        }
        HALO_EXPECTS(false, "unknown feature type ", static_cast<int>(x.type));
    }

    // Marks (kColdMark) the device indices of the nonzeros whose column is not among the `hot`
    // most-read ones: reads counted and indices marked on the device, the hot set picked on the
    // host from the counts (preprocess/hot_columns.hpp; mark_cold_columns there is the same on
    // the host). The host's indices stay unmarked.
    void mark_cold_columns(const Csr& a, std::int64_t hot)
    {
        HALO_EXPECTS(a.num_cols <= std::numeric_limits<std::int32_t>::max(),
                     "L2 hints past 2^31 - 1 columns");
        const cudaStream_t stream = ctx_.compute_stream();
        const std::int64_t nnz = a.nnz();
        DeviceBuffer<std::uint32_t> reads_d(ctx_, static_cast<std::size_t>(a.num_cols));
        HALO_CUDA_TRY(cudaMemsetAsync(reads_d.data(), 0, reads_d.bytes(), stream));
        if (nnz > 0) {
            count_column_reads<<<grid_for(nnz), kBlockThreads, 0, stream>>>(indices_d_.data(), nnz,
                                                                            reads_d.data());
            HALO_CUDA_CHECK_LAUNCH();
        }
        std::vector<std::uint32_t> reads(static_cast<std::size_t>(a.num_cols));
        if (!reads.empty()) {
            HALO_CUDA_TRY(cudaMemcpyAsync(reads.data(), reads_d.data(), reads_d.bytes(),
                                          cudaMemcpyDeviceToHost, stream));
        }
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
        const auto set = mergepath::hot_set(reads, hot);
        const auto is_hot_d = detail::upload(ctx_, set.is_hot);
        if (nnz > 0) {
            mark_cold_indices<<<grid_for(nnz), kBlockThreads, 0, stream>>>(indices_d_.data(), nnz,
                                                                           is_hot_d.data());
            HALO_CUDA_CHECK_LAUNCH();
        }
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));  // is_hot leaves scope
        marked_ = true;
        hot_columns_ = set.hot;
        hot_share_ = nnz == 0 ? 0.0 : static_cast<double>(set.hot_reads) / static_cast<double>(nnz);
    }

    // A row range's schedule on the host (kept: the kernel's scalars, and the source of the
    // asynchronous upload) and on the device.
    struct Prepared {
        mergepath::Schedule host;
        DeviceBuffer<std::int64_t> segment_rows;
        DeviceBuffer<std::int64_t> split_rows;
    };

    template <typename T>
    KernelArgs<T> kernel_args(const Prepared& p, std::int64_t lanes, FeatureView x,
                              DenseView<float> y, bool add) const
    {
        return {indptr_d_.data(),
                indices_d_.data(),
                values_d_.data(),
                scaling_d_.row.data(),
                scaling_d_.col.data(),
                p.segment_rows.data(),
                p.host.num_segments(),
                p.host.cost,
                p.host.items,
                p.host.range.begin,
                p.host.first_nonzero,
                lanes,
                x.cols,
                static_cast<const T*>(x.data),
                x.ld,
                y.data,
                y.ld,
                add};
    }

    std::int64_t cost_for(std::int64_t width) const
    {
        if (options_.wide_from > 0 && width >= options_.wide_from) {
            return options_.wide_cost;
        }
        return options_.cost > 0 ? options_.cost : mergepath::default_cost(width);
    }

    // The schedule of (rows, cost), made and uploaded on first use. Keyed by the requested cost:
    // effective_cost() depends only on the range, so the key determines the schedule.
    const Prepared& schedule(RowRange rows, std::int64_t cost)
    {
        const auto key = std::make_tuple(rows.begin, rows.end, cost);
        const auto found = prepared_.find(key);
        if (found != prepared_.end()) {
            return *found->second;
        }
        const CsrView pattern{num_rows_, num_cols_, indptr_.data(), nullptr, nullptr};
        const std::int64_t items = rows.size() + indptr_[rows.end] - indptr_[rows.begin];
        auto p = std::make_unique<Prepared>();
        p->host = mergepath::make_schedule(
            pattern, rows, mergepath::effective_cost(items, cost, options_.min_segments));
        p->segment_rows = detail::upload(ctx_, p->host.segment_rows);
        p->split_rows = detail::upload(ctx_, p->host.split_rows);
        const Prepared& ref = *p;
        prepared_.emplace(key, std::move(p));
        return ref;
    }

public:
    MemoryReport memory() const override
    {
        MemoryReport r;
        r.row_pointers = static_cast<std::int64_t>(indptr_d_.bytes());
        r.indices = static_cast<std::int64_t>(indices_d_.bytes());
        // 0 for a pattern operator; the scalings of a scaled one (rows + columns floats).
        r.values = static_cast<std::int64_t>(values_d_.bytes() + scaling_d_.bytes());
        r.nonzeros = static_cast<std::int64_t>(indices_d_.size());
        for (const auto& [key, p] : prepared_) {  // the merge-path schedules
            r.kernel_metadata +=
                static_cast<std::int64_t>(p->segment_rows.bytes() + p->split_rows.bytes());
        }
        return r;
    }

private:
    Context& ctx_;
    std::int64_t num_rows_ = 0;
    std::int64_t num_cols_ = 0;
    std::int64_t max_dim_ = 0;
    MergePathOptions options_;
    bool scaled_ = false;           // values made on the device from an OperatorScaling
    bool pattern_scaled_ = false;   // a pattern with an OperatorScaling: no values array
    bool marked_ = false;           // L2 hints: the device indices carry cold marks
    std::int64_t hot_columns_ = 0;  // the columns whose nonzeros are not marked cold
    double hot_share_ = 0.0;        // and their share of the nonzeros
    std::vector<offset_t> indptr_;  // host copy: the schedules of new ranges
    DeviceBuffer<std::int64_t> indptr_d_;
    DeviceBuffer<std::int32_t> indices_d_;
    DeviceBuffer<float> values_d_;     // empty for a pattern matrix or a pattern-scaled plan
    detail::DeviceScaling scaling_d_;  // a pattern-scaled plan's scalings
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::unique_ptr<Prepared>>
        prepared_;
};

}  // namespace

MergePathOptions with_large_x_hints(Context& ctx, std::int64_t max_dim, MergePathOptions options)
{
    const auto l2 = device_info(ctx.device()).l2_cache_bytes;
    options.hint_hot_bytes = static_cast<std::int64_t>(kHintHotShare * static_cast<double>(l2));
    options.hint_width = std::clamp<std::int64_t>(max_dim, 1, kSliceWidth);
    options.hint_min_x_bytes = kHintCacheFactor * l2;
    return options;
}

std::unique_ptr<SpmmPlan> make_mergepath_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                   const MergePathOptions& options,
                                                   const OperatorScaling* scaling)
{
    return std::make_unique<MergePathSpmmPlan>(ctx, a, max_dim, options, scaling);
}

MergePathOptions with_requested_hints(Context& ctx, const SpmmPlanRequest& request,
                                      std::int64_t max_dim, MergePathOptions options)
{
    return request.l2_hints ? with_large_x_hints(ctx, max_dim, options) : options;
}

// The registry's factories (halo/spmm_registry.hpp): the paper's per-width cost, and the larger
// fixed costs the autotuner also tries.

std::unique_ptr<SpmmPlan> mergepath_spmm_factory(Context& ctx, const Csr& a,
                                                 const SpmmPlanRequest& request)
{
    return make_mergepath_spmm_plan(ctx, a, request.max_dim,
                                    with_requested_hints(ctx, request, request.max_dim, {}));
}

std::unique_ptr<SpmmPlan> mergepath_c200_spmm_factory(Context& ctx, const Csr& a,
                                                      const SpmmPlanRequest& request)
{
    return make_mergepath_spmm_plan(
        ctx, a, request.max_dim,
        with_requested_hints(ctx, request, request.max_dim, MergePathOptions{.cost = 200}));
}

std::unique_ptr<SpmmPlan> mergepath_c400_spmm_factory(Context& ctx, const Csr& a,
                                                      const SpmmPlanRequest& request)
{
    return make_mergepath_spmm_plan(
        ctx, a, request.max_dim,
        with_requested_hints(ctx, request, request.max_dim, MergePathOptions{.cost = 400}));
}

// Cost 400 with L2 hints at every width (bench: the hints measured on any graph; with
// SpmmPlanRequest::l2_hints, the cost model and the autotuner's MergePath candidates hint where X
// is past 32x the L2 only).
std::unique_ptr<SpmmPlan> mergepath_c400_l2hints_spmm_factory(Context& ctx, const Csr& a,
                                                              const SpmmPlanRequest& request)
{
    auto options = with_large_x_hints(ctx, request.max_dim, MergePathOptions{.cost = 400});
    options.hint_min_x_bytes = 0;
    return make_mergepath_spmm_plan(ctx, a, request.max_dim, options);
}

std::unique_ptr<SpmmPlan> mergepath_scaled_factory(Context& ctx, const Csr& pattern,
                                                   const SpmmPlanRequest& request,
                                                   const OperatorScaling& scaling)
{
    MergePathOptions options;
    options.scaled_form = scaled_form(request);
    return make_mergepath_spmm_plan(ctx, pattern, request.max_dim,
                                    with_requested_hints(ctx, request, request.max_dim, options),
                                    &scaling);
}

}  // namespace halo::cuda
