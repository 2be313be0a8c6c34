// The Backend conformance suite (backend_conformance.hpp) on the CPU backend: host memory, the
// reference kernels, and its one exact SpMM, the reference loop.
#include <memory>
#include <string>
#include <vector>

#include "backend_conformance.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo::testing {
namespace {

struct CpuBackends {
    static std::string unavailable() { return {}; }
    std::unique_ptr<Backend> make() { return make_cpu_backend(); }
    std::vector<SpmmVariant> spmm_variants()
    {
        std::vector<SpmmVariant> out;
        out.push_back({"reference", make()});
        return out;
    }
};

}  // namespace

INSTANTIATE_TYPED_TEST_SUITE_P(Cpu, BackendConformance, CpuBackends);

}  // namespace halo::testing
