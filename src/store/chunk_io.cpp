#include "chunk_io.hpp"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "halo/core/error.hpp"

namespace halo::store {

namespace {

constexpr std::size_t checksum_bytes = 4;
/// Bytes of chunks read before a reader that asked to be told (RowsRead) hears of them.
constexpr std::uint64_t read_group_bytes = std::uint64_t{64} << 20;
/// Bytes a thread reads or prepares and checksums at a time (even: Fletcher32 pieces must be).
constexpr std::uint64_t piece_bytes = std::uint64_t{1} << 20;

std::uint32_t little_endian_u32(const unsigned char* p)
{
    return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) |
           (std::uint32_t{p[3]} << 24);
}

/// HDF5 before 1.6.3 stored the checksum with the bytes of each 16-bit half swapped on
/// little-endian machines; its filter accepts both forms, and so do we.
std::uint32_t swapped_halves(std::uint32_t v)
{
    return ((v & 0x00ff00ffU) << 8) | ((v & 0xff00ff00U) >> 8);
}

/// Closes a POSIX file descriptor on scope exit.
struct Fd {
    int fd = -1;
    ~Fd()
    {
        if (fd >= 0) {
            ::close(fd);
        }
    }
};

/// Reads exactly `size` bytes at `offset`; returns an empty string or what went wrong.
std::string pread_exact(int fd, unsigned char* dst, std::uint64_t size, std::uint64_t offset)
{
    while (size > 0) {
        const auto want =
            static_cast<std::size_t>(std::min<std::uint64_t>(size, std::uint64_t{1} << 30));
        const auto got = ::pread(fd, dst, want, static_cast<off_t>(offset));
        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            return std::string("read failed: ") + std::strerror(errno);
        }
        if (got == 0) {
            return "read failed: the file ends at byte " + std::to_string(offset) +
                   " (truncated file)";
        }
        dst += got;
        size -= static_cast<std::uint64_t>(got);
        offset += static_cast<std::uint64_t>(got);
    }
    return {};
}

/// The first failure of a parallel loop, kept for the throw after it.
class FirstError {
public:
    void set(std::uint64_t index, std::string message)
    {
#pragma omp critical(halo_store_first_error)
        {
            if (!failed_.load() || index < index_) {
                index_ = index;
                message_ = std::move(message);
            }
            failed_.store(true);
        }
    }
    bool failed() const
    {
        return failed_.load(std::memory_order_relaxed);
    }
    const std::string& message() const
    {
        return message_;
    }

private:
    std::atomic<bool> failed_{false};
    std::uint64_t index_ = 0;
    std::string message_;
};

/// The dataset's file, its name and the offset of HDF5 address 0 in it (the user block).
struct FileOfDataset {
    std::string name;
    std::uint64_t base = 0;
};

FileOfDataset file_of(hid_t dataset, const Where& where)
{
    FileOfDataset out;
    const auto length = HALO_HDF5_TRY(H5Fget_name(dataset, nullptr, 0), where.str());
    out.name.resize(static_cast<std::size_t>(length) + 1);
    HALO_HDF5_TRY(H5Fget_name(dataset, out.name.data(), out.name.size()), where.str());
    out.name.resize(static_cast<std::size_t>(length));
    const Handle file(HALO_HDF5_TRY(H5Iget_file_id(dataset), where.str()), H5Fclose);
    const Handle fcpl(HALO_HDF5_TRY(H5Fget_create_plist(file.get()), where.str()), H5Pclose);
    hsize_t userblock = 0;
    HALO_HDF5_TRY(H5Pget_userblock(fcpl.get(), &userblock), where.str());
    out.base = userblock;
    return out;
}

std::string chunk_name(std::uint64_t chunk, std::uint64_t first_row, std::uint64_t rows)
{
    return "chunk " + std::to_string(chunk) + " (rows " + std::to_string(first_row) + ".." +
           std::to_string(first_row + rows - 1) + ")";
}

[[noreturn]] void throw_read_error(const Where& where, const std::string& message)
{
    throw Hdf5Error(where.str() + ": H5Dread failed: " + message, __FILE__, __LINE__);
}

