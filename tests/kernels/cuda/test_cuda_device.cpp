#include <cmath>
#include <cstdio>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/kernels/cuda/device.hpp"
#include "halo_test.hpp"

TEST(CudaDevice, ReportsPropertiesOfEveryDevice)
{
    HALO_REQUIRE_GPUS(1);
    for (int d = 0; d < halo::cuda::device_count(); ++d) {
        const auto info = halo::cuda::device_info(d);
        EXPECT_FALSE(info.name.empty());
        EXPECT_GE(info.compute_major, 7) << info.name;
        EXPECT_GT(info.global_memory_bytes, 0);
        EXPECT_GT(info.multiprocessors, 0);
        std::printf("device %d: %s, sm_%d%d, %lld MiB, %d SMs, L2 %lld KiB\n", d, info.name.c_str(),
                    info.compute_major, info.compute_minor,
                    static_cast<long long>(info.global_memory_bytes >> 20), info.multiprocessors,
                    static_cast<long long>(info.l2_cache_bytes >> 10));
    }
}

TEST(CudaDevice, SelfTestKernelWritesEveryElement)
{
    HALO_REQUIRE_GPUS(1);
    const std::int64_t count = 1000003;  // not a multiple of the block size
    const auto in = halo::testing::random_floats(count, 42);
    std::vector<float> out(count, std::nanf(""));
    halo::cuda::self_test(in.data(), out.data(), count, 0.5f);
    for (std::int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[i], in[i] + 0.5f) << "element " << i;
    }
}

TEST(CudaDevice, InvalidDeviceIndexThrows)
{
    HALO_REQUIRE_GPUS(1);
    EXPECT_THROW(halo::cuda::device_info(halo::cuda::device_count() + 7), halo::CudaError);
}
