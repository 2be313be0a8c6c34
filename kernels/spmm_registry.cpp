// The SpMM kernel registry (include/halo/kernels_host/spmm_registry.hpp): one entry per kernel. A
// kernel joins with its factory's line in spmm_factories.hpp and one entry below (docs/KERNELS.md,
// "Adding a kernel").
#include "halo/kernels_host/spmm_registry.hpp"

#include <string>
#include <string_view>
#include <utility>

#include "halo/core/error.hpp"
#include "spmm_factories.hpp"

// The factories, declared weak: halo_kernels_host never links CUDA code, so a program without the
// CUDA library (halo-partition, halo-inspect, every CPU-only build) sees each address null, and
// one that links halo_kernels in a CUDA build sees them all (kernels/CMakeLists.txt: its anchor,
// cuda/spmm/spmm_factories.cpp, pulls every factory in). No HALO_HAVE_CUDA here: this file is
// compiled once, for both.
namespace halo::cuda {
#define HALO_DECLARE_WEAK_FACTORY(type, name) [[gnu::weak]] type name;
HALO_SPMM_FACTORIES(HALO_DECLARE_WEAK_FACTORY)
#undef HALO_DECLARE_WEAK_FACTORY
}  // namespace halo::cuda
#define HALO_SPMM_FACTORY(name) (&halo::cuda::name)

