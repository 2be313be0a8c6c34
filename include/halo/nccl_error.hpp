// HALO_NCCL_TRY: checks an NCCL call and throws halo::NcclError with NCCL's error string and, where
// NCCL recorded one, its last error message.
#pragma once

#include <nccl.h>

#include "halo/error.hpp"

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