bool read_contiguous(const OpenDataset& ds, const Where& where, std::uint64_t total_bytes,
                     void* out)
{
    const auto d = ds.dataset.get();
    const haddr_t address = H5Dget_offset(d);
    if (address == HADDR_UNDEF || H5Dget_storage_size(d) != total_bytes) {
        return false;
    }
    const auto file = file_of(d, where);
    Fd fd{::open(file.name.c_str(), O_RDONLY | O_CLOEXEC)};
    if (fd.fd < 0) {
        return false;
    }
    constexpr std::uint64_t piece = std::uint64_t{8} << 20;
    const auto pieces = (total_bytes + piece - 1) / piece;
    auto* dst = static_cast<unsigned char*>(out);
    FirstError error;
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t p = 0; p < static_cast<std::int64_t>(pieces); ++p) {
        if (error.failed()) {
            continue;
        }
        const auto begin = static_cast<std::uint64_t>(p) * piece;
        const auto size = std::min(piece, total_bytes - begin);
        auto message = pread_exact(fd.fd, dst + begin, size, file.base + address + begin);
        if (!message.empty()) {
            error.set(static_cast<std::uint64_t>(p), std::move(message));
        }
    }
    if (error.failed()) {
        throw_read_error(where, error.message());
    }
    return true;
}

/// A chunked dataset's layout as read_parallel reads it: chunks of whole rows.
struct ChunkedLayout {
    bool checksummed = false;  // Fletcher32 is its one filter
    std::uint64_t rows = 0;
    std::uint64_t chunk_rows = 0;
    std::uint64_t row_bytes = 0;
    std::uint64_t chunk_bytes = 0;
    std::uint64_t chunks = 0;
};

/// The layout of a chunked dataset whose filters are none or Fletcher32 alone and whose chunks
/// hold whole rows; nullopt for any other (then HDF5 reads it).
std::optional<ChunkedLayout> chunked_layout(hid_t dcpl, const OpenDataset& ds, const Where& where,
                                            std::uint64_t element_bytes)
{
    const int nfilters = HALO_HDF5_TRY(H5Pget_nfilters(dcpl), where.str());
    bool checksummed = false;
    if (nfilters == 1) {
        unsigned flags = 0;
        std::size_t nelements = 0;
        const auto filter =
            H5Pget_filter2(dcpl, 0, &flags, &nelements, nullptr, 0, nullptr, nullptr);
        if (filter != H5Z_FILTER_FLETCHER32) {
            return std::nullopt;
        }
        checksummed = true;
    } else if (nfilters != 0) {
        return std::nullopt;
    }
    const int rank = static_cast<int>(ds.dims.size());
    std::vector<hsize_t> chunk(static_cast<std::size_t>(rank));
    if (H5Pget_chunk(dcpl, rank, chunk.data()) != rank) {
        return std::nullopt;
    }
    std::uint64_t row_elements = 1;
    for (int k = 1; k < rank; ++k) {
        if (chunk[k] != ds.dims[k]) {
            return std::nullopt;  // a chunk that is not whole rows is not contiguous in `out`
        }
        row_elements *= ds.dims[k];
    }
    const std::uint64_t rows = ds.dims[0];
    const std::uint64_t chunk_rows = chunk[0];
    const std::uint64_t row_bytes = row_elements * element_bytes;
    const std::uint64_t chunk_bytes = chunk_rows * row_bytes;
    const std::uint64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
    return ChunkedLayout{checksummed, rows, chunk_rows, row_bytes, chunk_bytes, chunks};
}

/// Where a chunk is in the file, and whether a checksum follows it.
struct ChunkAddress {
    haddr_t address = HADDR_UNDEF;
    bool has_checksum = false;
};

/// The file address of every chunk, from HDF5's index; false when a chunk is unallocated (fill
/// value) or of a size this reader does not know.
bool locate_chunks(hid_t d, const ChunkedLayout& layout, int rank,
                   std::vector<ChunkAddress>& where_is)
{
    const bool checksummed = layout.checksummed;
    const std::uint64_t chunk_rows = layout.chunk_rows;
    const std::uint64_t chunk_bytes = layout.chunk_bytes;
    const std::uint64_t chunks = layout.chunks;
    // Chunk addresses from HDF5's index, on this thread (HDF5 is not thread-safe).
    where_is.assign(chunks, ChunkAddress{});
    std::vector<hsize_t> offset(static_cast<std::size_t>(rank), 0);
    for (std::uint64_t c = 0; c < chunks; ++c) {
        offset[0] = c * chunk_rows;
        unsigned filter_mask = 0;
        haddr_t address = HADDR_UNDEF;
        hsize_t size = 0;
        if (H5Dget_chunk_info_by_coord(d, offset.data(), &filter_mask, &address, &size) < 0) {
            H5Eclear2(H5E_DEFAULT);
            return false;
        }
        const bool has_checksum = checksummed && (filter_mask & 1U) == 0;
        if (address == HADDR_UNDEF || size != chunk_bytes + (has_checksum ? checksum_bytes : 0)) {
            return false;  // unallocated (fill value) or not a size this reader knows
        }
        where_is[c] = {address, has_checksum};
    }
    return true;
}

}  // namespace

