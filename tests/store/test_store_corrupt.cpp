// Damaged and inconsistent files are rejected with messages that name the file, the object and
// the offending value. Each case writes a good dataset, then breaks one thing in it through the
// HDF5 C API (or by cutting the file short) and checks the reader's or checker's message.
#include <algorithm>
#include <fstream>
#include <utility>
#include <vector>

#include "halo/core/error.hpp"
#include "halo_test.hpp"
#include "store_test_util.hpp"

namespace {

using halo::testing::expect_error;

class StoreCorrupt : public ::testing::Test {
protected:
    void SetUp() override
    {
        data_ =
            halo::testing::make_small_dataset({.valued = true, .feature_dim = 4, .labels = true});
        halo::write_dataset(path_, data_.info, data_.owner, data_.shards);
        ASSERT_NO_THROW(halo::check_dataset(path_));
    }

    // "<file>: <object>", the head of the messages about `object`.
    std::string at(const std::string& object) const { return path_.string() + ": " + object; }

    halo::testing::ScratchDir dir_{"store"};
    std::filesystem::path path_ = dir_.file("data.h5");
    halo::testing::SmallDataset data_;
};

TEST_F(StoreCorrupt, TruncatedFile)
{
    std::filesystem::resize_file(path_, std::filesystem::file_size(path_) / 2);
    expect_error<halo::Hdf5Error>([&] { halo::read_dataset_info(path_); },
                                  {path_.string(), "truncated"});
    expect_error<halo::Hdf5Error>([&] { halo::check_dataset(path_); }, {"truncated"});
}

TEST_F(StoreCorrupt, FileCutAnywhereIsAnErrorNotACrash)
{
    const auto size = std::filesystem::file_size(path_);
    const auto copy = dir_.file("cut.h5");
    for (const auto keep :
         {size - 1, size * 9 / 10, size / 3, std::uintmax_t{100}, std::uintmax_t{7}}) {
        SCOPED_TRACE("kept " + std::to_string(keep) + " of " + std::to_string(size) + " bytes");
        std::filesystem::copy_file(path_, copy, std::filesystem::copy_options::overwrite_existing);
        std::filesystem::resize_file(copy, keep);
        expect_error<halo::Error>([&] { halo::check_dataset(copy); }, {copy.string()});
    }
}

TEST_F(StoreCorrupt, FileCutBeforeTheSignature)
{
    std::filesystem::resize_file(path_, 4);
    expect_error<halo::InputError>([&] { halo::read_shard(path_, 0); },
                                   {path_.string(), "not an HDF5 file"});
}

TEST_F(StoreCorrupt, NotAnHdf5File)
{
    std::ofstream(path_, std::ios::trunc) << "0 1\n1 2\n2 0\n";
    expect_error<halo::InputError>([&] { halo::read_dataset_info(path_); },
                                   {path_.string(), "not an HDF5 file"});
}

TEST_F(StoreCorrupt, MissingFile)
{
    expect_error<halo::IoError>([&] { halo::read_dataset_info(dir_.file("absent.h5")); },
                                {"absent.h5", "no such file"});
}

TEST_F(StoreCorrupt, WrongFormatName)
{
    halo::testing::set_string_attribute(path_, "/", "format", "anndata");
    expect_error<halo::InputError>([&] { halo::read_dataset_info(path_); },
                                   {path_.string(), "not a halo dataset", "'anndata'"});
}

TEST_F(StoreCorrupt, FutureVersion)
{
    halo::testing::set_int_attribute(path_, "/", "version", 3);
    expect_error<halo::InputError>([&] { halo::read_shard(path_, 0); },
                                   {path_.string(), "version 3", "newer", "(version 2)"});
}

TEST_F(StoreCorrupt, MissingDataset)
{
    halo::testing::delete_link(path_, "/parts/1/halo/send_rows");
    expect_error<halo::InputError>([&] { halo::read_shard(path_, 1); },
                                   {at("/parts/1/halo/send_rows"), "missing dataset"});
    EXPECT_NO_THROW(halo::read_shard(path_, 0));
    expect_error<halo::InputError>([&] { halo::check_dataset(path_); },
                                   {at("/parts/1/halo/send_rows")});
}

TEST_F(StoreCorrupt, MissingRootAttribute)
{
    {
        const auto f = halo::testing::open_for_edit(path_);
        ASSERT_GE(H5Adelete(f.get(), "num_nodes"), 0);
    }
    expect_error<halo::InputError>([&] { halo::read_dataset_info(path_); },
                                   {at("/"), "attribute num_nodes", "missing"});
}

TEST_F(StoreCorrupt, ColumnIndexOutOfRange)
{
    auto indices = halo::testing::read_raw<std::int32_t>(path_, "/parts/0/csr/indices");
    const auto num_cols = data_.shards[0].csr.num_cols;
    indices[7] = static_cast<std::int32_t>(num_cols + 5);
    halo::testing::overwrite_raw(path_, "/parts/0/csr/indices", indices);
    expect_error<halo::InputError>(
        [&] { halo::read_shard(path_, 0); },
        {at("/parts/0"), "csr/indices[7] = " + std::to_string(num_cols + 5), "outside"});
}

TEST_F(StoreCorrupt, NonMonotoneIndptr)
{
    auto indptr = halo::testing::read_raw<std::int64_t>(path_, "/parts/1/csr/indptr");
    indptr[3] = indptr[4] + 1;
    halo::testing::overwrite_raw(path_, "/parts/1/csr/indptr", indptr);
    expect_error<halo::InputError>([&] { halo::read_shard(path_, 1); },
                                   {at("/parts/1"), "csr/indptr[4]", "below csr/indptr[3]"});
}

TEST_F(StoreCorrupt, ElementTypeThatWouldLoseValues)
{
    const auto indices = halo::testing::read_raw<std::int32_t>(path_, "/parts/0/csr/indices");
    halo::testing::replace_raw(path_, "/parts/0/csr/indices",
                               std::vector<std::int64_t>(indices.begin(), indices.end()));
    expect_error<halo::InputError>([&] { halo::read_shard(path_, 0); },
                                   {at("/parts/0/csr/indices"), "stored as int64, expected int32"});
}

TEST_F(StoreCorrupt, SendAndReceiveCountsDisagreeBetweenParts)
{
    // Part 0 drops the last row it sends to part 1: part 0 alone is still a valid shard, but
    // part 1 waits for one row more than part 0 sends (an NCCL exchange would hang).
    const auto& plan = data_.shards[0].plan;
    ASSERT_EQ(plan.send_ranks, std::vector<std::int32_t>{1});
    auto offsets = plan.send_offsets;
    auto rows = plan.send_rows;
    --offsets.back();
    rows.pop_back();
    halo::testing::replace_raw(path_, "/parts/0/halo/send_offsets", offsets);
    halo::testing::replace_raw(path_, "/parts/0/halo/send_rows", rows);
    EXPECT_NO_THROW(halo::read_shard(path_, 0));
    expect_error<halo::InputError>(
        [&] { halo::check_dataset(path_); },
        {path_.string(), "halo plans disagree",
         "part 0 sends " + std::to_string(rows.size()) + " rows to part 1",
         "part 1 receives " + std::to_string(rows.size() + 1) + " rows from part 0"});
}

TEST_F(StoreCorrupt, SendRowsInAnotherOrderThanTheReceiverExpects)
{
    // Same counts, but part 0 sends row 0 (an interior row, never sent) in place of its first
    // send row: the list stays ascending, so only the pairwise check can see it.
    const auto& shard = data_.shards[0];
    auto rows = shard.plan.send_rows;
    ASSERT_GT(shard.num_interior, 0);
    ASSERT_GT(rows.front(), 0);
    const auto replaced = shard.global_ids[static_cast<std::size_t>(rows.front())];
    rows.front() = 0;
    halo::testing::overwrite_raw(path_, "/parts/0/halo/send_rows", rows);
    EXPECT_NO_THROW(halo::read_shard(path_, 0));
    expect_error<halo::InputError>(
        [&] { halo::check_dataset(path_); },
        {"halo plans disagree", "row 0 of the block part 0 sends to part 1",
         "global id " + std::to_string(shard.global_ids[0]),
         "expects global id " + std::to_string(replaced)});
}

TEST_F(StoreCorrupt, HaloGlobalIdWhoseOwnerDisagrees)
{
    // Part 0's last halo column is grid node 33, from part 1; only node 32 reads it, as its
    // largest column. Claim it is node 36, which part 2 owns: still node 32's largest column, so
    // the row keeps ascending global order, the part alone stays valid, and only the owner array
    // can expose it.
    const auto& shard = data_.shards[0];
    ASSERT_EQ(shard.plan.recv_ranks, std::vector<std::int32_t>{1});
    const auto last = static_cast<std::size_t>(shard.num_halo - 1);
    ASSERT_EQ(shard.halo_global_ids[last], 33);
    ASSERT_EQ(data_.owner[36], 2);
    auto halo_ids = halo::testing::read_raw<std::int64_t>(path_, "/parts/0/halo/global_ids");
    halo_ids[last] = 36;
    halo::testing::overwrite_raw(path_, "/parts/0/halo/global_ids", halo_ids);
    EXPECT_NO_THROW(halo::read_shard(path_, 0));
    expect_error<halo::InputError>(
        [&] { halo::check_dataset(path_); },
        {at("/parts/0/halo/global_ids[" + std::to_string(last) + "] = 36"), "owned by part 2",
         "from part 1"});
}

TEST_F(StoreCorrupt, RowSortedByLocalIdInsteadOfGlobalId)
{
    // A part as the old rule wrote it: the first row of part 0 whose local order differs from its
    // global order, re-sorted by local id with its values. Every column is still in range and
    // ascending by local id, but the row's sum would run in another order than on one rank.
    const auto& shard = data_.shards[0];
    auto indices = halo::testing::read_raw<std::int32_t>(path_, "/parts/0/csr/indices");
    auto values = halo::testing::read_raw<float>(path_, "/parts/0/csr/values");
    auto node = [&](std::int32_t c) {
        return c < shard.num_owned
                   ? shard.global_ids[static_cast<std::size_t>(c)]
                   : shard.halo_global_ids[static_cast<std::size_t>(c - shard.num_owned)];
    };
    std::int64_t bad = -1;  // first entry of the re-sorted row that does not ascend by node
    for (std::int64_t i = 0; i < shard.num_owned && bad < 0; ++i) {
        const auto first = static_cast<std::size_t>(shard.csr.indptr[i]);
        const auto last = static_cast<std::size_t>(shard.csr.indptr[i + 1]);
        std::vector<std::pair<std::int32_t, float>> row;
        for (auto k = first; k < last; ++k) {
            row.emplace_back(indices[k], values[k]);
        }
        std::sort(row.begin(), row.end());
        for (auto k = first; k < last; ++k) {
            indices[k] = row[k - first].first;
            values[k] = row[k - first].second;
            if (k > first && bad < 0 && node(indices[k]) < node(indices[k - 1])) {
                bad = static_cast<std::int64_t>(k);
            }
        }
    }
    ASSERT_GE(bad, 1) << "no row of part 0 has a local order that differs from its global order";
    halo::testing::overwrite_raw(path_, "/parts/0/csr/indices", indices);
    halo::testing::overwrite_raw(path_, "/parts/0/csr/values", values);
    const auto c = indices[static_cast<std::size_t>(bad)];
    const auto previous = indices[static_cast<std::size_t>(bad - 1)];
    expect_error<halo::InputError>(
        [&] { halo::read_shard(path_, 0); },
        {at("/parts/0"),
         "csr/indices[" + std::to_string(bad) + "] = " + std::to_string(c) + " (node " +
             std::to_string(node(c)) + ") not above csr/indices[" + std::to_string(bad - 1) +
             "] = " + std::to_string(previous) + " (node " + std::to_string(node(previous)) + ")",
         "columns must ascend by global id without duplicates"});
    expect_error<halo::InputError>([&] { halo::check_dataset(path_); },
                                   {at("/parts/0"), "must ascend by global id"});
}

TEST_F(StoreCorrupt, OwnerArrayDisagreesWithTheParts)
{
    // Node 0 belongs to part 0's rows but /partition/owner now gives it to part 1.
    auto owner = halo::testing::read_raw<std::int32_t>(path_, "/partition/owner");
    ASSERT_EQ(owner[0], 0);
    owner[0] = 1;
    halo::testing::overwrite_raw(path_, "/partition/owner", owner);
    EXPECT_NO_THROW(halo::read_owner(path_));
    expect_error<halo::InputError>(
        [&] { halo::check_dataset(path_); },
        {at("/parts/0/global_ids["), "= 0 is owned by part 1", "not by part 0"});
}

TEST_F(StoreCorrupt, PartCountAttributeDisagreesWithGroups)
{
    halo::testing::set_int_attribute(path_, "/", "num_parts", 4);
    expect_error<halo::InputError>([&] { halo::read_dataset_info(path_); },
                                   {at("/parts"), "holds 3 parts", "num_parts is 4"});
}

TEST_F(StoreCorrupt, MissingPartGroup)
{
    halo::testing::delete_link(path_, "/parts/2");
    expect_error<halo::InputError>([&] { halo::read_shard(path_, 0); },
                                   {at("/parts"), "holds 2 parts", "num_parts is 3"});
}

TEST_F(StoreCorrupt, StrayMemberOfParts)
{
    {
        const auto f = halo::testing::open_for_edit(path_);
        ASSERT_GE(
            H5Lcreate_hard(f.get(), "/parts/2", f.get(), "/parts/02", H5P_DEFAULT, H5P_DEFAULT), 0);
    }
    expect_error<halo::InputError>([&] { halo::read_dataset_info(path_); },
                                   {at("/parts"), "unexpected member '02'"});
}

TEST_F(StoreCorrupt, OwnerValueOutOfRange)
{
    auto owner = halo::testing::read_raw<std::int32_t>(path_, "/partition/owner");
    owner[5] = 7;
    halo::testing::overwrite_raw(path_, "/partition/owner", owner);
    expect_error<halo::InputError>([&] { halo::read_owner(path_); },
                                   {at("/partition/owner[5] = 7"), "outside [0, 3)"});
    expect_error<halo::InputError>([&] { halo::check_dataset(path_); },
                                   {at("/partition/owner[5] = 7")});
}

TEST_F(StoreCorrupt, PartNnzAttributeMismatch)
{
    const auto nnz = data_.shards[1].csr.nnz();
    halo::testing::set_int_attribute(path_, "/parts/1", "nnz", nnz + 1);
    expect_error<halo::InputError>(
        [&] { halo::read_shard(path_, 1); },
        {at("/parts/1/csr/indices"), std::to_string(nnz) + " elements, expected " +
                                         std::to_string(nnz + 1) + " (attribute nnz)"});
}

TEST_F(StoreCorrupt, NonzeroTotalMismatch)
{
    halo::testing::set_int_attribute(path_, "/", "num_nonzeros", data_.info.num_nonzeros - 1);
    expect_error<halo::InputError>(
        [&] { halo::check_dataset(path_); },
        {path_.string(), std::to_string(data_.info.num_nonzeros) + " nonzeros in all",
         "num_nonzeros is " + std::to_string(data_.info.num_nonzeros - 1)});
}

TEST_F(StoreCorrupt, CsrShapeAttributeMismatch)
{
    {
        const auto f = halo::testing::open_for_edit(path_);
        const halo::store::Handle csr(H5Gopen2(f.get(), "/parts/0/csr", H5P_DEFAULT), H5Gclose);
        ASSERT_GE(H5Adelete(csr.get(), "shape"), 0);
        const std::int64_t shape[2] = {3, 3};
        halo::store::write_attribute_array(csr.get(), {path_.string(), "/parts/0/csr"}, "shape",
                                           shape);
    }
    expect_error<halo::InputError>([&] { halo::read_shard(path_, 0); },
                                   {at("/parts/0/csr"), "attribute shape is [3, 3]"});
}

TEST_F(StoreCorrupt, ValuesAliasThatIsACopy)
{
    const auto values = halo::testing::read_raw<float>(path_, "/parts/2/csr/values");
    halo::testing::replace_raw(path_, "/parts/2/csr/data", values);
    expect_error<halo::InputError>([&] { halo::read_shard(path_, 2); },
                                   {at("/parts/2/csr/data"), "not a hard link to csr/values"});
}

TEST_F(StoreCorrupt, ValuesMissingFromAValuedDataset)
{
    halo::testing::delete_link(path_, "/parts/1/csr/data");
    halo::testing::delete_link(path_, "/parts/1/csr/values");
    expect_error<halo::InputError>(
        [&] { halo::read_shard(path_, 1); },
        {at("/parts/1/csr/values"), "missing dataset", "has_values is 1"});
}

TEST_F(StoreCorrupt, LabelsMissingAlthoughDeclared)
{
    halo::testing::delete_link(path_, "/parts/0/labels");
    expect_error<halo::InputError>([&] { halo::read_shard(path_, 0); },
                                   {at("/parts/0/labels"), "missing dataset"});
}

TEST_F(StoreCorrupt, FeatureMatrixOfTheWrongWidth)
{
    halo::testing::set_int_attribute(path_, "/", "feature_dim", 5);
    expect_error<halo::InputError>(
        [&] { halo::read_shard(path_, 0); },
        {at("/parts/0/features/values"), "shape [18, 4]", "expected [18, 5]"});
}

TEST_F(StoreCorrupt, MorePeersThanParts)
{
    halo::testing::replace_raw(path_, "/parts/0/halo/recv_ranks",
                               std::vector<std::int32_t>{1, 2, 3, 4});
    expect_error<halo::InputError>(
        [&] { halo::read_shard(path_, 0); },
        {at("/parts/0/halo/recv_ranks"), "4 elements, expected at most 2 (num_parts - 1 peers)"});
}

TEST_F(StoreCorrupt, PartThatDoesNotExist)
{
    expect_error<halo::InputError>([&] { halo::read_shard(path_, 3); },
                                   {path_.string(), "part 3 does not exist", "3 parts"});
}

TEST(StoreChecksum, CorruptedChunkFailsItsFletcher32Check)
{
    const halo::testing::ScratchDir dir("store");
    const auto path = dir.file("wide.h5");
    const auto d = halo::testing::make_small_dataset({.valued = true, .feature_dim = 1000});
    halo::write_dataset(path, d.info, d.owner, d.shards);

    haddr_t address = 0;
    {
        const auto f = halo::testing::open_for_edit(path);
        const halo::store::Handle ds(H5Dopen2(f.get(), "/parts/0/features/values", H5P_DEFAULT),
                                     H5Dclose);
        const halo::store::Handle space(H5Dget_space(ds.get()), H5Sclose);
        hsize_t offset[2] = {0, 0};
        unsigned mask = 0;
        hsize_t size = 0;
        ASSERT_GE(H5Dget_chunk_info(ds.get(), space.get(), 0, offset, &mask, &address, &size), 0);
        ASSERT_GT(size, 100u);
    }
    {
        // Flip one byte of the chunk's data, as a bad disk block would.
        std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
        file.seekg(static_cast<std::streamoff>(address + 40));
        char byte = 0;
        file.read(&byte, 1);
        byte = static_cast<char>(byte ^ 0x5a);
        file.seekp(static_cast<std::streamoff>(address + 40));
        file.write(&byte, 1);
    }
    EXPECT_NO_THROW(halo::read_dataset_info(path));
    expect_error<halo::Hdf5Error>(
        [&] { halo::read_shard(path, 0); },
        {path.string() + ": /parts/0/features/values", "H5Dread failed", "Fletcher32"});
}

}  // namespace
