// Accel-GCN SpMM (paper 001; docs/KERNELS.md "Accel-GCN"): rows degree-sorted, packed into thread
// blocks by the block-level partition (one int4 of metadata per block), each warp's nonzeros
// swept by a "combined warp" of ceil(d / 32) warps across the dense columns, partial sums of a row
// combined in shared memory (atomicAdd_block) and rows longer than deg_bound split across blocks
// and combined in global memory (atomicAdd; their outputs are zeroed first). Output rows are
// written in the original order. The preprocessing is halo/kernels_host/accel_gcn_partition.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"
#include "halo/kernels_host/accel_gcn_partition.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo::cuda {

struct AccelGcnOptions {
    /// max_block_warps of Algorithm 1: warps of a thread block (1 .. 32). Rows with few nonzeros
    /// share a block (warps_per_block / f rows of f warps each).
    std::int32_t warps_per_block = 12;
    /// Nonzeros one block takes (max_block_warps * max_warp_nzs); a multiple of warps_per_block.
    /// Rows with more nonzeros are split into chunks of deg_bound, one block each, added
    /// atomically: their results vary in the last bits from run to run.
    std::int32_t deg_bound = 96;
    /// Row ranges that run() will be asked for (e.g. interior and boundary rows). Their bounds cut
    /// [0, num_rows) into segments, each degree-sorted and partitioned at plan creation; any range
    /// that is a union of consecutive segments (the whole matrix included) runs from that one
    /// partition. run() on another range partitions and uploads it on its first call (host work,
    /// once per range) and caches it.
    std::vector<RowRange> ranges;
    /// Section III-C's degree sorting (default). false: rows keep their order, blocks take runs
    /// of consecutive rows of equal degree (AccelGcnPartitionOptions::degree_sort); an ablation.
    bool degree_sort = true;
    /// Section III-D's combined warps (default): for width d, c = ceil(d / 32) consecutive warps
    /// form one combined warp that sweeps a nonzero group across all d columns at once, and the
    /// block's c passes hand the next groups to the same combined warps. false: the non-combined
    /// mapping of the paper's Fig. 4(a) (GNNAdvisor's), the ablation of its Fig. 8: warp w keeps
    /// nonzero group w and loops over the c column slices of 32 itself.
    bool combined_warps = true;
    /// A precomputed host partition (e.g. loaded from the dataset's kernels/accel_gcn group), used
    /// instead of building one. It must be a partition of this matrix with these warps_per_block,
    /// deg_bound and degree_sort, whose segments tile the rows and cut at every bound of
    /// `ranges`; otherwise the plan throws halo::InputError naming the mismatch
    /// (halo::check_stored_accel_gcn_partition). Its indices and values may be left empty: they
    /// are gathered from the matrix (halo::accel_gcn_gather_nonzeros).
    std::shared_ptr<const AccelGcnPartition> partition = nullptr;
};

/// Accel-GCN SpMM over a device copy of `a` (reordered by degree) for dense widths up to
/// `max_dim`, any width (lanes beyond the width idle). run() is asynchronous on
/// ctx.compute_stream(); x and y are device views. The plan is a FeatureSpmmPlan
/// (as_feature_plan()): fp16/bf16 features are read one column per lane, as fp32 ones. Throws
/// halo::InputError when `a` is not a valid CSR matrix, has more than 2^31 - 1 nonzeros (int4
/// metadata), the options are invalid or a stored partition does not match. With `scaling`, `a`
/// is read as a pattern (its values, if any, ignored) and the entries are scaling.row[i] *
/// scaling.col[j], never formed: the kernel multiplies x's row j by col[j] in the gather and
/// each row's result by row[i] (cuda::ScaledForm::pattern; no values array on the device).
std::unique_ptr<SpmmPlan> make_accel_gcn_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                   const AccelGcnOptions& options = {},
                                                   const OperatorScaling* scaling = nullptr);

}  // namespace halo::cuda
