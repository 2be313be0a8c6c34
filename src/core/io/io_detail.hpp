// Internals shared by the readers in src/io: whole-file reads with gzip detection, line and field
// scanning, token parsing with messages that name file, line and token, and the write-to-temporary-
// then-rename output file. Not a public header.
#pragma once

#include <bit>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "halo/core/error.hpp"

// The binary formats (binary CSR, .npy '<f4', raw float32) are little-endian and read by copying
// bytes straight into arrays.
static_assert(std::endian::native == std::endian::little,
              "halo io reads little-endian binary files by direct copy; add byte swapping first");

/// Throws halo::InputError "<name>:<line>: <message...>".
#define HALO_INPUT_ERROR_AT(name, line, ...) \
    HALO_THROW(::halo::InputError, name, ":", line, ": ", __VA_ARGS__)

namespace halo::io_detail {

// ---- files -------------------------------------------------------------------------------------

/// Bytes of the whole file. Throws halo::IoError naming the file when it is missing, a directory
/// or unreadable.
std::string read_file_bytes(const std::filesystem::path& path);

/// At most `max_bytes` from the start of the file (IoError as read_file_bytes).
std::string read_file_prefix(const std::filesystem::path& path, std::size_t max_bytes);

inline bool has_gzip_magic(std::string_view bytes)
{
    return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
           static_cast<unsigned char>(bytes[1]) == 0x8b;
}

/// Decompresses gzip data (every concatenated member). Throws halo::InputError naming `name` when
/// the stream is corrupt, truncated or followed by bytes that are not another gzip member.
std::string gunzip(std::string_view compressed, const std::string& name);

/// Up to `max_out` decompressed bytes from the start of gzip data; never throws on bad data (it
/// returns what decompressed cleanly), for sniffing a format.
std::string gunzip_prefix(std::string_view compressed, std::size_t max_out);

/// The file's content, decompressed when it starts with the gzip magic bytes 1f 8b.
std::string read_text(const std::filesystem::path& path);

/// A file opened for reading binary data, with its size; closes itself.
class InputFile {
public:
    explicit InputFile(const std::filesystem::path& path);
    ~InputFile();
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    std::uint64_t size() const noexcept { return size_; }
    const std::string& name() const noexcept { return name_; }

    /// Reads exactly `bytes` bytes; a short read throws halo::InputError ("truncated ... while
    /// reading <what>"), a failed one halo::IoError.
    void read_exact(void* data, std::size_t bytes, const char* what);

private:
    std::FILE* file_ = nullptr;
    std::string name_;
    std::uint64_t size_ = 0;
};

/// Writes a file under a temporary name in the target's directory and renames it over the target
/// in commit(); destroyed uncommitted, it removes the temporary file. Every failure throws
/// halo::IoError naming the target.
class AtomicFile {
public:
    explicit AtomicFile(const std::filesystem::path& target);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, std::size_t bytes);
    /// Flushes to disk (fsync), closes and renames onto the target.
    void commit();

private:
    std::filesystem::path target_;
    std::filesystem::path temp_;
    int fd_ = -1;
};

// ---- text scanning -----------------------------------------------------------------------------

inline bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/// Splits a buffer into lines ('\n'; a '\r' before it is whitespace to the field scanner) and
/// counts them from 1.
class LineReader {
public:
    explicit LineReader(std::string_view text)
        : begin_(text.data()), p_(text.data()), end_(text.data() + text.size())
    {
    }

    bool next(std::string_view& line)
    {
        if (p_ == end_) {
            return false;
        }
        const auto* nl = static_cast<const char*>(std::memchr(p_, '\n', end_ - p_));
        const char* stop = nl != nullptr ? nl : end_;
        line = std::string_view(p_, static_cast<std::size_t>(stop - p_));
        p_ = nl != nullptr ? nl + 1 : end_;
        ++line_;
        return true;
    }

    /// Number of the line last returned by next() (0 before the first).
    std::int64_t line_number() const noexcept { return line_; }
    /// Bytes of the text consumed so far.
    std::size_t offset() const noexcept { return static_cast<std::size_t>(p_ - begin_); }

private:
    const char* begin_;
    const char* p_;
    const char* end_;
    std::int64_t line_ = 0;
};

/// Whitespace-separated fields of one line.
class Fields {
public:
    explicit Fields(std::string_view line) : p_(line.data()), end_(line.data() + line.size()) {}

    bool next(std::string_view& field)
    {
        while (p_ != end_ && is_space(*p_)) {
            ++p_;
        }
        if (p_ == end_) {
            return false;
        }
        const char* start = p_;
        while (p_ != end_ && !is_space(*p_)) {
            ++p_;
        }
        field = std::string_view(start, static_cast<std::size_t>(p_ - start));
        return true;
    }

    /// Number of fields not yet returned (consumes them).
    int count_rest()
    {
        int n = 0;
        std::string_view f;
        while (next(f)) {
            ++n;
        }
        return n;
    }

private:
    const char* p_;
    const char* end_;
};

/// The line without leading whitespace.
inline std::string_view trim_left(std::string_view line)
{
    std::size_t i = 0;
    while (i < line.size() && is_space(line[i])) {
        ++i;
    }
    return line.substr(i);
}

/// The token in single quotes for a message: at most 40 characters (then "..."), bytes that are
/// not printable ASCII as \xNN.
std::string quote(std::string_view token);

// ---- token parsing -----------------------------------------------------------------------------

/// Parses a whole token as a decimal int64. Returns false (setting `ec`) when the token is not an
/// integer or out of range.
inline bool parse_int64(std::string_view token, std::int64_t& value, std::errc& ec)
{
    const auto* first = token.data();
    const auto* last = token.data() + token.size();
    const auto result = std::from_chars(first, last, value);
    if (result.ec == std::errc() && result.ptr == last) {
        return true;
    }
    ec = result.ec == std::errc::result_out_of_range ? result.ec : std::errc::invalid_argument;
    return false;
}

/// Throws the InputError for a token parse_int64 rejected: `what` names the field ("source id").
[[noreturn]] void throw_bad_integer(const std::string& name, std::int64_t line,
                                    std::string_view what, std::string_view token, std::errc ec);

/// Parses a whole token as an int64 or throws "<name>:<line>: <what> '<token>' is not an integer"
/// (or "is out of range").
inline std::int64_t int_field(std::string_view token, const std::string& name, std::int64_t line,
                              std::string_view what)
{
    std::int64_t value = 0;
    std::errc ec{};
    if (!parse_int64(token, value, ec)) {
        throw_bad_integer(name, line, what, token, ec);
    }
    return value;
}

/// Parses a whole token as a finite float32 (decimal or scientific notation; a value too small for
/// float32 rounds toward zero). Throws naming file, line, `what` and the token when the token is
/// not a number, is NaN or infinite, or exceeds the float32 range.
float float_field(std::string_view token, const std::string& name, std::int64_t line,
                  std::string_view what);

/// Case-insensitive ASCII comparison.
bool iequals(std::string_view a, std::string_view b);

}  // namespace halo::io_detail
