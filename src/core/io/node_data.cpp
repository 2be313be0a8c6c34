// Dense node features: NumPy .npy, raw float32 and sparse COO text, all read into a row-major
// float32 matrix, and the .npy writer.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "halo/core/io.hpp"
#include "halo/core/memory_limits.hpp"
#include "io_detail.hpp"

namespace halo {
namespace {

using io_detail::quote;

constexpr char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

std::string lower(std::string text)
{
    for (auto& c : text) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return text;
}

bool ends_with(const std::string& text, std::string_view suffix)
{
    return text.size() >= suffix.size() &&
           text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Rejects rows x cols matrices that overflow int64 or could not fit in this machine's memory, so
// that a corrupt size fails with a message instead of an allocation that the OOM killer answers.
// `where` prefixes the message ("<file>:<line>: ").
// Before a rows x cols float32 matrix is allocated: addressable, and within the memory this
// process may use (check_allocation: available memory, cgroup limit, HALO_MEMORY_LIMIT_BYTES).
void check_dense_size(std::int64_t rows, std::int64_t cols, const std::string& where)
{
    const auto max_elems = std::numeric_limits<std::int64_t>::max() / 4;
    if (rows < 0 || cols < 0 || (cols > 0 && rows > max_elems / cols)) {
        HALO_THROW(InputError, where, ": a ", rows, " x ", cols,
                   " float32 matrix is too large to address");
    }
    check_allocation(
        where, "a dense " + std::to_string(rows) + " x " + std::to_string(cols) + " float32 matrix",
        4.0 * static_cast<double>(rows) * static_cast<double>(cols));
}

// First NaN or infinity, reported by row and column.
void check_finite(const DenseMatrix& m, const std::string& name)
{
    const auto it =
        std::find_if(m.values.begin(), m.values.end(), [](float v) { return !std::isfinite(v); });
    if (it != m.values.end()) {
        const auto k = it - m.values.begin();
        HALO_THROW(InputError, name, ": non-finite feature value ", *it, " at row ", k / m.cols,
                   ", column ", k % m.cols, " (NaN and infinite features are rejected)");
    }
}

// ---- .npy --------------------------------------------------------------------------------------

struct NpyHeader {
    std::string descr;
    bool fortran_order = false;
    std::vector<std::int64_t> shape;
};

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class NpyHeaderParser {
public:
    NpyHeaderParser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

    NpyHeader parse()
    {
        NpyHeader header;
        bool have_descr = false;
        bool have_order = false;
        bool have_shape = false;
        expect('{');
        for (;;) {
            skip_space();
            if (peek() == '}') {
                ++pos_;
                break;
            }
            const auto key = string_literal();
            expect(':');
            if (key == "descr") {
                header.descr = string_literal();
                have_descr = true;
            } else if (key == "fortran_order") {
                header.fortran_order = boolean();
                have_order = true;
            } else if (key == "shape") {
                header.shape = tuple();
                have_shape = true;
            } else {
                fail("unknown key " + quote(key));
            }
            skip_space();
            if (peek() == ',') {
                ++pos_;
            } else if (peek() != '}') {
                fail("expected ',' or '}'");
            }
        }
        if (!have_descr || !have_order || !have_shape) {
            fail("it lacks one of 'descr', 'fortran_order', 'shape'");
        }
        return header;
    }

private:
    [[noreturn]] void fail(const std::string& what) const
    {
        HALO_THROW(InputError, name_, ": malformed .npy header ", quote(text_), ": ", what,
                   " at character ", pos_);
    }

    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

    void skip_space()
    {
        while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) {
            ++pos_;
        }
    }

    void expect(char c)
    {
        skip_space();
        if (peek() != c) {
            fail(std::string("expected '") + c + "'");
        }
        ++pos_;
    }

    std::string string_literal()
    {
        skip_space();
        const char q = peek();
        if (q != '\'' && q != '"') {
            fail("expected a quoted string");
        }
        const auto end = text_.find(q, pos_ + 1);
        if (end == std::string_view::npos) {
            fail("unterminated string");
        }
        std::string out(text_.substr(pos_ + 1, end - pos_ - 1));
        pos_ = end + 1;
        return out;
    }

    bool boolean()
    {
        skip_space();
        if (text_.substr(pos_, 4) == "True") {
            pos_ += 4;
            return true;
        }
        if (text_.substr(pos_, 5) == "False") {
            pos_ += 5;
            return false;
        }
        fail("expected True or False");
    }

    std::vector<std::int64_t> tuple()
    {
        expect('(');
        std::vector<std::int64_t> values;
        for (;;) {
            skip_space();
            if (peek() == ')') {
                ++pos_;
                return values;
            }
            const auto start = pos_;
            while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
                ++pos_;
            }
            std::int64_t value = 0;
            std::errc ec{};
            if (pos_ == start ||
                !io_detail::parse_int64(text_.substr(start, pos_ - start), value, ec)) {
                fail("expected a dimension (non-negative integer)");
            }
            values.push_back(value);
            skip_space();
            if (peek() == ',') {
                ++pos_;
            } else if (peek() != ')') {
                fail("expected ',' or ')'");
            }
        }
    }

