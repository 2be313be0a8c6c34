// An open dataset file: the root attributes read and checked once, then the owner array and parts
// on demand. The public readers (store.hpp) and check_dataset share it, so that a check of every
// part opens the file once. Declare a QuietErrors before constructing one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "halo/core/shard.hpp"
#include "halo/store/store.hpp"
#include "hdf5_util.hpp"

namespace halo::store {

class DatasetReader {
public:
    /// Opens read-only and checks the root (format, version, attributes, the groups of /parts).
    explicit DatasetReader(const std::filesystem::path& path);

    const DatasetInfo& info() const noexcept { return info_; }
    const std::string& file() const noexcept { return file_; }

    /// /partition/owner, checked for length num_nodes and values in [0, num_parts).
    std::vector<std::int32_t> owner() const;

    /// Part `part`, checked against the root attributes and through validate_shard.
    Shard part(int part, const ShardReadOptions& options = {}) const;

private:
    std::string file_;
    Handle handle_;
    DatasetInfo info_;
};

}  // namespace halo::store
