// Row-split SpMM: the simplest exact custom kernel, beside cuSPARSE (docs/KERNELS.md "Row-split").
// A group of lanes owns one row (a warp, or a half/quarter warp for narrow widths), its lanes span
// the dense columns with float4 accesses where alignment allows, and the row's nonzeros are read
// cooperatively and broadcast by warp shuffles, so each X row is read once per nonzero. Every
// output row has one owner and sums its nonzeros in CSR order with fused multiply-adds, so results
// are bit-identical from run to run and across row-range splits (no atomics).
#pragma once

#include <cstdint>
#include <memory>

#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo::cuda {

/// Row-split SpMM over a device copy of `a` for dense widths up to `max_dim` (wider runs throw
/// halo::LogicError). Row offsets are int32 when nnz fits comfortably in int32 and int64 beyond;
/// IndexWidth::bits64 forces int64 (to test that path on small matrices). The upload happens here,
/// run() is asynchronous on ctx.compute_stream() with x and y device views and allocates nothing.
/// Throws halo::InputError when `a` is not a valid CSR matrix. The plan is a FeatureSpmmPlan
/// (as_feature_plan()): fp16/bf16 features, 8 columns per lane where aligned, fp32 sums in the
/// same order as for fp32 features. With `scaling`, `a` is read as a pattern and the values are
/// scaling.row[i] * scaling.col[j] (Backend::make_scaled_spmm_plan): made on the device, or never
/// formed (the scalings applied in the kernel), as `form` says (ScaledForm).
std::unique_ptr<SpmmPlan> make_rowsplit_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                  IndexWidth offsets = IndexWidth::automatic,
                                                  const OperatorScaling* scaling = nullptr,
                                                  ScaledForm form = ScaledForm::automatic);

/// The chunked row-split kernel ("rowchunk" in the registry): the row-split kernel for rows of at
/// most `length` nonzeros, and every longer row cut into units of `length` nonzeros (or
/// ceil(sqrt(degree)) where that is more), a lane group each, whose sums the last unit to finish
/// adds in unit order (a workspace slot of max_dim floats per unit and a counter per long row,
/// kept by the plan). One launch per run, no atomics on y, the same bits every run and across
/// row-range splits; a long row's bits are those of its units' sums added in order, not of one
/// CSR-order sum. Runs of one plan must be ordered on one stream
/// (the context's compute stream is). Same operators, operands, scalings and feature types as
/// make_rowsplit_spmm_plan.
struct RowchunkOptions {
    /// Nonzeros per unit; rows with more are cut. 0: rowchunk_length(nnz).
    std::int64_t length = 0;
    IndexWidth offsets = IndexWidth::automatic;
};

std::unique_ptr<SpmmPlan> make_rowchunk_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                  const RowchunkOptions& options = {},
                                                  const OperatorScaling* scaling = nullptr,
                                                  ScaledForm form = ScaledForm::automatic);

/// The automatic unit length for an operator of `nnz` nonzeros: 8 below 2^16 nonzeros, 32 below
/// 2^19, else 64, and at least ceil(nnz / 32768) (the workspace stays below 65536 slots).
std::int64_t rowchunk_length(std::int64_t nnz);

}  // namespace halo::cuda
