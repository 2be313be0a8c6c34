#include "store_test_util.hpp"

#include "halo/core/graph.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo_test.hpp"

namespace halo::testing {

SmallDataset make_small_dataset(const DatasetSpec& spec)
{
    constexpr int side = 6;
    constexpr int ring = 8;
    EdgeList edges = grid_edges(side);
    edges.num_nodes += ring;
    for (int k = 0; k < ring; ++k) {
        edges.src.push_back(side * side + k);
        edges.dst.push_back(side * side + (k + 1) % ring);
    }
    BuildOptions options;
    options.self_loops = spec.valued ? SelfLoops::add : SelfLoops::keep;
    options.normalization = spec.valued ? Normalization::gcn : Normalization::none;

    SmallDataset d;
    d.global = build_csr(edges, options);
    d.owner.resize(static_cast<std::size_t>(edges.num_nodes));
    for (std::int64_t v = 0; v < edges.num_nodes; ++v) {
        d.owner[static_cast<std::size_t>(v)] = v >= side * side ? 2 : (v % side < side / 2 ? 0 : 1);
    }
    d.shards = build_shards(d.global, d.owner, 3);

    const auto features =
        random_floats(static_cast<std::size_t>(edges.num_nodes * spec.feature_dim), 42);
    std::vector<std::int32_t> labels;
    if (spec.labels) {
        for (std::int64_t v = 0; v < edges.num_nodes; ++v) {
            labels.push_back(v % 7 == 3 ? -1 : static_cast<std::int32_t>(v % 5));
        }
    }
    for (auto& shard : d.shards) {
        attach_node_data(shard, features, spec.feature_dim, labels);
    }

    d.info.num_nodes = edges.num_nodes;
    d.info.num_nonzeros = d.global.nnz();
    d.info.num_parts = 3;
    d.info.partitioner = "manual";
    d.info.normalization = to_string(options.normalization);
    d.info.self_loops = to_string(options.self_loops);
    d.info.feature_dim = spec.feature_dim;
    d.info.has_labels = spec.labels;
    d.info.created_by = "test_store (ünïcode ok)";
    return d;
}

ScratchDir::ScratchDir(const std::string& tag) : dir_(scratch_dir(tag)) {}

ScratchDir::~ScratchDir()
{
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
}

void expect_same_shard(const Shard& a, const Shard& b)
{
    EXPECT_EQ(a.part, b.part);
    EXPECT_EQ(a.num_parts, b.num_parts);
    EXPECT_EQ(a.num_owned, b.num_owned);
    EXPECT_EQ(a.num_halo, b.num_halo);
    EXPECT_EQ(a.num_interior, b.num_interior);
    EXPECT_EQ(a.global_ids, b.global_ids);
    EXPECT_EQ(a.halo_global_ids, b.halo_global_ids);
    EXPECT_EQ(a.csr.num_rows, b.csr.num_rows);
    EXPECT_EQ(a.csr.num_cols, b.csr.num_cols);
    EXPECT_EQ(a.csr.indptr, b.csr.indptr);
    EXPECT_EQ(a.csr.indices, b.csr.indices);
    EXPECT_EQ(a.csr.values, b.csr.values);  // stored as float32: bit-exact
    EXPECT_EQ(a.plan.recv_ranks, b.plan.recv_ranks);
    EXPECT_EQ(a.plan.recv_offsets, b.plan.recv_offsets);
    EXPECT_EQ(a.plan.send_ranks, b.plan.send_ranks);
    EXPECT_EQ(a.plan.send_offsets, b.plan.send_offsets);
    EXPECT_EQ(a.plan.send_rows, b.plan.send_rows);
    EXPECT_EQ(a.feature_dim, b.feature_dim);
    EXPECT_EQ(a.features, b.features);
    EXPECT_EQ(a.labels, b.labels);
}

store::Handle open_for_edit(const std::filesystem::path& file)
{
    store::Handle f(H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    EXPECT_TRUE(f.valid()) << "cannot open " << file << " for editing";
    return f;
}

void delete_link(const std::filesystem::path& file, const std::string& path)
{
    const auto f = open_for_edit(file);
    ASSERT_GE(H5Ldelete(f.get(), path.c_str(), H5P_DEFAULT), 0) << path;
}

namespace {

void replace_attribute(const std::filesystem::path& file, const std::string& object,
                       const std::string& name,
                       const std::function<void(hid_t, const store::Where&)>& write)
{
    const auto f = open_for_edit(file);
    const store::Handle o(H5Oopen(f.get(), object.c_str(), H5P_DEFAULT), H5Oclose);
    ASSERT_TRUE(o.valid()) << object;
    if (H5Aexists(o.get(), name.c_str()) > 0) {
        ASSERT_GE(H5Adelete(o.get(), name.c_str()), 0);
    }
    write(o.get(), {file.string(), object});
}

}  // namespace

void set_int_attribute(const std::filesystem::path& file, const std::string& object,
                       const std::string& name, std::int64_t value)
{
    replace_attribute(file, object, name, [&](hid_t o, const store::Where& where) {
        store::write_attribute<std::int64_t>(o, where, name.c_str(), value);
    });
}

void set_string_attribute(const std::filesystem::path& file, const std::string& object,
                          const std::string& name, const std::string& value)
{
    replace_attribute(file, object, name, [&](hid_t o, const store::Where& where) {
        store::write_attribute_string(o, where, name.c_str(), value);
    });
}

}  // namespace halo::testing
