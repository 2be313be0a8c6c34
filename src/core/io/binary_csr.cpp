// The ".hcsr" binary CSR file (layout in docs/INPUT.md): a 40-byte header, the three arrays as
// they sit in memory, and a CRC-32 of everything before it. Loading is a few large reads, with
// every size checked against the file length before anything is allocated.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "halo/core/io.hpp"
#include "io_detail.hpp"

namespace halo {
namespace {

constexpr char magic[8] = {'H', 'A', 'L', 'O', 'C', 'S', 'R', '\0'};
constexpr std::uint32_t format_version = 1;
constexpr std::uint32_t flag_has_values = 1u;
constexpr std::uint64_t header_bytes = 40;
constexpr std::uint64_t checksum_bytes = 4;

struct Header {
    char magic[8];
    std::uint32_t version;
    std::uint32_t flags;
    std::int64_t num_rows;
    std::int64_t num_cols;
    std::int64_t nnz;
};
static_assert(sizeof(Header) == header_bytes, "the header has no padding");

// zlib's crc32 takes 32-bit lengths; crc32_z takes size_t but feed bounded pieces all the same.
std::uint32_t crc_update(std::uint32_t crc, const void* data, std::size_t bytes)
{
    const auto* p = static_cast<const Bytef*>(data);
    while (bytes > 0) {
        const auto piece = std::min<std::size_t>(bytes, std::size_t{1} << 30);
        crc = static_cast<std::uint32_t>(crc32(crc, p, static_cast<uInt>(piece)));
        p += piece;
        bytes -= piece;
    }
    return crc;
}

std::string hex_prefix(const char* bytes, std::size_t count)
{
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < count; ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        if (i > 0) {
            out += ' ';
        }
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

std::string hex32(std::uint32_t value)
{
    char buffer[11];
    std::snprintf(buffer, sizeof buffer, "0x%08x", value);
    return buffer;
}

}  // namespace

void write_binary_csr(const std::filesystem::path& path, const Csr& csr)
{
    const auto name = path.string();
    validate(csr, name.c_str());
    if (csr.num_cols > std::numeric_limits<local_id>::max()) {
        HALO_THROW(InputError, name, ": ", csr.num_cols,
                   " columns exceed the int32 column range of the binary CSR format");
    }
    Header header{};
    std::memcpy(header.magic, magic, sizeof magic);
    header.version = format_version;
    header.flags = csr.has_values() ? flag_has_values : 0u;
    header.num_rows = csr.num_rows;
    header.num_cols = csr.num_cols;
    header.nnz = csr.nnz();

    io_detail::AtomicFile out(path);
    std::uint32_t crc = crc_update(0, &header, sizeof header);
    out.write(&header, sizeof header);
    const auto indptr_bytes = csr.indptr.size() * sizeof(offset_t);
    crc = crc_update(crc, csr.indptr.data(), indptr_bytes);
    out.write(csr.indptr.data(), indptr_bytes);
    const auto index_bytes = csr.indices.size() * sizeof(local_id);
    crc = crc_update(crc, csr.indices.data(), index_bytes);
    out.write(csr.indices.data(), index_bytes);
    if (csr.has_values()) {
        const auto value_bytes = csr.values.size() * sizeof(float);
        crc = crc_update(crc, csr.values.data(), value_bytes);
        out.write(csr.values.data(), value_bytes);
    }
    out.write(&crc, sizeof crc);
    out.commit();
}

Csr read_binary_csr(const std::filesystem::path& path)
{
    io_detail::InputFile in(path);
    const auto& name = in.name();
    const auto file_size = in.size();
    Header header{};
    if (file_size < 8) {
        HALO_THROW(InputError, name, ": not a binary CSR file: ", file_size,
                   " bytes, shorter than the magic \"HALOCSR\\0\"");
    }
    in.read_exact(header.magic, 8, "the magic");
    if (std::memcmp(header.magic, magic, sizeof magic) != 0) {
        if (io_detail::has_gzip_magic(std::string_view(header.magic, 2))) {
            HALO_THROW(InputError, name, ": is gzip-compressed; binary CSR files are read ",
                       "uncompressed (gunzip it first)");
        }
        HALO_THROW(InputError, name, ": bad magic: not a binary CSR file (first bytes ",
                   hex_prefix(header.magic, 8),
                   ", expected 48 41 4c 4f 43 53 52 00 \"HALOCSR\\0\")");
    }
    if (file_size < header_bytes + checksum_bytes) {
        HALO_THROW(InputError, name, ": truncated: ", file_size,
                   " bytes, shorter than a header and checksum (", header_bytes + checksum_bytes,
                   " bytes)");
    }
    in.read_exact(reinterpret_cast<char*>(&header) + 8, header_bytes - 8, "the header");
    if (header.version != format_version) {
        HALO_THROW(InputError, name, ": unsupported binary CSR version ", header.version,
                   " (this build reads version ", format_version, ")");
    }
    if ((header.flags & ~flag_has_values) != 0) {
        HALO_THROW(InputError, name, ": unknown flag bits ", hex32(header.flags & ~flag_has_values),
                   " in the header (version ", format_version, " defines bit 0 only)");
    }
    if (header.num_rows < 0 || header.num_cols < 0 || header.nnz < 0) {
        HALO_THROW(InputError, name, ": negative size in the header: ", header.num_rows, " x ",
                   header.num_cols, " with ", header.nnz, " nonzeros");
    }
    if (header.num_cols > std::numeric_limits<local_id>::max()) {
        HALO_THROW(InputError, name, ": ", header.num_cols,
                   " columns exceed the int32 column range");
    }
    const bool has_values = (header.flags & flag_has_values) != 0;
    // Bound each count by the file length first, so that the size arithmetic cannot overflow.
    const auto rows = static_cast<std::uint64_t>(header.num_rows);
    const auto nnz = static_cast<std::uint64_t>(header.nnz);
    std::uint64_t expected = std::numeric_limits<std::uint64_t>::max();
    if (rows < file_size / 8 && nnz <= file_size / 4) {
        expected = header_bytes + 8 * (rows + 1) + nnz * (has_values ? 8 : 4) + checksum_bytes;
    }
    if (expected != file_size) {
        const char* what = expected > file_size ? "truncated" : "trailing bytes";
        HALO_THROW(InputError, name, ": ", what, ": the header describes ", header.num_rows,
                   " rows and ", header.nnz, " nonzeros", has_values ? " with values" : "",
                   ", which take ",
                   expected == std::numeric_limits<std::uint64_t>::max()
                       ? std::string("more bytes than the file has")
                       : std::to_string(expected) + " bytes",
                   ", but the file has ", file_size, " bytes");
    }

    Csr csr;
    csr.num_rows = header.num_rows;
    csr.num_cols = header.num_cols;
    csr.indptr.resize(rows + 1);
    csr.indices.resize(nnz);
    std::uint32_t crc = crc_update(0, &header, sizeof header);
    in.read_exact(csr.indptr.data(), csr.indptr.size() * sizeof(offset_t), "indptr");
    crc = crc_update(crc, csr.indptr.data(), csr.indptr.size() * sizeof(offset_t));
    in.read_exact(csr.indices.data(), csr.indices.size() * sizeof(local_id), "indices");
    crc = crc_update(crc, csr.indices.data(), csr.indices.size() * sizeof(local_id));
    if (has_values) {
        csr.values.resize(nnz);
        in.read_exact(csr.values.data(), csr.values.size() * sizeof(float), "values");
        crc = crc_update(crc, csr.values.data(), csr.values.size() * sizeof(float));
    }
    std::uint32_t stored = 0;
    in.read_exact(&stored, sizeof stored, "the checksum");
    if (stored != crc) {
        HALO_THROW(InputError, name, ": checksum mismatch: the file stores CRC-32 ", hex32(stored),
                   " but its contents give ", hex32(crc), " (the file is corrupt)");
    }
    validate(csr, name.c_str());
    return csr;
}

}  // namespace halo
