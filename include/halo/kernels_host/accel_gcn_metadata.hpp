// Accel-GCN's block partition as dataset kernel metadata (docs/FORMAT.md, "Kernel metadata",
// kernels/accel_gcn/<operator>): the degree-sorted row order, the int4 blocks, the split rows and
// the segment tables. The reordered nonzeros are not stored: they are the operator's own, gathered
// again in sorted order on load (accel_gcn_gather_nonzeros).
#pragma once

#include <string>

#include "halo/core/kernel_metadata.hpp"
#include "halo/kernels_host/accel_gcn_partition.hpp"

namespace halo {

inline constexpr const char* accel_gcn_metadata_kernel = "accel_gcn";

/// The metadata of `p`, a partition of operator `a` named `op` (kernel_operator_adjacency or
/// kernel_operator_gcn).
KernelMetadata accel_gcn_to_metadata(const AccelGcnPartition& p, const CsrView& a,
                                     const std::string& op);

/// The partition stored in `md`, for operator `a`: checks that `md` was built for `a`
/// (fingerprint), rebuilds the nonzeros and validates the whole partition against `a`
/// (validate_accel_gcn_partition). Throws halo::InputError naming md.origin and the mismatch.
AccelGcnPartition accel_gcn_from_metadata(const KernelMetadata& md, const CsrView& a);

}  // namespace halo
