// Row-split SpMM (include/halo/cuda/rowsplit.hpp): a group of lanes per row, lanes across the
// dense columns, the row's nonzeros loaded cooperatively and broadcast with warp shuffles.
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
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/primitives/cusparse_csr.hpp"  // upload_scaling, device_scaled_values
#include "cuda/primitives/feature_load.cuh"
#include "cuda/primitives/feature_vec.hpp"
#include "cuda/primitives/spmm_checks.hpp"
#include "cuda/primitives/upload.hpp"
#include "cuda/spmm/rowsplit_layout.hpp"
#include "halo/cuda/lowp_spmm.hpp"
#include "halo/cuda/rowsplit.hpp"
#include "halo/cuda_error.hpp"
#include "halo/error.hpp"
#include "halo/spmm_registry.hpp"

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
    __device__ void write(float* y, bool add) const { write_results<Vec>(y, v, add); }
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

// The chunked variant's long rows (header comment): rows, ascending; units
// [first_unit[k], first_unit[k + 1]) of long row k, each of lengths[k] nonzeros but the last
// (rowsplit::unit_length); unit_row[u] = k; the run's units are [unit_begin, unit_end) (those of
// its row range).
struct Chunks {
    const std::int64_t* rows = nullptr;
    const std::int64_t* lengths = nullptr;
    const std::int32_t* first_unit = nullptr;
    const std::int32_t* unit_row = nullptr;
    std::int64_t unit_begin = 0;
    std::int64_t unit_end = 0;
    std::int64_t length = 0;  // nonzeros per unit; rows with more are long
    float* partial = nullptr;  // unit u's sums at partial + u * ldp (ldp a multiple of 4)
    std::int64_t ldp = 0;
    unsigned int* arrivals = nullptr;  // per long row: units done in this launch (0 between)
};

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
    const std::int64_t items = chunks != nullptr
                                   ? (rows + chunks->unit_end - chunks->unit_begin) * args.chunks
                                   : rows;
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

class RowsplitSpmmPlan final : public FeatureSpmmPlan {
public:
    static constexpr std::int64_t kAutomaticChunk = -1;

    // chunk_length: 0 for the plain kernel; else the chunked one with units of that many
    // nonzeros (kAutomaticChunk: chunk_length_for()).
    RowsplitSpmmPlan(Context& ctx, const Csr& a, std::int64_t max_dim, IndexWidth offsets,
                     const OperatorScaling* scaling, ScaledForm form, std::int64_t chunk_length)
        : ctx_(ctx), num_rows_(a.num_rows), num_cols_(a.num_cols), max_dim_(max_dim)
    {
        HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
        validate(a, chunk_length != 0 ? "the operator of a chunked row-split SpMM plan"
                                      : "the operator of a row-split SpMM plan");
        const std::int64_t nnz = a.nnz();
        wide_ = offsets == IndexWidth::bits64 || nnz > std::int64_t{INT_MAX} - 2 * kWarp;
        const cudaStream_t stream = ctx_.compute_stream();

        if (wide_) {
            offsets64_ = detail::upload(ctx_, a.indptr);
        } else {
            const std::vector<std::int32_t> narrow(a.indptr.begin(), a.indptr.end());
            offsets32_ = detail::upload(ctx_, narrow);
        }
        columns_ = detail::upload(ctx_, a.indices);
        if (scaling != nullptr && !scaling->col.empty() && form == ScaledForm::automatic) {
            values_ = wide_ ? detail::device_scaled_values(ctx_, a, offsets64_.data(),
                                                           columns_.data(), *scaling)
                            : detail::device_scaled_values(ctx_, a, offsets32_.data(),
                                                           columns_.data(), *scaling);
            scaled_ = true;
        } else if (scaling != nullptr) {
            // Pattern-only: the scalings (rows + columns floats) instead of a values array; the
            // pattern's own values, if any, are ignored (Backend::make_scaled_spmm_plan).
            scaling_ = detail::upload_scaling(ctx_, a, *scaling);
            pattern_scaled_ = true;
        } else if (a.has_values()) {
            values_ = detail::upload(ctx_, a.values);
        }
        if (chunk_length != 0) {
            make_chunks(a, chunk_length == kAutomaticChunk ? chunk_length_for(nnz) : chunk_length);
        }
        // Once, at setup: any failure of the uploads surfaces here rather than in a later run.
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
    }

    RowsplitSpmmPlan(const RowsplitSpmmPlan&) = delete;
    RowsplitSpmmPlan& operator=(const RowsplitSpmmPlan&) = delete;

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
        const std::string base =
            chunked_ ? "rowchunk-" + std::to_string(chunk_length_) : std::string("rowsplit");
        return base + (wide_ ? "-i64" : "") +
               (pattern_scaled_ ? ", pattern with scalings"
                : scaled_        ? ", values made on the device"
                                 : "");
    }

