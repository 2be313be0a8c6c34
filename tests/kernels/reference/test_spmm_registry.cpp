// The SpMM kernel registry (include/halo/kernels_host/spmm_registry.hpp) on the CPU: names and
// their uses, the autotuner's candidate order that stored choices depend on, the help text
// halo-infer prints, the parsing of what users write (aes:W[:scaling] included), and the offline
// metadata that halo-partition builds for the kernels that read it.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
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

// Stored autotune choices name the candidate list, and ties go to the earlier candidate: this
// order is part of the dataset format (docs/FORMAT.md), changing it retimes every dataset.
TEST(SpmmRegistry, AutotuneCandidatesAreTheExactKernelsInTheirTieOrder)
{
    EXPECT_EQ(names(halo::spmm_use_autotune),
              (std::vector<std::string>{"cusparse", "accel_gcn", "mergepath", "mergepath_c200",
                                        "mergepath_c400", "mergepath_c400_t128", "rowsplit",
                                        "rowchunk", "resident"}));
    for (const auto* k : halo::spmm_kernels(halo::spmm_use_autotune)) {
        EXPECT_TRUE(k->exact) << k->name << ": approximate kernels are never chosen silently";
        EXPECT_EQ(k->parse_arguments, nullptr) << k->name;
    }
}

TEST(SpmmRegistry, ToolListsFollowTheRegistryOrder)
{
    EXPECT_EQ(halo::spmm_kernel_names(halo::spmm_use_bench),
              "auto, cusparse, accel_gcn, accel_gcn_nosort, accel_gcn_nocombine, mergepath, "
              "mergepath_c400_t128, mergepath_c400_l2hints, rowsplit, rowchunk, resident, "
              "resident_csr_order, autotune");
    EXPECT_EQ(names(halo::spmm_use_infer),
              (std::vector<std::string>{"auto", "cusparse", "accel_gcn", "mergepath", "rowsplit",
                                        "rowchunk", "resident", "autotune", "aes"}));
    const auto help = halo::spmm_kernel_help(halo::spmm_use_infer);
    EXPECT_EQ(help.rfind("auto (default: ", 0), 0u) << help;
    EXPECT_NE(help.find(" | rowsplit (a warp per row) | "), std::string::npos) << help;
    EXPECT_NE(help.find(" | aes:W[:sample_sum|rescaled] (AES-SpMM, approximate: at most W "
                        "sampled nonzeros per row, W in 16..1024; also with --backend cpu)"),
              std::string::npos)
        << help;
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
