// The row-split SpMM plans (include/halo/kernels/cuda/rowsplit.hpp): the argument checks, the
// operator's upload (SpmmPlanBase), the chunked variant's long rows, units and workspace, and the
// registry's factories. Host code: the kernels and their launchers are in rowsplit.cu, whose header
// comment says how they work and how the unit length is chosen.
#include "halo/kernels/cuda/rowsplit.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda/primitives/feature_vec.hpp"
#include "cuda/primitives/upload.hpp"
#include "cuda/spmm/rowsplit_kernels.hpp"
#include "cuda/spmm/rowsplit_layout.hpp"
#include "cuda/spmm/spmm_plan_base.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo::cuda {
namespace {

using rowsplit_kernels::Chunks;

class RowsplitSpmmPlan final : public detail::SpmmPlanBase {
public:
    static constexpr std::int64_t kAutomaticChunk = -1;

    // chunk_length: 0 for the plain kernel; else the chunked one with units of that many
    // nonzeros (kAutomaticChunk: chunk_length_for()).
    RowsplitSpmmPlan(Context& ctx, const Csr& a, std::int64_t max_dim, IndexWidth offsets,
                     const OperatorScaling* scaling, ScaledForm form, std::int64_t chunk_length)
        : SpmmPlanBase(ctx, a, max_dim)
    {
        HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
        validate(a, chunk_length != 0 ? "the operator of a chunked row-split SpMM plan"
                                      : "the operator of a row-split SpMM plan");
        upload_operator(a, offsets, scaling, form);
        if (chunk_length != 0) {
            make_chunks(a,
                        chunk_length == kAutomaticChunk ? chunk_length_for(a.nnz()) : chunk_length);
        }
        finish_setup();
    }

    std::string algorithm() const override
    {
        const std::string base =
            chunked_ ? "rowchunk-" + std::to_string(chunk_length_) : std::string("rowsplit");
        return base + (wide_offsets() ? "-i64" : "") + form_suffix();
    }

private:
    void launch(FeatureView x, DenseView<float> y, RowRange rows, bool add) override
    {
        const std::int64_t width = x.cols;
        Chunks chunks;
        const Chunks* ch = nullptr;
        if (chunked_) {
            reserve_partial(width);
            chunks = chunks_for(rows);
            ch = &chunks;
        }
        rowsplit_kernels::launch_spmm(
            ctx_.compute_stream(),
            {.offsets32 = offsets32_.data(),
             .offsets64 = offsets64_.data(),
             .columns = columns_.data(),
             .values = values_.data(),
             .row_scale = scaling_.row.data(),
             .col_scale = scaling_.col.data(),
             .rows = rows,
             .x = x,
             .y = y,
             .add = add,
             .layout = rowsplit::make_layout(
                 width, detail::lane_columns(x.type, x.data, x.ld, y.data, y.ld, width))},
            ch);
    }

public:
    MemoryReport memory() const override
    {
        MemoryReport r = SpmmPlanBase::memory();
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
            first_unit_host_.push_back(static_cast<std::int32_t>(first_unit_host_.back() + units));
        }
        long_rows_host_ = rows;
        units_ = static_cast<std::int64_t>(unit_row.size());
        if (!rows.empty()) {
            long_rows_ = detail::upload(ctx_, rows);
            lengths_ = detail::upload(ctx_, lengths);
            first_unit_ = detail::upload(ctx_, first_unit_host_);
            unit_row_ = detail::upload(ctx_, unit_row);
            arrivals_ = DeviceBuffer<unsigned int>(ctx_, rows.size());
            HALO_CUDA_TRY(
                cudaMemsetAsync(arrivals_.data(), 0, arrivals_.bytes(), ctx_.compute_stream()));
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
        const auto lo =
            std::lower_bound(long_rows_host_.begin(), long_rows_host_.end(), rows.begin);
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

    // The chunked variant (make_chunks): empty for the plain kernel or without long rows.
    bool chunked_ = false;
    std::int64_t chunk_length_ = 0;
    std::int64_t units_ = 0;        // the long rows' units
    mutable std::int64_t ldp_ = 0;  // partial_'s row stride at the last run's width
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
                                                  IndexWidth offsets,
                                                  const OperatorScaling* scaling, ScaledForm form)
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
