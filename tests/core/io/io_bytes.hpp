// Builds binary CSR and .npy files byte by byte from the layouts in docs/INPUT.md, independently of
// the writers, so the tests pin the formats and can corrupt any field.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace halo::testing {

template <typename T>
void append_pod(std::string& out, const T& value)
{
    out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
void append_array(std::string& out, const std::vector<T>& values)
{
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

/// A binary CSR file: "HALOCSR\0", version, flags, num_rows, num_cols, nnz, indptr, indices,
/// values (when given), CRC-32 of all preceding bytes.
inline std::string hcsr_bytes(std::int64_t rows, std::int64_t cols,
                              const std::vector<std::int64_t>& indptr,
                              const std::vector<std::int32_t>& indices,
                              const std::vector<float>& values = {}, std::uint32_t version = 1)
{
    std::string out("HALOCSR", 8);
    append_pod(out, version);
    append_pod(out, static_cast<std::uint32_t>(values.empty() ? 0 : 1));
    append_pod(out, rows);
    append_pod(out, cols);
    append_pod(out, static_cast<std::int64_t>(indices.size()));
    append_array(out, indptr);
    append_array(out, indices);
    append_array(out, values);
    const auto crc = static_cast<std::uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(out.size())));
    append_pod(out, crc);
    return out;
}

/// Recomputes the trailing CRC-32 after a test edited the bytes before it.
inline void reseal_hcsr(std::string& bytes)
{
    const auto body = bytes.size() - 4;
    const auto crc = static_cast<std::uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(body)));
    std::memcpy(bytes.data() + body, &crc, 4);
}

/// A version 1.0 .npy file with the given header fields and raw data bytes.
inline std::string npy_bytes(const std::string& descr, const std::string& fortran,
                             const std::string& shape, const std::string& data)
{
    std::string header =
        "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
    while ((10 + header.size() + 1) % 64 != 0) {
        header += ' ';
    }
    header += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    append_pod(out, static_cast<std::uint16_t>(header.size()));
    return out + header + data;
}

template <typename T>
std::string raw_bytes(const std::vector<T>& values)
{
    std::string out;
    append_array(out, values);
    return out;
}

}  // namespace halo::testing
