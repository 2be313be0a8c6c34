// read_shard's features reader (ShardReadOptions::features): told of every feature row once, in
// order, as stored (float32 or int8; fp16 / bf16 widened) and where the returned shard keeps them, on a thread of its
// own while the graph is read; in several groups on a large part; its exception fails the read;
// the shard is the one read_shard returns without it.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "halo/core/feature_type.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/shard.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo/quantize/quantize.hpp"
#include "halo/store/store.hpp"
#include "store_test_util.hpp"

namespace halo::testing {
namespace {

struct Told {
    FeatureRowsRead group;
    std::vector<unsigned char> copy;  // the rows' bytes when told
    std::thread::id thread;
};

// Reads part `part` with a features reader that records what it is told.
Shard read_telling(const std::filesystem::path& file, int part, std::size_t row_bytes,
                   std::vector<Told>& told)
{
    ShardReadOptions options;
    options.features = [&told, row_bytes](const FeatureRowsRead& group) {
        const auto* bytes = static_cast<const unsigned char*>(group.rows);
        told.push_back({group, std::vector<unsigned char>(bytes, bytes + group.count * row_bytes),
                        std::this_thread::get_id()});
    };
    return read_shard(file, part, options);
}

// Every row once, in order, its bytes those of `stored` (the shard's array) at their place.
void expect_told_in_order(const std::vector<Told>& told, const void* stored, std::int64_t rows,
                          std::int64_t cols, bool int8)
{
    ASSERT_FALSE(told.empty());
    const auto row_bytes = static_cast<std::size_t>(cols) * (int8 ? 1 : sizeof(float));
    std::int64_t next = 0;
    for (const auto& t : told) {
        const auto& g = t.group;
        EXPECT_EQ(g.first_row, next);
        EXPECT_EQ(g.total_rows, rows);
        EXPECT_EQ(g.cols, cols);
        EXPECT_EQ(g.int8, int8);
        EXPECT_EQ(g.rows, static_cast<const unsigned char*>(stored) + g.first_row * row_bytes);
        EXPECT_EQ(std::memcmp(t.copy.data(), g.rows, t.copy.size()), 0);
        EXPECT_NE(t.thread, std::this_thread::get_id());
        next = g.first_row + g.count;
    }
    EXPECT_EQ(next, rows);
}

TEST(FeatureRows, SmallPartsFloatAndInt8)
{
    const ScratchDir dir{"feature-rows"};
    auto d = make_small_dataset({true, 5, true});
    const auto plain = dir.file("plain.h5");
    write_dataset(plain, d.info, d.owner, d.shards);
    for (int p = 0; p < d.info.num_parts; ++p) {
        std::vector<Told> told;
        const auto s = read_telling(plain, p, 5 * sizeof(float), told);
        expect_same_shard(s, read_shard(plain, p));
        expect_told_in_order(told, s.features.data(), s.num_owned, 5, false);
    }
    // The same features quantized over all nodes, as halo-partition --quantize int8 stores them.
    std::vector<float> global(static_cast<std::size_t>(d.info.num_nodes * 5));
    for (const auto& s : d.shards) {
        for (std::int64_t i = 0; i < s.num_owned; ++i) {
            std::copy_n(s.features.data() + i * 5, 5, global.data() + s.global_ids[i] * 5);
        }
    }
    const auto q =
        quantize_columns(dense_view<const float>(global.data(), d.info.num_nodes, 5), "t");
    d.info.feature_type = "int8";
    for (auto& s : d.shards) {
        s.features_int8.resize(static_cast<std::size_t>(s.num_owned * 5));
        for (std::int64_t i = 0; i < s.num_owned; ++i) {
            std::copy_n(q.data.data() + s.global_ids[i] * 5, 5, s.features_int8.data() + i * 5);
        }
        s.feature_scale = q.scale;
        s.feature_zero_point = q.zero_point;
    }
    const auto quantized = dir.file("int8.h5");
    write_dataset(quantized, d.info, d.owner, d.shards);
    for (int p = 0; p < d.info.num_parts; ++p) {
        std::vector<Told> told;
        const auto s = read_telling(quantized, p, 5, told);
        expect_same_shard(s, read_shard(quantized, p));
        expect_told_in_order(told, s.features_int8.data(), s.num_owned, 5, true);
    }
}

// A one-part dataset of an n-node path with dim features a node (0, 1, 2, ... in row order).
struct PathDataset {
    std::vector<Shard> shards;
    DatasetInfo info;
};

PathDataset make_path_dataset(std::int64_t n, std::int64_t dim)
{
    EdgeList e;
    e.num_nodes = n;
    for (std::int64_t v = 0; v + 1 < n; ++v) {
        e.src.push_back(v);
        e.dst.push_back(v + 1);
    }
    const auto g = build_csr(e, {});
    PathDataset d;
    d.shards = build_shards(g, std::vector<std::int32_t>(n, 0), 1);
    std::vector<float> features(static_cast<std::size_t>(n * dim));
    std::iota(features.begin(), features.end(), 0.0f);
    attach_node_data(d.shards[0], features, dim, {});
    d.info.num_nodes = n;
    d.info.num_nonzeros = g.nnz();
    d.info.num_parts = 1;
    d.info.partitioner = "block";
    d.info.normalization = "none";
    d.info.self_loops = "keep";
    d.info.feature_dim = dim;
    return d;
}

TEST(FeatureRows, SixteenBitRowsAreToldWidenedInGroups)
{
    // 72 MB of bf16 features: two groups of the parallel reader, each widened to float32 where
    // the shard keeps it before it is told, each value the rounding of the written one.
    const ScratchDir dir{"feature-rows"};
    const std::int64_t n = 140000;
    const std::int64_t dim = 256;
    auto d = make_path_dataset(n, dim);
    d.info.feature_type = "bfloat16";
    const auto file = dir.file("large-bf16.h5");
    write_dataset(file, d.info, std::vector<std::int32_t>(n, 0), d.shards);
    std::vector<Told> told;
    const auto s = read_telling(file, 0, dim * sizeof(float), told);
    EXPECT_GE(told.size(), 2u) << "one group: the offsets of later groups are not tested";
    expect_told_in_order(told, s.features.data(), n, dim, false);
    auto rounded = d.shards[0].features;
    round_features(rounded, FeatureType::bf16);
    EXPECT_TRUE(s.features == rounded);
    EXPECT_FALSE(s.features == d.shards[0].features) << "iota past 256 needs rounding in bf16";
}

TEST(FeatureRows, LargePartInGroupsAndFailures)
{
    // One part of a 300000-node path with 64 features a node: 77 MB of features, read in groups
    // of about 64 MiB (two or more), on the parallel reader's path.
    const ScratchDir dir{"feature-rows"};
    const std::int64_t n = 300000;
    const std::int64_t dim = 64;
    const auto d = make_path_dataset(n, dim);
    const auto& shards = d.shards;
    const auto& info = d.info;
    const auto file = dir.file("large.h5");
    write_dataset(file, info, std::vector<std::int32_t>(n, 0), shards);

    std::vector<Told> told;
    const auto s = read_telling(file, 0, dim * sizeof(float), told);
    EXPECT_GE(told.size(), 2u) << "one group: nothing overlapped";
    expect_told_in_order(told, s.features.data(), n, dim, false);
    EXPECT_EQ(s.features, shards[0].features);

    // A reader that fails fails the read with its exception.
    ShardReadOptions failing;
    failing.features = [](const FeatureRowsRead& group) {
        if (group.first_row > 0) {
            throw std::runtime_error("upload failed");
        }
    };
    expect_error<std::runtime_error>([&] { read_shard(file, 0, failing); }, {"upload failed"});
}

}  // namespace
}  // namespace halo::testing
