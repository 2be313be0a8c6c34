// Fixtures of the store tests: a small partitioned graph with a part that has no halo, its dataset
// written to a scratch file, shard comparison, and the HDF5 edits that corrupt a written file.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/shard.hpp"
#include "halo/store/store.hpp"
#include "hdf5_util.hpp"

namespace halo::testing {

struct DatasetSpec {
    bool valued = true;  // gcn-normalized values, else a pattern matrix
    std::int64_t feature_dim = 0;
    bool labels = false;
};

/// A 6 x 6 grid (nodes 0..35, split between parts 0 and 1 by column, ids interleaved) and an
/// 8-node ring (36..43) that part 2 owns alone: part 2 has no halo and sends nothing.
struct SmallDataset {
    Csr global;
    std::vector<std::int32_t> owner;
    std::vector<Shard> shards;
    DatasetInfo info;
};

SmallDataset make_small_dataset(const DatasetSpec& spec);

/// A scratch directory removed when the object dies.
class ScratchDir {
public:
    explicit ScratchDir(const std::string& tag);
    ~ScratchDir();
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    std::filesystem::path file(const std::string& name) const { return dir_ / name; }

private:
    std::filesystem::path dir_;
};

/// Every field of two shards, features and labels included.
void expect_same_shard(const Shard& a, const Shard& b);

/// Runs `fn`, expects it to throw E, and expects what() to contain every one of `parts`.
template <typename E>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts)
{
    try {
        fn();
    } catch (const E& e) {
        const std::string what = e.what();
        for (const auto& part : parts) {
            EXPECT_NE(what.find(part), std::string::npos)
                << "message lacks \"" << part << "\": " << what;
        }
        return;
    } catch (const std::exception& e) {
        ADD_FAILURE() << "threw another exception type: " << e.what();
        return;
    }
    ADD_FAILURE() << "did not throw";
}

// ---- editing a written file with the HDF5 C API ----------------------------------------------

/// The file opened read-write, for the duration of one edit.
store::Handle open_for_edit(const std::filesystem::path& file);

template <typename T>
std::vector<T> read_raw(const std::filesystem::path& file, const std::string& dataset)
{
    const auto f = open_for_edit(file);
    const store::Handle ds(H5Dopen2(f.get(), dataset.c_str(), H5P_DEFAULT), H5Dclose);
    EXPECT_TRUE(ds.valid()) << dataset;
    const store::Handle space(H5Dget_space(ds.get()), H5Sclose);
    std::vector<T> out(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.get())));
    if (!out.empty()) {
        EXPECT_GE(H5Dread(ds.get(), store::H5Type<T>::memory(), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                          out.data()),
                  0);
    }
    return out;
}

/// Overwrites a dataset's values in place (same length).
template <typename T>
void overwrite_raw(const std::filesystem::path& file, const std::string& dataset,
                   const std::vector<T>& values)
{
    const auto f = open_for_edit(file);
    const store::Handle ds(H5Dopen2(f.get(), dataset.c_str(), H5P_DEFAULT), H5Dclose);
    ASSERT_TRUE(ds.valid()) << dataset;
    ASSERT_GE(H5Dwrite(ds.get(), store::H5Type<T>::memory(), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                       values.data()),
              0);
}

/// Deletes a link (a dataset or group disappears from the file's tree).
void delete_link(const std::filesystem::path& file, const std::string& path);

/// Replaces a dataset by a new one of any length.
template <typename T>
void replace_raw(const std::filesystem::path& file, const std::string& dataset,
                 const std::vector<T>& values)
{
    delete_link(file, dataset);
    const auto slash = dataset.rfind('/');
    const auto parent = dataset.substr(0, slash);
    const auto name = dataset.substr(slash + 1);
    const auto f = open_for_edit(file);
    const store::Handle g(H5Gopen2(f.get(), parent.c_str(), H5P_DEFAULT), H5Gclose);
    ASSERT_TRUE(g.valid()) << parent;
    store::write_array<T>(g.get(), {file.string(), parent}, name.c_str(), values);
}

/// Replaces an attribute of `object` by an int64 (or string) scalar.
void set_int_attribute(const std::filesystem::path& file, const std::string& object,
                       const std::string& name, std::int64_t value);
void set_string_attribute(const std::filesystem::path& file, const std::string& object,
                          const std::string& name, const std::string& value);

}  // namespace halo::testing
