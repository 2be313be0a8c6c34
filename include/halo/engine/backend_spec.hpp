// Runtime assembly of an execution backend from its description (halo-infer --backend, --spmm,
// --device): the CPU backend, or a CUDA context and the CUDA backend on it. Part of halo_engine,
// so that drivers name a backend instead of building one.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "halo/kernels_host/aes.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo {

namespace cuda {
class Context;
}

struct BackendSpec {
    /// "cpu" or "cuda".
    std::string kind = "cpu";
    /// The SpMM kernel: empty or "auto" (cuda: the autotuner's choices stored in the dataset for
    /// this device, the cost model's kernel per width where there are none; cpu: the reference),
    /// or any other kernel of the registry that halo-infer offers (spmm_use_infer in
    /// halo/kernels_host/spmm_registry.hpp; docs/KERNELS.md's table): CUDA kernels, or
    /// "aes:W[:sample_sum|rescaled]" (AES-SpMM, approximate, both backends).
    std::string spmm;
    /// cuda: the device of this rank; -1 picks local_rank modulo the visible devices.
    int device = -1;
    /// This rank's rank among the ranks of its node, and their number (MpiWorld).
    int local_rank = 0;
    int local_size = 1;
    /// cuda: MergePath and row-split keep scaled operators as the pattern and both scalings
    /// (SpmmPlanRequest::pattern_operators; halo-infer --pattern-operators).
    bool pattern_operators = false;
    /// cuda: MergePath loads X with L2 hints where X is past 32x the L2 (SpmmPlanRequest::l2_hints;
    /// halo-infer --l2-hints).
    bool l2_hints = false;
};

/// A backend made from a BackendSpec, with the CUDA context it runs on (null on the CPU). The
/// context is declared first, so it outlives the backend.
struct BackendInstance {
    std::shared_ptr<cuda::Context> context;
    std::unique_ptr<Backend> backend;
};

/// "aes:W" or "aes:W:scaling" -> AES options, checked; any other text (an exact kernel's name)
/// -> none. Throws halo::InputError for a malformed or out-of-range aes spec.
std::optional<AesOptions> parse_aes_spmm(const std::string& text);

/// Checks what needs neither data nor a device: the kind, an SpMM kernel the kind runs, an aes
/// spec in range, and that a CUDA backend was built in. Throws halo::InputError naming the
/// option (--backend, --spmm) as halo-infer spells it.
void check_backend_spec(const BackendSpec& spec);

/// Checks the spec, then makes the backend: on cuda a Context on the chosen device first.
BackendInstance make_backend(const BackendSpec& spec);

}  // namespace halo
