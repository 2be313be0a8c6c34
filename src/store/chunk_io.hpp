// Parallel, verified raw-data I/O of the store's large datasets (docs/FORMAT.md, "Storage").
//
// The store's large datasets are chunked, a chunk holding whole rows, with a Fletcher32 checksum
// per chunk. HDF5 itself reads and writes them on one thread and checks each checksum in its
// filter pipeline, about 0.2-1 GB/s. These functions keep the file format exactly as it is (any
// HDF5 reader reads what they write, and they read what HDF5 wrote) but move the bytes on every
// core: HDF5 is asked only for the chunk addresses, the chunks are read with pread() on all
// threads straight into the destination, and every checksum is verified (on read) or computed (on
// write) in parallel. Only the metadata calls go through HDF5, on the calling thread.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "hdf5_handle.hpp"

namespace halo::store {

/// Datasets smaller than this are read and written by HDF5 on the calling thread: as fast there,
/// and no OpenMP region runs (safe in a forked child).
inline constexpr std::uint64_t parallel_min_bytes = std::uint64_t{4} << 20;

/// False when the environment sets HALO_SERIAL_IO (to any value): then every read and write
/// goes through HDF5's own pipeline, as before the parallel path existed (for measurements and
/// as a way around a file system where the parallel reads misbehave).
bool parallel_io_enabled();

/// HDF5's Fletcher32 (H5_checksum_fletcher32): the data as 16-bit big-endian words (an odd last
/// byte as the high byte of a word), both sums folded to 16 bits every 360 words. The same value
/// as HDF5's on any input, from the exact sums mod 65535 (docs/FORMAT.md, "Fletcher32 from exact
/// sums") in SIMD lanes, with an AVX2 version where the CPU has it (about 15 GB/s on one core of
/// the dev VM).
std::uint32_t fletcher32(const unsigned char* data, std::size_t size);

/// Fletcher32 in pieces: the sums of consecutive byte ranges combine into those of the whole,
/// and fletcher32_of(sums of all) == fletcher32(all). Every piece but the last must have an even
/// number of bytes.
struct FletcherSums {
    std::uint64_t a = 0;      // sum of the words, mod 65535
    std::uint64_t b = 0;      // sum of the words' prefix sums, mod 65535
    std::uint64_t words = 0;  // words covered (an odd last byte is one)
    bool nonzero = false;     // any word nonzero
};
FletcherSums fletcher_sums(const unsigned char* data, std::size_t size);
FletcherSums combine(const FletcherSums& first, const FletcherSums& then);
std::uint32_t fletcher32_of(const FletcherSums& sums);

namespace detail {
/// fletcher_sums without the AVX2 dispatch (the version other CPUs run), for the tests.
FletcherSums fletcher_sums_portable(const unsigned char* data, std::size_t size);
}  // namespace detail

/// Reads the whole of an opened dataset into `out` (its element count, of `memory_type`) with
/// parallel reads when it is laid out as the store writes it: chunked over whole rows with no
/// filter or Fletcher32 alone, every chunk allocated, stored in the memory type's exact format (no
/// conversion); or contiguous and large. Returns false, having read nothing, for anything else
/// (then H5Dread reads it). A chunk failing its checksum, or a short or failed read, is a
/// halo::Hdf5Error naming the dataset, the chunk and its rows.
/// With `on_rows`, tells it of each group of finished rows (about 64 MiB, in row order, on the
/// calling thread) as soon as they are read and verified.
bool read_parallel(const OpenDataset& ds, const Where& where, hid_t memory_type, void* out,
                   const RowsRead& on_rows = {});

/// Writes all of `data` (row-major, dims[0] rows of `row_bytes`) into `dataset`, freshly created
/// chunked with `chunk_rows` rows a chunk and Fletcher32 as its only filter: the checksums are
/// computed in parallel and the finished chunks written with H5Dwrite_chunk (direct chunk write;
/// the stored bytes are those HDF5's own filter would store, edge chunk padded with the zero fill
/// value). Pipelined: the calling thread hands one batch of finished chunks (64 MiB) to HDF5
/// while the other threads prepare the next.
void write_chunks_parallel(hid_t dataset, const Where& where, const void* data, std::uint64_t rows,
                           std::uint64_t row_bytes, std::uint64_t chunk_rows);

/// Bytes of finished chunks in one batch of the write pipeline (at least one chunk).
inline constexpr std::uint64_t write_batch_bytes = std::uint64_t{64} << 20;

/// write_chunks_parallel with the rows from `source` (hdf5_handle.hpp), fetched batch by batch.
void write_chunks_parallel(hid_t dataset, const Where& where, const RowSource& source,
                           std::uint64_t rows, std::uint64_t row_bytes, std::uint64_t chunk_rows,
                           std::uint64_t batch_bytes = write_batch_bytes);

}  // namespace halo::store
