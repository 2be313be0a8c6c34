// The parallel chunk reader and writer (src/store/chunk_io.hpp) against HDF5's own pipeline: the
// same checksums, files each can read of the other, every thread count, edge chunks, damaged
// chunks found and named.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <random>
#include <tuple>
#include <vector>

#include "chunk_io.hpp"
#include "halo/core/error.hpp"
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
            using namespace halo::store;
            EXPECT_EQ(fletcher32_of(detail::fletcher_sums_portable(bytes.data(), bytes.size())),
                      stored);
            // In pieces of any even length, combined.
            for (const std::size_t piece : {2, 720, 4096, 65536}) {
                FletcherSums sums;
                for (std::size_t at = 0; at < bytes.size(); at += piece) {
                    sums = combine(
                        sums, fletcher_sums(bytes.data() + at, std::min(piece, bytes.size() - at)));
                }
                EXPECT_EQ(fletcher32_of(sums), stored) << "pieces of " << piece;
            }
        }
    }
}

TEST(ChunkIo, ChunkSizeKeepsLargeDatasetsNearAThousandChunks)
{
    using halo::store::chunk_rows_for;
    constexpr std::uint64_t mib = 1 << 20;
    EXPECT_EQ(chunk_rows_for(1000, 100), 1000u) << "small: one chunk of every row";
    EXPECT_EQ(chunk_rows_for(10'000'000, 4), mib / 4) << "40 MB: 1 MiB chunks";
    EXPECT_EQ(chunk_rows_for(1024 * mib / 4, 4), mib / 4) << "1 GiB: still 1 MiB";
    EXPECT_EQ(chunk_rows_for(1024 * mib / 4 + 1, 4), 2 * mib / 4) << "past 1 GiB: 2 MiB";
    // 2.1e9 int32 column indices (R-MAT 26 symmetrized): 8.4 GB in 8 MiB chunks, 1002 of them.
    EXPECT_EQ(chunk_rows_for(2'100'000'000, 4), 8 * mib / 4);
    EXPECT_EQ(chunk_rows_for(std::uint64_t{1} << 40, 4), 64 * mib / 4) << "at most 64 MiB";
    EXPECT_EQ(chunk_rows_for(10, 100 * mib), 1u) << "a row larger than a chunk: one a chunk";
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

TEST(ChunkIo, RowSourceIsFetchedBatchByBatchOnEveryChunkSize)
{
    // Rows that arrive batch by batch (as from a device), each batch in a buffer that the source
    // overwrites two calls later, in batches of 1 MiB: HDF5 must read back exactly the rows (its
    // pipeline verifies every checksum) on any team size, with chunks smaller than a piece (256
    // KiB: 4 a batch), larger (3.3 MB: 4 pieces, the last partial) and of an odd length (int8
    // rows of 63 bytes, 33333 a chunk: the last piece odd), the last chunk partial in each.
    struct Case {
        const char* name;
        hid_t type;
        std::uint64_t row_bytes;
        hsize_t chunk_rows;
    };
    const std::int64_t rows = 70001;
    for (const auto& c : {Case{"256 KiB chunks", H5T_IEEE_F32LE, 256, 1024},
                          Case{"3.3 MB chunks", H5T_IEEE_F32LE, 256, 13000},
                          Case{"odd chunks", H5T_STD_I8LE, 63, 33333}}) {
        SCOPED_TRACE(c.name);
        halo::testing::ScratchDir dir{"chunk_io"};
        const auto path = dir.file("source.h5");
        std::vector<unsigned char> bytes(rows * c.row_bytes);
        std::mt19937 gen(6);
        for (auto& b : bytes) {
            b = static_cast<unsigned char>(gen());
        }
        for (const int threads : {1, 2, 5}) {
            SCOPED_TRACE("threads " + std::to_string(threads));
            const ThreadCount tc(threads);
            std::vector<std::vector<unsigned char>> staging(2);
            std::uint64_t calls = 0;
            std::uint64_t next_row = 0;
            {
                const halo::store::QuietErrors quiet;
                const Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                                  H5Fclose);
                const auto cols = static_cast<hsize_t>(c.row_bytes / H5Tget_size(c.type));
                const hsize_t dims[2] = {static_cast<hsize_t>(rows), cols};
                const Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose);
                const Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
                const hsize_t chunk[2] = {c.chunk_rows, cols};
                ASSERT_GE(H5Pset_chunk(dcpl.get(), 2, chunk), 0);
                ASSERT_GE(H5Pset_fletcher32(dcpl.get()), 0);
                const Handle ds(H5Dcreate2(file.get(), "x", c.type, space.get(), H5P_DEFAULT,
                                           dcpl.get(), H5P_DEFAULT),
                                H5Dclose);
                halo::store::write_chunks_parallel(
                    ds.get(), Where{path.string(), "/x"},
                    [&](std::uint64_t first, std::uint64_t count) -> const void* {
                        EXPECT_EQ(first, next_row) << "rows must be asked for in order";
                        next_row = first + count;
                        auto& buffer = staging[calls++ % staging.size()];
                        buffer.assign(bytes.begin() + first * c.row_bytes,
                                      bytes.begin() + (first + count) * c.row_bytes);
                        return buffer.data();
                    },
                    rows, c.row_bytes, c.chunk_rows, std::uint64_t{1} << 20);
            }
            EXPECT_EQ(next_row, static_cast<std::uint64_t>(rows));
            EXPECT_GE(calls, 3u) << "the rows came in one batch: nothing was pipelined";
            // Through HDF5's pipeline, then through the store's parallel reader.
            const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
            const Handle ds(H5Dopen2(file.get(), "x", H5P_DEFAULT), H5Dclose);
            std::vector<unsigned char> back(bytes.size(), 0xaa);
            ASSERT_GE(H5Dread(ds.get(), c.type, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data()), 0);
            EXPECT_EQ(back, bytes);
            const halo::store::QuietErrors quiet;
            const auto opened = halo::store::open_dataset(
                file.get(), Where{path.string(), "/"}, "x",
                c.type == H5T_STD_I8LE ? halo::store::ElementClass::integer
                                       : halo::store::ElementClass::floating,
                H5Tget_size(c.type), "x", 2);
            std::fill(back.begin(), back.end(), 0xaa);
            EXPECT_TRUE(halo::store::read_parallel(opened, Where{path.string(), "/x"}, c.type,
                                                   back.data()));
            EXPECT_EQ(back, bytes);
        }
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
                    rows, cols * 4, 1024, std::uint64_t{1} << 20);
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
    // 800 bytes a row: chunks of 1000 rows (0.8 MB, one piece) and of 2500 rows (2 MB: the byte
    // flipped lies in the chunk's second piece, whose sums combine with the first's).
    const std::int64_t rows = 8000;
    const std::int64_t cols = 200;
    const auto values = random_values(rows * cols, 3);
    for (const auto& [chunk_rows, damaged, byte] :
         {std::tuple<hsize_t, hsize_t, std::uint64_t>{1000, 5, 4321},
          std::tuple<hsize_t, hsize_t, std::uint64_t>{2500, 2, 1500000}}) {
        SCOPED_TRACE("chunks of " + std::to_string(chunk_rows) + " rows");
        halo::testing::ScratchDir dir{"chunk_io"};
        const auto path = dir.file("damaged.h5");
        write_with_hdf5(path, values, rows, cols, chunk_rows);
        // Find the chunk's bytes in the file and flip one.
        haddr_t address = 0;
        {
            const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
            const Handle ds(H5Dopen2(file.get(), "x", H5P_DEFAULT), H5Dclose);
            const hsize_t offset[2] = {damaged * chunk_rows, 0};
            unsigned mask = 0;
            hsize_t size = 0;
            ASSERT_GE(H5Dget_chunk_info_by_coord(ds.get(), offset, &mask, &address, &size), 0);
        }
        {
            std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
            f.seekg(static_cast<std::streamoff>(address + byte));
            char value = 0;
            f.read(&value, 1);
            value = static_cast<char>(value ^ 0x10);
            f.seekp(static_cast<std::streamoff>(address + byte));
            f.write(&value, 1);
        }
        const ThreadCount tc(3);
        const auto first = damaged * chunk_rows;
        expect_error<halo::Hdf5Error>(
            [&] { read_with_store(path, rows, cols); },
            {path.string() + ": /x", "Fletcher32",
             "chunk " + std::to_string(damaged) + " (rows " + std::to_string(first) + ".." +
                 std::to_string(first + chunk_rows - 1) + ")"});
    }
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
