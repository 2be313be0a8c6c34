// MaxK-GNN on the GPU (paper 000): the top-k activation into CBSR, and the sparse-sparse-dense
// (SSD) aggregation out = A * S over edge groups, in the variants the paper compares:
//
// - maxk: MaxK's operator (section III, Fig. 5): a thread block of W warps takes W groups, each
//   with a D-wide shared buffer; for k < 32 the groups are accumulated by k-lane slots packed into
//   the first warps (the rest idle), then a block-wide barrier, then every warp adds its buffer
//   to the output row with atomics (outputs zeroed first).
// - decoupled: section IV (Fig. 7): each warp independently (no block-wide barrier) takes
//   min(32 / k, buffers_per_warp) groups, one per slot of 32 / slots lanes with its own D-wide
//   buffer; the slots accumulate in lockstep, then a warp-level barrier and a fused, coalesced
//   update of the warp's groups in turn, with plain stores for groups of update_mode 0 and atomics
//   only for shared rows (smart edge groups, section IV-A; those rows are zeroed first).
// - the section VI-A ablations: no_slots (one group per warp), no_atomic_aware (atomics always),
//   and both.
//
// Within a group every kernel adds the nonzeros in storage order with fmaf, the lanes of a warp
// synchronizing after each nonzero step (two neighbours may keep the same column, and independent
// thread scheduling does not keep the lanes in step), so rows of one group are bit-identical to
// reference::ssd_edge_groups and from run to run; shared rows are summed with atomics and may
// differ in the last bits. Buffers and output rows use float4 accesses (float4 atomics on sm_90)
// when the width and leading dimension are multiples of 4, in every variant alike.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "halo/core/dense.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/maxk.hpp"

namespace halo::cuda {

/// A CBSR matrix in device memory from a Context's pool.
struct DeviceCbsr {
    DeviceBuffer<float> values;
    DeviceBuffer<cbsr_index> indices;
    std::int64_t rows = 0;
    std::int64_t dim = 0;
    std::int64_t k = 0;