bool parallel_io_enabled()
{
    static const bool enabled = std::getenv("HALO_SERIAL_IO") == nullptr;
    return enabled;
}

bool read_parallel(const OpenDataset& ds, const Where& where, hid_t memory_type, void* out,
                   const RowsRead& on_rows)
{
    const auto d = ds.dataset.get();
    std::uint64_t count = 1;
    for (const auto dim : ds.dims) {
        count *= dim;
    }
    const Handle type(HALO_HDF5_TRY(H5Dget_type(d), where.str()), H5Tclose);
    if (!parallel_io_enabled() || count == 0 ||
        HALO_HDF5_TRY(H5Tequal(type.get(), memory_type), where.str()) <= 0) {
        return false;  // nothing to read, or HDF5 converts the values
    }
    const std::uint64_t element_bytes = H5Tget_size(type.get());
    const std::uint64_t total_bytes = count * element_bytes;
    if (total_bytes < parallel_min_bytes) {
        return false;
    }
    const Handle dcpl(HALO_HDF5_TRY(H5Dget_create_plist(d), where.str()), H5Pclose);
    const auto layout = H5Pget_layout(dcpl.get());
    if (layout == H5D_CONTIGUOUS) {
        if (!read_contiguous(ds, where, total_bytes, out)) {
            return false;
        }
        if (on_rows) {
            on_rows(0, ds.dims[0], out);
        }
        return true;
    }
    if (layout != H5D_CHUNKED) {
        return false;
    }
    const auto chunked = chunked_layout(dcpl.get(), ds, where, element_bytes);
    if (!chunked) {
        return false;
    }
    const bool checksummed = chunked->checksummed;
    const std::uint64_t rows = chunked->rows;
    const std::uint64_t chunk_rows = chunked->chunk_rows;
    const std::uint64_t row_bytes = chunked->row_bytes;
    const std::uint64_t chunk_bytes = chunked->chunk_bytes;
    const std::uint64_t chunks = chunked->chunks;
    std::vector<ChunkAddress> where_is;
    if (!locate_chunks(d, *chunked, static_cast<int>(ds.dims.size()), where_is)) {
        return false;
    }
    const auto file = file_of(d, where);
    Fd fd{::open(file.name.c_str(), O_RDONLY | O_CLOEXEC)};
    if (fd.fd < 0) {
        return false;
    }

    // Work items are pieces of chunks (1 MiB), so that a chunk of any size is read on every core
    // and each piece is checksummed right after its read, in cache; a chunk's pieces' sums
    // combine into its checksum. With a reader to tell, chunks are read in groups of about 64
    // MiB, each told when done.
    auto* dst = static_cast<unsigned char*>(out);
    const std::uint64_t pieces_per_chunk = (chunk_bytes + piece_bytes - 1) / piece_bytes;
    const std::uint64_t group =
        on_rows ? std::max<std::uint64_t>(read_group_bytes / chunk_bytes, 1) : chunks;
    std::vector<FletcherSums> sums(checksummed ? std::min(group, chunks) * pieces_per_chunk : 0);
    std::vector<std::uint32_t> stored(checksummed ? std::min(group, chunks) : 0);
    // The last chunk, stored whole but only partly used, is read here and its rows copied out.
    std::vector<unsigned char> edge(rows % chunk_rows != 0 ? chunk_bytes : 0);
    FirstError error;
    for (std::uint64_t first_chunk = 0; first_chunk < chunks; first_chunk += group) {
        const auto last_chunk = std::min(chunks, first_chunk + group);
        const auto items = static_cast<std::int64_t>((last_chunk - first_chunk) * pieces_per_chunk);
#pragma omp parallel for schedule(dynamic, 1)
        for (std::int64_t item = 0; item < items; ++item) {
            const auto c = first_chunk + static_cast<std::uint64_t>(item) / pieces_per_chunk;
            const auto piece = static_cast<std::uint64_t>(item) % pieces_per_chunk;
            if (error.failed()) {
                continue;
            }
            const auto first_row = c * chunk_rows;
            const auto position = file.base + where_is[c].address;
            unsigned char* target =
                c == chunks - 1 && !edge.empty() ? edge.data() : dst + first_row * row_bytes;
            const auto begin = piece * piece_bytes;
            const auto size = std::min(piece_bytes, chunk_bytes - begin);
            auto message = pread_exact(fd.fd, target + begin, size, position + begin);
            if (message.empty() && checksummed) {
                sums[static_cast<std::uint64_t>(item)] = fletcher_sums(target + begin, size);
                if (piece == pieces_per_chunk - 1 && where_is[c].has_checksum) {
                    unsigned char bytes[checksum_bytes] = {0, 0, 0, 0};
                    message = pread_exact(fd.fd, bytes, checksum_bytes, position + chunk_bytes);
                    stored[c - first_chunk] = little_endian_u32(bytes);
                }
            }
            if (!message.empty()) {
                const auto here = std::min(chunk_rows, rows - first_row);
                error.set(c, chunk_name(c, first_row, here) + ": " + message);
            }
        }
        for (auto c = first_chunk; c < last_chunk && checksummed && !error.failed(); ++c) {
            if (!where_is[c].has_checksum) {
                continue;
            }
            FletcherSums chunk_sums;
            for (std::uint64_t piece = 0; piece < pieces_per_chunk; ++piece) {
                chunk_sums =
                    combine(chunk_sums, sums[(c - first_chunk) * pieces_per_chunk + piece]);
            }
            const auto computed = fletcher32_of(chunk_sums);
            const auto expected = stored[c - first_chunk];
            if (expected != computed && expected != swapped_halves(computed)) {
                const auto first_row = c * chunk_rows;
                const auto name = chunk_name(c, first_row, std::min(chunk_rows, rows - first_row));
                error.set(c, name +
                                 ": can't read data (data error detected by Fletcher32 checksum "
                                 "in " +
                                 name + ")");
            }
        }
        if (error.failed()) {
            throw_read_error(where, error.message());
        }
        if (last_chunk == chunks && !edge.empty()) {
            const auto first_row = (chunks - 1) * chunk_rows;
            std::memcpy(dst + first_row * row_bytes, edge.data(), (rows - first_row) * row_bytes);
        }
        if (on_rows) {
            const auto first_row = first_chunk * chunk_rows;
            on_rows(first_row, std::min(rows, last_chunk * chunk_rows) - first_row,
                    dst + first_row * row_bytes);
        }
    }
    return true;
}

