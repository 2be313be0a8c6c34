// The resident-slice SpMM plan (include/halo/kernels/cuda/resident.hpp): the argument checks and
// the column limit, the scalings' upload (SpmmPlanBase), the chunk layout of each row range (built
// on the host, uploaded once), and the registry's factories. Host code: the kernel and its launcher
// are in resident.cu, whose header comment says why and how it works.
#include "halo/kernels/cuda/resident.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/primitives/upload.hpp"
#include "cuda/spmm/resident_kernels.hpp"
#include "cuda/spmm/spmm_plan_base.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/spmm_registry.hpp"
#include "preprocess/resident_layout.hpp"

namespace halo::cuda {
namespace {

using resident_kernels::kRowBytes;

// A range's layout on the device.
struct DeviceLayout {
    std::int64_t chunks = 0;
    DeviceBuffer<std::int64_t> chunk_start;
    DeviceBuffer<std::int32_t> lane_row;
    DeviceBuffer<std::int32_t> lane_info;
    DeviceBuffer<std::uint16_t> columns;
    DeviceBuffer<float> values;
};

int max_shared_bytes(int device)
{
    int bytes = 0;
    HALO_CUDA_TRY(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    // The kernel's static shared memory (the part bounds) comes out of the same budget.
    return bytes - 64;
}

class ResidentSpmmPlan final : public detail::SpmmPlanBase {
public:
    ResidentSpmmPlan(Context& ctx, const Csr& a, std::int64_t max_dim,
                     const ResidentOptions& options, const OperatorScaling* scaling,
                     const std::vector<RowRange>& ranges)
        : SpmmPlanBase(ctx, a, max_dim), options_(options)
    {
        HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
        if (options.segment < 0) {
            HALO_THROW(InputError, "resident SpMM plan: segment limit ", options.segment,
                       " must be positive (or 0 for the automatic limit)");
        }
        // The column limit first: refusing a large operator costs no pass over its nonzeros.
        const std::int64_t limit = resident_max_columns(ctx_.device());
        if (a.num_cols > limit) {
            HALO_THROW(InputError, "resident SpMM plan: the operator's ", a.num_cols,
                       " columns need ", (a.num_cols + 1) * static_cast<std::int64_t>(kRowBytes),
                       " bytes of shared memory a block for their X slices; device ", ctx_.device(),
                       " allows ", limit, " columns");
        }
        validate(a, "the operator of a resident-slice SpMM plan");
        occupancy_.device = ctx_.device();
        occupancy_.shared_bytes =
            static_cast<std::size_t>(a.num_cols + 1) * kRowBytes;  // + the zero row
        host_ = a;  // only once the operator is known to fit
        if (scaling != nullptr) {
            upload_scaling(a, *scaling);
            host_.values.clear();  // the pattern's own values, if any, are ignored
        }
        HALO_CUDA_TRY(cudaDeviceGetAttribute(&occupancy_.multiprocessors,
                                             cudaDevAttrMultiProcessorCount, ctx_.device()));
        layout_for({0, a.num_rows});
        for (const auto& r : ranges) {
            if (r.begin >= 0 && r.begin <= r.end && r.end <= a.num_rows) {
                layout_for(r);
            }
        }
        finish_setup();
    }

    std::string algorithm() const override
    {
        // The whole operator's segment limit (a range's layout takes its own nonzeros' limit).
        const std::int64_t segment =
            options_.segment > 0 ? options_.segment : resident::segment_limit(host_.nnz());
        return "resident-s" + std::to_string(segment) + (options_.schedule ? "" : "-unscheduled") +
               form_suffix();
    }

    MemoryReport memory() const override
    {
        MemoryReport r = SpmmPlanBase::memory();  // the scalings of a scaled one
        std::int64_t metadata = 0;
        std::int64_t columns = 0;
        std::int64_t values = 0;
        for (const auto& [range, l] : layouts_) {
            metadata += static_cast<std::int64_t>(l.chunk_start.bytes() + l.lane_row.bytes() +
                                                  l.lane_info.bytes());
            columns += static_cast<std::int64_t>(l.columns.bytes());
            values += static_cast<std::int64_t>(l.values.bytes());
        }
        r.indices = columns;
        r.values += values;
        r.nonzeros = host_.nnz();
        r.kernel_metadata = metadata;
        return r;
    }

private:
    const DeviceLayout& layout_for(RowRange rows)
    {
        const auto key = std::make_pair(rows.begin, rows.end);
        const auto found = layouts_.find(key);
        if (found != layouts_.end()) {
            return found->second;
        }
        const auto h =
            resident::build_layout(host_.view(), rows, options_.segment, options_.schedule);
        DeviceLayout d;
        d.chunks = h.num_chunks();
        d.chunk_start = detail::upload(ctx_, h.chunk_start);
        d.lane_row = detail::upload(ctx_, h.lane_row);
        d.lane_info = detail::upload(ctx_, h.lane_info);
        d.columns = detail::upload(ctx_, h.columns);
        d.values = detail::upload(ctx_, h.values);
        // The uploads stage pageable sources before returning: h may go.
        return layouts_.emplace(key, std::move(d)).first->second;
    }

    void launch(FeatureView x, DenseView<float> y, RowRange rows, bool add) override
    {
        const DeviceLayout& l = layout_for(rows);
        resident_kernels::launch_spmm(ctx_.compute_stream(),
                                      {.x = x,
                                       .y = y,
                                       .num_cols = host_.num_cols,
                                       .chunk_start = l.chunk_start.data(),
                                       .chunks = l.chunks,
                                       .lane_row = l.lane_row.data(),
                                       .lane_info = l.lane_info.data(),
                                       .columns = l.columns.data(),
                                       .values = l.values.data(),
                                       .row_scale = scaling_.row.data(),
                                       .col_scale = scaling_.col.data(),
                                       .add = add},
                                      occupancy_);
    }

    ResidentOptions options_;
    Csr host_;  // the operator, for the layouts of ranges first run later
    resident_kernels::Occupancy occupancy_;
    std::map<std::pair<std::int64_t, std::int64_t>, DeviceLayout> layouts_;
};

}  // namespace

std::int64_t resident_max_columns(int index)
{
    return max_shared_bytes(index) / static_cast<std::int64_t>(kRowBytes) - 1;  // the zero row
}

std::unique_ptr<SpmmPlan> make_resident_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                  const ResidentOptions& options,
                                                  const OperatorScaling* scaling,
                                                  const std::vector<RowRange>& ranges)
{
    return std::make_unique<ResidentSpmmPlan>(ctx, a, max_dim, options, scaling, ranges);
}

std::unique_ptr<SpmmPlan> resident_spmm_factory(Context& ctx, const Csr& a,
                                                const SpmmPlanRequest& request)
{
    return make_resident_spmm_plan(ctx, a, request.max_dim, {}, nullptr, request.hints.ranges);
}

std::unique_ptr<SpmmPlan> resident_csr_order_spmm_factory(Context& ctx, const Csr& a,
                                                          const SpmmPlanRequest& request)
{
    return make_resident_spmm_plan(ctx, a, request.max_dim, {.schedule = false}, nullptr,
                                   request.hints.ranges);
}

std::unique_ptr<SpmmPlan> resident_scaled_factory(Context& ctx, const Csr& pattern,
                                                  const SpmmPlanRequest& request,
                                                  const OperatorScaling& scaling)
{
    return make_resident_spmm_plan(ctx, pattern, request.max_dim, {}, &scaling,
                                   request.hints.ranges);
}

}  // namespace halo::cuda
