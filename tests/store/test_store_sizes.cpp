// Sizes before allocation: a count read from a file is checked against the bytes the
// file stores and the memory available before anything is allocated for it. Each case declares an
// absurd shape in an otherwise valid file (a chunked dataset may declare any shape and store
// nothing) and expects a halo::InputError naming the file and the object, never an allocation.
#include <hdf5.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/memory_limits.hpp"
#include "halo/core/model.hpp"
#include "halo/core/result.hpp"
#include "halo/store/model_file.hpp"
#include "halo_test.hpp"
#include "store_test_util.hpp"

namespace {

using halo::testing::expect_error;

// Replaces `path` in `file` by a chunked dataset of `dims` that stores nothing; with `deflate`
// it is compressed, so that only the memory check can refuse it.
void declare_dataset(const std::filesystem::path& file, const std::string& path, hid_t type,
                     std::vector<hsize_t> dims, bool deflate = false)
{
    halo::testing::delete_link(file, path);
    const auto f = halo::testing::open_for_edit(file);
    const halo::store::Handle space(
        H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
    const halo::store::Handle plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    std::vector<hsize_t> chunk;
    for (const auto d : dims) {
        chunk.push_back(std::min<hsize_t>(d, 64));
    }
    ASSERT_GE(H5Pset_chunk(plist.get(), static_cast<int>(chunk.size()), chunk.data()), 0);
    if (deflate) {
        ASSERT_GE(H5Pset_deflate(plist.get(), 6), 0);
    }
    const halo::store::Handle ds(
        H5Dcreate2(f.get(), path.c_str(), type, space.get(), H5P_DEFAULT, plist.get(), H5P_DEFAULT),
        H5Dclose);
    ASSERT_TRUE(ds.valid()) << path;
}

// Sets HALO_MEMORY_LIMIT_BYTES for one test.
class MemoryLimit {
public:
    explicit MemoryLimit(const char* bytes) { ::setenv("HALO_MEMORY_LIMIT_BYTES", bytes, 1); }
    ~MemoryLimit() { ::unsetenv("HALO_MEMORY_LIMIT_BYTES"); }
    MemoryLimit(const MemoryLimit&) = delete;
    MemoryLimit& operator=(const MemoryLimit&) = delete;
};

class StoreSizes : public ::testing::Test {
protected:
    void SetUp() override
    {
        data_ =
            halo::testing::make_small_dataset({.valued = true, .feature_dim = 4, .labels = true});
        halo::write_dataset(path_, data_.info, data_.owner, data_.shards);
    }

    halo::testing::ScratchDir dir_{"store-sizes"};
    std::filesystem::path path_ = dir_.file("data.h5");
    halo::testing::SmallDataset data_;
};

TEST_F(StoreSizes, PartDeclaringATrillionRowsIsRefusedBeforeAllocation)
{
    declare_dataset(path_, "/parts/0/global_ids", H5T_STD_I64LE, {1'000'000'000'000ULL});
    halo::testing::set_int_attribute(path_, "/parts/0", "num_owned", 1'000'000'000'000LL);
    expect_error<halo::InputError>([&] { halo::read_shard(path_, 0); },
                                   {path_.string(), "/parts/0"});
    // The dataset itself, read as the reader reads it: refused by its stored size.
    const halo::store::QuietErrors quiet;
    const auto f = halo::store::open_file_read_only(path_.string());
    const halo::store::Where root{path_.string(), "/"};
    const halo::store::Handle part(H5Gopen2(f.get(), "/parts/0", H5P_DEFAULT), H5Gclose);
    ASSERT_TRUE(part.valid());
    expect_error<halo::InputError>(
        [&] {
            halo::store::read_array<std::int64_t>(part.get(), root.child("parts/0"), "global_ids",
                                                  {1'000'000'000'000LL, "test", true});
        },
        {path_.string() + ": /parts/0/global_ids", "declares 8e+12 bytes", "stores 0 bytes"});
}

TEST_F(StoreSizes, CompressedDatasetBeyondMemoryIsRefused)
{
    declare_dataset(path_, "/parts/1/features/values", H5T_IEEE_F32LE, {1'000'000'000'000ULL, 4},
                    /*deflate=*/true);
    const halo::store::QuietErrors quiet;
    const auto f = halo::store::open_file_read_only(path_.string());
    const halo::store::Where root{path_.string(), "/"};
    const halo::store::Handle features(H5Gopen2(f.get(), "/parts/1/features", H5P_DEFAULT),
                                       H5Gclose);
    ASSERT_TRUE(features.valid());
    expect_error<halo::InputError>(
        [&] {
            halo::store::read_matrix<float>(features.get(), root.child("parts/1/features"),
                                            "values", 1'000'000'000'000LL, 4, "test");
        },
        {"/parts/1/features/values", "shape [1000000000000, 4] needs", "GiB", "available"});
}

TEST_F(StoreSizes, MemoryLimitRefusesAnOtherwiseValidDataset)
{
    const MemoryLimit limit("64");
    expect_error<halo::InputError>([&] { halo::read_shard(path_, 0); },
                                   {path_.string(), "needs", "available"});
}

TEST(StoreSizesModel, WeightDeclaringAPetabyteIsRefused)
{
    const halo::testing::ScratchDir dir{"store-sizes-model"};
    const auto path = dir.file("model.h5");
    halo::write_model(path, halo::random_model(halo::LayerType::gcn, {8, 4}, 1, {}));
    declare_dataset(path, "/layers/0/weight", H5T_IEEE_F32LE, {1ULL << 24, 1ULL << 24});
    halo::testing::set_int_attribute(path, "/layers/0", "in_dim", 1LL << 24);
    halo::testing::set_int_attribute(path, "/layers/0", "out_dim", 1LL << 24);
    expect_error<halo::InputError>([&] { halo::read_model(path); },
                                   {path.string() + ": /layers/0/weight", "declares"});
}

TEST(StoreSizesResult, PieceDeclaringATrillionRowsIsRefused)
{
    const halo::testing::ScratchDir dir{"store-sizes-result"};
    halo::ResultPiece piece;
    piece.part = 0;
    piece.num_parts = 1;
    piece.global_ids = {0, 1, 2};
    piece.output_dim = 2;
    piece.output = {1, 2, 3, 4, 5, 6};
    piece.prediction = halo::argmax_rows(piece.output, 2);
    halo::write_result_piece(dir.file(""), piece);
    const auto file = halo::result_piece_path(dir.file(""), 0);
    declare_dataset(file, "/global_ids", H5T_STD_I64LE, {1'000'000'000'000ULL});
    halo::testing::set_int_attribute(file, "/", "num_rows", 1'000'000'000'000LL);
    expect_error<halo::InputError>([&] { halo::read_result_piece(file); },
                                   {file.string() + ": /global_ids", "declares"});
}

TEST(MemoryLimits, CheckAllocationNamesWhereAndWhat)
{
    EXPECT_NO_THROW(halo::check_allocation("f", "x", 1024));
    const MemoryLimit limit("1000");
    EXPECT_EQ(halo::available_memory_bytes(), 1000u);
    expect_error<halo::InputError>([] { halo::check_allocation("file.mtx:2", "offsets", 1e15); },
                                   {"file.mtx:2: offsets needs", "GiB"});
}

}  // namespace
