// HALO_MPI_TRY: checks an MPI call's return code and throws halo::MpiError with MPI's own text.
// Communicators used by HaloGNN return errors (MPI_ERRORS_RETURN) instead of aborting, so that the
// failing rank can report before the job is aborted.
#pragma once

#include <mpi.h>

#include <string>

#include "halo/core/error.hpp"

namespace halo::detail {

inline std::string mpi_error_text(int code)
{
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
        return "MPI error " + std::to_string(code);
    }
    return std::string(text, length);
}

}  // namespace halo::detail

#define HALO_MPI_TRY(call)                                                                         \
    do {                                                                                           \
        const int halo_status_ = (call);                                                           \
        if (halo_status_ != MPI_SUCCESS) {                                                         \
            throw ::halo::MpiError(                                                                \
                ::halo::detail::concat(#call,                                                      \
                                       " failed: ", ::halo::detail::mpi_error_text(halo_status_)), \
                __FILE__, __LINE__);                                                               \
        }                                                                                          \
    } while (0)
