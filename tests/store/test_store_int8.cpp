// INT8 features in the dataset (format version 2): written per part with the columns' shared
// scale and zero point, read back with their dequantized values within scale / 2 of the original
// features, refused when a scale or zero point is damaged or missing; version-1 files (float32,
// no feature_type attribute) are still read.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "halo/quantize/quantize.hpp"
#include "halo/store/store.hpp"
#include "store_test_util.hpp"

namespace halo::testing {
namespace {

constexpr std::int64_t kDim = 5;

// The small dataset with float features, and the same with int8 features quantized over all
// nodes (what halo-partition --quantize int8 stores).
struct Int8Dataset {
    SmallDataset plain;
    SmallDataset quantized;
    QuantizedMatrix global;
    std::vector<float> global_features;
};

Int8Dataset make_int8_dataset()
{
    Int8Dataset d;
    d.plain = make_small_dataset({true, kDim, true});
    d.quantized = d.plain;
    const auto n = d.plain.info.num_nodes;
    d.global_features.assign(static_cast<std::size_t>(n * kDim), 0.0f);
    for (const auto& s : d.plain.shards) {
        for (std::int64_t i = 0; i < s.num_owned; ++i) {
            std::copy_n(s.features.data() + i * kDim, kDim,
                        d.global_features.data() + s.global_ids[i] * kDim);
        }
    }
    d.global = quantize_columns(dense_view<const float>(d.global_features.data(), n, kDim), "t");
    d.quantized.info.feature_type = "int8";
    for (auto& s : d.quantized.shards) {
        s.features_int8.resize(static_cast<std::size_t>(s.num_owned * kDim));
        for (std::int64_t i = 0; i < s.num_owned; ++i) {
            std::copy_n(d.global.data.data() + s.global_ids[i] * kDim, kDim,
                        s.features_int8.data() + i * kDim);
        }
        s.feature_scale = d.global.scale;
        s.feature_zero_point = d.global.zero_point;
    }
    return d;
}

class StoreInt8 : public ::testing::Test {
protected:
    void SetUp() override
    {
        data_ = make_int8_dataset();
        write_dataset(path_, data_.quantized.info, data_.quantized.owner, data_.quantized.shards);
    }
    std::string at(const std::string& object) const { return path_.string() + ": " + object; }

    ScratchDir dir_{"store_int8"};
    std::filesystem::path path_ = dir_.file("q.h5");
    Int8Dataset data_;
};

TEST_F(StoreInt8, RoundTripDequantizesWithinHalfAStep)
{
    const auto info = read_dataset_info(path_);
    EXPECT_EQ(info.version, 2);
    EXPECT_EQ(info.feature_type, "int8");
    EXPECT_NO_THROW(check_dataset(path_));
    for (std::size_t p = 0; p < data_.plain.shards.size(); ++p) {
        const auto& want = data_.quantized.shards[p];
        const auto got = read_shard(path_, static_cast<int>(p));
        EXPECT_EQ(got.features_int8, want.features_int8);
        EXPECT_EQ(got.feature_scale, data_.global.scale);
        EXPECT_EQ(got.feature_zero_point, data_.global.zero_point);
        ASSERT_EQ(got.features.size(), want.features.size());
        for (std::int64_t i = 0; i < got.num_owned; ++i) {
            for (std::int64_t j = 0; j < kDim; ++j) {
                const auto e = static_cast<std::size_t>(i * kDim + j);
                EXPECT_EQ(got.features[e],
                          dequantize_int8(got.features_int8[e], data_.global.view().params(j)));
                EXPECT_LE(std::fabs(got.features[e] - want.features[e]),
                          0.5f * data_.global.scale[j] * (1.0f + 1e-5f))
                    << "part " << p << " (" << i << ", " << j << ")";
            }
        }
    }
}

TEST_F(StoreInt8, FourTimesSmallerFeatureArrays)
{
    ScratchDir other("store_int8_plain");
    const auto plain = other.file("f.h5");
    write_dataset(plain, data_.plain.info, data_.plain.owner, data_.plain.shards);
    auto element_bytes = [](const std::filesystem::path& file) {
        const auto f = open_for_edit(file);
        const store::Handle ds(H5Dopen2(f.get(), "/parts/0/features/values", H5P_DEFAULT),
                               H5Dclose);
        const store::Handle type(H5Dget_type(ds.get()), H5Tclose);
        return H5Tget_size(type.get());
    };
    EXPECT_EQ(element_bytes(path_), 1u);
    EXPECT_EQ(element_bytes(plain), 4u);
}

TEST_F(StoreInt8, DamagedScalesAndZeroPointsAreRefused)
{
    const auto scale = read_raw<float>(path_, "/parts/1/features/scale");
    for (const float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity()}) {
        auto edited = scale;
        edited[2] = bad;
        overwrite_raw(path_, "/parts/1/features/scale", edited);
        expect_error<InputError>([&] { read_shard(path_, 1); },
                                 {at("/parts/1/features"), "column 2"});
    }
    overwrite_raw(path_, "/parts/1/features/scale", scale);
    EXPECT_NO_THROW(read_shard(path_, 1));

    auto zero = read_raw<std::int32_t>(path_, "/parts/0/features/zero_point");
    zero[4] = 300;
    overwrite_raw(path_, "/parts/0/features/zero_point", zero);
    expect_error<InputError>([&] { read_shard(path_, 0); },
                             {at("/parts/0/features"), "column 4", "300"});

    delete_link(path_, "/parts/2/features/zero_point");
    expect_error<InputError>([&] { read_shard(path_, 2); },
                             {at("/parts/2/features/zero_point"), "missing dataset"});

    replace_raw<float>(path_, "/parts/1/features/scale", {1.0f, 1.0f});
    expect_error<InputError>([&] { read_shard(path_, 1); },
                             {at("/parts/1/features/scale"), "2 elements, expected 5"});
}

TEST_F(StoreInt8, UnknownFeatureTypeIsRefused)
{
    set_string_attribute(path_, "/", "feature_type", "float8");
    expect_error<InputError>([&] { read_dataset_info(path_); },
                             {path_.string(), "feature_type", "'float8'"});
}

TEST_F(StoreInt8, WriterRefusesPartsWithOtherParameters)
{
    ScratchDir other("store_int8_writer");
    auto shards = data_.quantized.shards;
    shards[1].feature_scale[0] *= 2.0f;
    DatasetWriter writer(other.file("w.h5"), data_.quantized.info, data_.quantized.owner);
    writer.write_part(shards[0]);
    expect_error<LogicError>([&] { writer.write_part(shards[1]); },
                             {"/parts/1", "differ from the first part"});
}

TEST(StoreVersion1, FloatFilesWithoutFeatureTypeAreRead)
{
    ScratchDir dir("store_v1");
    const auto path = dir.file("v1.h5");
    const auto plain = make_small_dataset({true, kDim, true});
    write_dataset(path, plain.info, plain.owner, plain.shards);
    set_int_attribute(path, "/", "version", 1);
    {
        const auto f = open_for_edit(path);
        ASSERT_GE(H5Adelete(f.get(), "feature_type"), 0);
    }
    const auto info = read_dataset_info(path);
    EXPECT_EQ(info.version, 1);
    EXPECT_EQ(info.feature_type, "float32");
    expect_same_shard(read_shard(path, 0), plain.shards[0]);
}

}  // namespace
}  // namespace halo::testing
