// The Backend conformance suite (backend_conformance.hpp) on the CUDA backend, once per exact SpMM
// kernel of the registry (halo/spmm_registry.hpp): every kernel a backend can be built with,
// including halo-bench's ablations and the autotuner's cost variants. Skips with a message where
// there is no CUDA device.
#include <memory>
#include <string>
#include <vector>

#include "backend_conformance.hpp"
#include "halo/backend.hpp"
#include "halo/cuda/backend.hpp"
#include "halo/cuda/context.hpp"
#include "halo/spmm_registry.hpp"

namespace halo::testing {
namespace {

struct CudaBackends {
    static std::string unavailable()
    {
        return gpu_count() < 1 ? "needs a CUDA device, found none" : std::string();
    }

    cuda::Context ctx;

    std::unique_ptr<Backend> make() { return cuda::make_cuda_backend(ctx); }

    std::vector<SpmmVariant> spmm_variants()
    {
        std::vector<SpmmVariant> out;
        for (const auto& kernel : spmm_kernels()) {
            if (kernel.exact && kernel.make != nullptr) {
                out.push_back({kernel.name, cuda::make_cuda_backend(ctx, SpmmChoice{&kernel, {}})});
            }
        }
        return out;
    }
};

}  // namespace

INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, BackendConformance, CudaBackends);

// The registry's exact kernels all run through the suite above; an empty list would pass it
// vacuously.
TEST(CudaBackendConformance, CoversEveryExactRegisteredKernel)
{
    std::vector<std::string> names;
    for (const auto& kernel : spmm_kernels()) {
        if (kernel.exact) {
            ASSERT_NE(kernel.make, nullptr) << kernel.name;
            names.push_back(kernel.name);
        }
    }
    EXPECT_GE(names.size(), 6u);
}

}  // namespace halo::testing
