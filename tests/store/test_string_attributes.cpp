// String attributes: written fixed-length (no global heap), read back equal; variable-length ones
// of older files still read, in a child process (src/store/hdf5_guard.hpp), and the corrupt global
// heaps on which HDF5 1.10.8 crashes or hangs (tests/fuzz/regressions) are a halo::InputError in
// bounded time, leaving no child process and no open descriptor behind.
#include <dirent.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/store/model_file.hpp"
#include "halo_test.hpp"
#include "hdf5_guard.hpp"
#include "hdf5_util.hpp"

namespace {

namespace fs = std::filesystem;
using halo::store::Handle;
using halo::store::Where;

const std::vector<std::string>& sample_values()
{
    static const std::vector<std::string> values{"", "x", "halo-dataset", "ünïcødé ✓",
                                                 std::string(300, 'a') + " trailing space "};
    return values;
}

Handle create(const fs::path& path)
{
    Handle f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    EXPECT_TRUE(f.valid()) << path;
    return f;
}

Handle open_read_only(const fs::path& path)
{
    Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    EXPECT_TRUE(f.valid()) << path;
    return f;
}

// A scalar variable-length UTF-8 string attribute, as the writers made them before and h5py makes
// them by default.
void write_variable_length(hid_t loc, const char* name, const char* value)
{
    const Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    ASSERT_GE(H5Tset_size(type.get(), H5T_VARIABLE), 0);
    ASSERT_GE(H5Tset_cset(type.get(), H5T_CSET_UTF8), 0);
    const Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    const Handle attr(H5Acreate2(loc, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                      H5Aclose);
    ASSERT_TRUE(attr.valid()) << name;
    ASSERT_GE(H5Awrite(attr.get(), type.get(), static_cast<const void*>(&value)), 0);
}

int open_descriptors()
{
    int count = 0;
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) {
        return -1;
    }
    while (::readdir(dir) != nullptr) {
        ++count;
    }
    ::closedir(dir);
    return count;
}

// No child of this process is left, running or unreaped.
void expect_no_children()
{
    int status = 0;
    EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD);
}

std::string name_of(std::size_t k)
{
    std::string name = "s";
    name += std::to_string(k);  // not "s" + ...: a false -Wrestrict in GCC 12
    return name;
}

TEST(StringAttributes, WrittenFixedLengthUtf8AndReadBackEqual)
{
    const auto path = halo::testing::scratch_dir("strings") / "fixed.h5";
    const halo::store::QuietErrors quiet;
    {
        const auto f = create(path);
        for (std::size_t k = 0; k < sample_values().size(); ++k) {
            halo::store::write_attribute_string(f.get(), {path.string()}, name_of(k).c_str(),
                                                sample_values()[k]);
        }
    }
    const auto f = open_read_only(path);
    for (std::size_t k = 0; k < sample_values().size(); ++k) {
        const auto& value = sample_values()[k];
        SCOPED_TRACE(value);
        const Handle attr(H5Aopen(f.get(), name_of(k).c_str(), H5P_DEFAULT), H5Aclose);
        const Handle type(H5Aget_type(attr.get()), H5Tclose);
        EXPECT_EQ(H5Tget_class(type.get()), H5T_STRING);
        EXPECT_EQ(H5Tis_variable_str(type.get()), 0);
        EXPECT_EQ(H5Tget_size(type.get()), std::max<std::size_t>(value.size(), 1));
        EXPECT_EQ(H5Tget_cset(type.get()), H5T_CSET_UTF8);
        EXPECT_EQ(halo::store::read_string_attribute(f.get(), {path.string()}, name_of(k).c_str()),
                  value);
    }
}

TEST(StringAttributes, VariableLengthOnesOfOlderFilesStillRead)
{
    const auto path = halo::testing::scratch_dir("strings") / "variable.h5";
    const halo::store::QuietErrors quiet;
    {
        const auto f = create(path);
        for (std::size_t k = 0; k < sample_values().size(); ++k) {
            write_variable_length(f.get(), name_of(k).c_str(), sample_values()[k].c_str());
        }
        write_variable_length(f.get(), "null", nullptr);
    }
    const int descriptors = open_descriptors();
    const auto f = open_read_only(path);
    for (std::size_t k = 0; k < sample_values().size(); ++k) {
        EXPECT_EQ(halo::store::read_string_attribute(f.get(), {path.string()}, name_of(k).c_str()),
                  sample_values()[k]);
    }
    EXPECT_EQ(halo::store::read_string_attribute(f.get(), {path.string()}, "null"), "");
    expect_no_children();
    EXPECT_EQ(open_descriptors(), descriptors + 1);  // the file itself
}

TEST(StringAttributes, ChildThatOverrunsItsDeadlineIsKilled)
{
    // A healthy read with no time at all: the child cannot answer before the deadline.
    const auto path = halo::testing::scratch_dir("strings") / "deadline.h5";
    const halo::store::QuietErrors quiet;
    {
        const auto f = create(path);
        write_variable_length(f.get(), "s", "value");
    }
    const int descriptors = open_descriptors();
    {
        const auto f = open_read_only(path);
        const Handle attr(H5Aopen(f.get(), "s", H5P_DEFAULT), H5Aclose);
        const Handle type(H5Aget_type(attr.get()), H5Tclose);
        try {
            halo::store::read_variable_string_guarded(attr.get(), type.get(), "where",
                                                      std::chrono::milliseconds(0));
            ADD_FAILURE() << "did not throw";
        } catch (const halo::InputError& e) {
            EXPECT_NE(std::string(e.what()).find("where: HDF5 did not finish in 0 s"),
                      std::string::npos)
                << e.what();
        }
    }
    expect_no_children();
    EXPECT_EQ(open_descriptors(), descriptors);
}

TEST(StringAttributes, CorruptGlobalHeapIsAnInputErrorInBoundedTime)
{
    const fs::path dir = HALO_FUZZ_REGRESSIONS_DIR;
    const int descriptors = open_descriptors();
    for (const char* input :
         {"fuzz_model-hdf5-global-heap-memcpy-overlap", "fuzz_model-hdf5-global-heap-hang"}) {
        SCOPED_TRACE(input);
        ASSERT_TRUE(fs::exists(dir / input));
        const auto start = std::chrono::steady_clock::now();
        try {
            halo::read_model(dir / input);
            ADD_FAILURE() << "read a corrupt model";
        } catch (const halo::InputError& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(input), std::string::npos) << what;
            EXPECT_NE(what.find(": attribute "), std::string::npos) << what;
            EXPECT_NE(what.find("variable-length string"), std::string::npos) << what;
            std::printf("%s\n", what.c_str());
        }
        const auto took = std::chrono::steady_clock::now() - start;
        EXPECT_LT(took, halo::store::guarded_read_timeout + std::chrono::seconds(5));
    }
    expect_no_children();
    EXPECT_EQ(open_descriptors(), descriptors);
}

}  // namespace
