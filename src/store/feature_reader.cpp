// read_stored_features: the features group of one part, read as read_shard reads it (the same
// shape and parameter checks) but returned as stored.
#include "halo/store/feature_reader.hpp"

#include "dataset_reader.hpp"
#include "halo/core/error.hpp"
#include "hdf5_util.hpp"

namespace halo {

std::int64_t StoredFeatures::bytes() const noexcept
{
    if (feature_type == "int8") {
        return rows * cols + cols * static_cast<std::int64_t>(sizeof(float) + sizeof(std::int32_t));
    }
    if (feature_type == "float16" || feature_type == "bfloat16") {
        return rows * cols * static_cast<std::int64_t>(sizeof(std::uint16_t));
    }
    return rows * cols * static_cast<std::int64_t>(sizeof(float));
}

StoredFeatures read_stored_features(const std::filesystem::path& path, int part)
{
    using namespace store;
    const QuietErrors quiet;
    const DatasetReader reader(path);
    const auto& info = reader.info();
    if (part < 0 || part >= info.num_parts) {
        HALO_THROW(InputError, reader.file(), ": part ", part, " does not exist (the dataset has ",
                   info.num_parts, " parts)");
    }
    if (info.feature_dim <= 0) {
        HALO_THROW(InputError, reader.file(), ": the dataset has no features (feature_dim 0)");
    }
    const auto file = open_file_read_only(reader.file());
    const Where root{reader.file(), "/"};
    const auto name = std::to_string(part);
    const auto parts = open_group(file.get(), root, "parts");
    const auto where = root.child("parts").child(name);
    const auto group = open_group(parts.get(), root.child("parts"), name.c_str());
    const auto rows = read_int_attribute(group.get(), where, "num_owned");
    if (rows < 0) {
        HALO_THROW(InputError, where.str(), ": attribute num_owned is ", rows, " (negative)");
    }
    const auto features = open_group(group.get(), where, "features");
    const auto fw = where.child("features");
    const char* shape = "attribute num_owned x root attribute feature_dim";

    StoredFeatures out;
    out.feature_type = info.feature_type;
    out.rows = rows;
    out.cols = info.feature_dim;
    if (info.feature_type == "int8") {
        out.int8.rows = rows;
        out.int8.cols = info.feature_dim;
        out.int8.data = read_matrix<std::int8_t>(features.get(), fw, "values", rows,
                                                 info.feature_dim, shape);
        out.int8.scale = read_array<float>(features.get(), fw, "scale",
                                           {info.feature_dim, "root attribute feature_dim"});
        out.int8.zero_point = read_array<std::int32_t>(
            features.get(), fw, "zero_point", {info.feature_dim, "root attribute feature_dim"});
        validate(out.int8, fw.str().c_str());
    } else if (const auto type16 = feature_type_from_stored_name(info.feature_type);
               type16 && *type16 != FeatureType::fp32) {
        out.bits16 =
            read_matrix16(features.get(), fw, "values", *type16, rows, info.feature_dim, shape);
    } else {
        out.fp32 = read_matrix<float>(features.get(), fw, "values", rows, info.feature_dim, shape);
    }
    return out;
}

}  // namespace halo
