// Sizes before allocation in the text and binary readers: a header that declares more
// than the machine can hold is refused with the file and line, before any allocation.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "halo/core/error.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/core/memory_limits.hpp"
#include "halo_test.hpp"
#include "io_test_util.hpp"

namespace {

// Runs `fn`, expecting a halo::InputError whose message contains every one of `parts`.
template <typename Fn>
void expect_input_error(Fn&& fn, std::initializer_list<std::string> parts)
{
    try {
        fn();
        ADD_FAILURE() << "did not throw";
    } catch (const halo::InputError& e) {
        const std::string what = e.what();
        for (const auto& part : parts) {
            EXPECT_NE(what.find(part), std::string::npos) << "lacks \"" << part << "\": " << what;
        }
    }
}

TEST(IoSizes, MatrixMarketDeclaringATrillionRows)
{
    const auto file = halo::testing::scratch_dir("io-sizes") / "trillion.mtx";
    halo::testing::write_file(file,
                              "%%MatrixMarket matrix coordinate pattern general\n"
                              "1000000000000 1000000000000 1\n1 1\n");
    expect_input_error([&] { halo::read_matrix_market(file); },
                       {file.string() + ":2", "1000000000000 nodes", "GiB"});
}

TEST(IoSizes, CooFeaturesDeclaringATrillionRows)
{
    const auto file = halo::testing::scratch_dir("io-sizes") / "coo.txt";
    halo::testing::write_file(file, "# 1000000000000 100 1\n0 0 1.0\n");
    expect_input_error([&] { halo::read_coo_features(file); }, {file.string() + ":1", "GiB"});
}

// Found by fuzz_coo_features: a header of 1 x 555555555 (2.2 GB) passed the old check against
// physical memory although the memory limit was 1 GiB.
TEST(IoSizes, CooFeaturesBeyondTheMemoryLimit)
{
    const auto file = halo::testing::scratch_dir("io-sizes") / "wide-coo.txt";
    halo::testing::write_file(file, "# 1 555555555 5\n0 0 1.0\n");
    ::setenv("HALO_MEMORY_LIMIT_BYTES", "1073741824", 1);
    expect_input_error([&] { halo::read_coo_features(file); },
                       {file.string() + ":1", "1 x 555555555", "GiB"});
    ::unsetenv("HALO_MEMORY_LIMIT_BYTES");
}

TEST(IoSizes, NpyDeclaringMoreThanItHolds)
{
    const auto file = halo::testing::scratch_dir("io-sizes") / "big.npy";
    std::string header =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 1000), }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::string bytes = "\x93NUMPY";
    bytes += std::string("\x01\x00", 2);
    bytes += static_cast<char>(header.size() & 0xff);
    bytes += static_cast<char>(header.size() >> 8);
    bytes += header;
    halo::testing::write_file(file, bytes);
    expect_input_error([&] { halo::read_npy(file); }, {file.string(), "truncated"});
}

TEST(IoSizes, GraphBeyondTheMemoryLimit)
{
    ::setenv("HALO_MEMORY_LIMIT_BYTES", "4096", 1);
    halo::EdgeList edges;
    edges.num_nodes = 100000;
    expect_input_error([&] { halo::build_csr(edges, {}); }, {"100000 nodes", "needs"});
    ::unsetenv("HALO_MEMORY_LIMIT_BYTES");
}

}  // namespace
