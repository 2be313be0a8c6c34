// Device side of the SpMM test fixtures (GPU tests only: needs the CUDA headers): a context with
// its backend; the backend-generic helpers (padded matrices to and from the device, the SpMM
// check) are backend_fixtures.hpp's.
#pragma once

#include <memory>

#include "backend_fixtures.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo::testing {

// One context and its backend (for allocation and copies) per test, made after the GPU check.
struct Gpu {
    cuda::Context ctx;
    std::unique_ptr<Backend> backend = cuda::make_cuda_backend(ctx);
};

}  // namespace halo::testing
