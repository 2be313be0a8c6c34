#include "halo/kernels/device_backend.hpp"

#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"

namespace halo::cuda {

DeviceBackend make_device_backend(const DeviceBackendRequest& request)
{
    ContextOptions options;
    options.device = request.device;
    options.local_rank = request.local_rank;
    options.local_size = request.local_size;
    DeviceBackend out;
    out.context = std::make_shared<Context>(options);
    out.backend = make_cuda_backend(*out.context, request.spmm);
    return out;
}

}  // namespace halo::cuda