    std::string_view text_;
    const std::string& name_;
    std::size_t pos_ = 0;
};

// Converts float64 data to float32 in pieces, rejecting what float32 cannot hold.
void read_f8(io_detail::InputFile& in, DenseMatrix& m)
{
    constexpr std::size_t piece = std::size_t{1} << 20;
    std::vector<double> buffer(std::min<std::size_t>(piece, m.values.size()));
    for (std::size_t done = 0; done < m.values.size();) {
        const auto count = std::min(piece, m.values.size() - done);
        in.read_exact(buffer.data(), count * sizeof(double), "the array data");
        for (std::size_t k = 0; k < count; ++k) {
            const double v = buffer[k];
            const auto at = static_cast<std::int64_t>(done + k);
            if (!std::isfinite(v) || std::fabs(v) > FLT_MAX) {
                HALO_THROW(InputError, in.name(), ": feature value ", v, " at row ", at / m.cols,
                           ", column ", at % m.cols,
                           std::isfinite(v) ? " is out of the float32 range"
                                            : " is not finite (NaN and infinite features are "
                                              "rejected)");
            }
            m.values[done + k] = static_cast<float>(v);
        }
        done += count;
    }
}

}  // namespace

DenseMatrix read_npy(const std::filesystem::path& path)
{
    io_detail::InputFile in(path);
    const auto& name = in.name();
    char prefix[12];
    if (in.size() < 10) {
        HALO_THROW(InputError, name, ": not a .npy file: ", in.size(),
                   " bytes, shorter than the .npy preamble (10 bytes)");
    }
    in.read_exact(prefix, 10, "the .npy preamble");
    if (std::memcmp(prefix, npy_magic, sizeof npy_magic) != 0) {
        HALO_THROW(InputError, name, ": bad magic: not a .npy file (expected \\x93NUMPY, found ",
                   quote(std::string_view(prefix, 6)), ")");
    }
    const int major = static_cast<unsigned char>(prefix[6]);
    const int minor = static_cast<unsigned char>(prefix[7]);
    std::uint64_t header_len = 0;
    std::uint64_t preamble = 10;
    if (major == 1) {
        std::uint16_t len16 = 0;
        std::memcpy(&len16, prefix + 8, 2);
        header_len = len16;
    } else if (major == 2 || major == 3) {
        in.read_exact(prefix + 10, 2, "the .npy preamble");
        std::uint32_t len32 = 0;
        std::memcpy(&len32, prefix + 8, 4);
        header_len = len32;
        preamble = 12;
    } else {
        HALO_THROW(InputError, name, ": unsupported .npy format version ", major, ".", minor,
                   " (expected 1.0, 2.0 or 3.0)");
    }
    if (header_len > in.size() - preamble) {
        HALO_THROW(InputError, name, ": truncated: the .npy header claims ", header_len,
                   " bytes but the file has ", in.size(), " in all");
    }
    std::string header_text(header_len, '\0');
    in.read_exact(header_text.data(), header_len, "the .npy header");
    const auto header = NpyHeaderParser(header_text, name).parse();

    std::size_t item = 0;
    if (header.descr == "<f4") {
        item = 4;
    } else if (header.descr == "<f8") {
        item = 8;
    } else {
        HALO_THROW(InputError, name, ": dtype ", quote(header.descr),
                   " is not supported (expected '<f4' float32 or '<f8' float64, little-endian)");
    }
    if (header.fortran_order) {
        HALO_THROW(InputError, name,
                   ": fortran_order True (column-major) is not supported; "
                   "save a C-order array (numpy.ascontiguousarray)");
    }
    if (header.shape.size() != 2) {
        std::string shape = "(";
        for (std::size_t k = 0; k < header.shape.size(); ++k) {
            shape += (k > 0 ? ", " : "") + std::to_string(header.shape[k]);
        }
        shape += header.shape.size() == 1 ? ",)" : ")";
        HALO_THROW(InputError, name, ": shape ", shape, " is ", header.shape.size(),
                   "-D; node features must be a 2-D array (nodes, features)");
    }
    DenseMatrix m;
    m.rows = header.shape[0];
    m.cols = header.shape[1];
    const auto data_bytes = in.size() - preamble - header_len;
    const auto max_elems = std::numeric_limits<std::int64_t>::max() / 8;
    const bool fits = m.cols == 0 || m.rows <= max_elems / m.cols;
    const auto needed = fits ? static_cast<std::uint64_t>(m.rows * m.cols) * item : 0;
    if (!fits || needed != data_bytes) {
        HALO_THROW(InputError, name, ": ",
                   !fits || needed > data_bytes ? "truncated" : "trailing bytes", ": shape (",
                   m.rows, ", ", m.cols, ") of ", header.descr, " needs ",
                   fits ? std::to_string(needed) : std::string("more"),
                   " data bytes, the file has ", data_bytes);
    }
    m.values.resize(static_cast<std::size_t>(m.rows * m.cols));
    if (item == 4) {
        in.read_exact(m.values.data(), m.values.size() * sizeof(float), "the array data");
        check_finite(m, name);
    } else {
        read_f8(in, m);
    }
    return m;
}

