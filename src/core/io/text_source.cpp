// Whole-file reads (plain or gzip, detected by the magic bytes), and the token parsing and quoting
// every text reader shares.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "io_detail.hpp"

namespace halo::io_detail {
namespace {

// Bytes moved per read() call and per inflate() call: large enough that call overhead vanishes,
// small enough for zlib's 32-bit counters.
constexpr std::size_t chunk_bytes = std::size_t{1} << 26;

// An open file descriptor that closes itself.
class Fd {
public:
    explicit Fd(const std::filesystem::path& path) : name_(path.string())
    {
        do {
            fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        } while (fd_ < 0 && errno == EINTR);
        if (fd_ < 0) {
            HALO_THROW(IoError, name_, ": cannot open for reading: ", std::strerror(errno));
        }
        struct stat st {};
        if (::fstat(fd_, &st) != 0) {
            const int err = errno;
            ::close(fd_);
            HALO_THROW(IoError, name_, ": cannot stat: ", std::strerror(err));
        }
        if (S_ISDIR(st.st_mode)) {
            ::close(fd_);
            HALO_THROW(IoError, name_, ": is a directory, not a file");
        }
        size_hint_ = S_ISREG(st.st_mode) ? static_cast<std::size_t>(st.st_size) : 0;
    }
    ~Fd() { ::close(fd_); }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;

    // Reads until `out` holds `limit` bytes or the file ends. A regular file is read into one
    // allocation of its size; a probe read then confirms the end (the file may have grown).
    void read_into(std::string& out, std::size_t limit)
    {
        constexpr std::size_t small = std::size_t{1} << 16;
        std::size_t have = 0;
        out.resize(std::min(limit, size_hint_ > 0 ? size_hint_ : small));
        for (;;) {
            if (have == out.size()) {
                if (have == limit) {
                    break;
                }
                char probe[4096];
                const auto got = read_some(probe, std::min(sizeof probe, limit - have));
                if (got == 0) {
                    break;
                }
                out.append(probe, got);
                have += got;
                out.resize(std::min(limit, std::max(2 * have, have + small)));
                continue;
            }
            const auto got = read_some(out.data() + have, std::min(out.size() - have, chunk_bytes));
            if (got == 0) {
                break;
            }
            have += got;
        }
        out.resize(have);
    }

private:
    std::size_t read_some(char* data, std::size_t bytes)
    {
        for (;;) {
            const auto got = ::read(fd_, data, bytes);
            if (got >= 0) {
                return static_cast<std::size_t>(got);
            }
            if (errno != EINTR) {
                HALO_THROW(IoError, name_, ": read failed: ", std::strerror(errno));
            }
        }
    }

    std::string name_;
    int fd_ = -1;
    std::size_t size_hint_ = 0;
};

// Inflates gzip data `in` into `out` (growing it up to `max_out` bytes, where it stops early) and
// trims `out` to what came out. Returns an empty string on success, else what went wrong.
std::string inflate_gzip(std::string_view in, std::string& out, std::size_t max_out)
{
    z_stream zs{};
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
        return "cannot initialize zlib";
    }
    std::size_t in_pos = 0;
    std::size_t out_pos = 0;
    std::string problem;
    for (;;) {
        if (out_pos == out.size()) {
            if (out.size() >= max_out) {
                break;
            }
            out.resize(std::min(max_out, std::max<std::size_t>(out.size() * 2, 1 << 16)));
        }
        zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + in_pos));
        zs.avail_in = static_cast<uInt>(std::min(in.size() - in_pos, chunk_bytes));
        zs.next_out = reinterpret_cast<Bytef*>(out.data() + out_pos);
        zs.avail_out = static_cast<uInt>(std::min(out.size() - out_pos, chunk_bytes));
        const auto avail_in = zs.avail_in;
        const auto avail_out = zs.avail_out;
        const int rc = inflate(&zs, Z_NO_FLUSH);
        in_pos += avail_in - zs.avail_in;
        out_pos += avail_out - zs.avail_out;
        if (rc == Z_STREAM_END) {
            if (in_pos == in.size()) {
                break;
            }
            // Concatenated members (as `cat a.gz b.gz` makes) are one file to gunzip.
            if (has_gzip_magic(in.substr(in_pos))) {
                inflateReset(&zs);
                continue;
            }
            problem = "unexpected bytes after the end of the gzip stream at compressed offset " +
                      std::to_string(in_pos);
            break;
        }
        if (rc == Z_OK) {
            continue;
        }
        if (rc == Z_BUF_ERROR && out_pos == out.size()) {
            continue;  // out of room: grow and go on
        }
        if (rc == Z_BUF_ERROR && in_pos == in.size()) {
            problem = "truncated gzip stream (the compressed data ends after " +
                      std::to_string(in.size()) + " bytes, before the end of the stream)";
            break;
        }
        problem = std::string("corrupt gzip data (zlib: ") +
                  (zs.msg != nullptr ? zs.msg : zError(rc)) + ") near compressed offset " +
                  std::to_string(in_pos);
        break;
    }
    inflateEnd(&zs);
    out.resize(out_pos);
    return problem;
}

}  // namespace

std::string read_file_bytes(const std::filesystem::path& path)
{
    Fd fd(path);
    std::string bytes;
    fd.read_into(bytes, std::numeric_limits<std::size_t>::max());
    return bytes;
}

