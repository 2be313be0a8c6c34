// HALO_NCCL_TRY: checks an NCCL call and throws halo::NcclError with NCCL's error string and, where
// NCCL recorded one, its last error message.
#pragma once

#include <nccl.h>

#include <string>

#include "halo/core/error.hpp"

namespace halo::detail {

/// NCCL's last error message of `comm` in parentheses, or nothing when it recorded none.
inline std::string nccl_last_error(ncclComm_t comm)
{
    const char* text = ncclGetLastError(comm);
    return text != nullptr && *text != '\0' ? concat(" (", text, ')') : std::string();
}

}  // namespace halo::detail

#define HALO_NCCL_TRY(call)                                                                        \
    do {                                                                                           \
        const ncclResult_t halo_status_ = (call);                                                  \
        if (halo_status_ != ncclSuccess && halo_status_ != ncclInProgress) {                       \
            throw ::halo::NcclError(                                                               \
                ::halo::detail::concat(#call, " failed: ", ncclGetErrorString(halo_status_), " (", \
                                       ncclGetLastError(nullptr), ")"),                            \
                __FILE__, __LINE__);                                                               \
        }                                                                                          \
    } while (0)
