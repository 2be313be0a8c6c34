// MaxK's edge groups as dataset kernel metadata (docs/FORMAT.md, "Kernel metadata",
// kernels/maxk/<operator>): the four per-group arrays of halo::EdgeGroups (row, count, first,
// update_mode) and the group size, built offline by halo-partition --kernel-metadata maxk and
// reused by the engine's maxk layers instead of rebuilding them at every start.
#pragma once

#include <string>

#include "halo/core/kernel_metadata.hpp"
#include "halo/kernels_host/maxk.hpp"

namespace halo {

inline constexpr const char* maxk_metadata_kernel = "maxk";

/// The metadata of `groups`, built for operator `a` named `op` (kernel_operator_gcn for the
/// engine's maxk layers; kernel_operator_adjacency is allowed too).
KernelMetadata edge_groups_to_metadata(const EdgeGroups& groups, const CsrView& a,
                                       const std::string& op);

/// The groups stored in `md`, for operator `a`: checks that `md` was built for `a` (shape and
/// pattern fingerprint) and validates the groups against `a` (halo::validate(EdgeGroups, ...)).
/// Throws halo::InputError naming md.origin, the field and the value.
EdgeGroups edge_groups_from_metadata(const KernelMetadata& md, const CsrView& a);

}  // namespace halo
