// Fused3S's BSB format as dataset kernel metadata (docs/FORMAT.md, "Kernel metadata",
// kernels/fused3s/<operator>): the row-window blocks, compacted column maps, 128-bit block
// bitmaps and the window order of halo::Bsb, built offline by halo-partition --kernel-metadata
// fused3s and reused by the engine's attention layers.
#pragma once

#include <string>

#include "halo/core/kernel_metadata.hpp"
#include "halo/kernels_host/fused3s.hpp"

namespace halo {

inline constexpr const char* fused3s_metadata_kernel = "fused3s";

/// The metadata of `bsb`, built for the pattern of `a` named `op` (kernel_operator_gcn: the
/// pattern with self-loops that agnn and gat attend over; kernel_operator_adjacency: the
/// transformer's).
KernelMetadata bsb_to_metadata(const Bsb& bsb, const Csr& a, const std::string& op);

/// The BSB stored in `md` for pattern `a`: checks that `md` was built for `a` (shape and pattern
/// fingerprint) and validates the format (halo::validate(Bsb, ...)), so a corrupt file is an
/// error, never a wrong result. Throws halo::InputError naming md.origin, the field and the value.
Bsb bsb_from_metadata(const KernelMetadata& md, const Csr& a);

}  // namespace halo