void write_npy(const std::filesystem::path& path, const DenseMatrix& matrix)
{
    HALO_EXPECTS(matrix.rows >= 0 && matrix.cols >= 0 &&
                     static_cast<std::int64_t>(matrix.values.size()) == matrix.rows * matrix.cols,
                 "a ", matrix.rows, " x ", matrix.cols, " matrix holds ", matrix.values.size(),
                 " values");
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                         std::to_string(matrix.rows) + ", " + std::to_string(matrix.cols) + "), }";
    // NumPy pads the header with spaces and a final newline so the data starts 64-byte aligned.
    const auto total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    const auto len = static_cast<std::uint16_t>(header.size());
    io_detail::AtomicFile out(path);
    out.write(npy_magic, sizeof npy_magic);
    const char version[2] = {1, 0};
    out.write(version, 2);
    out.write(&len, 2);
    out.write(header.data(), header.size());
    out.write(matrix.values.data(), matrix.values.size() * sizeof(float));
    out.commit();
}

// ---- raw float32 -------------------------------------------------------------------------------

DenseMatrix read_raw_features(const std::filesystem::path& path, std::int64_t width)
{
    const auto name = path.string();
    if (width <= 0) {
        HALO_THROW(InputError, name, ": raw float32 features need the row width (values per ",
                   "node), got ", width);
    }
    io_detail::InputFile in(path);
    const auto row_bytes = static_cast<std::uint64_t>(width) * 4;
    if (in.size() % row_bytes != 0) {
        HALO_THROW(InputError, name, ": size ", in.size(), " bytes is not a multiple of ",
                   row_bytes, " (rows of ", width, " float32 values): truncated, or a wrong width");
    }
    DenseMatrix m;
    m.rows = static_cast<std::int64_t>(in.size() / row_bytes);
    m.cols = width;
    m.values.resize(static_cast<std::size_t>(in.size() / 4));
    in.read_exact(m.values.data(), in.size(), "the float32 data");
    check_finite(m, name);
    return m;
}

// ---- COO text ----------------------------------------------------------------------------------

