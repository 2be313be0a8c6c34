// MaxK on the GPU, host side (include/halo/kernels/cuda/maxk.hpp): the device CBSR, the top-k entry
// point, and the SSD plan: operator and edge groups uploaded once (groups packed into 16-byte
// records), the shared rows listed for the zeroing that atomic-aware runs need, and per run the
// group slice of the row range, the zeroing, and the variant's launch (maxk.cu).
//
// Row ranges: groups are ordered by row, so a range is one contiguous slice of them (binary
// search on the host copy of the group rows), and its shared rows one slice of the sorted list.
// The ordered ranges (SsdOptions::ordered_ranges, else all rows) also have their groups' indices
// longest first (halo::longest_first), one slice each of one device array; a longest-first run
// over exactly such a range reads its groups through that slice, any other run by row.
// Atomic-always variants zero the whole range first (cudaMemset2DAsync over the width only);
// atomic-aware ones zero only the shared rows, every other row being written by a plain store of
// its single group (empty rows included: they have one group of 0 nonzeros); their kernel is the
// zeroing's programmatic dependent, which accumulates while the zeroing runs.
#include "halo/kernels/cuda/maxk.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/maxk/maxk_kernels.hpp"
#include "cuda/primitives/upload.hpp"
#include "cuda/primitives/zero_rows.hpp"
#include "halo/core/enum_names.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda {
namespace {

using detail::upload;

bool uses_slots(SsdVariant v)
{
    return v == SsdVariant::decoupled || v == SsdVariant::no_atomic_aware;
}

bool atomic_aware(SsdVariant v)
{
    return v == SsdVariant::decoupled || v == SsdVariant::no_slots;
}

// What one run launches.
struct Resolved {
    SsdVariant variant = SsdVariant::decoupled;
    int warps = 0;
    int slots = 1;
};

class SsdPlanImpl final : public DeviceSsdPlan {
public:
    SsdPlanImpl(Context& ctx, const Csr& a, std::int64_t max_dim, EdgeGroups groups,
                const SsdLaunch& launch, std::vector<RowRange> ordered_ranges)
        : ctx_(ctx),
          num_rows_(a.num_rows),
          num_cols_(a.num_cols),
          max_dim_(max_dim),
          launch_(launch),
          groups_(std::move(groups))
    {
        // The factories validated `a` (the groups are built from or checked against it).
        HALO_EXPECTS(max_dim >= 1 && max_dim <= kMaxkMaxDim, "max_dim ", max_dim, " outside [1, ",
                     kMaxkMaxDim, "]");
        validate(launch_);
        validate(groups_, a.view(), "the edge groups of an SSD plan");

        std::vector<detail::SsdGroup> packed(static_cast<std::size_t>(groups_.size()));
        for (std::int64_t q = 0; q < groups_.size(); ++q) {
            packed[q].row = groups_.row[q];
            packed[q].count_mode =
                static_cast<std::int32_t>(static_cast<std::uint32_t>(groups_.count[q]) |
                                          (groups_.update_mode[q] != 0 ? 0x80000000u : 0u));
            packed[q].first = groups_.first[q];
        }
        shared_rows_ = shared_rows(groups_);
        if (ordered_ranges.empty()) {
            ordered_ranges.push_back({0, num_rows_});
        }
        std::vector<std::int32_t> order;
        // int32 group indices: past 2^31 groups every run takes its groups by row.
        if (groups_.size() > std::int64_t{INT32_MAX} + 1) {
            ordered_ranges.clear();
        }
        for (const auto& rows : ordered_ranges) {
            if (rows.begin < 0 || rows.begin > rows.end || rows.end > num_rows_) {
                HALO_THROW(InputError, "SSD plan: ordered row range [", rows.begin, ", ", rows.end,
                           ") outside [0, ", num_rows_, "]");
            }
            const auto slice = longest_first(groups_, edge_group_range(groups_, rows));
            ordered_.push_back({rows, static_cast<std::int64_t>(order.size()),
                                static_cast<std::int64_t>(slice.size())});
            order.insert(order.end(), slice.begin(), slice.end());
        }
        valued_ = a.has_values();
        indices_ = upload(ctx_, a.indices);
        values_ = upload(ctx_, a.values);
        groups_device_ = upload(ctx_, packed);
        order_device_ = upload(ctx_, order);
        shared_rows_device_ = upload(ctx_, shared_rows_);
        HALO_CUDA_TRY(cudaDeviceGetAttribute(
            &shared_optin_, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx_.device()));
        // Once, at setup: a failed upload surfaces here rather than in a later run.
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream()));
    }

    SsdPlanImpl(const SsdPlanImpl&) = delete;
    SsdPlanImpl& operator=(const SsdPlanImpl&) = delete;

    void run(CbsrView<const float> s, DenseView<float> out, RowRange rows) override
    {
        run(s, out, rows, launch_);
    }

    void run(CbsrView<const float> s, DenseView<float> out, RowRange rows,
             const SsdLaunch& launch) override
    {
        check_cbsr_shape(s.rows, s.dim, s.k);
        HALO_EXPECTS(s.dim <= max_dim_, "width ", s.dim, " exceeds the plan's max_dim ", max_dim_);
        HALO_EXPECTS(s.rows >= num_cols_, "S has ", s.rows, " rows, A has ", num_cols_, " columns");
        HALO_EXPECTS(out.rows >= num_rows_, "out has ", out.rows, " rows, A has ", num_rows_);
        HALO_EXPECTS(out.cols == s.dim, "out has ", out.cols, " columns, S is ", s.dim, " wide");
        HALO_EXPECTS(out.ld >= out.cols, "leading dimension ", out.ld, " below the width ",
                     out.cols);
        HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= num_rows_,
                     "row range [", rows.begin, ", ", rows.end, ") outside [0, ", num_rows_, ")");
        if (rows.empty()) {
            return;
        }
        const Resolved r = resolve(launch, s.dim, s.k);
        const cudaStream_t stream = ctx_.compute_stream();
        const int dim = static_cast<int>(s.dim);

        bool zeroed_by_kernel = false;
        if (atomic_aware(r.variant)) {
            const auto lo = std::lower_bound(shared_rows_.begin(), shared_rows_.end(), rows.begin);
            const auto hi = std::lower_bound(lo, shared_rows_.end(), rows.end);
            zeroed_by_kernel =
                detail::zero_rows(stream, shared_rows_device_.data() + (lo - shared_rows_.begin()),
                                  hi - lo, dim, out.data, out.ld);
        } else {
            HALO_CUDA_TRY(cudaMemset2DAsync(out.data + rows.begin * out.ld,
                                            static_cast<std::size_t>(out.ld) * sizeof(float), 0,
                                            static_cast<std::size_t>(dim) * sizeof(float),
                                            static_cast<std::size_t>(rows.size()), stream));
        }

        detail::SsdArgs args;
        const auto ordered =
            std::find_if(ordered_.begin(), ordered_.end(), [&](const OrderedRange& o) {
                return o.rows.begin == rows.begin && o.rows.end == rows.end;
            });
        if (launch.order == SsdOrder::longest_first && ordered != ordered_.end()) {
            args.groups = groups_device_.data();
            args.order = order_device_.data() + ordered->offset;
            args.group_count = ordered->count;
        } else {
            const GroupRange range = edge_group_range(groups_, rows);
            args.groups = groups_device_.data() + range.begin;
            args.group_count = range.end - range.begin;
        }
        args.a_indices = indices_.data();
        args.a_values = valued_ ? values_.data() : nullptr;
        args.s_values = s.values;
        args.s_indices = s.indices;
        args.k = static_cast<int>(s.k);
        args.dim = dim;
        args.out = out.data;
        args.ldo = out.ld;
        if (r.variant == SsdVariant::maxk) {
            detail::ssd_maxk(stream, args, r.warps);
        } else {
            detail::ssd_decoupled(stream, args, r.warps, r.slots, atomic_aware(r.variant),
                                  zeroed_by_kernel);
        }
    }

    std::string describe(const SsdLaunch& launch, std::int64_t dim, std::int64_t k) const override
    {
        check_cbsr_shape(0, dim, k);
        const Resolved r = resolve(launch, dim, k);
        return to_string(r.variant) + "-w" + std::to_string(r.warps) + "-s" +
               std::to_string(r.slots) + "-g" + std::to_string(groups_.group_size) +
               (launch.order == SsdOrder::longest_first ? "-lf" : "");
    }

    std::string algorithm() const override
    {
        return "ssd-" + to_string(launch_.variant) + "-w" +
               std::to_string(launch_.warps_per_block) + "-b" +
               std::to_string(launch_.buffers_per_warp) + "-g" +
               std::to_string(groups_.group_size) +
               (launch_.order == SsdOrder::longest_first ? "-lf" : "");
    }

    const EdgeGroups& groups() const override { return groups_; }

