// The SpMM kernel registry (include/halo/kernels_host/spmm_registry.hpp) on the CPU: names and
// their uses, the autotuner's candidate order that stored choices depend on, the help text
// halo-infer prints, the parsing of what users write (aes:W[:scaling] included), and the offline
// metadata that halo-partition builds for the kernels that read it.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/kernel_metadata.hpp"
#include "halo/kernels_host/aes.hpp"
#include "halo/kernels_host/spmm_registry.hpp"
#include "halo/partition/kernel_metadata_build.hpp"

namespace {

std::vector<std::string> names(halo::SpmmKernelUse use)
{
    std::vector<std::string> out;
    for (const auto* k : halo::spmm_kernels(use)) {
        out.push_back(k->name);
    }
    return out;
}

// Throws halo::InputError whose message contains `part`.
void expect_refused(const std::string& text, const std::string& part,
                    halo::SpmmKernelUse use = halo::spmm_use_infer)
{
    try {
        static_cast<void>(halo::parse_spmm_choice(text, use));
        ADD_FAILURE() << "'" << text << "' was accepted";
    } catch (const halo::InputError& e) {
        EXPECT_NE(e.message().find(part), std::string::npos) << e.message();
    }
}

TEST(SpmmRegistry, NamesAreUniqueFileNamesAndEveryKernelHasAUse)
{
    std::set<std::string> seen;
    for (const auto& k : halo::spmm_kernels()) {
        EXPECT_TRUE(seen.insert(k.name).second) << k.name << " registered twice";
        EXPECT_NO_THROW(halo::validate_metadata_name(k.name, "kernel")) << k.name;
        EXPECT_NE(k.uses, 0u) << k.name;
        EXPECT_FALSE(k.description.empty()) << k.name;
        EXPECT_EQ(k.metadata == halo::SpmmMetadataKind::none, k.metadata_group.empty()) << k.name;
        EXPECT_EQ(k.parse_arguments == nullptr, k.syntax.empty()) << k.name;
#ifdef HALO_HAVE_CUDA
        EXPECT_NE(k.make, nullptr) << k.name << " has no factory in a CUDA build";
#else
        EXPECT_EQ(k.make, nullptr) << k.name;
#endif
    }
}

// Stored autotune choices name the candidate list, and ties go to the earlier candidate: the
// order is part of the dataset format (docs/FORMAT.md; docs/KERNELS.md's generated table shows
// it, and test_kernel_docs fails when it changes). What is pinned here: cuSPARSE, the baseline,
// wins ties, and MergePath's cost variants follow their default.
TEST(SpmmRegistry, AutotuneCandidatesAreTheExactKernelsInTheirTieOrder)
{
    const auto candidates = names(halo::spmm_use_autotune);
    ASSERT_FALSE(candidates.empty());
    EXPECT_EQ(candidates.front(), "cusparse");
    const auto at = [&](const std::string& name) {
        const auto it = std::find(candidates.begin(), candidates.end(), name);
        EXPECT_NE(it, candidates.end()) << name << " is no autotune candidate";
        return it - candidates.begin();
    };
    EXPECT_LT(at("mergepath"), at("mergepath_c200"));
    EXPECT_LT(at("mergepath_c200"), at("mergepath_c400"));
    for (const auto* k : halo::spmm_kernels(halo::spmm_use_autotune)) {
        EXPECT_TRUE(k->exact) << k->name << ": approximate kernels are never chosen silently";
        EXPECT_EQ(k->parse_arguments, nullptr) << k->name;
        EXPECT_NE(k->name, "auto");
        EXPECT_NE(k->name, "autotune");
    }
}

// Each tool's list is the registry's kernels with its use, in registry order: rebuilt here from
// the table (no list by hand), with the entries whose place in a list is behaviour pinned.
TEST(SpmmRegistry, ToolListsFollowTheRegistryOrder)
{
    for (const auto use : {halo::spmm_use_infer, halo::spmm_use_bench, halo::spmm_use_autotune}) {
        std::string expected;
        for (const auto& k : halo::spmm_kernels()) {
            if ((k.uses & use) != 0) {
                expected += (expected.empty() ? "" : ", ") + k.name;
            }
        }
        EXPECT_FALSE(expected.empty()) << "use " << use;
        EXPECT_EQ(halo::spmm_kernel_names(use), expected) << "use " << use;
    }
    const auto infer = names(halo::spmm_use_infer);
    ASSERT_FALSE(infer.empty());
    EXPECT_EQ(infer.front(), "auto");  // halo-infer's default comes first in its help
    EXPECT_EQ(halo::spmm_kernel_names(halo::spmm_use_bench).rfind("auto, cusparse, ", 0), 0u);
    const auto help = halo::spmm_kernel_help(halo::spmm_use_infer);
    EXPECT_EQ(help.rfind("auto (default: ", 0), 0u) << help;
    EXPECT_NE(help.find(" | rowsplit (a warp per row) | "), std::string::npos) << help;
    EXPECT_NE(help.find(" | aes:W[:sample_sum|rescaled] (AES-SpMM, approximate: at most W "
                        "sampled nonzeros per row, W in 16..1024; also with --backend cpu)"),
              std::string::npos)
        << help;
}

// What `halo-inspect --kernels` prints and docs/KERNELS.md holds: a row per kernel in registry
// order, as written (a '|' escaped in the table), and each tool's list.
TEST(SpmmRegistry, MarkdownHasARowPerKernelAndEachList)
{
    const auto markdown = halo::spmm_kernels_markdown();
    std::size_t from = 0;
    for (const auto& k : halo::spmm_kernels()) {
        std::string written;
        for (const char c : k.written()) {
            written += c == '|' ? std::string("\\|") : std::string(1, c);
        }
        const auto row = markdown.find("\n| `" + written + "` | ", from);
        ASSERT_NE(row, std::string::npos) << k.name << " has no row after the previous kernel's";
        EXPECT_NE(markdown.find(k.description, row), std::string::npos) << k.name;
        from = row + 1;
    }
    EXPECT_NE(
        markdown.find("| `aes:W[:sample_sum\\|rescaled]` | yes | - | - | no | values | fp32 | - |"),
        std::string::npos)
        << markdown;
    EXPECT_NE(
        markdown.find("| `mergepath` | yes | yes | yes | yes | all four | fp32, fp16, bf16 | - |"),
        std::string::npos)
        << markdown;
    for (const auto& [use, label] :
         {std::pair{halo::spmm_use_infer, "- halo-infer `--spmm`: "},
          std::pair{halo::spmm_use_bench, "- halo-bench `--kernels`: "},
          std::pair{halo::spmm_use_autotune,
                    "- the autotuner's candidates, in their tie order: "}}) {
        std::string line = label;
        bool first = true;
        for (const auto* k : halo::spmm_kernels(use)) {
            line += (first ? "`" : ", `") + k->written() + "`";
            first = false;
        }
        EXPECT_NE(markdown.find(line + "\n"), std::string::npos) << line << "\n" << markdown;
    }
}

TEST(SpmmRegistry, ParsesNamesAndAesArguments)
{
    const auto exact = halo::parse_spmm_choice("mergepath");
    ASSERT_NE(exact.kernel, nullptr);
    EXPECT_EQ(exact.kernel->name, "mergepath");
    EXPECT_FALSE(exact.aes.has_value());
    EXPECT_EQ(halo::parse_spmm_choice("auto").kernel->name, "auto");

    const auto aes = halo::parse_spmm_choice("aes:64");
    EXPECT_EQ(aes.kernel->name, "aes");
    EXPECT_FALSE(aes.kernel->exact);
    ASSERT_TRUE(aes.aes.has_value());
    EXPECT_EQ(aes.aes->sample_width, 64);
    EXPECT_EQ(aes.aes->scaling, halo::AesScaling::sample_sum);
    const auto rescaled = halo::parse_spmm_choice("aes:1024:rescaled");
    ASSERT_TRUE(rescaled.aes.has_value());
    EXPECT_EQ(rescaled.aes->sample_width, 1024);
    EXPECT_EQ(rescaled.aes->scaling, halo::AesScaling::rescaled);

    expect_refused("foo", "unknown SpMM kernel 'foo'");
    expect_refused("", "unknown SpMM kernel ''");
    expect_refused("cusparse:2", "unknown SpMM kernel 'cusparse:2'");
    expect_refused("aes", "needs its arguments: aes:W[:sample_sum|rescaled]");
    expect_refused("aes:5", "W = 5 outside");
    expect_refused("aes:2000", "2000");
    expect_refused("aes:12x", "'12x' is not a sample width");
    expect_refused("aes:", "'' is not a sample width");
    expect_refused("aes:64:loud", "loud");
}

TEST(SpmmRegistry, EachToolSeesOnlyItsKernels)
{
    // Ablations are halo-bench's, cost variants the autotuner's: halo-infer refuses both.
    expect_refused("accel_gcn_nosort", "unknown SpMM kernel");
    expect_refused("mergepath_c200", "unknown SpMM kernel");
    EXPECT_EQ(halo::parse_spmm_choice("accel_gcn_nosort", halo::spmm_use_bench).kernel->name,
              "accel_gcn_nosort");
    // halo-bench times `auto` as halo-infer runs it without stored choices: the cost model.
    EXPECT_EQ(halo::parse_spmm_choice("auto", halo::spmm_use_bench).kernel->name, "auto");
    EXPECT_EQ(halo::find_spmm_kernel("auto", halo::spmm_use_autotune), nullptr);
    EXPECT_EQ(halo::find_spmm_kernel("mergepath_c400", halo::spmm_use_bench), nullptr);
    EXPECT_NE(halo::find_spmm_kernel("mergepath_c400", halo::spmm_use_autotune), nullptr);
}

// halo-partition --kernel-metadata offers every kernel whose metadata is built offline.
TEST(SpmmRegistry, OfflineMetadataIsBuiltByHaloPartition)
{
    const auto& offline = halo::offline_metadata_kernels();
    for (const auto& k : halo::spmm_kernels()) {
        const bool listed =
            std::find(offline.begin(), offline.end(), k.metadata_group) != offline.end();
        EXPECT_EQ(listed, k.metadata == halo::SpmmMetadataKind::offline) << k.name;
    }
    EXPECT_EQ(offline.front(), "accel_gcn");
}

}  // namespace
