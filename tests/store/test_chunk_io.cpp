// The parallel chunk reader and writer (src/store/chunk_io.hpp) against HDF5's own pipeline: the
// same checksums, files each can read of the other, every thread count, edge chunks, damaged
// chunks found and named.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "chunk_io.hpp"
#include "halo/error.hpp"
#include "halo_test.hpp"
#include "hdf5_util.hpp"
#include "store_test_util.hpp"

namespace {

using halo::store::Handle;
using halo::store::Where;
using halo::testing::expect_error;

// Writes `values` as a rows x cols float32 dataset "x" through HDF5's filter pipeline (H5Dwrite),
// chunked by `chunk_rows` with Fletcher32: the reference layout.
void write_with_hdf5(const std::filesystem::path& path, const std::vector<float>& values,
                     hsize_t rows, hsize_t cols, hsize_t chunk_rows)
{
    const Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    ASSERT_TRUE(file.valid());
    const hsize_t dims[2] = {rows, cols};
    const Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose);
    const Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    const hsize_t chunk[2] = {chunk_rows, cols};
    ASSERT_GE(H5Pset_chunk(dcpl.get(), 2, chunk), 0);
    ASSERT_GE(H5Pset_fletcher32(dcpl.get()), 0);
    const Handle ds(H5Dcreate2(file.get(), "x", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                               dcpl.get(), H5P_DEFAULT),
                    H5Dclose);
    ASSERT_GE(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
              0);
}

// Reads "x" through HDF5's own pipeline (H5Dread: its filter verifies every checksum).
std::vector<float> read_with_hdf5(const std::filesystem::path& path, std::size_t count)
{
    const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    const Handle ds(H5Dopen2(file.get(), "x", H5P_DEFAULT), H5Dclose);
    std::vector<float> out(count, -7.0f);
    EXPECT_GE(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0);
    return out;
}

// Reads "x" through the store (its parallel path where it applies); `parallel` says whether the
// parallel reader took it.
std::vector<float> read_with_store(const std::filesystem::path& path, std::int64_t rows,
                                   std::int64_t cols, bool* parallel = nullptr)
{
    const halo::store::QuietErrors quiet;
    const auto file = halo::store::open_file_read_only(path.string());
    const Where root{path.string(), "/"};
    const auto ds = halo::store::open_dataset(file.get(), root, "x",
                                              halo::store::ElementClass::floating, 4, "float32", 2);
    std::vector<float> out(static_cast<std::size_t>(rows * cols), -7.0f);
    if (parallel != nullptr) {
        *parallel = halo::store::read_parallel(ds, root.child("x"), H5T_NATIVE_FLOAT, out.data());
        if (*parallel) {
            return out;
        }
    }
    halo::store::read_into(ds, root.child("x"), H5T_NATIVE_FLOAT, out.data());
    return out;
}

std::vector<float> random_values(std::size_t count, unsigned seed)
{
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
    std::vector<float> v(count);
    for (auto& x : v) {
        x = dist(gen);
    }
    return v;
}

