// The SpMM kernel registry: every SpMM kernel of the CUDA backend under the name users give it
// (halo-infer --spmm, halo-bench --kernels, the autotuner's candidates and its stored choices),
// with what each tool needs to know about it: what it is, whether it is exact, which dataset
// kernel metadata it reads, where it may be chosen, and the factory that builds its plan. The
// table itself is host code (halo_kernels_host, built with or without CUDA: the names, help texts
// and metadata kinds are known everywhere); the factories are in halo_kernels and exist only in
// CUDA builds, for the programs that link it. docs/KERNELS.md, "Adding a kernel", shows how a
// kernel joins it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/kernels_host/aes.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo {

struct AccelGcnPartition;
namespace cuda {
class Context;
}

/// What the dataset may hold for a kernel, under /parts/<p>/kernels/<group>/ (docs/FORMAT.md,
/// "Kernel metadata").
enum class SpmmMetadataKind {
    none,
    /// The kernel's preprocessing, built by halo-partition --kernel-metadata <group>.
    offline,
    /// Choices that runs time and store (the autotuner's).
    tuning,
};

/// Where a kernel may be chosen (bits of SpmmKernel::uses).
enum SpmmKernelUse : unsigned {
    spmm_use_infer = 1u,     // halo-infer --spmm, make_cuda_backend
    spmm_use_bench = 2u,     // halo-bench --kernels
    spmm_use_autotune = 4u,  // a candidate the autotuner times (exact kernels only)
};

/// The forms in which the engine hands an operator to a kernel's plan (bits of
/// SpmmKernel::forms). One operator reaches the backend in exactly one form, chosen once per
/// operator by what the engine holds and the user's options (spmm_form), and every block of it
/// (the split overlap's local and halo columns, a row block out of core) in the same form.
enum SpmmForm : unsigned {
    /// A CSR with its values (SpmmKernel::make).
    spmm_form_values = 1u,
    /// A pattern and a row scaling (the mean operator; SpmmKernel::make_scaled).
    spmm_form_row_scaled = 2u,
    /// A pattern and row and column scalings (the gcn operator), the plan free to form the
    /// values on the device (SpmmKernel::make_scaled).
    spmm_form_scaled = 4u,
    /// The same, the plan keeping the pattern and both scalings (halo-infer
    /// --pattern-operators; SpmmPlanRequest::pattern_operators).
    spmm_form_scaled_pattern = 8u,
};
inline constexpr unsigned spmm_forms_all =
    spmm_form_values | spmm_form_row_scaled | spmm_form_scaled | spmm_form_scaled_pattern;

/// The element types of X a kernel's plans read (bits of SpmmKernel::x_types): fp32, and fp16 /
/// bf16 rows gathered with fp32 products and sums into an fp32 y (cuda::FeatureSpmmPlan's
/// run_features; include/halo/kernels/cuda/lowp_spmm.hpp).
enum SpmmXType : unsigned {
    spmm_x_fp32 = 1u,
    spmm_x_fp16 = 2u,
    spmm_x_bf16 = 4u,
};
inline constexpr unsigned spmm_x_all = spmm_x_fp32 | spmm_x_fp16 | spmm_x_bf16;

/// The SpmmXType bit of `type`.
unsigned spmm_x_bit(FeatureType type);

/// The form of an operator given with `scaling` (null: with its values) under
/// SpmmPlanRequest::pattern_operators.
SpmmForm spmm_form(const OperatorScaling* scaling, bool pattern_operators);

/// "values", "pattern with row scaling", "pattern with row and column scalings", "pattern with
/// row and column scalings kept as the pattern".
const char* to_string(SpmmForm form);

/// What a factory gets besides the context and the operator.
struct SpmmPlanRequest {
    /// The widest dense operand run() must accept.
    std::int64_t max_dim = 1;
    /// What the engine knows about the operator: its pattern name, the row ranges run() will be
    /// asked for, the dataset's stored kernel metadata (a plan takes what it uses).
    const SpmmPlanHints& hints;
    /// The parameters of a kernel that takes some (aes:W[:scaling]); ignored by the others.
    AesOptions aes{};
    /// Accel-GCN's partition of this operator, already loaded from hints.stored (the autotuner
    /// loads it once for all its candidates and reports it); null: accel_gcn loads it itself.
    std::shared_ptr<const AccelGcnPartition> accel_gcn_partition{};
    /// Scaled plans (make_scaled) of MergePath and row-split keep the pattern and both scalings
    /// even where the columns are scaled (cuda::ScaledForm::pattern: 4 bytes per nonzero less
    /// device memory, slower on gcn); false: cuda::ScaledForm::automatic.
    bool pattern_operators = false;
    /// MergePath plans of the cost model and the autotuner's MergePath candidates load X with L2
    /// hints where X is past 32x the L2 (cuda::with_large_x_hints; halo-infer --l2-hints). Off by
    /// default: the plan's hot-column pass costs more setup than a short job saves
    /// (docs/NOTEBOOK.md "L2 hints for X past the L2").
    bool l2_hints = false;
    /// The element types of X the plan will be run with (SpmmXType bits, at least fp32): plans
    /// that pick kernels per width (`auto`'s cost model) build, at setup, the kernels each of
    /// these types needs. Other plans read what their registry entry's x_types says, whatever
    /// this asks.
    unsigned x_types = spmm_x_fp32;
};