void write_chunks_parallel(hid_t dataset, const Where& where, const void* data, std::uint64_t rows,
                           std::uint64_t row_bytes, std::uint64_t chunk_rows)
{
    const auto* bytes = static_cast<const unsigned char*>(data);
    write_chunks_parallel(
        dataset, where,
        [bytes, row_bytes](std::uint64_t first_row, std::uint64_t) {
            return static_cast<const void*>(bytes + first_row * row_bytes);
        },
        rows, row_bytes, chunk_rows);
}

void write_chunks_parallel(hid_t dataset, const Where& where, const RowSource& source,
                           std::uint64_t rows, std::uint64_t row_bytes, std::uint64_t chunk_rows,
                           std::uint64_t batch_bytes)
{
    HALO_EXPECTS(chunk_rows > 0 && row_bytes > 0, where.str(), ": chunk of ", chunk_rows,
                 " rows of ", row_bytes, " bytes");
    const Handle space(HALO_HDF5_TRY(H5Dget_space(dataset), where.str()), H5Sclose);
    const int rank = HALO_HDF5_TRY(H5Sget_simple_extent_ndims(space.get()), where.str());
    const std::uint64_t chunk_bytes = chunk_rows * row_bytes;
    const std::uint64_t stored_bytes = chunk_bytes + checksum_bytes;
    const std::uint64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
    const std::uint64_t batch =
        std::clamp<std::uint64_t>(batch_bytes / chunk_bytes, 1, std::max<std::uint64_t>(chunks, 1));
    const std::uint64_t batches = (chunks + batch - 1) / batch;
    const std::uint64_t pieces_per_chunk = (chunk_bytes + piece_bytes - 1) / piece_bytes;
    // Two batches of finished chunks: the workers fill one while the calling thread hands the
    // other to HDF5. Not zero-filled: every byte is written before it is read.
    const std::unique_ptr<unsigned char[]> slots(new unsigned char[2 * batch * stored_bytes]);
    std::vector<FletcherSums> sums(2 * batch * pieces_per_chunk);
    auto first_row_of = [&](std::uint64_t b) { return std::min(rows, b * batch * chunk_rows); };
    auto rows_of = [&](std::uint64_t b) { return first_row_of(b + 1) - first_row_of(b); };
    auto slot = [&](std::uint64_t c) {
        return slots.get() + ((c / batch) % 2 * batch + c % batch) * stored_bytes;
    };
    auto sums_of = [&](std::uint64_t c) {
        return sums.data() + ((c / batch) % 2 * batch + c % batch) * pieces_per_chunk;
    };

    // Piece `piece` of chunk c, from the rows of its batch: copied into the chunk's slot, the
    // part past the dataset's end (an edge chunk) filled with the zero fill value as HDF5's
    // pipeline fills it before its filters run, and summed for the checksum (in cache).
    auto prepare = [&](std::uint64_t c, std::uint64_t piece, const unsigned char* batch_rows) {
        const auto begin = piece * piece_bytes;
        const auto size = std::min(piece_bytes, chunk_bytes - begin);
        const auto first_row = c * chunk_rows;
        const auto data_bytes = std::min(chunk_rows, rows - first_row) * row_bytes;
        const auto copied = std::min(size, data_bytes > begin ? data_bytes - begin : 0);
        unsigned char* out = slot(c) + begin;
        std::memcpy(out, batch_rows + (first_row - first_row_of(c / batch)) * row_bytes + begin,
                    copied);
        std::memset(out + copied, 0, size - copied);
        sums_of(c)[piece] = fletcher_sums(out, size);
    };
    std::vector<hsize_t> offset(static_cast<std::size_t>(rank), 0);
    auto write = [&](std::uint64_t b) {
        const auto last = std::min(chunks, (b + 1) * batch);
        for (auto c = b * batch; c < last; ++c) {
            FletcherSums chunk_sums;
            for (std::uint64_t piece = 0; piece < pieces_per_chunk; ++piece) {
                chunk_sums = combine(chunk_sums, sums_of(c)[piece]);
            }
            const auto sum = fletcher32_of(chunk_sums);
            for (std::size_t k = 0; k < checksum_bytes; ++k) {
                slot(c)[chunk_bytes + k] = static_cast<unsigned char>(sum >> (8 * k));
            }
            offset[0] = c * chunk_rows;
            HALO_HDF5_TRY(H5Dwrite_chunk(dataset, H5P_DEFAULT, 0, offset.data(),
                                         static_cast<std::size_t>(stored_bytes), slot(c)),
                          where.str(), " (chunk ", c, ")");
        }
    };

    // Step s: thread 0 finishes batch s - 1 (the checksums from its pieces' sums) and writes it
    // through HDF5 (the only thread that calls it) while the others fetch batch s + 1's rows from
    // the source and prepare batch s, piece by piece; a barrier ends the step. A team of one does
    // the three in turn.
    std::vector<const unsigned char*> batch_rows(batches + 1, nullptr);
    batch_rows[0] = static_cast<const unsigned char*>(source(0, rows_of(0)));
    std::exception_ptr failure;
    std::atomic<bool> failed{false};
    auto guarded = [&](auto&& step) {
        if (failed.load()) {
            return;
        }
        try {
            step();
        } catch (...) {
#pragma omp critical(halo_store_write_failure)
            if (!failure) {
                failure = std::current_exception();
            }
            failed.store(true);
        }
    };
#pragma omp parallel
    {
        const auto team = static_cast<std::uint64_t>(omp_get_num_threads());
        const auto t = static_cast<std::uint64_t>(omp_get_thread_num());
        const auto workers = team > 1 ? team - 1 : 1;
        const auto worker = team > 1 ? t - 1 : 0;
        for (std::uint64_t step = 0; step <= batches; ++step) {
            if (t == 0 && step > 0) {
                guarded([&] { write(step - 1); });
            }
            if ((t > 0 || team == 1) && step < batches) {
                if (worker == 0 && step + 1 < batches) {
                    guarded([&] {
                        batch_rows[step + 1] = static_cast<const unsigned char*>(
                            source(first_row_of(step + 1), rows_of(step + 1)));
                    });
                }
                guarded([&] {
                    const auto first = step * batch;
                    const auto items = (std::min(chunks, first + batch) - first) * pieces_per_chunk;
                    for (auto item = worker; item < items; item += workers) {
                        prepare(first + item / pieces_per_chunk, item % pieces_per_chunk,
                                batch_rows[step]);
                    }
                });
            }
#pragma omp barrier
        }
    }
    if (failure) {
        std::rethrow_exception(failure);
    }
}

}  // namespace halo::store
