// The input features told in groups while a part is read (halo_store's read_shard hands them to
// halo_engine's FeatureUpload): a type both floors use, so it lives in halo_core.
#pragma once

#include <cstdint>
#include <functional>

namespace halo {

/// A group of a part's input features, told while the part is read: rows [first_row,
/// first_row + count) of /parts/<p>/features/values (total_rows x cols) as stored (float32, or
/// int8 in an int8 dataset: `int8`; fp16 and bf16 rows widened to float32 as they arrive), at
/// their final place in the shard that halo_store's read_shard returns
/// (Shard::features or Shard::features_int8), which stays there as long as that vector lives
/// (moving a vector keeps its storage).
struct FeatureRowsRead {
    std::int64_t first_row = 0;
    std::int64_t count = 0;
    std::int64_t total_rows = 0;
    std::int64_t cols = 0;
    bool int8 = false;
    const void* rows = nullptr;
};
using FeatureRows = std::function<void(const FeatureRowsRead& group)>;

}  // namespace halo
