// The Backend conformance suite (backend_conformance.hpp) on the CUDA backend, once per exact SpMM
// kernel of the registry (halo/kernels_host/spmm_registry.hpp): every kernel a backend can be built
// with, including halo-bench's ablations and the autotuner's cost variants. Skips with a message
// where there is no CUDA device.
#include <memory>
#include <string>
#include <vector>

#include "backend_conformance.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

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

// The split overlap adds the halo columns in place only with plans that can: those of halo-infer's
// default (the cost model, on R-MAT: MergePath and cuSPARSE; scaled as the gcn operator runs) and
// of the kernels it picks from, but Accel-GCN.
TEST(CudaBackendConformance, TheDefaultPlansAndTheirKernelsAddInPlace)
{
    HALO_REQUIRE_GPUS(1);
    cuda::Context ctx;
    const auto a = graph_csr("rmat", 12, 77, true);
    const OperatorScaling scaling{std::vector<float>(static_cast<std::size_t>(a.num_rows), 0.5f),
                                  std::vector<float>(static_cast<std::size_t>(a.num_cols), 2.0f)};
    for (const std::string name : {"auto", "cusparse", "mergepath", "rowsplit"}) {
        SCOPED_TRACE(name);
        const auto* kernel = find_spmm_kernel(name, spmm_use_infer);
        ASSERT_NE(kernel, nullptr);
        const auto backend = cuda::make_cuda_backend(ctx, SpmmChoice{kernel, {}});
        EXPECT_TRUE(backend->make_spmm_plan(a)->adds_in_place());
        const auto scaled = backend->make_scaled_spmm_plan(a, {}, scaling);
        ASSERT_NE(scaled, nullptr);
        EXPECT_TRUE(scaled->adds_in_place());
    }
    const auto* accel = find_spmm_kernel("accel_gcn", spmm_use_infer);
    ASSERT_NE(accel, nullptr);
    EXPECT_FALSE(
        cuda::make_cuda_backend(ctx, SpmmChoice{accel, {}})->make_spmm_plan(a)->adds_in_place());
}

}  // namespace halo::testing
