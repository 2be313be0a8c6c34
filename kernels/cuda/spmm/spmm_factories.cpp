// The anchor of the SpMM registry's factories (spmm_factories.hpp). The registry's table in
// halo_kernels_host refers to the factories weakly, and a weak reference pulls no object out of a
// static library: every program linking halo_kernels asks for halo_cuda_spmm_factories
// (kernels/CMakeLists.txt, --undefined), whose table refers to every factory, so the objects that
// define them are linked and the table's addresses are theirs.
#include "spmm_factories.hpp"

#include <cstddef>

namespace halo::cuda {
#define HALO_DECLARE_FACTORY(type, name) type name;
HALO_SPMM_FACTORIES(HALO_DECLARE_FACTORY)
#undef HALO_DECLARE_FACTORY
}  // namespace halo::cuda

extern "C" {
// The factories' addresses, in spmm_factories.hpp's order (nothing reads them: the references
// are the point).
const void* const* halo_cuda_spmm_factories(std::size_t* count);
const void* const* halo_cuda_spmm_factories(std::size_t* count)
{
#define HALO_FACTORY_ADDRESS(type, name) reinterpret_cast<const void*>(&halo::cuda::name),
    static const void* const table[] = {HALO_SPMM_FACTORIES(HALO_FACTORY_ADDRESS)};
#undef HALO_FACTORY_ADDRESS
    *count = sizeof(table) / sizeof(table[0]);
    return table;
}
}