private:
    // Slots per warp (section IV-A: min(warp size / k, the buffer limit); one for k >= 32 and for
    // the variants without slots) and the warps per block whose buffers fit the device's shared
    // memory per block.
    Resolved resolve(const SsdLaunch& launch, std::int64_t dim, std::int64_t k) const
    {
        validate(launch);
        Resolved r;
        r.variant = launch.variant;
        if (uses_slots(launch.variant) && k < 32) {
            r.slots = static_cast<int>(std::min<std::int64_t>(32 / k, launch.buffers_per_warp));
        }
        const std::size_t per_warp =
            r.variant == SsdVariant::maxk
                ? detail::ssd_maxk_shared_bytes(1, static_cast<int>(dim))
                : detail::ssd_decoupled_shared_bytes(1, r.slots, static_cast<int>(dim));
        const auto fit =
            static_cast<std::int64_t>(static_cast<std::size_t>(shared_optin_) / per_warp);
        if (fit < 1) {
            HALO_THROW(InputError, "SSD ", to_string(r.variant), ": ", r.slots,
                       " buffer(s) per warp of width ", dim, " need ", per_warp,
                       " bytes of shared memory, a block has at most ", shared_optin_);
        }
        r.warps = static_cast<int>(std::min<std::int64_t>(launch.warps_per_block, fit));
        return r;
    }

    // A range whose groups are kept longest first: order_device_[offset, offset + count).
    struct OrderedRange {
        RowRange rows;
        std::int64_t offset = 0;
        std::int64_t count = 0;
    };

    Context& ctx_;
    std::int64_t num_rows_ = 0;
    std::int64_t num_cols_ = 0;
    std::int64_t max_dim_ = 0;
    SsdLaunch launch_;
    EdgeGroups groups_;
    std::vector<std::int32_t> shared_rows_;
    std::vector<OrderedRange> ordered_;
    bool valued_ = false;
    int shared_optin_ = 48 * 1024;
    DeviceBuffer<std::int32_t> indices_;
    DeviceBuffer<float> values_;
    DeviceBuffer<detail::SsdGroup> groups_device_;
    DeviceBuffer<std::int32_t> order_device_;
    DeviceBuffer<std::int32_t> shared_rows_device_;
};

