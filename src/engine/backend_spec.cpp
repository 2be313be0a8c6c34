#include "halo/backend_spec.hpp"

#include "halo/error.hpp"
#ifdef HALO_HAVE_CUDA
#include "halo/cuda/backend.hpp"
#include "halo/cuda/context.hpp"
#endif

namespace halo {
namespace {

#ifdef HALO_HAVE_CUDA
// The CUDA backend's kernel for an --spmm name (check_backend_spec took the aes ones apart).
cuda::SpmmAlgorithm cuda_spmm_algorithm(const std::string& name)
{
    if (name.empty() || name == "auto") {
        return cuda::SpmmAlgorithm::stored_or_cusparse;
    }
    if (name == "cusparse") {
        return cuda::SpmmAlgorithm::cusparse;
    }
    if (name == "rowsplit") {
        return cuda::SpmmAlgorithm::rowsplit;
    }
    if (name == "mergepath") {
        return cuda::SpmmAlgorithm::mergepath;
    }
    if (name == "accel_gcn") {
        return cuda::SpmmAlgorithm::accel_gcn;
    }
    if (name == "autotune") {
        return cuda::SpmmAlgorithm::autotune;
    }
    if (name.rfind("aes:", 0) == 0) {
        return cuda::SpmmAlgorithm::aes;
    }
    HALO_THROW(InputError, "unknown SpMM kernel '", name, "'");
}
#endif

}  // namespace

std::optional<AesOptions> parse_aes_spmm(const std::string& text)
{
    if (text.rfind("aes:", 0) != 0) {
        return std::nullopt;
    }
    const auto rest = text.substr(4);
    const auto colon = rest.find(':');
    const auto width_text = rest.substr(0, colon);
    AesOptions options;
    std::size_t used = 0;
    try {
        options.sample_width = std::stoll(width_text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (width_text.empty() || used != width_text.size()) {
        HALO_THROW(InputError, "--spmm ", text, ": '", width_text,
                   "' is not a sample width (expected aes:W[:sample_sum|rescaled], W in ",
                   kAesMinWidth, "..", kAesMaxWidth, ")");
    }
    if (colon != std::string::npos) {
        options.scaling = parse_aes_scaling(rest.substr(colon + 1));
    }
    validate(options);
    return options;
}

void check_backend_spec(const BackendSpec& spec)
{
    const bool cuda = spec.kind == "cuda";
    if (!cuda && spec.kind != "cpu") {
        HALO_THROW(InputError, "--backend ", spec.kind, ": unknown (cpu | cuda)");
    }
    const auto aes = parse_aes_spmm(spec.spmm);
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
#ifdef HALO_HAVE_CUDA
    cuda::ContextOptions options;
    options.device = spec.device;
    options.local_rank = spec.local_rank;
    options.local_size = spec.local_size;
    out.context = std::make_shared<cuda::Context>(options);
    out.backend = cuda::make_cuda_backend(*out.context, cuda_spmm_algorithm(spec.spmm),
                                          aes.value_or(AesOptions{}));
#endif
    return out;
}

}  // namespace halo
