// fp16 and bf16 features in the dataset (feature_type "float16" / "bfloat16"): the writer rounds
// each value to nearest even, the reader widens it exactly, so read_shard returns
// round_feature(x) bit for bit; the stored types are HDF5 floating-point types that HDF5's own
// conversion widens to the same values (what h5py and h5dump see); a value beyond fp16's range,
// a dataset of the other layout or of float32 are refused with the dataset's name.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "halo/core/feature_type.hpp"
#include "halo/store/feature_reader.hpp"
#include "halo/store/store.hpp"
#include "store_test_util.hpp"

namespace halo::testing {
namespace {

constexpr std::int64_t kDim = 5;

// Values that exercise the rounding: ties, subnormals of fp16, signed zero, both types' extremes
// (fp16 ones only where they stay in range), spread over the parts' rows.
std::vector<float> special_values(FeatureType type)
{
    std::vector<float> v = {0.0f,       -0.0f,     1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f,
                            0x1p-24f,   -0x1p-25f, 3e-6f,           -1.0009765625f,
                            1.0f / 3.0f, 65504.0f, -65519.0f,       1e-40f};
    if (type == FeatureType::bf16) {
        v.insert(v.end(), {1e38f, -3e38f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f});
    }
    return v;
}

class Store16 : public ::testing::TestWithParam<FeatureType> {
protected:
    void SetUp() override
    {
        type_ = GetParam();
        data_ = make_small_dataset({true, kDim, true});
        const auto specials = special_values(type_);
        std::size_t k = 0;
        for (auto& s : data_.shards) {
            for (std::size_t e = 0; e < s.features.size(); e += 3) {
                s.features[e] = specials[k++ % specials.size()];
            }
        }
        data_.info.feature_type = stored_feature_type_name(type_);
        write_dataset(path_, data_.info, data_.owner, data_.shards);
    }
    std::string at(const std::string& object) const { return path_.string() + ": " + object; }