std::string read_file_prefix(const std::filesystem::path& path, std::size_t max_bytes)
{
    Fd fd(path);
    std::string bytes;
    fd.read_into(bytes, max_bytes);
    return bytes;
}

std::string gunzip(std::string_view compressed, const std::string& name)
{
    std::string out;
    // The gzip trailer holds the uncompressed size mod 2^32; trust it as a first allocation only
    // when it is plausible (deflate expands at most about 1032:1).
    std::size_t guess = compressed.size() * 4;
    if (compressed.size() >= 18) {
        std::uint32_t isize = 0;
        std::memcpy(&isize, compressed.data() + compressed.size() - 4, 4);
        if (isize >= compressed.size() / 2 && isize <= compressed.size() * std::size_t{1032}) {
            guess = isize;
        }
    }
    out.resize(std::max<std::size_t>(guess, 1 << 16));
    const auto problem = inflate_gzip(compressed, out, std::numeric_limits<std::size_t>::max());
    if (!problem.empty()) {
        HALO_THROW(InputError, name, ": ", problem);
    }
    return out;
}

std::string gunzip_prefix(std::string_view compressed, std::size_t max_out)
{
    std::string out;
    out.resize(std::min<std::size_t>(max_out, 1 << 16));
    inflate_gzip(compressed, out, max_out);
    return out;
}

std::string read_text(const std::filesystem::path& path)
{
    auto bytes = read_file_bytes(path);
    if (has_gzip_magic(bytes)) {
        return gunzip(bytes, path.string());
    }
    return bytes;
}

InputFile::InputFile(const std::filesystem::path& path) : name_(path.string())
{
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) {
        HALO_THROW(IoError, name_, ": cannot open for reading: ", std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(::fileno(file_), &st) != 0) {
        const int err = errno;
        std::fclose(file_);
        HALO_THROW(IoError, name_, ": cannot stat: ", std::strerror(err));
    }
    if (S_ISDIR(st.st_mode)) {
        std::fclose(file_);
        HALO_THROW(IoError, name_, ": is a directory, not a file");
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
}

InputFile::~InputFile()
{
    std::fclose(file_);
}

void InputFile::read_exact(void* data, std::size_t bytes, const char* what)
{
    auto* out = static_cast<char*>(data);
    std::size_t have = 0;
    while (have < bytes) {
        const auto want = std::min(bytes - have, chunk_bytes);
        const auto got = std::fread(out + have, 1, want, file_);
        have += got;
        if (got < want) {
            if (std::ferror(file_) != 0) {
                HALO_THROW(IoError, name_, ": read failed in ", what, ": ", std::strerror(errno));
            }
            HALO_THROW(InputError, name_, ": truncated: the file ends ", bytes - have,
                       " bytes short of the end of ", what);
        }
    }
}

std::string quote(std::string_view token)
{
    constexpr std::size_t shown = 40;
    static constexpr char hex[] = "0123456789abcdef";
    std::string out = "'";
    for (std::size_t i = 0; i < std::min(token.size(), shown); ++i) {
        const auto c = static_cast<unsigned char>(token[i]);
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    out += '\'';
    if (token.size() > shown) {
        out += "... (" + std::to_string(token.size()) + " characters)";
    }
    return out;
}

void throw_bad_integer(const std::string& name, std::int64_t line, std::string_view what,
                       std::string_view token, std::errc ec)
{
    if (ec == std::errc::result_out_of_range) {
        HALO_INPUT_ERROR_AT(name, line, what, " ", quote(token),
                            " is out of range (larger than a 64-bit integer)");
    }
    HALO_INPUT_ERROR_AT(name, line, what, " ", quote(token), " is not an integer");
}

float float_field(std::string_view token, const std::string& name, std::int64_t line,
                  std::string_view what)
{
    const char* first = token.data();
    const char* last = token.data() + token.size();
    // from_chars takes no '+' sign; accept one before a digit or a point, as strtod does.
    if (token.size() >= 2 && token[0] == '+' &&
        (std::isdigit(static_cast<unsigned char>(token[1])) || token[1] == '.')) {
        ++first;
    }
    float value = 0.0f;
    const auto result = std::from_chars(first, last, value);
    if (result.ptr == last && result.ec == std::errc()) {
        if (!std::isfinite(value)) {
            HALO_INPUT_ERROR_AT(name, line, what, " ", quote(token),
                                " is not a finite number (NaN and infinity are rejected)");
        }
        return value;
    }
    if (result.ptr == last && result.ec == std::errc::result_out_of_range) {
        // Out of float range either way: underflow rounds to (almost) zero, overflow is an error.
        double wide = 0.0;
        const auto again = std::from_chars(first, last, wide);
        if (again.ec == std::errc() && again.ptr == last && std::fabs(wide) <= FLT_MAX) {
            return static_cast<float>(wide);
        }
        HALO_INPUT_ERROR_AT(name, line, what, " ", quote(token),
                            " is out of the float32 range (magnitude above ", FLT_MAX, ")");
    }
    HALO_INPUT_ERROR_AT(name, line, what, " ", quote(token), " is not a number");
}

bool iequals(std::string_view a, std::string_view b)
{
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

}  // namespace halo::io_detail
