// Check macros for the CUDA runtime, cuSPARSE and cuBLAS. Each throws the matching halo exception
// (error.hpp) with the failed call's text, the library's error name and the source location.
// Include only from code that is compiled with the CUDA toolkit on its include path.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>

#include "halo/core/error.hpp"

#define HALO_CUDA_TRY(call)                                                                      \
    do {                                                                                         \
        const cudaError_t halo_status_ = (call);                                                 \
        if (halo_status_ != cudaSuccess) {                                                       \
            throw ::halo::CudaError(                                                             \
                ::halo::detail::concat(#call, " failed: ", cudaGetErrorName(halo_status_), ": ", \
                                       cudaGetErrorString(halo_status_)),                        \
                __FILE__, __LINE__);                                                             \
        }                                                                                        \
    } while (0)

/// After a kernel launch: checks the launch itself and, in debug builds, its execution.
#ifdef NDEBUG
#define HALO_CUDA_CHECK_LAUNCH() HALO_CUDA_TRY(cudaGetLastError())
#else
#define HALO_CUDA_CHECK_LAUNCH()                \
    do {                                        \
        HALO_CUDA_TRY(cudaGetLastError());      \
        HALO_CUDA_TRY(cudaDeviceSynchronize()); \
    } while (0)
#endif

#define HALO_CUSPARSE_TRY(call)                                                                \
    do {                                                                                       \
        const cusparseStatus_t halo_status_ = (call);                                          \
        if (halo_status_ != CUSPARSE_STATUS_SUCCESS) {                                         \
            throw ::halo::CusparseError(                                                       \
                ::halo::detail::concat(#call, " failed: ", cusparseGetErrorName(halo_status_), \
                                       ": ", cusparseGetErrorString(halo_status_)),            \
                __FILE__, __LINE__);                                                           \
        }                                                                                      \
    } while (0)

#define HALO_CUBLAS_TRY(call)                                                                 \
    do {                                                                                      \
        const cublasStatus_t halo_status_ = (call);                                           \
        if (halo_status_ != CUBLAS_STATUS_SUCCESS) {                                          \
            throw ::halo::CublasError(                                                        \
                ::halo::detail::concat(#call, " failed: ", cublasGetStatusName(halo_status_), \
                                       ": ", cublasGetStatusString(halo_status_)),            \
                __FILE__, __LINE__);                                                          \
        }                                                                                     \
    } while (0)
