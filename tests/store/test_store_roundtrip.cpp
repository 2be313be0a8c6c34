// Round trips through the HDF5 dataset: every array and attribute comes back as written, the
// storage policy (contiguous / chunked with checksums, UTF-8 string attributes, the AnnData alias)
// is what docs/FORMAT.md says, and HDF5's own tools can read the file.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "halo/core/error.hpp"
#include "halo/core/graph.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo_test.hpp"
#include "store_test_util.hpp"

namespace {

using halo::testing::DatasetSpec;
using halo::testing::ScratchDir;

void expect_same_info(const halo::DatasetInfo& a, const halo::DatasetInfo& b)
{
    EXPECT_EQ(a.format, b.format);
    EXPECT_EQ(a.version, b.version);
    EXPECT_EQ(a.num_nodes, b.num_nodes);
    EXPECT_EQ(a.num_nonzeros, b.num_nonzeros);
    EXPECT_EQ(a.num_parts, b.num_parts);
    EXPECT_EQ(a.partitioner, b.partitioner);
    EXPECT_EQ(a.normalization, b.normalization);
    EXPECT_EQ(a.self_loops, b.self_loops);
    EXPECT_EQ(a.feature_dim, b.feature_dim);
    EXPECT_EQ(a.has_labels, b.has_labels);
    EXPECT_EQ(a.created_by, b.created_by);
}

void expect_same_csr(const halo::Csr& a, const halo::Csr& b)
{
    EXPECT_EQ(a.num_rows, b.num_rows);
    EXPECT_EQ(a.num_cols, b.num_cols);
    EXPECT_EQ(a.indptr, b.indptr);
    EXPECT_EQ(a.indices, b.indices);
    EXPECT_EQ(a.values, b.values);
}

// Writes, reads back everything, and checks the whole file.
void round_trip(const DatasetSpec& spec)
{
    const ScratchDir dir("store");
    const auto d = halo::testing::make_small_dataset(spec);
    ASSERT_EQ(d.shards[2].num_halo, 0) << "the fixture must have a part without halo";
    ASSERT_TRUE(d.shards[2].plan.send_ranks.empty());
    ASSERT_GT(d.shards[0].num_halo, 0);

    const auto path = dir.file("data.h5");
    halo::write_dataset(path, d.info, d.owner, d.shards);

    const auto info = halo::read_dataset_info(path);
    expect_same_info(info, d.info);
    EXPECT_EQ(info.format, "halo-dataset");
    EXPECT_EQ(info.version, 2);
    EXPECT_EQ(info.feature_type, "float32");
    EXPECT_EQ(info.has_values, spec.valued);
    EXPECT_EQ(halo::read_owner(path), d.owner);

    std::vector<halo::Shard> back;
    for (int p = 0; p < d.info.num_parts; ++p) {
        SCOPED_TRACE("part " + std::to_string(p));
        back.push_back(halo::read_shard(path, p));
        halo::testing::expect_same_shard(back.back(), d.shards[static_cast<std::size_t>(p)]);
    }
    EXPECT_NO_THROW(halo::check_dataset(path));
    expect_same_csr(halo::reassemble(back, d.info.num_nodes), d.global);
}

}  // namespace

TEST(StoreRoundTrip, ValuedWithFeaturesAndLabels)
{
    round_trip({.valued = true, .feature_dim = 5, .labels = true});
}

TEST(StoreRoundTrip, ValuedWithoutNodeData)
{
    round_trip({.valued = true, .feature_dim = 0, .labels = false});
}

TEST(StoreRoundTrip, PatternWithFeatures)
{
    round_trip({.valued = false, .feature_dim = 3, .labels = false});
}

TEST(StoreRoundTrip, PatternWithLabelsOnly)
{
    round_trip({.valued = false, .feature_dim = 0, .labels = true});
}