    FeatureType type_ = FeatureType::fp16;
    ScratchDir dir_{"store_16bit"};
    std::filesystem::path path_ = dir_.file("h.h5");
    SmallDataset data_;
};

TEST_P(Store16, ReadBackIsTheRoundedValueBitForBit)
{
    const auto info = read_dataset_info(path_);
    EXPECT_EQ(info.feature_type, stored_feature_type_name(type_));
    EXPECT_NO_THROW(check_dataset(path_));
    std::int64_t changed = 0;
    for (std::size_t p = 0; p < data_.shards.size(); ++p) {
        const auto& want = data_.shards[p];
        const auto got = read_shard(path_, static_cast<int>(p));
        ASSERT_EQ(got.features.size(), want.features.size());
        for (std::size_t e = 0; e < got.features.size(); ++e) {
            const float rounded = round_feature(want.features[e], type_);
            EXPECT_EQ(std::bit_cast<std::uint32_t>(got.features[e]),
                      std::bit_cast<std::uint32_t>(rounded))
                << "part " << p << " element " << e << ": " << want.features[e] << " -> "
                << got.features[e] << ", expected " << rounded;
            changed += got.features[e] != want.features[e] ? 1 : 0;
        }
        // Everything but the features is as written.
        auto same = got;
        same.features = want.features;
        expect_same_shard(same, want);
    }
    EXPECT_GT(changed, 0) << "no feature needed rounding: the test would not see a missing round";
}

TEST_P(Store16, HdfFiveWidensTheStoredTypeToTheSameValues)
{
    // Any HDF5 reader (h5py's astype('float32'), h5dump) converts the stored type itself.
    const auto got = read_shard(path_, 0);
    const auto widened = read_raw<float>(path_, "/parts/0/features/values");
    ASSERT_EQ(widened.size(), got.features.size());
    for (std::size_t e = 0; e < widened.size(); ++e) {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(widened[e]),
                  std::bit_cast<std::uint32_t>(got.features[e]))
            << "element " << e << ": HDF5 gives " << widened[e] << ", HaloGNN " << got.features[e];
    }
    const auto f = open_for_edit(path_);
    const store::Handle ds(H5Dopen2(f.get(), "/parts/0/features/values", H5P_DEFAULT), H5Dclose);
    const store::Handle stored(H5Dget_type(ds.get()), H5Tclose);
    EXPECT_EQ(H5Tget_class(stored.get()), H5T_FLOAT);
    EXPECT_EQ(H5Tget_size(stored.get()), 2u);
    EXPECT_EQ(H5Tget_ebias(stored.get()), type_ == FeatureType::fp16 ? 15u : 127u);
}

TEST_P(Store16, StoredFeaturesAreTheBitPatterns)
{
    const auto stored = read_stored_features(path_, 1);
    EXPECT_EQ(stored.feature_type, stored_feature_type_name(type_));
    EXPECT_TRUE(stored.fp32.empty());
    const auto& shard = data_.shards[1];
    std::vector<std::uint16_t> want(shard.features.size());
    EXPECT_EQ(encode_features(shard.features, type_, want), -1);
    EXPECT_EQ(stored.bits16, want);
    EXPECT_EQ(stored.bytes(), stored.rows * stored.cols * 2);
}

TEST_P(Store16, OtherStoredTypesAreRefused)
{
    const std::string values = "/parts/1/features/values";
    const auto other = type_ == FeatureType::fp16 ? FeatureType::bf16 : FeatureType::fp16;
    set_string_attribute(path_, "/", "feature_type", stored_feature_type_name(other));
    expect_error<InputError>([&] { read_shard(path_, 1); },
                             {at(values), "stored as " + stored_feature_type_name(type_),
                              "expected " + stored_feature_type_name(other)});
    set_string_attribute(path_, "/", "feature_type", stored_feature_type_name(type_));
    EXPECT_NO_THROW(read_shard(path_, 1));

    const auto shard = data_.shards[1];
    replace_raw<float>(path_, values, shard.features);  // 1-D float32: type checked first
    expect_error<InputError>([&] { read_shard(path_, 1); },
                             {at(values), "float32", stored_feature_type_name(type_)});
}

INSTANTIATE_TEST_SUITE_P(Types, Store16, ::testing::Values(FeatureType::fp16, FeatureType::bf16),
                         [](const auto& info) { return to_string(info.param); });

TEST(Store16Writer, ValueBeyondTheRangeFailsThePartNamingNodeAndColumn)
{
    ScratchDir dir("store_16bit_range");
    const auto path = dir.file("r.h5");
    auto data = make_small_dataset({true, kDim, true});
    data.info.feature_type = "float16";
    auto& shard = data.shards[1];
    shard.features[static_cast<std::size_t>(3 * kDim + 2)] = -70000.0f;
    const auto node = shard.global_ids[3];
    DatasetWriter writer(path, data.info, data.owner);
    writer.write_part(data.shards[0]);
    expect_error<InputError>([&] { writer.write_part(shard); },
                             {path.string() + ": /parts/1", "-70000", "node " + std::to_string(node),
                              "column 2", "fp16", "65504"});
    EXPECT_FALSE(std::filesystem::exists(path)) << "a failed write must not leave the dataset";

    // The same value fits bf16.
    data.info.feature_type = "bfloat16";
    const auto bf16 = dir.file("b.h5");
    write_dataset(bf16, data.info, data.owner, data.shards);
    EXPECT_EQ(read_shard(bf16, 1).features[static_cast<std::size_t>(3 * kDim + 2)], -70144.0f);
}

TEST(Store16Large, ChunkedParallelWriteAndReadKeepTheBits)
{
    // Rows of 256 KiB: every part's features pass the 4 MiB mark of the parallel chunk path.
    constexpr std::int64_t dim = 131072;
    ScratchDir dir("store_16bit_large");
    const auto path = dir.file("l.h5");
    auto data = make_small_dataset({true, dim, false});
    for (auto& s : data.shards) {
        for (std::size_t e = 0; e < s.features.size(); ++e) {
            s.features[e] = std::ldexp(static_cast<float>(e % 977) + 0.3f, static_cast<int>(e % 41) - 20);
        }
    }
    data.info.feature_type = "bfloat16";
    write_dataset(path, data.info, data.owner, data.shards);
    for (std::size_t p = 0; p < data.shards.size(); ++p) {
        const auto got = read_shard(path, static_cast<int>(p));
        auto want = data.shards[p].features;
        round_features(want, FeatureType::bf16);
        ASSERT_EQ(got.features.size(), want.size());
        EXPECT_TRUE(got.features == want) << "part " << p;
    }
    EXPECT_TRUE(read_raw<float>(path, "/parts/0/features/values") == read_shard(path, 0).features);
}

TEST(Store16Encode, FirstOverflowIsReportedAndNaNIsNotAnOverflow)
{
    const std::vector<float> x = {1.0f, std::numeric_limits<float>::quiet_NaN(), 65519.0f,
                                  65520.0f, -1e6f, std::numeric_limits<float>::infinity()};
    std::vector<std::uint16_t> bits(x.size());
    EXPECT_EQ(encode_features(x, FeatureType::fp16, bits), 3);
    EXPECT_EQ(bits[2], 0x7BFFu);  // 65519 rounds down to 65504
    EXPECT_EQ(bits[3], 0x7C00u);
    EXPECT_EQ(first_out_of_range(x, FeatureType::fp16), 3);
    EXPECT_EQ(encode_features(x, FeatureType::bf16, bits), -1);
    EXPECT_EQ(first_out_of_range(x, FeatureType::bf16), -1);
    const std::vector<float> big = {3.4e38f, -3.3895313e38f};
    std::vector<std::uint16_t> big_bits(big.size());
    EXPECT_EQ(encode_features(big, FeatureType::bf16, big_bits), 0);
    std::vector<float> back(bits.size());
    decode_features(bits, FeatureType::bf16, back);
    EXPECT_EQ(back[0], 1.0f);
    EXPECT_TRUE(std::isnan(back[1]));
    EXPECT_EQ(back[4], -999424.0f);  // bf16 rounding of -1e6
}

}  // namespace
}  // namespace halo::testing
