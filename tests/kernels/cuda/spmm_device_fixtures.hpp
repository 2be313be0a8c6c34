// Device side of the SpMM test fixtures (GPU tests only: needs the CUDA headers): a context with
// its backend, and padded device matrices moved to and from spmm_fixtures.hpp's HostMatrix whole,
// padding included, so the device padding starts as NaN and a write into it comes back.
#pragma once

#include <memory>
#include <utility>

#include "halo/backend.hpp"
#include "halo/cuda/backend.hpp"
#include "halo/cuda/context.hpp"
#include "halo/dense.hpp"
#include "spmm_fixtures.hpp"

namespace halo::testing {

// One context and its backend (for allocation and copies) per test, made after the GPU check.
struct Gpu {
    cuda::Context ctx;
    std::unique_ptr<Backend> backend = cuda::make_cuda_backend(ctx);
};

// A backend matrix of rows x ld elements seen as rows x cols.
struct DeviceMatrix {
    Matrix storage;
    DenseView<float> view;
};

inline DeviceMatrix upload(Backend& backend, const HostMatrix& h)
{
    auto storage = backend.allocate(h.rows, h.ld);
    backend.copy_from_host(h.data.data(), storage.view());
    const DenseView<float> view{storage.data(), h.rows, h.cols, h.ld};
    return {std::move(storage), view};
}

inline HostMatrix download(Backend& backend, const DeviceMatrix& d)
{
    HostMatrix h(d.view.rows, d.view.cols, d.view.ld);
    backend.copy_to_host(d.storage.view(), h.data.data());
    return h;
}

}  // namespace halo::testing
