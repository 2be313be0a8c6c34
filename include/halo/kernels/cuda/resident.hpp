// The resident-slice SpMM ("resident" in the registry): for operators whose X rows, 4 feature
// columns each, fit in one block's shared memory (at most 14,528 columns on an H100/H200), a
// block holds that slice of every X row in shared memory and reads A once per slice, so that a
// nonzero costs a 16-byte shared-memory load and 6 bytes of A instead of a gather of its X row
// from L2. A's rows are packed in chunks of 32 lanes (kernels/preprocess/resident_layout.hpp:
// sliced ELL, rows sorted by length, long rows split over a power-of-two group of lanes), each
// lane's nonzeros ordered against shared-memory bank conflicts. The grid is (row parts, slices),
// one wave of blocks. Every output element is written once (no atomics, nothing zeroed), the same
// bits every run; the sum order is the layout's, not CSR order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo::cuda {

struct ResidentOptions {
    /// Nonzeros a lane takes at most before its row is split over more lanes (the last group of
    /// 32 lanes takes more); 0: resident::segment_limit(nnz).
    std::int64_t segment = 0;
    /// Order each lane's nonzeros against bank conflicts (false: CSR order; for measuring it).
    bool schedule = true;
};

/// The resident-slice plan of `a` for widths up to `max_dim`. Row layouts are built for `ranges`
/// and the whole operator at setup, for any other range on its first run (host work and an
/// upload: not inside a CUDA graph capture; the engine hints its ranges). The plan keeps a host
/// copy of `a` for those layouts. The plan is a
/// FeatureSpmmPlan (fp16/bf16 x widened to fp32 as the slice is loaded) and adds in place
/// (run_add). With `scaling`, `a` is read as a pattern and the values are scaling.row[i] *
/// scaling.col[j], never formed: X's rows are scaled as the slice is loaded, the sums as they are
/// stored. Throws halo::InputError when a's columns do not fit the device's shared memory (16
/// bytes each), when `a` is not a valid CSR matrix, or on a bad option.
std::unique_ptr<SpmmPlan> make_resident_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                  const ResidentOptions& options = {},
                                                  const OperatorScaling* scaling = nullptr,
                                                  const std::vector<RowRange>& ranges = {});

/// The most columns an operator may have for the resident-slice plan on device `index`.
std::int64_t resident_max_columns(int index);

}  // namespace halo::cuda
