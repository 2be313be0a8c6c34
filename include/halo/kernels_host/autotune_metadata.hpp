// The autotuner's choices as dataset kernel metadata (docs/FORMAT.md, "Kernel metadata",
// kernels/autotune/<operator>): per (row range, width) the winning kernel and every candidate's
// median, with the device they were measured on. A rank that finds choices for its device and
// candidate list loads them instead of timing again; others are ignored with a reason.
#pragma once

#include <optional>
#include <string>

#include "halo/core/kernel_metadata.hpp"
#include "halo/kernels_host/autotune.hpp"

namespace halo {

inline constexpr const char* autotune_metadata_kernel = "autotune";

/// The metadata of `table` (measured on `device`); `identity` names the operator
/// (metadata_for_operator("autotune", op, a)). Every entry must have the same candidate list.
/// Throws halo::LogicError otherwise.
KernelMetadata autotune_to_metadata(const AutotuneTable& table, KernelMetadata identity,
                                    const std::string& device);

/// What a stored table gives a plan.
struct StoredAutotune {
    std::vector<std::pair<AutotuneKey, AutotuneChoice>> entries;  // empty when not usable
    std::string note;  // why it is not used (another device, other candidates), else empty
};

/// The entries of `md` for operator `a`, when they were measured on `device` with exactly
/// `candidates`; otherwise no entries and a note. Throws halo::InputError naming md.origin when
/// the metadata is malformed (lengths, choice indices, ranges outside the operator) or was
/// built for another operator.
StoredAutotune autotune_from_metadata(const KernelMetadata& md, const CsrView& a,
                                      const std::string& device,
                                      const std::vector<std::string>& candidates);

}  // namespace halo