namespace halo {
namespace {

// "W" or "W:scaling" after "aes:".
void parse_aes_arguments(std::string_view arguments, std::string_view text, SpmmChoice& choice)
{
    const auto colon = arguments.find(':');
    const std::string width_text(arguments.substr(0, colon));
    AesOptions options;
    std::size_t used = 0;
    try {
        options.sample_width = std::stoll(width_text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (width_text.empty() || used != width_text.size()) {
        HALO_THROW(InputError, text, ": '", width_text,
                   "' is not a sample width (expected aes:W[:sample_sum|rescaled], W in ",
                   kAesMinWidth, "..", kAesMaxWidth, ")");
    }
    if (colon != std::string_view::npos) {
        options.scaling = parse_aes_scaling(arguments.substr(colon + 1));
    }
    validate(options);
    choice.aes = options;
}

constexpr unsigned infer = spmm_use_infer;
constexpr unsigned bench = spmm_use_bench;
constexpr unsigned autotune = spmm_use_autotune;
constexpr unsigned all = spmm_forms_all;
constexpr unsigned values = spmm_form_values;
constexpr unsigned row_scaled = spmm_form_row_scaled;
constexpr unsigned scaled_pattern = spmm_form_scaled_pattern;
constexpr unsigned lowp = spmm_x_all;  // fp32, fp16 and bf16 X (the plan is a FeatureSpmmPlan)

}  // namespace

const std::vector<SpmmKernel>& spmm_kernels()
{
    // The order is the autotuner's tie order: do not reorder its candidates (stored choices name
    // the candidate list, and a different list is timed again).
    static const std::vector<SpmmKernel> kernels{
        {.name = "auto",
         .description = "the autotuner's choices stored in the dataset for this device, the cost "
                        "model's kernel per width elsewhere (nothing timed)",
         .help = "default: the autotuner's choices stored in the dataset for this device, the "
                 "cost model's kernel per width where there are none",
         .metadata = SpmmMetadataKind::tuning,
         .metadata_group = "autotune",
         .uses = infer | bench,
         .forms = all,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(stored_or_modeled_spmm_factory),
         .make_scaled = HALO_SPMM_FACTORY(stored_or_modeled_scaled_factory)},
        {.name = "cusparse",
         .description = "cuSPARSE SpMM over CSR (the baseline)",
         .uses = infer | bench | autotune,
         .forms = all,
         .make = HALO_SPMM_FACTORY(cusparse_spmm_factory),
         .make_scaled = HALO_SPMM_FACTORY(cusparse_scaled_factory)},
        {.name = "accel_gcn",
         .description = "Accel-GCN: degree sort, block partition (int4 metadata), combined warps",
         .metadata = SpmmMetadataKind::offline,
         .metadata_group = "accel_gcn",
         .uses = infer | bench | autotune,
         .forms = values | row_scaled | scaled_pattern,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(accel_gcn_spmm_factory),
         .make_scaled = HALO_SPMM_FACTORY(accel_gcn_scaled_factory)},
        {.name = "accel_gcn_nosort",
         .description = "Accel-GCN ablation: no degree sort (blocks take runs of equal degree)",
         .uses = bench,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(accel_gcn_nosort_spmm_factory)},
        {.name = "accel_gcn_nocombine",
         .description =
             "Accel-GCN ablation: no combined warps (each warp loops over its column slices)",
         .uses = bench,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(accel_gcn_nocombine_spmm_factory)},
        {.name = "mergepath",
         .description = "MergePath-SpMM: merge-path segments, plain stores, atomics for split rows",
         .uses = infer | bench | autotune,
         .forms = all,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(mergepath_spmm_factory),
         .make_scaled = HALO_SPMM_FACTORY(mergepath_scaled_factory)},
        // Larger costs (fewer, longer segments) win on large power-law graphs and lose on small
        // ones (docs/NOTEBOOK.md's cost sweep): the autotuner tunes the cost like the kernel.
        {.name = "mergepath_c200",
         .description = "MergePath-SpMM, 200 merge items per segment at every width",
         .uses = autotune,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(mergepath_c200_spmm_factory)},
        {.name = "mergepath_c400",
         .description = "MergePath-SpMM, 400 merge items per segment at every width, L2 hints "
                        "where X is past 32x the L2",
         .uses = autotune,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(mergepath_c400_spmm_factory)},
        // Column slices: where X outgrows L2, slices of 128 features let twice (at d = 256) as
        // many X rows stay in L2 between their reads (docs/NOTEBOOK.md "The gather-bound
        // limit"); at d <= 128 it is mergepath_c400 itself.
        {.name = "mergepath_c400_t128",
         .description = "MergePath-SpMM, cost 400, run over slices of 128 feature columns",
         .uses = bench | autotune,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(mergepath_c400_t128_spmm_factory)},
        // L2 hints (the cold X rows evict-first, the hot evict-last): the cost model's choice
        // where X is past 32x the L2; here at every width, to measure them anywhere.
        {.name = "mergepath_c400_l2hints",
         .description = "MergePath-SpMM, cost 400, X rows loaded with L2 hints at every width",
         .uses = bench,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(mergepath_c400_l2hints_spmm_factory)},
        {.name = "rowsplit",
         .description = "row-split SpMM: a warp (or part of one) per row, lanes across columns",
         .help = "a warp per row",
         .uses = infer | bench | autotune,
         .forms = all,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(rowsplit_spmm_factory),
         .make_scaled = HALO_SPMM_FACTORY(rowsplit_scaled_factory)},
        // Row-split with long rows cut into units (no hub row holds a warp for its whole length)
        // in one launch: the small graphs' kernel, where a launch costs as much as the product.
        {.name = "rowchunk",
         .description = "row-split SpMM with rows longer than a unit cut into units, one launch",
         .help = "row-split with long rows cut into units summed by the last to finish",
         .uses = infer | bench | autotune,
         .forms = all,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(rowchunk_spmm_factory),
         .make_scaled = HALO_SPMM_FACTORY(rowchunk_scaled_factory)},
        // X's slices of 4 columns held in shared memory, A read once per slice: where X fits in
        // L2 and rows are long, no gather of X rows from L2 per nonzero (operators of at most
        // about 14.5K columns; the plan refuses larger ones, and the autotuner leaves it out).
        {.name = "resident",
         .description = "X slices of 4 columns resident in shared memory, A read per slice "
                        "(SELL-32 chunks, bank-conflict schedule)",
         .help = "X slices in shared memory, operators of at most ~14.5K columns",
         .uses = infer | bench | autotune,
         .forms = all,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(resident_spmm_factory),
         .make_scaled = HALO_SPMM_FACTORY(resident_scaled_factory)},
        {.name = "resident_csr_order",
         .description = "resident-slice ablation: each lane's nonzeros in CSR order (no "
                        "bank-conflict schedule)",
         .uses = bench,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(resident_csr_order_spmm_factory)},
        {.name = "autotune",
         .description = "the fastest exact kernel per (range, width), timed on its first run",
         .help = "the fastest exact kernel per row range and width, timed on the first run, or "
                 "taken from the dataset's stored choices",
         .metadata = SpmmMetadataKind::tuning,
         .metadata_group = "autotune",
         .uses = infer | bench,
         .x_types = lowp,
         .make = HALO_SPMM_FACTORY(autotune_spmm_factory)},
        {.name = "aes",
         .description = "AES-SpMM: adaptive edge sampling, at most W sampled nonzeros per row",
         .help = "AES-SpMM, approximate: at most W sampled nonzeros per row, W in " +
                 std::to_string(kAesMinWidth) + ".." + std::to_string(kAesMaxWidth) +
                 "; also with --backend cpu",
         .exact = false,
         .uses = infer,
         .parse_arguments = &parse_aes_arguments,
         .syntax = "aes:W[:sample_sum|rescaled]",
         .make = HALO_SPMM_FACTORY(aes_spmm_factory)},
    };
    return kernels;
}

unsigned spmm_x_bit(FeatureType type)
{
    switch (type) {
        case FeatureType::fp32:
            return spmm_x_fp32;
        case FeatureType::fp16:
            return spmm_x_fp16;
        case FeatureType::bf16:
            return spmm_x_bf16;
    }
    return 0;
}

SpmmForm spmm_form(const OperatorScaling* scaling, bool pattern_operators)
{
    if (scaling == nullptr) {
        return spmm_form_values;
    }
    if (scaling->col.empty()) {
        return spmm_form_row_scaled;
    }
    return pattern_operators ? spmm_form_scaled_pattern : spmm_form_scaled;
}

const char* to_string(SpmmForm form)
{
    switch (form) {
        case spmm_form_values:
            return "values";
        case spmm_form_row_scaled:
            return "pattern with row scaling";
        case spmm_form_scaled:
            return "pattern with row and column scalings";
        case spmm_form_scaled_pattern:
            return "pattern with row and column scalings kept as the pattern";
    }
    return "unknown form";
}

std::vector<const SpmmKernel*> spmm_kernels(SpmmKernelUse use)
{
    std::vector<const SpmmKernel*> out;
    for (const auto& k : spmm_kernels()) {
        if ((k.uses & use) != 0) {
            out.push_back(&k);
        }
    }
    return out;
}

const SpmmKernel* find_spmm_kernel(std::string_view name, SpmmKernelUse use)
{
    for (const auto* k : spmm_kernels(use)) {
        if (k->name == name) {
            return k;
        }
    }
    return nullptr;
}

std::string spmm_kernel_names(SpmmKernelUse use)
{
    std::string out;
    for (const auto* k : spmm_kernels(use)) {
        out += (out.empty() ? "" : ", ") + k->name;
    }
    return out;
}

namespace {

// `text` in a Markdown table cell: its '|' escaped.
std::string cell(std::string_view text)
{
    std::string out;
    for (const char c : text) {
        out += c == '|' ? "\\|" : std::string(1, c);
    }
    return out;
}

std::string yes_no(bool yes)
{
    return yes ? "yes" : "-";
}

std::string forms_text(unsigned forms)
{
    if (forms == spmm_forms_all) {
        return "all four";
    }
    std::string out;
    for (const auto& [bit, name] :
         {std::pair{spmm_form_values, "values"}, std::pair{spmm_form_row_scaled, "row_scaled"},
          std::pair{spmm_form_scaled, "scaled"},
          std::pair{spmm_form_scaled_pattern, "scaled_pattern"}}) {
        if ((forms & bit) != 0) {
            out += (out.empty() ? "" : ", ") + std::string(name);
        }
    }
    return out;
}

std::string x_types_text(unsigned x_types)
{
    std::string out;
    for (const auto& [bit, name] : {std::pair{spmm_x_fp32, "fp32"}, std::pair{spmm_x_fp16, "fp16"},
                                    std::pair{spmm_x_bf16, "bf16"}}) {
        if ((x_types & bit) != 0) {
            out += (out.empty() ? "" : ", ") + std::string(name);
        }
    }
    return out;
}

std::string metadata_text(const SpmmKernel& k)
{
    switch (k.metadata) {
        case SpmmMetadataKind::none:
            return "-";
        case SpmmMetadataKind::offline:
            return "`" + k.metadata_group + "` (offline)";
        case SpmmMetadataKind::tuning:
            return "`" + k.metadata_group + "` (tuning)";
    }
    return "-";
}

// "`a`, `b`, `c`": the kernels with `use` as they are written.
std::string written_list(SpmmKernelUse use)
{
    std::string out;
    for (const auto* k : spmm_kernels(use)) {
        out += (out.empty() ? "`" : ", `") + k->written() + "`";
    }
    return out;
}

}  // namespace

std::string spmm_kernels_markdown()
{
    std::string out =
        "| kernel | halo-infer | halo-bench | autotune | exact | forms | X types | metadata | what "
        "it is |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for (const auto& k : spmm_kernels()) {
        out += "| `" + cell(k.written()) + "` | " + yes_no((k.uses & spmm_use_infer) != 0) + " | " +
               yes_no((k.uses & spmm_use_bench) != 0) + " | " +
               yes_no((k.uses & spmm_use_autotune) != 0) + " | " + (k.exact ? "yes" : "no") +
               " | " + forms_text(k.forms) + " | " + x_types_text(k.x_types) + " | " +
               metadata_text(k) + " | " + cell(k.description) + " |\n";
    }
    out += "\n- halo-infer `--spmm`: " + written_list(spmm_use_infer) + "\n";
    out += "- halo-bench `--kernels`: " + written_list(spmm_use_bench) + "\n";
    out += "- the autotuner's candidates, in their tie order: " + written_list(spmm_use_autotune) +
           "\n";
    return out;
}

std::string spmm_kernel_help(SpmmKernelUse use)
{
    std::string out;
    for (const auto* k : spmm_kernels(use)) {
        out += (out.empty() ? "" : " | ") + k->written();
        if (!k->help.empty()) {
            out += " (" + k->help + ")";
        }
    }
    return out;
}

SpmmChoice parse_spmm_choice(std::string_view text, SpmmKernelUse use)
{
    const auto colon = text.find(':');
    const auto* kernel = find_spmm_kernel(text.substr(0, colon), use);
    if (kernel == nullptr || (colon != std::string_view::npos && !kernel->parse_arguments)) {
        HALO_THROW(InputError, "unknown SpMM kernel '", text, "'");
    }
    SpmmChoice choice;
    choice.kernel = kernel;
    if (kernel->parse_arguments) {
        if (colon == std::string_view::npos) {
            HALO_THROW(InputError, "SpMM kernel '", text,
                       "' needs its arguments: ", kernel->written());
        }
        kernel->parse_arguments(text.substr(colon + 1), text, choice);
    }
    return choice;
}

}  // namespace halo