private:
    void launch_rows(FeatureView x, DenseView<float> y, RowRange rows, bool add) const
    {
        if (!detail::check_feature_operands(x, y, rows, num_rows_, num_cols_, max_dim_)) {
            return;
        }
        const std::int64_t width = x.cols;
        HALO_EXPECTS(y.data != nullptr && (x.data != nullptr || num_cols_ == 0),
                     "null device operands");
        const auto layout = rowsplit::make_layout(
            width, detail::lane_columns(x.type, x.data, x.ld, y.data, y.ld, width));
        switch (x.type) {
            case FeatureType::fp32:
                return dispatch(layout, kernel_args<float>(layout, x, y, rows, add));
            case FeatureType::fp16:
                return dispatch(layout, kernel_args<__half>(layout, x, y, rows, add));
            case FeatureType::bf16:
                return dispatch(layout, kernel_args<__nv_bfloat16>(layout, x, y, rows, add));
        }
        HALO_EXPECTS(false, "unknown feature type ", static_cast<int>(x.type));
    }

    template <typename T>
    Args<T> kernel_args(const rowsplit::Layout& layout, FeatureView x, DenseView<float> y,
                        RowRange rows, bool add) const
    {
        return {static_cast<const T*>(x.data), x.ld, y.data, y.ld, rows.begin, rows.end,
                x.cols, layout.chunks, columns_.data(), values_.data(), scaling_.row.data(),
                scaling_.col.data(), add};
    }

public:
    MemoryReport memory() const override
    {
        MemoryReport r;
        r.row_pointers = static_cast<std::int64_t>(offsets32_.bytes() + offsets64_.bytes());
        r.indices = static_cast<std::int64_t>(columns_.bytes());
        // 0 for a pattern operator; the scalings of a scaled one (rows + columns floats).
        r.values = static_cast<std::int64_t>(values_.bytes() + scaling_.bytes());
        r.nonzeros = static_cast<std::int64_t>(columns_.size());
        r.kernel_metadata =
            static_cast<std::int64_t>(long_rows_.bytes() + lengths_.bytes() + first_unit_.bytes() +
                                      unit_row_.bytes() + arrivals_.bytes());
        r.workspace = static_cast<std::int64_t>(partial_.bytes());
        return r;
    }

    /// The automatic unit length of an operator of `nnz` nonzeros (header comment).
    static std::int64_t chunk_length_for(std::int64_t nnz)
    {
        const std::int64_t base = nnz < (std::int64_t{1} << 16)   ? 8
                                  : nnz < (std::int64_t{1} << 19) ? 32
                                                                   : 64;
        return std::max(base, (nnz + kMaxUnits - 1) / kMaxUnits);
    }