/// A kernel's factory: its plan over `a` for widths up to request.max_dim, preprocessing
/// included. Throws halo::InputError when the kernel rejects `a` (the autotuner then leaves it
/// out and says why).
using SpmmPlanFactory = std::unique_ptr<SpmmPlan>(cuda::Context& ctx, const Csr& a,
                                                  const SpmmPlanRequest& request);

/// A kernel's factory for an operator given as its pattern and the scalings of its values
/// (Backend::make_scaled_spmm_plan), in a form its registry entry takes (SpmmKernel::forms): the
/// plan makes the values itself. Null only where the request's stored metadata wants the values
/// (`auto` with stored autotune choices, which read the host's values): never for a request
/// without stored metadata, so every block of an operator that got a scaled plan gets one too.
using ScaledSpmmPlanFactory = std::unique_ptr<SpmmPlan>(cuda::Context& ctx, const Csr& pattern,
                                                        const SpmmPlanRequest& request,
                                                        const OperatorScaling& scaling);

struct SpmmChoice;

struct SpmmKernel {
    /// [a-z0-9_]+: the name on command lines, in autotune choices and reports.
    std::string name{};
    /// One line: what it is (halo-bench prints it beside the plan).
    std::string description{};
    /// halo-infer --spmm's note on it, in parentheses after its name; may be empty.
    std::string help{};
    /// Exact kernels compute the product up to rounding; approximate ones are never chosen
    /// silently: the user asks for them by name (docs/KERNELS.md, the registry).
    bool exact = true;
    /// The kernel metadata it reads from the dataset, and the group it is stored under.
    SpmmMetadataKind metadata = SpmmMetadataKind::none;
    std::string metadata_group{};
    /// SpmmKernelUse bits.
    unsigned uses = 0;
    /// SpmmForm bits: the forms its plans take. The one table of them: the backend asks a
    /// kernel only for a form it takes (the values otherwise), the cost model and the autotuner
    /// choose only among kernels that take the operator's form. A kernel taking a scaled form
    /// has make_scaled; its factory then never declines that form for an operator's shape.
    unsigned forms = spmm_form_values;
    /// SpmmXType bits: the element types of X its plans read. A kernel reading fp16 or bf16 has
    /// plans that are cuda::FeatureSpmmPlan (test_spmm_registry's GPU half checks it); the cost
    /// model and the autotuner choose only among the kernels that read X's type.
    unsigned x_types = spmm_x_fp32;
    /// Null where it takes no arguments; else parses what follows "name:" into `choice`
    /// (throwing halo::InputError naming `text`, the whole choice, on a bad argument), and
    /// `syntax` says how it is written.
    void (*parse_arguments)(std::string_view arguments, std::string_view text,
                            SpmmChoice& choice) = nullptr;
    std::string syntax{};
    /// Null in builds without CUDA and in programs that do not link halo_kernels.
    SpmmPlanFactory* make = nullptr;
    /// Null where the kernel reads the host's values (and where `make` is null).
    ScaledSpmmPlanFactory* make_scaled = nullptr;

    /// How it is written on a command line: `syntax`, or the name.
    const std::string& written() const noexcept { return syntax.empty() ? name : syntax; }
    /// Whether its plans take operators in `form`.
    bool takes(SpmmForm form) const noexcept { return (forms & form) != 0; }
    /// Whether its plans read X stored as `type`.
    bool reads(FeatureType type) const noexcept { return (x_types & spmm_x_bit(type)) != 0; }
};

/// Every registered kernel, in one fixed order: the autotuner's candidates in their tie order
/// (ties go to the earlier kernel), halo-bench's and halo-infer's lists in that order too.
const std::vector<SpmmKernel>& spmm_kernels();

/// The kernels with `use` among their uses, in registry order.
std::vector<const SpmmKernel*> spmm_kernels(SpmmKernelUse use);

/// The kernel called `name` with `use` among its uses, or null.
const SpmmKernel* find_spmm_kernel(std::string_view name, SpmmKernelUse use);

/// "a, b, c": the names of the kernels with `use`.
std::string spmm_kernel_names(SpmmKernelUse use);

/// "auto (note) | cusparse | ... | aes:W[...] (note)": every kernel with `use` as it is written,
/// with its help note, for an option's help text.
std::string spmm_kernel_help(SpmmKernelUse use);

/// The registry as Markdown: a table of every kernel (its name as written, its uses, exact or
/// not, the operator forms and X types it takes, the dataset metadata it reads, its description)
/// and the
/// list of each use in registry order. `halo-inspect --kernels` prints it; docs/KERNELS.md holds
/// a copy between marker comments that scripts/kernel-docs.py writes and test_kernel_docs
/// checks. Identical in builds with and without CUDA (it shows no factory).
std::string spmm_kernels_markdown();

/// A kernel chosen by what a user wrote: "name" or "name:arguments".
struct SpmmChoice {
    const SpmmKernel* kernel = nullptr;
    /// Set for a kernel that took arguments (AES-SpMM's sampling).
    std::optional<AesOptions> aes;
    /// SpmmPlanRequest::pattern_operators of every plan (halo-infer --pattern-operators).
    bool pattern_operators = false;
    /// SpmmPlanRequest::l2_hints of every plan (halo-infer --l2-hints).
    bool l2_hints = false;
};

/// Resolves `text` among the kernels with `use`. Throws halo::InputError: "unknown SpMM kernel
/// 'text'", or the kernel's own message for bad arguments.
SpmmChoice parse_spmm_choice(std::string_view text, SpmmKernelUse use = spmm_use_infer);

}  // namespace halo
