// The writer's contract: a file appears at the target path only on commit, whole; an interrupted
// writer leaves neither the target nor its temporary file; misuse and inconsistent shards are
// refused before anything is published.
#include <sys/wait.h>
#include <unistd.h>

#include "halo/core/error.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo_test.hpp"
#include "store_test_util.hpp"

namespace {

using halo::testing::expect_error;
using halo::testing::ScratchDir;

std::filesystem::path temp_of(const std::filesystem::path& path, pid_t pid)
{
    auto temp = path;
    temp += ".tmp-" + std::to_string(pid);
    return temp;
}

TEST(StoreWriter, FileAppearsOnlyOnCommit)
{
    const ScratchDir dir("store");
    const auto path = dir.file("data.h5");
    const auto d = halo::testing::make_small_dataset({});
    halo::DatasetWriter writer(path, d.info, d.owner);
    for (const auto p : {2, 0, 1}) {  // any order
        writer.write_part(d.shards[static_cast<std::size_t>(p)]);
        EXPECT_FALSE(std::filesystem::exists(path));
        EXPECT_TRUE(std::filesystem::exists(temp_of(path, ::getpid())));
    }
    writer.commit();
    EXPECT_TRUE(std::filesystem::exists(path));
    EXPECT_FALSE(std::filesystem::exists(temp_of(path, ::getpid())));
    EXPECT_NO_THROW(halo::check_dataset(path));
}

TEST(StoreWriter, InterruptedWriterLeavesNoFileAndNoTemporary)
{
    const ScratchDir dir("store");
    const auto path = dir.file("data.h5");
    const auto d = halo::testing::make_small_dataset({.valued = true, .feature_dim = 2});
    {
        halo::DatasetWriter writer(path, d.info, d.owner);
        writer.write_part(d.shards[0]);
        writer.write_part(d.shards[1]);
        ASSERT_TRUE(std::filesystem::exists(temp_of(path, ::getpid())));
    }
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_FALSE(std::filesystem::exists(temp_of(path, ::getpid())));
    EXPECT_TRUE(std::filesystem::is_empty(path.parent_path()));
}

TEST(StoreWriter, WriterUnwoundByAnExceptionCleansUp)
{
    const ScratchDir dir("store");
    const auto path = dir.file("data.h5");
    const auto d = halo::testing::make_small_dataset({});
    EXPECT_THROW(
        {
            halo::DatasetWriter writer(path, d.info, d.owner);
            writer.write_part(d.shards[0]);
            writer.commit();  // parts 1 and 2 missing
        },
        halo::LogicError);
    EXPECT_TRUE(std::filesystem::is_empty(path.parent_path()));
}

TEST(StoreWriter, CrashedWriterLeavesNothingThatLooksValid)
{
    // A process killed before commit: its temporary file stays behind, but the target path does
    // not exist and the leftover is not a halo dataset to any reader.
    const ScratchDir dir("store");
    const auto path = dir.file("data.h5");
    // The fixture is built before fork: the child runs no OpenMP region (not fork-safe).
    const auto d = halo::testing::make_small_dataset({});
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        halo::DatasetWriter writer(path, d.info, d.owner);
        for (const auto& shard : d.shards) {
            writer.write_part(shard);
        }
        ::_exit(0);  // no destructor, no commit: as if killed
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_FALSE(std::filesystem::exists(path));
    const auto leftover = temp_of(path, child);
    ASSERT_TRUE(std::filesystem::exists(leftover));
    try {
        halo::read_dataset_info(leftover);
        ADD_FAILURE() << "a crashed writer's temporary file reads as a dataset";
    } catch (const halo::Error& e) {
        SUCCEED() << e.what();
    }
}

TEST(StoreWriter, CommitReplacesAnExistingDatasetWhole)
{
    const ScratchDir dir("store");
    const auto path = dir.file("data.h5");
    const auto pattern = halo::testing::make_small_dataset({.valued = false});
    halo::write_dataset(path, pattern.info, pattern.owner, pattern.shards);

    const auto valued = halo::testing::make_small_dataset({.valued = true, .labels = true});
    halo::DatasetWriter writer(path, valued.info, valued.owner);
    for (const auto& shard : valued.shards) {
        writer.write_part(shard);
    }
    EXPECT_FALSE(halo::read_dataset_info(path).has_values);  // the old file until commit
    writer.commit();
    const auto info = halo::read_dataset_info(path);
    EXPECT_TRUE(info.has_values);
    EXPECT_TRUE(info.has_labels);
    halo::testing::expect_same_shard(halo::read_shard(path, 1), valued.shards[1]);
}

TEST(StoreWriter, RefusesMisuse)
{
    const ScratchDir dir("store");
    const auto path = dir.file("data.h5");
    const auto d = halo::testing::make_small_dataset({});
    halo::DatasetWriter writer(path, d.info, d.owner);

    auto out_of_range = d.shards[2];
    out_of_range.part = 3;
    expect_error<halo::LogicError>([&] { writer.write_part(out_of_range); },
                                   {path.string(), "part 3 outside [0, 3)"});
    writer.write_part(d.shards[1]);
    expect_error<halo::LogicError>([&] { writer.write_part(d.shards[1]); },
                                   {path.string(), "part 1 written twice"});
    auto with_features = d.shards[0];
    halo::attach_node_data(with_features, std::vector<float>(44 * 2, 1.0f), 2, {});
    expect_error<halo::LogicError>([&] { writer.write_part(with_features); },
                                   {"part 0 has feature_dim 2, the dataset 0"});
    expect_error<halo::LogicError>([&] { writer.commit(); },
                                   {path.string(), "commit with part(s) 0, 2 not written"});
}

TEST(StoreWriter, RefusesShardsThatDisagreeWithTheOwnerArray)
{
    const ScratchDir dir("store");
    const auto path = dir.file("data.h5");
    auto d = halo::testing::make_small_dataset({});
    auto owner = d.owner;
    std::swap(owner[0], owner[36]);  // node 0 to part 2, node 36 to part 0
    halo::DatasetWriter writer(path, d.info, owner);
    expect_error<halo::InputError>(
        [&] { writer.write_part(d.shards[0]); },
        {path.string() + ": /parts/0/global_ids[", "= 0 is owned by part 2"});
    expect_error<halo::LogicError>([&] { writer.write_part(d.shards[1]); },
                                   {"after a failed write"});
}

TEST(StoreWriter, RefusesAWrongNonzeroTotalAtCommit)
{
    const ScratchDir dir("store");
    const auto path = dir.file("data.h5");
    auto d = halo::testing::make_small_dataset({});
    d.info.num_nonzeros += 3;
    expect_error<halo::InputError>([&] { halo::write_dataset(path, d.info, d.owner, d.shards); },
                                   {"num_nonzeros is " + std::to_string(d.info.num_nonzeros)});
    EXPECT_TRUE(std::filesystem::is_empty(path.parent_path()));
}

TEST(StoreWriter, RefusesPlansThatDisagree)
{
    const ScratchDir dir("store");
    const auto path = dir.file("data.h5");
    auto d = halo::testing::make_small_dataset({});
    auto& plan = d.shards[1].plan;
    ASSERT_FALSE(plan.send_rows.empty());
    plan.send_rows.pop_back();
    --plan.send_offsets.back();
    expect_error<halo::InputError>([&] { halo::write_dataset(path, d.info, d.owner, d.shards); },
                                   {"halo plans disagree", "part 1 sends"});
    EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(StoreWriter, RefusesAMissingDirectory)
{
    const ScratchDir dir("store");
    const auto path = dir.file("no/such/dir/data.h5");
    const auto d = halo::testing::make_small_dataset({});
    expect_error<halo::IoError>([&] { halo::DatasetWriter(path, d.info, d.owner); },
                                {"does not exist"});
}

}  // namespace
