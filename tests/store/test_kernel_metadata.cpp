// Kernel metadata in the dataset: written with the dataset or added in place, read back exactly,
// replaced atomically, ignored by the shard readers, and rejected with a clear message when
// damaged or built for another operator.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "halo/core/kernel_metadata.hpp"
#include "halo/store/store.hpp"
#include "store_test_util.hpp"

namespace halo::testing {
namespace {

KernelMetadata sample_metadata(const Csr& a, const std::string& kernel, const std::string& op)
{
    KernelMetadata md;
    md.kernel = kernel;
    md.op = op;
    md.fingerprint = pattern_fingerprint(a.view());
    md.rows = a.num_rows;
    md.cols = a.num_cols;
    md.nnz = a.nnz();
    md.ints["warps_per_block"] = 12;
    md.ints["negative"] = -5;
    md.reals["ratio"] = 0.25;
    md.strings["device"] = "NVIDIA H200";
    md.int32_arrays["blocks"] = {1, 2, 3, -4, 5, 6, 7, 8};
    md.int32_arrays["empty"] = {};
    md.int64_arrays["segments"] = {0, 10, std::int64_t{1} << 40};
    md.float_arrays["times_ms"] = {0.5f, 1.25f, -0.0f};
    return md;
}

void expect_same_metadata(const KernelMetadata& a, const KernelMetadata& b)
{
    EXPECT_EQ(a.kernel, b.kernel);
    EXPECT_EQ(a.op, b.op);
    EXPECT_EQ(a.fingerprint, b.fingerprint);
    EXPECT_EQ(a.rows, b.rows);
    EXPECT_EQ(a.cols, b.cols);
    EXPECT_EQ(a.nnz, b.nnz);
    EXPECT_EQ(a.ints, b.ints);
    EXPECT_EQ(a.reals, b.reals);
    EXPECT_EQ(a.strings, b.strings);
    EXPECT_EQ(a.int32_arrays, b.int32_arrays);
    EXPECT_EQ(a.int64_arrays, b.int64_arrays);
    EXPECT_EQ(a.float_arrays, b.float_arrays);
}

TEST(KernelMetadata, FingerprintSeesPatternNotValues)
{
    const auto ds = make_small_dataset({});
    auto a = ds.shards[0].csr;
    const auto base = pattern_fingerprint(a.view());
    for (auto& v : a.values) {
        v *= 2.0f;
    }
    EXPECT_EQ(pattern_fingerprint(a.view()), base);
    a.indices[0] = a.indices[0] == 0 ? 1 : 0;
    EXPECT_NE(pattern_fingerprint(a.view()), base);
    auto b = ds.shards[0].csr;
    b.num_cols += 1;
    EXPECT_NE(pattern_fingerprint(b.view()), base);
}

TEST(KernelMetadata, ExpectOperatorNamesBothShapes)
{
    const auto ds = make_small_dataset({});
    auto md = sample_metadata(ds.shards[0].csr, "accel_gcn", "adjacency");
    md.origin = "data.h5: /parts/0/kernels/accel_gcn/adjacency";
    EXPECT_NO_THROW(md.expect_operator(ds.shards[0].csr.view()));
    expect_error<InputError>([&] { md.expect_operator(ds.shards[1].csr.view()); },
                             {"data.h5: /parts/0/kernels/accel_gcn/adjacency",
                              "built for an operator of", "rebuild"});
    expect_error<InputError>([&] { static_cast<void>(md.int_value("missing")); },
                             {"/parts/0/kernels/accel_gcn/adjacency", "missing", "'missing'"});
}

TEST(KernelMetadata, WrittenWithTheDatasetAndReadBack)
{
    ScratchDir dir("kernel_md");
    const auto ds = make_small_dataset({});
    const auto path = dir.file("d.h5");
    const auto md = sample_metadata(ds.shards[1].csr, "accel_gcn", "gcn");
    {
        DatasetWriter writer(path, ds.info, ds.owner);
        for (const auto& s : ds.shards) {
            writer.write_part(s);
        }
        writer.write_kernel_metadata(1, md);
        writer.commit();
    }
    const auto back = read_kernel_metadata(path, 1, "accel_gcn", "gcn");
    ASSERT_TRUE(back.has_value());
    expect_same_metadata(md, *back);
    EXPECT_EQ(back->origin, path.string() + ": /parts/1/kernels/accel_gcn/gcn");
    EXPECT_FALSE(read_kernel_metadata(path, 1, "accel_gcn", "adjacency").has_value());
    EXPECT_FALSE(read_kernel_metadata(path, 0, "accel_gcn", "gcn").has_value());
    EXPECT_EQ(list_kernel_metadata(path, 1), std::vector<std::string>{"accel_gcn/gcn"});
    EXPECT_TRUE(list_kernel_metadata(path, 0).empty());
    // The shard readers and the checker ignore it.
    EXPECT_NO_THROW(check_dataset(path));
    expect_same_shard(read_shard(path, 1), ds.shards[1]);
}

TEST(KernelMetadata, WriterRefusesMetadataBeforeItsPart)
{
    ScratchDir dir("kernel_md_order");
    const auto ds = make_small_dataset({});
    DatasetWriter writer(dir.file("d.h5"), ds.info, ds.owner);
    writer.write_part(ds.shards[0]);
    expect_error<LogicError>(
        [&] { writer.write_kernel_metadata(2, sample_metadata(ds.shards[2].csr, "x", "y")); },
        {"part 2", "not written yet"});
}

TEST(KernelMetadata, StoredInPlaceAndReplaced)
{
    ScratchDir dir("kernel_md_inplace");
    const auto ds = make_small_dataset({});
    const auto path = dir.file("d.h5");
    write_dataset(path, ds.info, ds.owner, ds.shards);
    auto md = sample_metadata(ds.shards[2].csr, "autotune", "adjacency");
    store_kernel_metadata(path, 2, md);
    expect_same_metadata(md, *read_kernel_metadata(path, 2, "autotune", "adjacency"));

    md.strings["device"] = "NVIDIA H100";
    md.int32_arrays.erase("blocks");
    store_kernel_metadata(path, 2, md);
    const auto back = read_kernel_metadata(path, 2, "autotune", "adjacency");
    expect_same_metadata(md, *back);
    EXPECT_EQ(back->int32_arrays.count("blocks"), 0u);
    EXPECT_EQ(list_kernel_metadata(path, 2), std::vector<std::string>{"autotune/adjacency"});
    EXPECT_NO_THROW(check_dataset(path));

    expect_error<InputError>([&] { store_kernel_metadata(path, 3, md); },
                             {"part 3 does not exist", "3 parts"});
    expect_error<IoError>([&] { store_kernel_metadata(dir.file("none.h5"), 0, md); },
                          {"none.h5", "no such file"});
}

TEST(KernelMetadata, RefusesBadNames)
{
    ScratchDir dir("kernel_md_names");
    const auto ds = make_small_dataset({});
    const auto path = dir.file("d.h5");
    write_dataset(path, ds.info, ds.owner, ds.shards);
    auto md = sample_metadata(ds.shards[0].csr, "Accel-GCN", "gcn");
    expect_error<InputError>([&] { store_kernel_metadata(path, 0, md); },
                             {"kernel name 'Accel-GCN'", "[a-z0-9_]"});
    md.kernel = "accel_gcn";
    md.ints["rows"] = 3;
    expect_error<LogicError>([&] { store_kernel_metadata(path, 0, md); }, {"'rows'", "reserved"});
    md.ints.erase("rows");
    md.op = "tmp_gcn";
    expect_error<LogicError>([&] { store_kernel_metadata(path, 0, md); }, {"temporary prefix"});
    EXPECT_TRUE(list_kernel_metadata(path, 0).empty());
}

TEST(KernelMetadata, DamagedGroupsAreRejected)
{
    ScratchDir dir("kernel_md_bad");
    const auto ds = make_small_dataset({});
    const auto path = dir.file("d.h5");
    write_dataset(path, ds.info, ds.owner, ds.shards);
    const auto md = sample_metadata(ds.shards[0].csr, "maxk", "adjacency");
    const std::string group = "/parts/0/kernels/maxk/adjacency";

    store_kernel_metadata(path, 0, md);
    replace_raw<std::int8_t>(path, group + "/blocks", {1, 2});
    // int8 widens to int32 exactly: accepted as an int32 array.
    EXPECT_EQ(read_kernel_metadata(path, 0, "maxk", "adjacency")->int32_arrays.at("blocks"),
              (std::vector<std::int32_t>{1, 2}));
    {
        const auto f = open_for_edit(path);
        const store::Handle g(H5Gopen2(f.get(), group.c_str(), H5P_DEFAULT), H5Gclose);
        const store::Handle space(H5Screate(H5S_SCALAR), H5Sclose);
        const store::Handle attr(H5Acreate2(g.get(), "fingerprint_bad", H5T_STD_U8LE, space.get(),
                                            H5P_DEFAULT, H5P_DEFAULT),
                                 H5Aclose);
        ASSERT_TRUE(attr.valid());
    }
    // An unsigned 8-bit attribute still reads as an integer; a damaged fingerprint does not.
    EXPECT_NO_THROW(read_kernel_metadata(path, 0, "maxk", "adjacency"));

    store_kernel_metadata(path, 0, md);
    delete_link(path, group);
    {
        // A group without its attributes.
        const auto f = open_for_edit(path);
        const store::Handle g(H5Gcreate2(f.get(), group.c_str(), H5P_DEFAULT, H5P_DEFAULT,
                                         H5P_DEFAULT),
                              H5Gclose);
        ASSERT_TRUE(g.valid());
    }
    expect_error<InputError>([&] { read_kernel_metadata(path, 0, "maxk", "adjacency"); },
                             {group, "kernel"});

    store_kernel_metadata(path, 0, md);
    delete_link(path, group + "/times_ms");
    {
        const auto f = open_for_edit(path);
        const store::Handle g(H5Gopen2(f.get(), group.c_str(), H5P_DEFAULT), H5Gclose);
        const double values[2] = {1.0, 2.0};
        const hsize_t dims[1] = {2};
        store::write_dataset(g.get(), {path.string(), group}, "times_ms", H5T_IEEE_F64LE,
                             H5T_NATIVE_DOUBLE, sizeof(double), values, dims);
    }
    expect_error<InputError>([&] { read_kernel_metadata(path, 0, "maxk", "adjacency"); },
                             {group + "/times_ms", "int32, int64 or float32"});

    store_kernel_metadata(path, 0, md);
    {
        const auto f = open_for_edit(path);
        const store::Handle g(H5Gopen2(f.get(), group.c_str(), H5P_DEFAULT), H5Gclose);
        ASSERT_GE(H5Adelete(g.get(), "kernel"), 0);
        store::write_attribute_string(g.get(), {path.string(), group}, "kernel", "fused3s");
    }
    expect_error<InputError>([&] { read_kernel_metadata(path, 0, "maxk", "adjacency"); },
                             {group, "kernel 'fused3s'"});
}

}  // namespace
}  // namespace halo::testing
