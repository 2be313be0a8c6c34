// The CUDA backend on a Context of its own, declared without the CUDA headers: what halo_engine's
// make_backend (halo/engine/backend_spec.hpp) calls, so that the engine includes no CUDA header.
// Part of halo_kernels; in a build without CUDA it throws halo::CudaError.
#pragma once

#include <memory>

#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo::cuda {

class Context;

struct DeviceBackendRequest {
    /// cuda::ContextOptions: the device (-1 picks local_rank modulo the visible devices), this
    /// process's rank among the ranks of its node and their number.
    int device = -1;
    int local_rank = 0;
    int local_size = 1;
    /// The SpMM kernel and its flags (parse_spmm_choice).
    SpmmChoice spmm;
};

/// A Context on the requested device, and the CUDA backend on it. The context is declared first,
/// so it outlives the backend.
struct DeviceBackend {
    std::shared_ptr<Context> context;
    std::unique_ptr<Backend> backend;
};

DeviceBackend make_device_backend(const DeviceBackendRequest& request);

}  // namespace halo::cuda
