#include "halo_test.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#ifdef HALO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "halo/kernels/cuda/device.hpp"

namespace halo::testing {
namespace {

// Removes every scratch directory when the test process ends, unless HALO_KEEP_SCRATCH is set
// (to look at what a failing test wrote).
struct ScratchRegistry {
    std::vector<std::filesystem::path> dirs;
    ~ScratchRegistry()
    {
        if (std::getenv("HALO_KEEP_SCRATCH") != nullptr) {
            return;
        }
        for (const auto& dir : dirs) {
            std::error_code ec;
            std::filesystem::remove_all(dir, ec);
        }
    }
};

ScratchRegistry& scratch_registry()
{
    static ScratchRegistry registry;
    return registry;
}

#ifdef HALO_HAVE_CUDA
// With HALO_TEST_REPORT_DEVICE_MEMORY set (scripts/gpu-check.sh --memory), a GPU test program
// prints the high-water mark of device 0's memory pool (every Context allocates from it) when it
// ends: what its RESOURCE_GROUPS declaration (cmake/HaloTesting.cmake, GPU_MEMORY_GIB) must cover,
// with the CUDA context and library handles on top.
class DeviceMemoryReport final : public ::testing::Environment {
public:
    void TearDown() override
    {
        if (std::getenv("HALO_TEST_REPORT_DEVICE_MEMORY") == nullptr || gpu_count() == 0) {
            return;
        }
        cudaMemPool_t pool = nullptr;
        std::uint64_t high = 0;  // the attribute is a cuuint64_t (64 bits)
        std::size_t free_bytes = 0;
        std::size_t total_bytes = 0;
        if (cudaDeviceGetDefaultMemPool(&pool, 0) != cudaSuccess ||
            cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high) != cudaSuccess ||
            cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
            (void)cudaGetLastError();
            return;
        }
        std::printf("halo-test: device memory high-water mark %.1f MiB (pool of device 0)\n",
                    static_cast<double>(high) / (1 << 20));
    }
};
[[maybe_unused]] const auto* const device_memory_report =
    ::testing::AddGlobalTestEnvironment(new DeviceMemoryReport);
#endif

}  // namespace

std::filesystem::path shared_data_dir()
{
    if (const char* env = std::getenv("HALO_DATA_DIR"); env != nullptr && *env != '\0') {
        return env;
    }
    return HALO_TEST_DATA_DIR;
}

std::filesystem::path shared_data_file(const std::string& name)
{
    const auto path = shared_data_dir() / name;
    std::error_code ec;
    return std::filesystem::is_regular_file(path, ec) ? path : std::filesystem::path{};
}

std::filesystem::path scratch_dir(const std::string& tag)
{
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = tag;
    if (info != nullptr) {
        name += std::string("-") + info->test_suite_name() + "-" + info->name();
    }
    for (auto& c : name) {
        if (c == '/' || c == ' ') {
            c = '_';
        }
    }
    const auto dir = std::filesystem::temp_directory_path() /
                     ("halo-test-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    scratch_registry().dirs.push_back(dir);
    return dir;
}

int gpu_count()
{
    return halo::cuda::device_count();
}

bool under_sanitizer()
{
    const char* tool = std::getenv("HALO_TEST_UNDER_SANITIZER");
    return tool != nullptr && *tool != '\0';
}

EdgeList grid_edges(int side)
{
    EdgeList e;
    e.num_nodes = static_cast<std::int64_t>(side) * side;
    for (int r = 0; r < side; ++r) {
        for (int c = 0; c < side; ++c) {
            const auto v = static_cast<std::int64_t>(r) * side + c;
            if (c + 1 < side) {
                e.src.push_back(v);
                e.dst.push_back(v + 1);
            }
            if (r + 1 < side) {
                e.src.push_back(v);
                e.dst.push_back(v + side);
            }
        }
    }
    return e;
}

Csr grid_graph(int side)
{
    return build_csr(grid_edges(side), {});
}

std::vector<float> random_floats(std::size_t count, std::uint64_t seed, float lo, float hi)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> out(count);
    for (auto& v : out) {
        v = dist(rng);
    }
    return out;
}

}  // namespace halo::testing