constexpr std::array<EnumName<SsdOrder>, 2> ssd_order_names{
    {{SsdOrder::rows, "rows"}, {SsdOrder::longest_first, "longest_first"}}};

constexpr std::array<EnumName<SsdVariant>, 5> ssd_variant_names{
    {{SsdVariant::maxk, "maxk"},
     {SsdVariant::decoupled, "decoupled"},
     {SsdVariant::no_slots, "no_slots"},
     {SsdVariant::no_atomic_aware, "no_atomic_aware"},
     {SsdVariant::no_slots_no_atomic_aware, "no_slots_no_atomic_aware"}}};

}  // namespace

DeviceCbsr make_device_cbsr(Context& ctx, std::int64_t rows, std::int64_t dim, std::int64_t k)
{
    check_cbsr_shape(rows, dim, k);
    DeviceCbsr s;
    s.values = DeviceBuffer<float>(ctx, static_cast<std::size_t>(rows * k));
    s.indices = DeviceBuffer<cbsr_index>(ctx, static_cast<std::size_t>(rows * k));
    s.rows = rows;
    s.dim = dim;
    s.k = k;
    return s;
}

void maxk_topk(Context& ctx, DenseView<const float> x, CbsrView<float> out)
{
    check_cbsr_shape(out.rows, out.dim, out.k);
    HALO_EXPECTS(out.rows == x.rows && out.dim == x.cols, "CBSR of ", out.rows, " x ", out.dim,
                 " for an input of ", x.rows, " x ", x.cols);
    HALO_EXPECTS(x.ld >= x.cols, "leading dimension ", x.ld, " below the width ", x.cols);
    detail::maxk_topk(ctx.compute_stream(), x.data, x.rows, static_cast<int>(x.cols), x.ld,
                      static_cast<int>(out.k), out.values, out.indices);
}

DeviceCbsr maxk_topk(Context& ctx, DenseView<const float> x, std::int64_t k)
{
    DeviceCbsr s = make_device_cbsr(ctx, x.rows, x.cols, k);
    maxk_topk(ctx, x, s.view());
    return s;
}

std::string to_string(SsdVariant variant)
{
    const auto name = enum_name(ssd_variant_names, variant);
    return name == "?" ? std::string("unknown") : std::string(name);
}

SsdVariant parse_ssd_variant(std::string_view text)
{
    for (const auto& n : ssd_variant_names) {
        if (text == n.name) {
            return n.value;
        }
    }
    HALO_THROW(InputError, "unknown SSD variant '", text,
               "' (known: maxk, decoupled, no_slots, no_atomic_aware, no_slots_no_atomic_aware)");
}

std::string to_string(SsdOrder order)
{
    const auto name = enum_name(ssd_order_names, order);
    return name == "?" ? std::string("unknown") : std::string(name);
}

SsdOrder parse_ssd_order(std::string_view text)
{
    return parse_enum(ssd_order_names, text, "SSD group order");
}

void validate(const SsdLaunch& launch)
{
    if (launch.warps_per_block < 1 || launch.warps_per_block > 32) {
        HALO_THROW(InputError, "SSD warps per block ", launch.warps_per_block, " outside [1, 32]");
    }
    if (launch.buffers_per_warp < 1 || launch.buffers_per_warp > 32) {
        HALO_THROW(InputError, "SSD buffers per warp ", launch.buffers_per_warp,
                   " outside [1, 32]");
    }
}

std::unique_ptr<DeviceSsdPlan> make_ssd_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                             const SsdOptions& options)
{
    validate(a, "the operator of an SSD plan");
    return std::make_unique<SsdPlanImpl>(ctx, a, max_dim,
                                         build_edge_groups(a.view(), options.groups),
                                         options.launch, options.ordered_ranges);
}

std::unique_ptr<DeviceSsdPlan> make_ssd_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                             EdgeGroups groups, const SsdOptions& options)
{
    validate(a, "the operator of an SSD plan");
    return std::make_unique<SsdPlanImpl>(ctx, a, max_dim, std::move(groups), options.launch,
                                         options.ordered_ranges);
}

}  // namespace halo::cuda