DenseMatrix read_coo_features(const std::filesystem::path& path)
{
    const auto name = path.string();
    const auto text = io_detail::read_text(path);
    io_detail::LineReader lines(text);
    std::string_view line;
    std::string_view rest;
    while (lines.next(line)) {
        rest = io_detail::trim_left(line);
        if (!rest.empty()) {
            break;
        }
    }
    if (rest.empty()) {
        HALO_THROW(InputError, name, ": the file is empty (expected a first line '# N F NNZ')");
    }
    const auto header_line = lines.line_number();
    std::int64_t sizes[3] = {0, 0, 0};
    {
        io_detail::Fields fields(rest.substr(1));
        std::string_view tokens[3];
        std::string_view extra;
        if (rest.front() != '#' || !fields.next(tokens[0]) || !fields.next(tokens[1]) ||
            !fields.next(tokens[2]) || fields.next(extra)) {
            HALO_INPUT_ERROR_AT(name, header_line, "expected the header '# N F NNZ' (nodes, ",
                                "features, nonzeros), found ", quote(rest));
        }
        const char* what[3] = {"node count N", "feature count F", "nonzero count NNZ"};
        for (int k = 0; k < 3; ++k) {
            sizes[k] = io_detail::int_field(tokens[k], name, header_line, what[k]);
            if (sizes[k] < 0) {
                HALO_INPUT_ERROR_AT(name, header_line, what[k], " ", quote(tokens[k]),
                                    " is negative");
            }
        }
    }
    const auto n = sizes[0];
    const auto f = sizes[1];
    const auto nnz = sizes[2];
    check_dense_size(n, f, name + ":" + std::to_string(header_line));
    DenseMatrix m;
    m.rows = n;
    m.cols = f;
    m.values.assign(static_cast<std::size_t>(n * f), 0.0f);

    std::int64_t count = 0;
    while (lines.next(line)) {
        io_detail::Fields fields(line);
        std::string_view t[3];
        if (!fields.next(t[0]) || t[0].front() == '#' || t[0].front() == '%') {
            continue;
        }
        const auto ln = lines.line_number();
        if (count == nnz) {
            HALO_INPUT_ERROR_AT(name, ln, "more entries than the ", nnz,
                                " declared in the header (line ", header_line, ")");
        }
        std::string_view extra;
        if (!fields.next(t[1]) || !fields.next(t[2])) {
            HALO_INPUT_ERROR_AT(name, ln, "truncated entry ", quote(io_detail::trim_left(line)),
                                ", expected 'row col value'");
        }
        if (fields.next(extra)) {
            HALO_INPUT_ERROR_AT(name, ln, "unexpected ", quote(extra),
                                " after the entry, expected 'row col value'");
        }
        const auto row = io_detail::int_field(t[0], name, ln, "row");
        const auto col = io_detail::int_field(t[1], name, ln, "column");
        if (row < 0 || row >= n) {
            HALO_INPUT_ERROR_AT(name, ln, "row ", quote(t[0]), " is outside [0, ", n,
                                ") (N from the header)");
        }
        if (col < 0 || col >= f) {
            HALO_INPUT_ERROR_AT(name, ln, "column ", quote(t[1]), " is outside [0, ", f,
                                ") (F from the header)");
        }
        const auto value = io_detail::float_field(t[2], name, ln, "feature value");
        auto& cell = m.values[static_cast<std::size_t>(row * f + col)];
        cell += value;
        if (!std::isfinite(cell)) {
            HALO_INPUT_ERROR_AT(name, ln, "duplicate entries at row ", row, ", column ", col,
                                " add up beyond the float32 range");
        }
        ++count;
    }
    if (count < nnz) {
        HALO_INPUT_ERROR_AT(name, lines.line_number(), "the file ends after ", count, " of the ",
                            nnz, " entries declared in the header (line ", header_line, ")");
    }
    return m;
}

DenseMatrix read_features(const std::filesystem::path& path, std::int64_t raw_width)
{
    const auto file = lower(path.filename().string());
    if (ends_with(file, ".npy")) {
        return read_npy(path);
    }
    if (ends_with(file, ".bin") || ends_with(file, ".f32")) {
        return read_raw_features(path, raw_width);
    }
    if (ends_with(file, ".txt") || ends_with(file, ".txt.gz")) {
        return read_coo_features(path);
    }
    HALO_THROW(InputError, path.string(), ": unknown feature file type (expected .npy, raw ",
               "float32 .bin or .f32, or COO text .txt or .txt.gz)");
}

}  // namespace halo
