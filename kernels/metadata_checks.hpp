// The checks every reader of dataset kernel metadata makes (accel_gcn_metadata.cpp,
// autotune_metadata.cpp, maxk_metadata.cpp, fused3s_metadata.cpp), written once so that they
// reject damaged metadata with the same messages, each naming md.origin. Internal to halo_kernels.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/core/kernel_metadata.hpp"

namespace halo::detail {

/// Throws halo::InputError unless `md` holds `kernel`'s metadata, built for operator `a`.
inline void expect_metadata(const KernelMetadata& md, std::string_view kernel, const CsrView& a)
{
    if (md.kernel != kernel) {
        HALO_THROW(InputError, md.origin, ": holds '", md.kernel, "' metadata, not ", kernel);
    }
    md.expect_operator(a);
}

/// Throws halo::InputError naming the array unless it holds `expected` values (`why`: what
/// fixes that count).
template <typename T>
void expect_length(const KernelMetadata& md, const std::vector<T>& values, const char* name,
                   std::int64_t expected, std::string_view why)
{
    if (static_cast<std::int64_t>(values.size()) != expected) {
        HALO_THROW(InputError, md.origin, "/", name, ": ", values.size(), " values, expected ",
                   expected, " (", why, ")");
    }
}

/// Runs `check` (a validation of the structure read from `md`), naming md.origin in the
/// halo::InputError it throws.
template <typename Check>
void check_stored(const KernelMetadata& md, Check&& check)
{
    try {
        std::forward<Check>(check)();
    } catch (const InputError& e) {
        HALO_THROW(InputError, md.origin, ": ", e.message());
    }
}

}  // namespace halo::detail
