// The input features of one dataset part exactly as stored (docs/FORMAT.md, "/parts/<p>"): the
// float32 array, the float16 / bfloat16 bit patterns, or the int8 array with its per-column scale
// and zero point, without the widening or dequantization that read_shard performs. For tools that
// move the stored bytes themselves (halo-bench load times file -> device for both feature types; an
// int8 kernel reads them as is).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "halo/quantize/quantize.hpp"

namespace halo {

struct StoredFeatures {
    std::string feature_type;  // "float32", "float16", "bfloat16" or "int8" (the root attribute)
    std::int64_t rows = 0;     // the part's num_owned
    std::int64_t cols = 0;     // feature_dim
    std::vector<float> fp32;   // rows x cols, row-major; float32 datasets only
    QuantizedMatrix int8;      // int8 datasets only (validated: scale > 0, zero point in range)
    std::vector<std::uint16_t> bits16;  // float16 / bfloat16 datasets only: the bit patterns

    /// Bytes of the stored arrays: 4 rows cols for float32; 2 rows cols for float16 and
    /// bfloat16; rows cols + 8 cols for int8.
    std::int64_t bytes() const noexcept;
};

/// Opens `path` read-only, checks its root attributes as every dataset reader does, and reads
/// /parts/<part>/features. Throws halo::InputError naming the file when the part does not exist
/// or the dataset has no features (feature_dim 0), and the errors of read_shard otherwise.
StoredFeatures read_stored_features(const std::filesystem::path& path, int part);

}  // namespace halo
