// The dataset's kernel metadata as the SpMM factories take it from an operator's hints
// (halo/kernels_host/backend.hpp, SpmmPlanHints::stored): found by kernel, checked against the
// operator it must describe. Internal to halo_kernels (accel_gcn.cpp, autotuned_spmm.cpp).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/kernel_metadata.hpp"
#include "halo/kernels_host/accel_gcn_partition.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo::cuda::detail {

/// The hints' metadata of `kernel` for their operator, or null.
inline const KernelMetadata* find_stored(const SpmmPlanHints& hints, std::string_view kernel)
{
    for (const auto& md : hints.stored) {
        if (md.kernel == kernel && md.op == hints.op) {
            return &md;
        }
    }
    return nullptr;
}

/// Whether `md` was built for operator `a` (shape and pattern fingerprint).
inline bool built_for(const KernelMetadata& md, const Csr& a)
{
    return md.rows == a.num_rows && md.cols == a.num_cols && md.nnz == a.nnz() &&
           md.fingerprint == pattern_fingerprint(a.view());
}

/// The stored Accel-GCN partition of `a`, when the hints carry one built for it; one built for
/// another operator (a stale dataset), or one that does not fit the hints' ranges, is skipped with
/// a line in `notes`, a damaged one throws halo::InputError. Defined in accel_gcn.cpp.
std::shared_ptr<const AccelGcnPartition> stored_accel_gcn_partition(
    const Csr& a, const SpmmPlanHints& hints, std::vector<std::string>& notes);

}  // namespace halo::cuda::detail
