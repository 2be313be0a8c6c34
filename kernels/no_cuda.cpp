// Device discovery for builds without CUDA (HALO_ENABLE_CUDA=OFF): there is never a device, and
// no device backend.
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/device.hpp"
#include "halo/kernels/device_backend.hpp"

namespace halo::cuda {

int device_count()
{
    return 0;
}

DeviceInfo device_info(int index)
{
    HALO_THROW(CudaError, "device ", index, " requested, but HaloGNN was built without CUDA");
}

void self_test(const float*, float*, std::int64_t, float)
{
    HALO_THROW(CudaError, "CUDA self-test requested, but HaloGNN was built without CUDA");
}

DeviceBackend make_device_backend(const DeviceBackendRequest&)
{
    HALO_THROW(CudaError, "--backend cuda: HaloGNN was built without CUDA");
}

}  // namespace halo::cuda
