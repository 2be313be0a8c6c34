// MergePath-SpMM (paper 003, Algorithm 2 with section III-C's thread mapping) and its plan.
//
// Choices:
// - Schedule: the merge-path partition comes from the host (mergepath_schedule.cpp): only each
//   segment's start row is stored; its start nonzero follows from the diagonal. A row range and a
//   cost make one schedule, prepared once and cached (the full range at plan creation).
// - Split rows: a row whose nonzeros lie in several segments is zeroed by a small kernel over the
//   split rows only, then each segment adds its part with one atomicAdd per element (the paper's
//   T[0, :] / T[1, :] accumulate in registers first). Every other row gets one plain store from
//   the segment holding its start and end, so no other row of y is read or zeroed.
// - Mapping by width d: a lane owns 4 consecutive columns (float4 loads and stores) when d, both
//   leading dimensions and both base pointers allow 16-byte accesses, else 1 column; with c
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
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "halo/cuda/mergepath.hpp"
#include "halo/cuda_error.hpp"
#include "halo/error.hpp"
#include "mergepath_schedule.hpp"
#include "spmm_checks.hpp"

namespace halo::cuda {
namespace {

constexpr int kBlockThreads = 256;
// Grid-stride loops beyond this many blocks (any larger grid only adds block scheduling).
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 22;
// Widths above this all share default_cost()'s last class, so scanning 1..kLastCostClass finds
// every default cost that a plan can use.
constexpr std::int64_t kLastCostClass = 65;

struct KernelArgs {
    const std::int64_t* indptr;
    const std::int32_t* indices;
    const float* values;  // null: pattern matrix
    const std::int64_t* segment_rows;
    std::int64_t num_segments;
    std::int64_t cost;
    std::int64_t items;
    std::int64_t range_begin;
    std::int64_t first_nonzero;
    std::int64_t lanes;  // per segment
    std::int64_t width;
    const float* x;
    std::int64_t ldx;
    float* y;
    std::int64_t ldy;
};

// Columns per lane: 4 (one float4) when the width, both leading dimensions and both base
// pointers allow 16-byte accesses, else 1.
template <int kVec>
struct Lanes;
template <>
struct Lanes<1> {
    using type = float;
    __device__ static type zero() { return 0.0f; }
    __device__ static type load(const float* p) { return __ldg(p); }
    __device__ static void fma(float a, type x, type& acc) { acc = fmaf(a, x, acc); }
    __device__ static void add(type x, type& acc) { acc += x; }
    __device__ static void store(float* p, type v) { *p = v; }
    __device__ static void atomic_add(float* p, type v) { atomicAdd(p, v); }
};
template <>
struct Lanes<4> {
    using type = float4;
    __device__ static type zero() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
    __device__ static type load(const float* p)
    {
        return __ldg(reinterpret_cast<const float4*>(p));
    }
    __device__ static void fma(float a, type x, type& acc)
    {
        acc.x = fmaf(a, x.x, acc.x);
        acc.y = fmaf(a, x.y, acc.y);
        acc.z = fmaf(a, x.z, acc.z);
        acc.w = fmaf(a, x.w, acc.w);
    }
    __device__ static void add(type x, type& acc)
    {
        acc.x += x.x;
        acc.y += x.y;
        acc.z += x.z;
        acc.w += x.w;
    }
    __device__ static void store(float* p, type v) { *reinterpret_cast<float4*>(p) = v; }
    __device__ static void atomic_add(float* p, type v)
    {
        atomicAdd(p, v.x);
        atomicAdd(p + 1, v.y);
        atomicAdd(p + 2, v.z);
        atomicAdd(p + 3, v.w);
    }
};

template <bool kValued, int kVec>
__device__ __forceinline__ typename Lanes<kVec>::type row_sum(const KernelArgs& k,
                                                              std::int64_t from, std::int64_t to,
                                                              std::int64_t col)
{
    // Unrolled so that several independent index -> x gathers are in flight per lane; x, the
    // matrix and the schedule are read-only for the whole kernel (read-only cache loads).
    using L = Lanes<kVec>;
    auto acc = L::zero();
#pragma unroll 4
    for (std::int64_t j = from; j < to; ++j) {
        const auto xv =
            L::load(k.x + static_cast<std::int64_t>(__ldg(k.indices + j)) * k.ldx + col);
        if constexpr (kValued) {
            L::fma(__ldg(k.values + j), xv, acc);
        } else {
            L::add(xv, acc);
        }
    }
    return acc;
}

template <bool kValued, int kVec>
__global__ void __launch_bounds__(kBlockThreads) mergepath_spmm_kernel(const KernelArgs k)
{
    using L = Lanes<kVec>;
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
        for (std::int64_t r = row_begin; r < row_end; ++r) {
            const std::int64_t next = __ldg(k.indptr + r + 1);
            float* out = k.y + r * k.ldy + col;
            if (r == row_begin && j > __ldg(k.indptr + r)) {
                // Partial start row (Algorithm 2, lines 2-10): zeroed by the pre-pass.
                if (j < next) {
                    L::atomic_add(out, row_sum<kValued, kVec>(k, j, next, col));
                }
            } else {
                L::store(out, row_sum<kValued, kVec>(k, j, next, col));
            }
            j = next;
        }
        if (j < nz_end) {
            // Partial end row (lines 11-13), continued by the next segment(s).
            L::atomic_add(k.y + row_end * k.ldy + col, row_sum<kValued, kVec>(k, j, nz_end, col));
        }
    }
}

__global__ void __launch_bounds__(kBlockThreads)
    zero_rows_kernel(const std::int64_t* rows, std::int64_t count, std::int64_t width, float* y,
                     std::int64_t ldy)
{
    const std::int64_t total = count * width;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
         t < total; t += stride) {
        const std::int64_t i = t / width;
        y[rows[i] * ldy + (t - i * width)] = 0.0f;
    }
}