private:
    // Units beyond the long rows' own last ones: the workspace stays below 2 * kMaxUnits slots.
    static constexpr std::int64_t kMaxUnits = 32768;

    // The long rows (more than `length` nonzeros), their units, the workspace and the counters.
    void make_chunks(const Csr& a, std::int64_t length)
    {
        chunked_ = true;
        chunk_length_ = length;
        std::vector<std::int64_t> rows;
        std::vector<std::int64_t> lengths;
        std::vector<std::int32_t> unit_row;
        first_unit_host_.assign(1, 0);
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            const std::int64_t degree = a.indptr[i + 1] - a.indptr[i];
            if (degree <= length) {
                continue;
            }
            const std::int64_t unit = rowsplit::unit_length(degree, length);
            const std::int64_t units = (degree + unit - 1) / unit;
            lengths.push_back(unit);
            HALO_EXPECTS(first_unit_host_.back() + units < std::int64_t{INT_MAX},
                         "rowchunk plan: more than 2^31 units");
            unit_row.insert(unit_row.end(), static_cast<std::size_t>(units),
                            static_cast<std::int32_t>(rows.size()));
            rows.push_back(i);
            first_unit_host_.push_back(
                static_cast<std::int32_t>(first_unit_host_.back() + units));
        }
        long_rows_host_ = rows;
        units_ = static_cast<std::int64_t>(unit_row.size());
        if (!rows.empty()) {
            long_rows_ = detail::upload(ctx_, rows);
            lengths_ = detail::upload(ctx_, lengths);
            first_unit_ = detail::upload(ctx_, first_unit_host_);
            unit_row_ = detail::upload(ctx_, unit_row);
            arrivals_ = DeviceBuffer<unsigned int>(ctx_, rows.size());
            HALO_CUDA_TRY(cudaMemsetAsync(arrivals_.data(), 0, arrivals_.bytes(),
                                          ctx_.compute_stream()));
        }
    }

    // The units' partial sums at `width`: allocated for the widest run so far, not for max_dim
    // (the backend's plans take widths up to 2^20: sized for that, the autotuner's rowchunk
    // candidate held 26 GiB on R-MAT 22 where its runs used a few MiB). Stream-ordered: a
    // smaller buffer replaced is freed after the runs that used it.
    void reserve_partial(std::int64_t width) const
    {
        const auto ldp = (width + 3) / 4 * 4;
        const auto needed = static_cast<std::size_t>(units_ * ldp);
        if (needed > partial_.size()) {
            partial_ = DeviceBuffer<float>(ctx_, needed);
        }
        ldp_ = ldp;
    }

    // The chunks of a run over `rows`: the units of the long rows inside the range.
    Chunks chunks_for(RowRange rows) const
    {
        const auto lo = std::lower_bound(long_rows_host_.begin(), long_rows_host_.end(), rows.begin);
        const auto hi = std::lower_bound(lo, long_rows_host_.end(), rows.end);
        Chunks c;
        c.rows = long_rows_.data();
        c.lengths = lengths_.data();
        c.first_unit = first_unit_.data();
        c.unit_row = unit_row_.data();
        c.unit_begin = first_unit_host_[static_cast<std::size_t>(lo - long_rows_host_.begin())];
        c.unit_end = first_unit_host_[static_cast<std::size_t>(hi - long_rows_host_.begin())];
        c.length = chunk_length_;
        c.partial = partial_.data();
        c.ldp = ldp_;
        c.arrivals = arrivals_.data();
        return c;
    }

    template <typename T>
    void dispatch(const rowsplit::Layout& layout, const Args<T>& args) const
    {
        Chunks chunks;
        const Chunks* ch = nullptr;
        if (chunked_) {
            reserve_partial(args.width);
            chunks = chunks_for(RowRange{args.row_begin, args.row_end});
            ch = &chunks;
        }
        if (wide_) {
            launch_layout(ctx_.compute_stream(), layout, offsets64_.data(), args, ch);
        } else {
            launch_layout(ctx_.compute_stream(), layout, offsets32_.data(), args, ch);
        }
    }

    Context& ctx_;
    std::int64_t num_rows_ = 0;
    std::int64_t num_cols_ = 0;
    std::int64_t max_dim_ = 0;
    bool wide_ = false;
    bool scaled_ = false;          // values made on the device from an OperatorScaling
    bool pattern_scaled_ = false;  // a pattern with an OperatorScaling: no values array
    DeviceBuffer<std::int32_t> offsets32_;
    DeviceBuffer<std::int64_t> offsets64_;
    DeviceBuffer<std::int32_t> columns_;
    DeviceBuffer<float> values_;     // empty for a pattern matrix or a pattern-scaled plan
    detail::DeviceScaling scaling_;  // a pattern-scaled plan's scalings
    // The chunked variant (make_chunks): empty for the plain kernel or without long rows.
    bool chunked_ = false;
    std::int64_t chunk_length_ = 0;
    std::int64_t units_ = 0;             // the long rows' units
    mutable std::int64_t ldp_ = 0;       // partial_'s row stride at the last run's width
    std::vector<std::int64_t> long_rows_host_;
    std::vector<std::int32_t> first_unit_host_;
    DeviceBuffer<std::int64_t> long_rows_;
    DeviceBuffer<std::int64_t> lengths_;
    DeviceBuffer<std::int32_t> first_unit_;
    DeviceBuffer<std::int32_t> unit_row_;
    mutable DeviceBuffer<float> partial_;  // reserve_partial
    DeviceBuffer<unsigned int> arrivals_;
};

}  // namespace

std::unique_ptr<SpmmPlan> make_rowsplit_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                  IndexWidth offsets, const OperatorScaling* scaling,
                                                  ScaledForm form)
{
    return std::make_unique<RowsplitSpmmPlan>(ctx, a, max_dim, offsets, scaling, form, 0);
}

std::unique_ptr<SpmmPlan> make_rowchunk_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                  const RowchunkOptions& options,
                                                  const OperatorScaling* scaling, ScaledForm form)
{
    if (options.length < 0) {
        HALO_THROW(InputError, "rowchunk plan: unit length ", options.length,
                   " must be positive (or 0 for the automatic length)");
    }
    return std::make_unique<RowsplitSpmmPlan>(
        ctx, a, max_dim, options.offsets, scaling, form,
        options.length > 0 ? options.length : RowsplitSpmmPlan::kAutomaticChunk);
}

std::int64_t rowchunk_length(std::int64_t nnz)
{
    return RowsplitSpmmPlan::chunk_length_for(nnz);
}

std::unique_ptr<SpmmPlan> rowsplit_spmm_factory(Context& ctx, const Csr& a,
                                                const SpmmPlanRequest& request)
{
    return make_rowsplit_spmm_plan(ctx, a, request.max_dim);
}

std::unique_ptr<SpmmPlan> rowchunk_spmm_factory(Context& ctx, const Csr& a,
                                                const SpmmPlanRequest& request)
{
    return make_rowchunk_spmm_plan(ctx, a, request.max_dim);
}

std::unique_ptr<SpmmPlan> rowchunk_scaled_factory(Context& ctx, const Csr& pattern,
                                                  const SpmmPlanRequest& request,
                                                  const OperatorScaling& scaling)
{
    return make_rowchunk_spmm_plan(ctx, pattern, request.max_dim, {}, &scaling,
                                   scaled_form(request));
}

std::unique_ptr<SpmmPlan> rowsplit_scaled_factory(Context& ctx, const Csr& pattern,
                                                  const SpmmPlanRequest& request,
                                                  const OperatorScaling& scaling)
{
    return make_rowsplit_spmm_plan(ctx, pattern, request.max_dim, IndexWidth::automatic, &scaling,
                                   scaled_form(request));
}

}  // namespace halo::cuda
