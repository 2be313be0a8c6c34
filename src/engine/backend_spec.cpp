#include "halo/engine/backend_spec.hpp"

#include <utility>

#include "halo/core/error.hpp"
#include "halo/kernels/device_backend.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo {

std::optional<AesOptions> parse_aes_spmm(const std::string& text)
{
    if (text.rfind("aes:", 0) != 0) {
        return std::nullopt;
    }
    return parse_spmm_choice(text).aes;
}

void check_backend_spec(const BackendSpec& spec)
{
    const bool cuda = spec.kind == "cuda";
    if (!cuda && spec.kind != "cpu") {
        HALO_THROW(InputError, "--backend ", spec.kind, ": unknown (cpu | cuda)");
    }
    // Every kernel name the registry knows (and an aes spec's arguments) checked here, before
    // any device or data is touched.
    const auto choice = parse_spmm_choice(spec.spmm.empty() ? "auto" : spec.spmm);
    const auto& aes = choice.aes;
    if (!cuda && spec.pattern_operators) {
        HALO_THROW(InputError,
                   "--pattern-operators needs --backend cuda (the cpu backend's "
                   "reference SpMM reads the values)");
    }
    if (!cuda && spec.l2_hints) {
        HALO_THROW(InputError,
                   "--l2-hints needs --backend cuda (the hints are the GPU's L2 cache policies)");
    }
    if (!cuda && !spec.spmm.empty() && spec.spmm != "auto" && !aes) {
        HALO_THROW(InputError, "--spmm ", spec.spmm,
                   " needs --backend cuda (the cpu backend runs the reference SpMM, or "
                   "aes:W)");
    }
#ifndef HALO_HAVE_CUDA
    if (cuda) {
        HALO_THROW(InputError,
                   "--backend cuda: halo-infer was built without CUDA "
                   "(configure with -DHALO_ENABLE_CUDA=ON), use --backend cpu");
    }
#endif
}

BackendInstance make_backend(const BackendSpec& spec)
{
    check_backend_spec(spec);
    const auto aes = parse_aes_spmm(spec.spmm);
    BackendInstance out;
    if (spec.kind == "cpu") {
        CpuBackendOptions options;
        options.aes = aes;
        out.backend = make_cpu_backend(options);
        return out;
    }
    cuda::DeviceBackendRequest request;
    request.device = spec.device;
    request.local_rank = spec.local_rank;
    request.local_size = spec.local_size;
    request.spmm = parse_spmm_choice(spec.spmm.empty() ? "auto" : spec.spmm);
    request.spmm.pattern_operators = spec.pattern_operators;
    request.spmm.l2_hints = spec.l2_hints;
    auto made = cuda::make_device_backend(request);
    out.context = std::move(made.context);
    out.backend = std::move(made.backend);
    return out;
}

}  // namespace halo