TEST(StoreRoundTrip, PatternStoresNoValuesAndValuedStoresTheAnnDataAlias)
{
    const ScratchDir dir("store");
    const auto pattern = dir.file("pattern.h5");
    const auto valued = dir.file("valued.h5");
    {
        const auto d = halo::testing::make_small_dataset({.valued = false});
        halo::write_dataset(pattern, d.info, d.owner, d.shards);
        const auto e = halo::testing::make_small_dataset({.valued = true});
        halo::write_dataset(valued, e.info, e.owner, e.shards);
    }
    const halo::store::QuietErrors quiet;
    {
        const auto f = halo::testing::open_for_edit(pattern);
        EXPECT_EQ(H5Lexists(f.get(), "/parts/0/csr/values", H5P_DEFAULT), 0);
        EXPECT_EQ(H5Lexists(f.get(), "/parts/0/csr/data", H5P_DEFAULT), 0);
    }
    const auto shard = halo::read_shard(valued, 0);
    const auto f = halo::testing::open_for_edit(valued);
    const halo::store::Handle csr(H5Gopen2(f.get(), "/parts/0/csr", H5P_DEFAULT), H5Gclose);
    const halo::store::Where cw{valued.string(), "/parts/0/csr"};
    EXPECT_TRUE(halo::store::same_object(csr.get(), cw, "data", "values"));
    EXPECT_FALSE(halo::store::same_object(csr.get(), cw, "indices", "values"));
    EXPECT_EQ(halo::store::read_string_attribute(csr.get(), cw, "encoding-type"), "csr_matrix");
    EXPECT_EQ(halo::store::read_string_attribute(csr.get(), cw, "encoding-version"), "0.1.0");
    const std::vector<std::int64_t> shape{shard.num_owned, shard.num_owned + shard.num_halo};
    EXPECT_EQ(halo::store::read_int_array_attribute(csr.get(), cw, "shape", 2), shape);
}

TEST(StoreRoundTrip, MetisPartitionOfALargerGraph)
{
    // A real partitioner on a 30 x 30 grid with 4 parts: every part exchanges with several peers.
    const auto e = halo::testing::grid_edges(30);
    halo::BuildOptions build;
    build.normalization = halo::Normalization::mean;
    const auto global = halo::build_csr(e, build);
    halo::PartitionOptions popt;
    popt.num_parts = 4;
    const auto owner = halo::partition_graph(global.view(), popt);
    const auto shards = halo::build_shards(global, owner, 4);

    halo::DatasetInfo info;
    info.num_nodes = e.num_nodes;
    info.num_nonzeros = global.nnz();
    info.num_parts = 4;
    info.partitioner = "metis";
    info.normalization = "mean";
    info.self_loops = "keep";
    const ScratchDir dir("store");
    const auto path = dir.file("grid.h5");
    halo::write_dataset(path, info, owner, shards);
    EXPECT_NO_THROW(halo::check_dataset(path));
    const auto created_by = halo::read_dataset_info(path).created_by;
    EXPECT_EQ(created_by.rfind("HaloGNN ", 0), 0u) << created_by;
    for (int p = 0; p < 4; ++p) {
        halo::testing::expect_same_shard(halo::read_shard(path, p),
                                         shards[static_cast<std::size_t>(p)]);
    }
}

TEST(StoreStorage, LargeDatasetsAreChunkedWithChecksumsSmallOnesContiguous)
{
    // Part 0's 18 rows x 1000 features x 4 bytes = 72 KB pass the 64 KiB limit; its indptr (19
    // int64) stays far below it.
    const auto d = halo::testing::make_small_dataset({.valued = true, .feature_dim = 1000});
    const ScratchDir dir("store");
    const auto path = dir.file("wide.h5");
    halo::write_dataset(path, d.info, d.owner, d.shards);
    const auto features_bytes = d.shards[0].features.size() * sizeof(float);
    ASSERT_GT(features_bytes, halo::store::contiguous_limit_bytes);

    const auto f = halo::testing::open_for_edit(path);
    auto layout_of = [&](const char* name, bool& fletcher) {
        const halo::store::Handle ds(H5Dopen2(f.get(), name, H5P_DEFAULT), H5Dclose);
        const halo::store::Handle dcpl(H5Dget_create_plist(ds.get()), H5Pclose);
        fletcher = false;
        for (int i = 0; i < H5Pget_nfilters(dcpl.get()); ++i) {
            unsigned flags = 0;
            std::size_t n = 0;
            unsigned config = 0;
            fletcher |= H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &n, nullptr, 0,
                                       nullptr, &config) == H5Z_FILTER_FLETCHER32;
        }
        return H5Pget_layout(dcpl.get());
    };
    bool fletcher = false;
    EXPECT_EQ(layout_of("/parts/0/features/values", fletcher), H5D_CHUNKED);
    EXPECT_TRUE(fletcher);
    EXPECT_EQ(layout_of("/parts/0/csr/indptr", fletcher), H5D_CONTIGUOUS);
    EXPECT_FALSE(fletcher);
    EXPECT_EQ(layout_of("/parts/2/halo/send_rows", fletcher), H5D_CONTIGUOUS);  // zero-length

    halo::testing::expect_same_shard(halo::read_shard(path, 0), d.shards[0]);
}

