// Kernel metadata conversions (no GPU): Accel-GCN's partition and the autotuner's choices survive
// a round trip through KernelMetadata and through the dataset file; a stored partition is
// checked against the operator it is given; the offline builder produces metadata for exactly the
// operator patterns the engine aggregates with.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/shard.hpp"
#include "halo/engine/engine.hpp"
#include "halo/kernels_host/accel_gcn_metadata.hpp"
#include "halo/kernels_host/accel_gcn_partition.hpp"
#include "halo/kernels_host/autotune.hpp"
#include "halo/kernels_host/autotune_metadata.hpp"
#include "halo/partition/kernel_metadata_build.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo/store/store.hpp"
#include "halo_test.hpp"

namespace halo::testing {
namespace {

// A grid with a few long rows (a hub connected to many nodes) so that the partition has split
// rows, blocks of several degrees and two segments.
Csr hub_graph()
{
    auto edges = grid_edges(20);
    for (global_id v = 1; v < 400; v += 2) {
        edges.src.push_back(0);
        edges.dst.push_back(v);
    }
    BuildOptions build;
    build.symmetrize = true;
    build.normalization = Normalization::gcn;
    build.self_loops = SelfLoops::add;
    return build_csr(edges, build);
}

void expect_same_partition(const AccelGcnPartition& a, const AccelGcnPartition& b)
{
    EXPECT_TRUE(a.options == b.options);
    ASSERT_EQ(a.segments.size(), b.segments.size());
    for (std::size_t s = 0; s < a.segments.size(); ++s) {
        EXPECT_EQ(a.segments[s].begin, b.segments[s].begin);
        EXPECT_EQ(a.segments[s].end, b.segments[s].end);
    }
    EXPECT_EQ(a.segment_rows, b.segment_rows);
    EXPECT_EQ(a.segment_blocks, b.segment_blocks);
    EXPECT_EQ(a.segment_split_rows, b.segment_split_rows);
    EXPECT_EQ(a.sorted_rows, b.sorted_rows);
    EXPECT_EQ(a.indices, b.indices);
    EXPECT_EQ(a.values, b.values);
    EXPECT_EQ(a.blocks, b.blocks);
    EXPECT_EQ(a.split_rows, b.split_rows);
}

template <typename Fn>
void expect_input_error(Fn&& fn, const std::vector<std::string>& parts)
{
    try {
        fn();
        ADD_FAILURE() << "did not throw";
    } catch (const InputError& e) {
        const std::string what = e.what();
        for (const auto& p : parts) {
            EXPECT_NE(what.find(p), std::string::npos) << "message lacks \"" << p << "\": " << what;
        }
    }
}

TEST(AccelGcnMetadata, RoundTripRebuildsTheNonzeros)
{
    const auto a = hub_graph();
    const std::vector<RowRange> ranges{{0, 150}, {150, a.num_rows}};
    const auto segments = accel_gcn_segments(a.num_rows, ranges);
    const auto p = build_accel_gcn_partition(a.view(), segments, {});
    ASSERT_FALSE(p.split_rows.empty()) << "the fixture must exercise split rows";
    auto md = accel_gcn_to_metadata(p, a.view(), "gcn");
    EXPECT_EQ(md.int32_arrays.count("indices"), 0u) << "nonzeros are derived, not stored";
    md.origin = "test";
    expect_same_partition(p, accel_gcn_from_metadata(md, a.view()));
}

TEST(AccelGcnMetadata, RejectsAnotherOperatorAndDamage)
{
    const auto a = hub_graph();
    const std::vector<RowRange> all{{0, a.num_rows}};
    const auto p = build_accel_gcn_partition(a.view(), all, {});
    auto md = accel_gcn_to_metadata(p, a.view(), "adjacency");
    md.origin = "d.h5: /parts/0/kernels/accel_gcn/adjacency";

    const auto other = grid_graph(20);
    expect_input_error([&] { accel_gcn_from_metadata(md, other.view()); },
                       {md.origin, "built for an operator"});

    auto bad = md;
    bad.int32_arrays["blocks"].pop_back();
    expect_input_error([&] { accel_gcn_from_metadata(bad, a.view()); },
                       {md.origin, "multiple of 4"});

    bad = md;
    std::swap(bad.int32_arrays["sorted_rows"][0], bad.int32_arrays["sorted_rows"].back());
    expect_input_error([&] { accel_gcn_from_metadata(bad, a.view()); }, {md.origin});

    bad = md;
    bad.int32_arrays["blocks"][2] += 1;  // first nonzero of block 0
    expect_input_error([&] { accel_gcn_from_metadata(bad, a.view()); }, {md.origin});

    bad = md;
    bad.ints["degree_sort"] = 7;
    expect_input_error([&] { accel_gcn_from_metadata(bad, a.view()); }, {"degree_sort = 7"});

    bad = md;
    bad.int64_arrays.erase("segment_rows");
    expect_input_error([&] { accel_gcn_from_metadata(bad, a.view()); },
                       {"missing", "segment_rows"});
}

AutotuneTable tuned_table()
{
    const std::vector<std::string> names{"cusparse", "accel_gcn", "mergepath", "rowsplit"};
    AutotuneTable table(1, 0);
    const std::vector<std::vector<double>> times{{0.3, 0.2, 0.1, 0.4}, {0.5, 0.6, 0.7, 0.8}};
    table.choose({0, 150, 64}, names, [&](std::size_t i) { return times[0][i]; });
    table.choose({150, 400, 64}, names, [&](std::size_t i) {
        if (i == 3) {
            HALO_THROW(LogicError, "width too large");
        }
        return times[1][i];
    });
    return table;
}

TEST(AutotuneMetadata, StoredChoicesAreReusedWithoutTiming)
{
    const auto a = hub_graph();
    const auto table = tuned_table();
    const auto md = autotune_to_metadata(
        table, metadata_for_operator(autotune_metadata_kernel, "gcn", a.view()), "NVIDIA H200");
    const std::vector<std::string> names{"cusparse", "accel_gcn", "mergepath", "rowsplit"};
    const auto stored = autotune_from_metadata(md, a.view(), "NVIDIA H200", names);
    ASSERT_TRUE(stored.note.empty()) << stored.note;
    ASSERT_EQ(stored.entries.size(), 2u);

    AutotuneTable fresh(3, 1);
    for (const auto& [key, choice] : stored.entries) {
        fresh.preload(key, choice);
    }
    int calls = 0;
    const auto& c1 = fresh.choose({0, 150, 64}, names, [&](std::size_t) {
        ++calls;
        return 1.0;
    });
    EXPECT_EQ(calls, 0) << "a stored choice is not timed again";
    EXPECT_EQ(c1.index, 2u);
    EXPECT_TRUE(c1.stored);
    const auto* c2 = fresh.find({150, 400, 64});
    ASSERT_NE(c2, nullptr);
    EXPECT_EQ(c2->index, 0u);
    EXPECT_TRUE(std::isnan(c2->median_ms[3]));
    EXPECT_FALSE(c2->failures[3].empty());
    EXPECT_NE(fresh.report().find("mergepath 0.100 ms (cusparse 0.300, accel_gcn 0.200, "
                                  "rowsplit 0.400) [stored]"),
              std::string::npos)
        << fresh.report();
    // A new shape is timed as before.
    fresh.choose({0, 150, 32}, names, [&](std::size_t) {
        ++calls;
        return 1.0;
    });
    EXPECT_EQ(calls, 4 * 4);
}

TEST(AutotuneMetadata, OtherDeviceOrCandidatesAreIgnoredWithANote)
{
    const auto a = hub_graph();
    const auto md = autotune_to_metadata(
        tuned_table(), metadata_for_operator(autotune_metadata_kernel, "gcn", a.view()),
        "NVIDIA H200");
    const std::vector<std::string> names{"cusparse", "accel_gcn", "mergepath", "rowsplit"};
    const auto other_device = autotune_from_metadata(md, a.view(), "NVIDIA H100", names);
    EXPECT_TRUE(other_device.entries.empty());
    EXPECT_NE(other_device.note.find("measured on NVIDIA H200, this is NVIDIA H100"),
              std::string::npos)
        << other_device.note;
    const auto fewer = autotune_from_metadata(md, a.view(), "NVIDIA H200", {"cusparse"});
    EXPECT_TRUE(fewer.entries.empty());
    EXPECT_NE(fewer.note.find("cusparse,accel_gcn,mergepath,rowsplit"), std::string::npos);
}

TEST(AutotuneMetadata, RejectsMalformedTables)
{
    const auto a = hub_graph();
    auto md = autotune_to_metadata(
        tuned_table(), metadata_for_operator(autotune_metadata_kernel, "gcn", a.view()), "dev");
    md.origin = "d.h5: /parts/1/kernels/autotune/gcn";
    const std::vector<std::string> names{"cusparse", "accel_gcn", "mergepath", "rowsplit"};
    auto bad = md;
    bad.int32_arrays["choice"][1] = 3;  // rowsplit failed on that shape
    expect_input_error([&] { autotune_from_metadata(bad, a.view(), "dev", names); },
                       {md.origin, "entry 1", "not a candidate that ran"});
    bad = md;
    bad.int64_arrays["end"][0] = a.num_rows + 1;
    expect_input_error([&] { autotune_from_metadata(bad, a.view(), "dev", names); },
                       {md.origin, "entry 0", "not a non-empty range"});
    bad = md;
    bad.float_arrays["median_ms"].pop_back();
    expect_input_error([&] { autotune_from_metadata(bad, a.view(), "dev", names); },
                       {md.origin, "median_ms"});
    const auto other = grid_graph(20);
    expect_input_error([&] { autotune_from_metadata(md, other.view(), "dev", names); },
                       {md.origin, "built for an operator"});
}

TEST(OfflineKernelMetadata, MatchesTheEngineOperatorsAndSurvivesTheFile)
{
    const auto a = hub_graph();
    // Raw adjacency (what the engine derives its operators from), two parts.
    auto raw = a;
    raw.values.clear();
    const auto owner = partition_graph(raw.view(), {Partitioner::block, 2});
    const auto shard = build_shard(raw, owner, 2, 1);
    const auto mds = build_kernel_metadata(shard, "none", {"accel_gcn"});
    ASSERT_EQ(mds.size(), 2u);
    EXPECT_EQ(mds[0].op, "adjacency");
    EXPECT_EQ(mds[1].op, "gcn");
    // The engine's gcn operator (real degrees) has the pattern the metadata was built for.
    std::vector<float> degree = gcn_degrees(shard);
    degree.resize(static_cast<std::size_t>(shard.num_owned + shard.num_halo), 3.0f);
    const auto gcn = make_aggregation(shard, Aggregation::gcn, "none", degree);
    EXPECT_NO_THROW(mds[1].expect_operator(gcn.view()));
    EXPECT_NO_THROW(mds[0].expect_operator(shard.csr.view()));
    const auto p = accel_gcn_from_metadata(mds[1], gcn.view());
    EXPECT_NO_THROW(check_stored_accel_gcn_partition(
        gcn.view(), p, {}, std::vector<RowRange>{{0, shard.num_interior},
                                                 {shard.num_interior, shard.num_owned}}));

    EXPECT_EQ(build_kernel_metadata(shard, "mean", {"accel_gcn"}).size(), 1u)
        << "no gcn layer runs on a mean-normalized dataset";
    expect_input_error([&] { build_kernel_metadata(shard, "none", {"maxk_typo"}); },
                       {"maxk_typo", "unknown", "accel_gcn"});
}

// Choices for fp32 and bf16 X over the same range and width (16-bit activations).
AutotuneTable typed_table()
{
    AutotuneTable table(1, 0);
    const std::vector<std::string> names{"cusparse", "accel_gcn", "mergepath", "rowsplit"};
    table.choose({0, 150, 64}, names,
                 [](std::size_t i) { return 0.1 * static_cast<double>(i + 1); });
    table.choose({0, 150, 64, halo::FeatureType::bf16}, names, [](std::size_t i) {
        if (i == 0) {
            HALO_THROW(halo::InputError, "cusparse reads fp32 X only, not bf16");
        }
        return 0.1 * static_cast<double>(5 - i);
    });
    return table;
}

TEST(AutotuneMetadata, ElementTypesRoundTripAndOldTablesAreFp32)
{
    const auto a = hub_graph();
    const std::vector<std::string> names{"cusparse", "accel_gcn", "mergepath", "rowsplit"};
    const auto md = autotune_to_metadata(
        typed_table(), metadata_for_operator(autotune_metadata_kernel, "gcn", a.view()), "dev");
    ASSERT_EQ(md.int32_arrays.count("x_type"), 1u);
    EXPECT_EQ(md.int32_arrays.at("x_type"), (std::vector<std::int32_t>{0, 2}));
    const auto stored = autotune_from_metadata(md, a.view(), "dev", names);
    ASSERT_TRUE(stored.note.empty()) << stored.note;
    ASSERT_EQ(stored.entries.size(), 2u);
    EXPECT_EQ(stored.entries[0].first.x_type, halo::FeatureType::fp32);
    EXPECT_EQ(stored.entries[0].second.index, 0u);
    EXPECT_EQ(stored.entries[1].first.x_type, halo::FeatureType::bf16);
    EXPECT_EQ(stored.entries[1].second.index, 3u);
    // A table of fp32 entries only is written without x_type, as before 16-bit X, and a table
    // without it reads as fp32.
    const auto plain = autotune_to_metadata(
        tuned_table(), metadata_for_operator(autotune_metadata_kernel, "gcn", a.view()), "dev");
    EXPECT_EQ(plain.int32_arrays.count("x_type"), 0u);
    for (const auto& [key, choice] :
         autotune_from_metadata(plain, a.view(), "dev", names).entries) {
        EXPECT_EQ(key.x_type, halo::FeatureType::fp32);
    }
    // Damaged: a code that is no type, or another length.
    auto bad = md;
    bad.origin = "d.h5: /parts/0/kernels/autotune/gcn";
    bad.int32_arrays["x_type"][1] = 7;
    expect_input_error([&] { autotune_from_metadata(bad, a.view(), "dev", names); },
                       {bad.origin, "entry 1", "x_type 7"});
    bad.int32_arrays["x_type"].pop_back();
    expect_input_error([&] { autotune_from_metadata(bad, a.view(), "dev", names); },
                       {bad.origin, "x_type has 1 values for 2 entries"});
}

}  // namespace
}  // namespace halo::testing
