// Matrix Market coordinate files as graph adjacencies (NIST "The Matrix Market Exchange Formats",
// 1996): banner, '%' comments, size line "rows cols entries", then 1-based "row col [value]".
#include <algorithm>

#include "halo/core/io.hpp"
#include "halo/core/memory_limits.hpp"
#include "io_detail.hpp"

namespace halo {
namespace {

using io_detail::Fields;
using io_detail::iequals;
using io_detail::int_field;
using io_detail::quote;

enum class Field { pattern, real, integer };

struct Banner {
    Field field = Field::pattern;
    bool symmetric = false;
};

constexpr const char* banner_form =
    "'%%MatrixMarket matrix coordinate <pattern|real|integer> <general|symmetric>'";

Banner parse_banner(std::string_view line, const std::string& name)
{
    Fields fields(line);
    std::string_view word;
    if (!fields.next(word) || !iequals(word, "%%MatrixMarket")) {
        HALO_INPUT_ERROR_AT(name, 1, "missing Matrix Market banner: the first line must be ",
                            banner_form, ", found ", quote(io_detail::trim_left(line)));
    }
    std::string_view object;
    std::string_view format;
    std::string_view field;
    std::string_view symmetry;
    if (!fields.next(object) || !fields.next(format) || !fields.next(field) ||
        !fields.next(symmetry)) {
        HALO_INPUT_ERROR_AT(name, 1, "incomplete Matrix Market banner ",
                            quote(io_detail::trim_left(line)), ", expected ", banner_form);
    }
    std::string_view extra;
    if (fields.next(extra)) {
        HALO_INPUT_ERROR_AT(name, 1, "unexpected ", quote(extra),
                            " after the Matrix Market banner, expected ", banner_form);
    }
    if (!iequals(object, "matrix")) {
        HALO_INPUT_ERROR_AT(name, 1, "Matrix Market object ", quote(object),
                            " is not supported (expected 'matrix')");
    }
    if (iequals(format, "array")) {
        HALO_INPUT_ERROR_AT(name, 1, "Matrix Market format 'array' (dense) is not supported; a ",
                            "graph adjacency must be in 'coordinate' format");
    }
    if (!iequals(format, "coordinate")) {
        HALO_INPUT_ERROR_AT(name, 1, "unknown Matrix Market format ", quote(format),
                            " (expected 'coordinate')");
    }
    Banner banner;
    if (iequals(field, "pattern")) {
        banner.field = Field::pattern;
    } else if (iequals(field, "real") || iequals(field, "double")) {
        banner.field = Field::real;
    } else if (iequals(field, "integer")) {
        banner.field = Field::integer;
    } else if (iequals(field, "complex")) {
        HALO_INPUT_ERROR_AT(name, 1, "Matrix Market field 'complex' is not supported (a graph ",
                            "adjacency needs pattern, real or integer values)");
    } else {
        HALO_INPUT_ERROR_AT(name, 1, "unknown Matrix Market field ", quote(field),
                            " (expected pattern, real or integer)");
    }
    if (iequals(symmetry, "general")) {
        banner.symmetric = false;
    } else if (iequals(symmetry, "symmetric")) {
        banner.symmetric = true;
    } else if (iequals(symmetry, "skew-symmetric") || iequals(symmetry, "hermitian")) {
        HALO_INPUT_ERROR_AT(name, 1, "Matrix Market symmetry ", quote(symmetry),
                            " is not supported (expected general or symmetric)");
    } else {
        HALO_INPUT_ERROR_AT(name, 1, "unknown Matrix Market symmetry ", quote(symmetry),
                            " (expected general or symmetric)");
    }
    return banner;
}

bool blank_or_comment(std::string_view line)
{
    const auto rest = io_detail::trim_left(line);
    return rest.empty() || rest.front() == '%';
}

std::int64_t index_field(std::string_view token, std::int64_t n, const std::string& name,
                         std::int64_t ln, const char* what)
{
    const auto value = int_field(token, name, ln, what);
    if (value < 1 || value > n) {
        HALO_INPUT_ERROR_AT(name, ln, what, " ", quote(token), " is outside 1..", n,
                            " (Matrix Market indices are 1-based)");
    }
    return value - 1;
}

EdgeList parse_matrix_market(std::string_view text, const std::string& name,
                             const GraphReadOptions& options)
{
    io_detail::LineReader lines(text);
    std::string_view line;
    if (!lines.next(line)) {
        HALO_THROW(InputError, name, ": the file is empty (expected a Matrix Market banner ",
                   banner_form, ")");
    }
    const auto banner = parse_banner(line, name);

    bool sized = false;
    while (!sized && lines.next(line)) {
        sized = !blank_or_comment(line);
    }
    if (!sized) {
        HALO_INPUT_ERROR_AT(name, lines.line_number(),
                            "the file ends before the size line 'rows cols entries'");
    }
    const auto size_line = lines.line_number();
    Fields fields(line);
    std::string_view tokens[3];
    std::string_view extra;
    if (!fields.next(tokens[0]) || !fields.next(tokens[1]) || !fields.next(tokens[2]) ||
        fields.next(extra)) {
        HALO_INPUT_ERROR_AT(name, size_line, "size line must be 'rows cols entries', found ",
                            quote(io_detail::trim_left(line)));
    }
    const char* what[3] = {"row count", "column count", "entry count"};
    std::int64_t sizes[3];
    for (int k = 0; k < 3; ++k) {
        sizes[k] = int_field(tokens[k], name, size_line, what[k]);
        if (sizes[k] < 0) {
            HALO_INPUT_ERROR_AT(name, size_line, what[k], " ", quote(tokens[k]), " is negative");
        }
    }
    const auto n = sizes[0];
    const auto entries = sizes[2];
    if (sizes[0] != sizes[1]) {
        HALO_INPUT_ERROR_AT(name, size_line, "the matrix is ", sizes[0], " x ", sizes[1],
                            ", not square; a graph adjacency must be square");
    }
    if (options.num_nodes >= 0 && options.num_nodes != n) {
        HALO_INPUT_ERROR_AT(name, size_line, "the matrix has ", n, " rows but the graph was given ",
                            options.num_nodes, " nodes");
    }

    check_allocation(name + ":" + std::to_string(size_line),
                     "a graph of " + std::to_string(n) + " nodes (its CSR row offsets)",
                     8.0 * (static_cast<double>(n) + 1));
    EdgeList edges;
    edges.num_nodes = n;
    // An entry takes at least 4 bytes ("1 1\n"): a bogus entry count cannot force a huge reserve.
    const auto reserve = static_cast<std::size_t>(
        std::min<std::int64_t>(entries, static_cast<std::int64_t>(text.size() / 4) + 1) *
        (banner.symmetric ? 2 : 1));
    edges.src.reserve(reserve);
    edges.dst.reserve(reserve);
    const bool valued = banner.field != Field::pattern;
    if (valued) {
        edges.weights.reserve(reserve);
    }
    const int wanted = valued ? 3 : 2;
    const char* entry_form = valued ? "'row col value'" : "'row col'";

    std::int64_t count = 0;
    while (lines.next(line)) {
        if (blank_or_comment(line)) {
            continue;
        }
        const auto ln = lines.line_number();
        if (count == entries) {
            HALO_INPUT_ERROR_AT(name, ln, "more entries than the ", entries,
                                " declared on the size line (line ", size_line, ")");
        }
        Fields entry(line);
        std::string_view t[3];
        int found = 0;
        while (found < wanted && entry.next(t[found])) {
            ++found;
        }
        if (found < wanted) {
            if (valued && found == 2) {
                HALO_INPUT_ERROR_AT(name, ln, "missing value: a ",
                                    banner.field == Field::real ? "real" : "integer",
                                    " matrix needs 'row col value' on every entry line");
            }
            HALO_INPUT_ERROR_AT(name, ln, "truncated entry ", quote(io_detail::trim_left(line)),
                                ", expected ", entry_form);
        }
        if (entry.next(extra)) {
            HALO_INPUT_ERROR_AT(
                name, ln, "unexpected ", quote(extra), " after the entry, expected ", entry_form,
                banner.field == Field::pattern ? " (the banner says 'pattern': no values)" : "");
        }
        const auto i = index_field(t[0], n, name, ln, "row index");
        const auto j = index_field(t[1], n, name, ln, "column index");
        float value = 1.0f;
        if (banner.field == Field::real) {
            value = io_detail::float_field(t[2], name, ln, "value");
        } else if (banner.field == Field::integer) {
            value = static_cast<float>(int_field(t[2], name, ln, "integer value"));
        }
        edges.src.push_back(i);
        edges.dst.push_back(j);
        if (valued) {
            edges.weights.push_back(value);
        }
        // A symmetric file stores one triangle; its off-diagonal entries stand for both halves.
        if (banner.symmetric && i != j) {
            edges.src.push_back(j);
            edges.dst.push_back(i);
            if (valued) {
                edges.weights.push_back(value);
            }
        }
        ++count;
    }
    if (count < entries) {
        HALO_INPUT_ERROR_AT(name, lines.line_number(), "the file ends after ", count, " of the ",
                            entries, " entries declared on the size line (line ", size_line, ")");
    }
    return edges;
}

}  // namespace

EdgeList read_matrix_market(const std::filesystem::path& path, const GraphReadOptions& options)
{
    const auto text = io_detail::read_text(path);
    return parse_matrix_market(text, path.string(), options);
}

}  // namespace halo