TEST(StoreStorage, StringAttributesAreFixedLengthUtf8Scalars)
{
    // Not variable-length: those live in the global heap, on which HDF5 1.10.8 may crash.
    const auto d = halo::testing::make_small_dataset({});
    const ScratchDir dir("store");
    const auto path = dir.file("data.h5");
    halo::write_dataset(path, d.info, d.owner, d.shards);
    const auto f = halo::testing::open_for_edit(path);
    for (const char* name :
         {"format", "partitioner", "normalization", "self_loops", "created_by"}) {
        SCOPED_TRACE(name);
        const halo::store::Handle attr(H5Aopen(f.get(), name, H5P_DEFAULT), H5Aclose);
        const halo::store::Handle type(H5Aget_type(attr.get()), H5Tclose);
        const halo::store::Handle space(H5Aget_space(attr.get()), H5Sclose);
        EXPECT_EQ(H5Tget_class(type.get()), H5T_STRING);
        EXPECT_EQ(H5Tis_variable_str(type.get()), 0);
        EXPECT_EQ(H5Tget_cset(type.get()), H5T_CSET_UTF8);
        EXPECT_EQ(H5Sget_simple_extent_type(space.get()), H5S_SCALAR);
    }
}

TEST(StoreStorage, ReaderOpensReadOnlySoOthersMayHoldSharedLocks)
{
    const auto d = halo::testing::make_small_dataset({});
    const ScratchDir dir("store");
    const auto path = dir.file("data.h5");
    halo::write_dataset(path, d.info, d.owner, d.shards);

    // Another reader's lock, as HDF5 takes it for a read-only open.
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_SH | LOCK_NB), 0);
    {
        const halo::store::QuietErrors quiet;
        const halo::store::Handle writable(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT),
                                           H5Fclose);
        if (writable.valid()) {
            ::close(fd);
            GTEST_SKIP() << "HDF5 file locking is off here (HDF5_USE_FILE_LOCKING=FALSE or a "
                            "file system without flock): a read-write open was not refused";
        }
    }
    EXPECT_NO_THROW(halo::read_dataset_info(path));
    EXPECT_NO_THROW(halo::read_shard(path, 1));
    EXPECT_NO_THROW(halo::check_dataset(path));
    ::close(fd);
}

TEST(StoreStorage, H5lsListsTheSchema)
{
    const auto d = halo::testing::make_small_dataset({.valued = true, .feature_dim = 2});
    const ScratchDir dir("store");
    const auto path = dir.file("data.h5");
    halo::write_dataset(path, d.info, d.owner, d.shards);
    if (std::system("command -v h5ls > /dev/null 2>&1") != 0) {
        GTEST_SKIP() << "h5ls not found (Debian package hdf5-tools)";
    }
    const std::string command = "h5ls -r '" + path.string() + "' 2>&1";
    const std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
    ASSERT_NE(pipe, nullptr);
    std::string listing;
    std::array<char, 4096> buffer{};
    while (std::fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr) {
        listing += buffer.data();
    }
    for (const char* name : {"/partition/owner", "/parts/0/csr/indptr", "/parts/0/csr/indices",
                             "/parts/1/halo/send_rows", "/parts/2/features/values"}) {
        EXPECT_NE(listing.find(name), std::string::npos) << name << " not in:\n" << listing;
    }
}