class ThreadCount {
public:
    explicit ThreadCount(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
    ~ThreadCount() { omp_set_num_threads(saved_); }

private:
    int saved_;
};

TEST(ChunkIo, Fletcher32IsHdf5s)
{
    // HDF5 stores its checksum after the chunk (little-endian); read the raw chunks back and
    // compare, on random bytes, all-ones bytes (the sums' largest values), zeros (the sums' only
    // zero), one nonzero byte in zeros, and lengths around HDF5's 360-word folds and the blocks of
    // both vector versions (4096 and 8192 bytes).
    halo::testing::ScratchDir dir{"chunk_io"};
    std::mt19937 gen(5);
    for (const hsize_t n : {1, 2, 3, 359, 360, 361, 719, 720, 721, 4095, 4096, 4097, 4099, 8191,
                            8192, 8193, 100000, 1048576, 1048579}) {
        for (const int fill : {-1, 0xff, 0, -2}) {
            SCOPED_TRACE("bytes " + std::to_string(n) + " fill " + std::to_string(fill));
            std::vector<unsigned char> bytes(n);
            for (auto& b : bytes) {
                b = static_cast<unsigned char>(fill >= 0 ? fill : fill == -1 ? gen() & 0xff : 0);
            }
            if (fill == -2) {
                bytes[n / 2] = 1;
            }
            const auto path = dir.file("bytes.h5");
            {
                const Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                                  H5Fclose);
                const hsize_t dims[1] = {n};
                const Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose);
                const Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
                ASSERT_GE(H5Pset_chunk(dcpl.get(), 1, dims), 0);
                ASSERT_GE(H5Pset_fletcher32(dcpl.get()), 0);
                const Handle ds(H5Dcreate2(file.get(), "b", H5T_STD_U8LE, space.get(), H5P_DEFAULT,
                                           dcpl.get(), H5P_DEFAULT),
                                H5Dclose);
                ASSERT_GE(H5Dwrite(ds.get(), H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                   bytes.data()),
                          0);
            }
            const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
            const Handle ds(H5Dopen2(file.get(), "b", H5P_DEFAULT), H5Dclose);
            std::vector<unsigned char> raw(n + 4);
            const hsize_t offset[1] = {0};
            std::uint32_t mask = 0;
            ASSERT_GE(H5Dread_chunk(ds.get(), H5P_DEFAULT, offset, &mask, raw.data()), 0);
            ASSERT_TRUE(std::equal(bytes.begin(), bytes.end(), raw.begin()));
            const std::uint32_t stored =
                raw[n] | (raw[n + 1] << 8) | (raw[n + 2] << 16) | (std::uint32_t{raw[n + 3]} << 24);
            EXPECT_EQ(halo::store::fletcher32(bytes.data(), bytes.size()), stored);
            EXPECT_EQ(halo::store::detail::fletcher32_portable(bytes.data(), bytes.size()), stored);
        }
    }
}

TEST(ChunkIo, ReadsWhatHdf5WroteOnAnyThreadCount)
{
    halo::testing::ScratchDir dir{"chunk_io"};
    const auto path = dir.file("hdf5.h5");
    // 20011 rows of 61 floats, 1000 rows a chunk: 21 chunks, the last one partial (11 rows).
    const std::int64_t rows = 20011;
    const std::int64_t cols = 61;
    const auto values = random_values(rows * cols, 1);
    write_with_hdf5(path, values, rows, cols, 1000);
    for (const int threads : {1, 2, 3, 7}) {
        SCOPED_TRACE("threads " + std::to_string(threads));
        const ThreadCount tc(threads);
        bool parallel = false;
        const auto got = read_with_store(path, rows, cols, &parallel);
        EXPECT_TRUE(parallel) << "the parallel reader declined a dataset the store's layout";
        EXPECT_EQ(got, values);
    }
}

TEST(ChunkIo, Hdf5ReadsWhatTheStoreWrote)
{
    halo::testing::ScratchDir dir{"chunk_io"};
    const auto path = dir.file("store.h5");
    // Wide enough that a chunk (1 MiB) holds 2621 rows; 30001 rows leave a partial last chunk.
    const std::int64_t rows = 30001;
    const std::int64_t cols = 100;
    const auto values = random_values(rows * cols, 2);
    for (const int threads : {1, 3}) {
        SCOPED_TRACE("threads " + std::to_string(threads));
        const ThreadCount tc(threads);
        {
            const halo::store::QuietErrors quiet;
            const Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                              H5Fclose);
            halo::store::write_matrix<float>(file.get(), Where{path.string(), "/"}, "x",
                                             std::span<const float>(values), rows, cols);
        }
        // HDF5's pipeline verifies every chunk's checksum: a wrong one fails this read.
        EXPECT_EQ(read_with_hdf5(path, values.size()), values);
        EXPECT_EQ(read_with_store(path, rows, cols), values);
        // The storage is HDF5's own: chunked, one filter, Fletcher32.
        const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
        const Handle ds(H5Dopen2(file.get(), "x", H5P_DEFAULT), H5Dclose);
        const Handle dcpl(H5Dget_create_plist(ds.get()), H5Pclose);
        EXPECT_EQ(H5Pget_layout(dcpl.get()), H5D_CHUNKED);
        ASSERT_EQ(H5Pget_nfilters(dcpl.get()), 1);
        unsigned flags = 0;
        std::size_t n = 0;
        EXPECT_EQ(H5Pget_filter2(dcpl.get(), 0, &flags, &n, nullptr, 0, nullptr, nullptr),
                  H5Z_FILTER_FLETCHER32);
    }
}