    CbsrView<float> view() noexcept { return {values.data(), indices.data(), rows, dim, k}; }
    CbsrView<const float> cview() const noexcept
    {
        return {values.data(), indices.data(), rows, dim, k};
    }
};

/// Uninitialized device storage for rows x dim with k entries per row (checks the shape).
DeviceCbsr make_device_cbsr(Context& ctx, std::int64_t rows, std::int64_t dim, std::int64_t k);

/// The MaxK nonlinearity: top-k of every row of the device matrix x (x.cols <= kMaxkMaxDim) into
/// `out` (out.rows == x.rows, out.dim == x.cols), with the tie and NaN rule of
/// halo/kernels_host/maxk.hpp, bit-identical to reference::maxk_topk. One warp per row keeps the
/// row's order keys in registers and finds the k-th largest by a bitwise radix search (warp-wide
/// counts, stopping once the count is exactly k), then writes the winners compacted in column
/// order. Asynchronous on ctx.compute_stream(); allocates nothing.
void maxk_topk(Context& ctx, DenseView<const float> x, CbsrView<float> out);

/// As above into a new DeviceCbsr.
DeviceCbsr maxk_topk(Context& ctx, DenseView<const float> x, std::int64_t k);

enum class SsdVariant {
    maxk,                      // the MaxK baseline (section III)
    decoupled,                 // section IV, all optimizations
    no_slots,                  // decoupled, one group (buffer) per warp
    no_atomic_aware,           // decoupled, atomic updates for every group
    no_slots_no_atomic_aware,  // decoupled, one group per warp and atomics always
};

/// "maxk" | "decoupled" | "no_slots" | "no_atomic_aware" | "no_slots_no_atomic_aware".
std::string to_string(SsdVariant variant);
/// Parses the names above; throws halo::InputError naming the text otherwise.
SsdVariant parse_ssd_variant(std::string_view text);

/// The order in which the warps of a run take its groups.
enum class SsdOrder {
    /// By row, as the groups are stored (MaxK's kernels).
    rows,
    /// Most nonzeros first (ties by row): the slots of a warp step in lockstep up to the warp's
    /// longest group, so that slots of groups of one length waste no steps, and the longest
    /// groups start first. Only for the row ranges the plan ordered (SsdOptions::ordered_ranges);
    /// a run over any other range takes its groups by row.
    longest_first,
};

/// "rows" | "longest_first".
std::string to_string(SsdOrder order);
/// Parses the names above; throws halo::InputError naming the text otherwise.
SsdOrder parse_ssd_order(std::string_view text);

/// How one run maps groups to threads; may change between runs of one plan.
struct SsdLaunch {
    SsdVariant variant = SsdVariant::decoupled;
    /// Warps of a thread block (maxk: groups per block). 1 .. 32. When the block's buffers exceed
    /// the device's shared memory per block, fewer warps are used (algorithm() says how many).
    std::int32_t warps_per_block = 12;
    /// Decoupled variants: most D-wide buffers (slots) per warp; the slots of a run are
    /// min(32 / k, buffers_per_warp), at least 1. The paper found 2 best at D = 256 on the H100
    /// (section VI-C); on the H200 here 4 was faster than 2 at D = 256 on BlogCatalog,
    /// ego-Twitter and R-MAT 22 (docs/MAXK.md), so 4 is the default.
    std::int32_t buffers_per_warp = 4;
    /// Every variant, the MaxK baseline too: rows is the paper's order (docs/MAXK.md, "Longest
    /// groups first").
    SsdOrder order = SsdOrder::longest_first;
};

/// Throws halo::InputError naming the option and value.
void validate(const SsdLaunch& launch);

struct SsdOptions {
    EdgeGroupOptions groups;
    SsdLaunch launch;
    /// The row ranges whose groups the plan also keeps longest first (4 bytes per group each),
    /// for runs over exactly one of them (the engine's interior and boundary rows); empty: the
    /// whole operator. Each within [0, A's rows]; they may overlap. Past 2^31 groups (int32
    /// indices) no range is ordered.
    std::vector<RowRange> ordered_ranges;
};

/// The SSD operator of one operator A (a shard's local CSR): A and its edge groups live on the
/// device. run() takes S as a device CBSR view (s.rows >= A's columns: owned then halo rows) and
/// writes out rows of the range, other rows and the columns beyond s.dim untouched (the engine
/// aggregates interior rows, then boundary rows). Asynchronous on ctx.compute_stream(), no
/// allocation; the zeroing that atomic updates need is part of run().
class DeviceSsdPlan : public SsdPlan {
public:
    /// The plan's default launch (SsdOptions::launch).
    void run(CbsrView<const float> s, DenseView<float> out, RowRange rows) override = 0;
    /// With another launch (variant, warps, buffers) over the same uploaded operator and groups.
    virtual void run(CbsrView<const float> s, DenseView<float> out, RowRange rows,
                     const SsdLaunch& launch) = 0;
    /// The launch as it would run for width `dim` and `k`: variant, warps and slots actually used,
    /// and "-lf" for longest first on the ordered ranges ("decoupled-w12-s2-g64-lf").
    virtual std::string describe(const SsdLaunch& launch, std::int64_t dim,
                                 std::int64_t k) const = 0;
    virtual const EdgeGroups& groups() const = 0;
};

/// Builds the edge groups of `a` (options.groups) and uploads `a` and the groups, for widths up to
/// max_dim (<= kMaxkMaxDim). Throws halo::InputError when `a` is not a valid CSR matrix or the
/// options are invalid.
std::unique_ptr<DeviceSsdPlan> make_ssd_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                             const SsdOptions& options = {});

/// As above with groups built before (e.g. loaded from the dataset): checked with
/// validate(groups, a) first, so corrupt stored groups are an InputError, never a wrong product.
/// options.groups is ignored (the groups carry their size).
std::unique_ptr<DeviceSsdPlan> make_ssd_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                             EdgeGroups groups, const SsdOptions& options = {});

}  // namespace halo::cuda