unsigned int grid_for(std::int64_t threads)
{
    const std::int64_t blocks = (threads + kBlockThreads - 1) / kBlockThreads;
    return static_cast<unsigned int>(std::clamp<std::int64_t>(blocks, 1, kMaxBlocks));
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

class MergePathSpmmPlan final : public SpmmPlan {
public:
    MergePathSpmmPlan(Context& ctx, const Csr& a, std::int64_t max_dim,
                      const MergePathOptions& options)
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
        validate(a, "the operator of a MergePath-SpMM plan");
        const cudaStream_t stream = ctx_.compute_stream();
        indptr_d_ = DeviceBuffer<std::int64_t>(ctx_, indptr_.size());
        HALO_CUDA_TRY(cudaMemcpyAsync(indptr_d_.data(), indptr_.data(), indptr_d_.bytes(),
                                      cudaMemcpyHostToDevice, stream));
        indices_d_ = DeviceBuffer<std::int32_t>(ctx_, a.indices.size());
        if (!a.indices.empty()) {
            HALO_CUDA_TRY(cudaMemcpyAsync(indices_d_.data(), a.indices.data(), indices_d_.bytes(),
                                          cudaMemcpyHostToDevice, stream));
        }
        if (a.has_values()) {
            values_d_ = DeviceBuffer<float>(ctx_, a.values.size());
            HALO_CUDA_TRY(cudaMemcpyAsync(values_d_.data(), a.values.data(), values_d_.bytes(),
                                          cudaMemcpyHostToDevice, stream));
        }
        std::set<std::int64_t> costs;
        for (std::int64_t w = 1; w <= std::min(max_dim, kLastCostClass); ++w) {
            costs.insert(cost_for(w));
        }
        for (const std::int64_t cost : costs) {
            (void)schedule(a.view().all_rows(), cost);
        }
        // Once, at setup: a failed upload surfaces here rather than in a later run.
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
    }

    MergePathSpmmPlan(const MergePathSpmmPlan&) = delete;
    MergePathSpmmPlan& operator=(const MergePathSpmmPlan&) = delete;

    void run(DenseView<const float> x, DenseView<float> y, RowRange rows) override
    {
        detail::check_spmm_operands(x, y, rows, num_rows_, num_cols_, max_dim_);
        const std::int64_t width = x.cols;
        if (rows.empty() || width == 0) {
            return;
        }
        const Prepared& p = schedule(rows, cost_for(width));
        const cudaStream_t stream = ctx_.compute_stream();
        const auto num_split = static_cast<std::int64_t>(p.host.split_rows.size());
        if (num_split > 0) {
            zero_rows_kernel<<<grid_for(num_split * width), kBlockThreads, 0, stream>>>(
                p.split_rows.data(), num_split, width, y.data, y.ld);
            HALO_CUDA_CHECK_LAUNCH();
        }
        // float4 lanes when every access of a lane's four columns is 16-byte aligned.
        const bool vec4 = width % 4 == 0 && x.ld % 4 == 0 && y.ld % 4 == 0 &&
                          reinterpret_cast<std::uintptr_t>(x.data) % 16 == 0 &&
                          reinterpret_cast<std::uintptr_t>(y.data) % 16 == 0;
        const std::int64_t lanes = lanes_per_segment(vec4 ? width / 4 : width);
        const KernelArgs args{indptr_d_.data(),
                              indices_d_.data(),
                              values_d_.data(),
                              p.segment_rows.data(),
                              p.host.num_segments(),
                              p.host.cost,
                              p.host.items,
                              p.host.range.begin,
                              p.host.first_nonzero,
                              lanes,
                              width,
                              x.data,
                              x.ld,
                              y.data,
                              y.ld};
        const unsigned int grid = grid_for(p.host.num_segments() * lanes);
        const bool valued = values_d_.data() != nullptr;
        if (valued && vec4) {
            mergepath_spmm_kernel<true, 4><<<grid, kBlockThreads, 0, stream>>>(args);
        } else if (valued) {
            mergepath_spmm_kernel<true, 1><<<grid, kBlockThreads, 0, stream>>>(args);
        } else if (vec4) {
            mergepath_spmm_kernel<false, 4><<<grid, kBlockThreads, 0, stream>>>(args);
        } else {
            mergepath_spmm_kernel<false, 1><<<grid, kBlockThreads, 0, stream>>>(args);
        }
        HALO_CUDA_CHECK_LAUNCH();
    }

    std::string algorithm() const override
    {
        return options_.cost > 0 ? "mergepath-cost" + std::to_string(options_.cost) : "mergepath";
    }

private:
    // A row range's schedule on the host (kept: the kernel's scalars, and the source of the
    // asynchronous upload) and on the device.
    struct Prepared {
        mergepath::Schedule host;
        DeviceBuffer<std::int64_t> segment_rows;
        DeviceBuffer<std::int64_t> split_rows;
    };

    std::int64_t cost_for(std::int64_t width) const
    {
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
        const cudaStream_t stream = ctx_.compute_stream();
        p->segment_rows = DeviceBuffer<std::int64_t>(ctx_, p->host.segment_rows.size());
        HALO_CUDA_TRY(cudaMemcpyAsync(p->segment_rows.data(), p->host.segment_rows.data(),
                                      p->segment_rows.bytes(), cudaMemcpyHostToDevice, stream));
        p->split_rows = DeviceBuffer<std::int64_t>(ctx_, p->host.split_rows.size());
        if (!p->host.split_rows.empty()) {
            HALO_CUDA_TRY(cudaMemcpyAsync(p->split_rows.data(), p->host.split_rows.data(),
                                          p->split_rows.bytes(), cudaMemcpyHostToDevice, stream));
        }
        const Prepared& ref = *p;
        prepared_.emplace(key, std::move(p));
        return ref;
    }

    Context& ctx_;
    std::int64_t num_rows_ = 0;
    std::int64_t num_cols_ = 0;
    std::int64_t max_dim_ = 0;
    MergePathOptions options_;
    std::vector<offset_t> indptr_;  // host copy: the schedules of new ranges
    DeviceBuffer<std::int64_t> indptr_d_;
    DeviceBuffer<std::int32_t> indices_d_;
    DeviceBuffer<float> values_d_;  // empty for a pattern matrix
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::unique_ptr<Prepared>>
        prepared_;
};

}  // namespace

std::unique_ptr<SpmmPlan> make_mergepath_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                   const MergePathOptions& options)
{
    return std::make_unique<MergePathSpmmPlan>(ctx, a, max_dim, options);
}

}  // namespace halo::cuda