TEST(ChunkIo, RowSourceIsFetchedBatchByBatchAndEveryChunkVisitedOnce)
{
    // Rows that arrive batch by batch (as from a device), each batch in a buffer of its own that
    // the source overwrites two calls later: HDF5 must read back exactly the rows, on any team
    // size, and the visitor see every row once with its values.
    halo::testing::ScratchDir dir{"chunk_io"};
    const auto path = dir.file("source.h5");
    // 64 floats a row, 1024 rows a 256 KiB chunk: 70001 rows are 69 chunks, the last partial, in
    // batches of 1 MiB (4 chunks, or 2 a thread): 18 batches or fewer, the last partial.
    const std::int64_t rows = 70001;
    const std::int64_t cols = 64;
    const auto values = random_values(rows * cols, 6);
    for (const int threads : {1, 2, 5}) {
        SCOPED_TRACE("threads " + std::to_string(threads));
        const ThreadCount tc(threads);
        std::vector<std::vector<float>> staging(2);
        std::uint64_t calls = 0;
        std::uint64_t next_row = 0;
        std::vector<std::uint8_t> seen(rows, 0);
        std::atomic<bool> visit_mismatch{false};
        {
            const halo::store::QuietErrors quiet;
            const Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                              H5Fclose);
            const hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
            const Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose);
            const Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
            const hsize_t chunk[2] = {1024, static_cast<hsize_t>(cols)};
            ASSERT_GE(H5Pset_chunk(dcpl.get(), 2, chunk), 0);
            ASSERT_GE(H5Pset_fletcher32(dcpl.get()), 0);
            const Handle ds(H5Dcreate2(file.get(), "x", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                       dcpl.get(), H5P_DEFAULT),
                            H5Dclose);
            halo::store::write_chunks_parallel(
                ds.get(), Where{path.string(), "/x"},
                [&](std::uint64_t first, std::uint64_t count) -> const void* {
                    EXPECT_EQ(first, next_row) << "rows must be asked for in order";
                    next_row = first + count;
                    auto& buffer = staging[calls++ % staging.size()];
                    buffer.assign(values.begin() + first * cols,
                                  values.begin() + (first + count) * cols);
                    return buffer.data();
                },
                rows, cols * 4, 1024,
                [&](std::uint64_t first, std::uint64_t count, const unsigned char* data) {
                    for (std::uint64_t r = first; r < first + count; ++r) {
                        ++seen[r];
                    }
                    if (std::memcmp(data, values.data() + first * cols, count * cols * 4) != 0) {
                        visit_mismatch = true;
                    }
                },
                std::uint64_t{1} << 20);
        }
        EXPECT_EQ(next_row, static_cast<std::uint64_t>(rows));
        EXPECT_GE(calls, 6u) << "the rows came in one batch: nothing was pipelined";
        EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](auto n) { return n == 1; }));
        EXPECT_FALSE(visit_mismatch.load());
        EXPECT_EQ(read_with_hdf5(path, values.size()), values);
    }
}

