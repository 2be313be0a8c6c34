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

template <typename Offset, int Group, int Vec, typename T>
__global__ void __launch_bounds__(kBlock)
    rowsplit_kernel(const Offset* __restrict__ offsets, Args<T> a)
{
    static_assert(kBlock % kWarp == 0 && kWarp % Group == 0, "groups must tile warps");
    const int lane = static_cast<int>(threadIdx.x) % Group;
    const int group_base = static_cast<int>(threadIdx.x) % kWarp - lane;
    const unsigned mask =
        Group == kWarp ? 0xffffffffu : ((1u << (Group % kWarp)) - 1u) << group_base;
    const std::int64_t thread = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::int64_t groups = static_cast<std::int64_t>(gridDim.x) * blockDim.x / Group;
    const std::int32_t* __restrict__ columns = a.columns;
    const float* __restrict__ values = a.values;
    const float* __restrict__ col_scale = a.col_scale;

    for (std::int64_t row = a.row_begin + thread / Group; row < a.row_end; row += groups) {
        const Offset start = offsets[row];
        const Offset stop = offsets[row + 1];
        for (std::int64_t chunk = 0; chunk < a.chunks; ++chunk) {
            const std::int64_t col = rowsplit::first_column(Group, Vec, chunk, lane);
            const bool active = col < a.width;
            const T* x_col = a.x + col;
            Acc<T, Vec> acc;
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
            if (active) {
                if (a.row_scale != nullptr) {
                    acc.scale(__ldg(a.row_scale + row));
                }
                acc.write(a.y + row * a.ldy + col, a.add);
            }
        }
    }
}

template <typename Offset, int Group, int Vec, typename T>
void launch(cudaStream_t stream, const Offset* offsets, const Args<T>& args)
{
    const std::int64_t rows = args.row_end - args.row_begin;
    const std::int64_t rows_per_block = kBlock / Group;
    const std::int64_t blocks = std::min((rows + rows_per_block - 1) / rows_per_block, kMaxBlocks);
    rowsplit_kernel<Offset, Group, Vec, T>
        <<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(offsets, args);
    HALO_CUDA_CHECK_LAUNCH();
}

template <typename Offset, int Vec, typename T>
void launch_group(cudaStream_t stream, int group, const Offset* offsets, const Args<T>& args)
{
    switch (group) {
        case 4:
            return launch<Offset, 4, Vec>(stream, offsets, args);
        case 8:
            return launch<Offset, 8, Vec>(stream, offsets, args);
        case 16:
            return launch<Offset, 16, Vec>(stream, offsets, args);
        case 32:
            return launch<Offset, 32, Vec>(stream, offsets, args);
        default:
            HALO_EXPECTS(false, "row-split group of ", group, " lanes is not instantiated");
    }
}

// fp32 features: 1 or 4 columns per lane; fp16/bf16: 1 or 8 (16-byte loads either way).
template <typename Offset, typename T>
void launch_layout(cudaStream_t stream, const rowsplit::Layout& layout, const Offset* offsets,
                   const Args<T>& args)
{
    constexpr int kWide = std::is_same_v<T, float> ? 4 : 8;
    HALO_EXPECTS(layout.vec == 1 || layout.vec == kWide, "row-split lanes of ", layout.vec,
                 " columns are not instantiated for this feature type");
    if (layout.vec == kWide) {
        launch_group<Offset, kWide>(stream, layout.group, offsets, args);
    } else {
        launch_group<Offset, 1>(stream, layout.group, offsets, args);
    }
}

class RowsplitSpmmPlan final : public FeatureSpmmPlan {
public:
    RowsplitSpmmPlan(Context& ctx, const Csr& a, std::int64_t max_dim, IndexWidth offsets,
                     const OperatorScaling* scaling, ScaledForm form)
        : ctx_(ctx), num_rows_(a.num_rows), num_cols_(a.num_cols), max_dim_(max_dim)
    {
        HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
        validate(a, "the operator of a row-split SpMM plan");
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
        return std::string(wide_ ? "rowsplit-i64" : "rowsplit") +
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
        return r;
    }

private:
    template <typename T>
    void dispatch(const rowsplit::Layout& layout, const Args<T>& args) const
    {
        if (wide_) {
            launch_layout(ctx_.compute_stream(), layout, offsets64_.data(), args);
        } else {
            launch_layout(ctx_.compute_stream(), layout, offsets32_.data(), args);
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
};

}  // namespace

std::unique_ptr<SpmmPlan> make_rowsplit_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                  IndexWidth offsets, const OperatorScaling* scaling,
                                                  ScaledForm form)
{
    return std::make_unique<RowsplitSpmmPlan>(ctx, a, max_dim, offsets, scaling, form);
}

std::unique_ptr<SpmmPlan> rowsplit_spmm_factory(Context& ctx, const Csr& a,
                                                const SpmmPlanRequest& request)
{
    return make_rowsplit_spmm_plan(ctx, a, request.max_dim);
}

std::unique_ptr<SpmmPlan> rowsplit_scaled_factory(Context& ctx, const Csr& pattern,
                                                  const SpmmPlanRequest& request,
                                                  const OperatorScaling& scaling)
{
    return make_rowsplit_spmm_plan(ctx, pattern, request.max_dim, IndexWidth::automatic, &scaling,
                                   scaled_form(request));
}

}  // namespace halo::cuda