TEST(ChunkIo, ARowSourceThatFailsFailsTheWrite)
{
    halo::testing::ScratchDir dir{"chunk_io"};
    const auto path = dir.file("failing.h5");
    const std::int64_t rows = 100000;
    const std::int64_t cols = 64;
    const auto values = random_values(rows * cols, 7);
    for (const int threads : {1, 3}) {
        const ThreadCount tc(threads);
        const halo::store::QuietErrors quiet;
        const Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                          H5Fclose);
        const hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
        const Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose);
        const Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
        const hsize_t chunk[2] = {1024, static_cast<hsize_t>(cols)};
        ASSERT_GE(H5Pset_chunk(dcpl.get(), 2, chunk), 0);
        ASSERT_GE(H5Pset_fletcher32(dcpl.get()), 0);
        const Handle ds(H5Dcreate2(file.get(), "x", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                   dcpl.get(), H5P_DEFAULT),
                        H5Dclose);
        expect_error<halo::IoError>(
            [&] {
                halo::store::write_chunks_parallel(
                    ds.get(), Where{path.string(), "/x"},
                    [&](std::uint64_t first, std::uint64_t) -> const void* {
                        if (first > 0) {
                            HALO_THROW(halo::IoError, "download of row ", first, " failed");
                        }
                        return values.data();
                    },
                    rows, cols * 4, 1024, {}, std::uint64_t{1} << 20);
            },
            {"download of row", "failed"});
    }
}

TEST(ChunkIo, ConvertedRowsAreWrittenBatchByBatchThroughHdf5)
{
    // Big-endian floats: HDF5 converts them, so write_dataset_rows writes through H5Dwrite,
    // batch by batch (64 MiB of whole chunks each): 70 MB of rows are two batches.
    halo::testing::ScratchDir dir{"chunk_io"};
    const auto path = dir.file("converted.h5");
    const std::int64_t rows = 1100000;
    const std::int64_t cols = 16;
    const auto values = random_values(rows * cols, 8);
    std::vector<std::uint64_t> firsts;
    {
        const halo::store::QuietErrors quiet;
        const Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                          H5Fclose);
        const hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
        halo::store::write_dataset_rows(file.get(), Where{path.string(), "/"}, "x", H5T_IEEE_F32BE,
                                        H5T_NATIVE_FLOAT, 4, dims,
                                        [&](std::uint64_t first, std::uint64_t) -> const void* {
                                            firsts.push_back(first);
                                            return values.data() + first * cols;
                                        });
    }
    EXPECT_EQ(firsts.size(), 2u);
    EXPECT_EQ(read_with_hdf5(path, values.size()), values);
}

TEST(ChunkIo, DamagedChunkIsNamed)
{
    halo::testing::ScratchDir dir{"chunk_io"};
    const auto path = dir.file("damaged.h5");
    const std::int64_t rows = 8000;
    const std::int64_t cols = 200;  // 800 bytes a row, 1310 rows a chunk (store) -> use HDF5's
    const auto values = random_values(rows * cols, 3);
    write_with_hdf5(path, values, rows, cols, 1000);
    // Find chunk 5's bytes in the file and flip one.
    haddr_t address = 0;
    {
        const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
        const Handle ds(H5Dopen2(file.get(), "x", H5P_DEFAULT), H5Dclose);
        const hsize_t offset[2] = {5000, 0};
        unsigned mask = 0;
        hsize_t size = 0;
        ASSERT_GE(H5Dget_chunk_info_by_coord(ds.get(), offset, &mask, &address, &size), 0);
    }
    {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(static_cast<std::streamoff>(address + 4321));
        char byte = 0;
        f.read(&byte, 1);
        byte = static_cast<char>(byte ^ 0x10);
        f.seekp(static_cast<std::streamoff>(address + 4321));
        f.write(&byte, 1);
    }
    const ThreadCount tc(3);
    expect_error<halo::Hdf5Error>(
        [&] { read_with_store(path, rows, cols); },
        {path.string() + ": /x", "Fletcher32", "chunk 5 (rows 5000..5999)"});
}

TEST(ChunkIo, ConvertedOrSmallDatasetsGoThroughHdf5)
{
    halo::testing::ScratchDir dir{"chunk_io"};
    const auto path = dir.file("small.h5");
    const auto values = random_values(100 * 10, 4);
    write_with_hdf5(path, values, 100, 10, 10);
    bool parallel = true;
    EXPECT_EQ(read_with_store(path, 100, 10, &parallel), values);
    EXPECT_FALSE(parallel) << "4 KB: HDF5's own read is as fast";
}

}  // namespace
