// SNAP-style edge lists: "src dst" or "src dst weight" per line, '#'/'%' comments, any whitespace.
//
// The whole (decompressed) file is scanned in memory line by line with std::from_chars; a 3M-line
// list parses in well under a second, where iostream extraction per token takes several.
#include <algorithm>
#include <fstream>
#include <limits>
#include <utility>

#include "halo/core/io.hpp"
#include "io_detail.hpp"

namespace halo {
namespace {

using io_detail::Fields;
using io_detail::int_field;
using io_detail::quote;

// Where the node count that ids are checked against came from, for messages.
struct NodeBound {
    std::int64_t value = -1;  // -1: none (ids only need to be non-negative)
    std::string origin;
};

// Reads "Nodes: N" from a SNAP header comment ("# Nodes: 7115 Edges: 103689"). Returns -1 when
// the comment says nothing about nodes.
std::int64_t header_node_count(std::string_view line, const std::string& name, std::int64_t ln)
{
    line = io_detail::trim_left(line);
    while (!line.empty() && (line.front() == '#' || line.front() == '%')) {
        line.remove_prefix(1);
    }
    Fields fields(line);
    std::string_view key;
    while (fields.next(key)) {
        if (!io_detail::iequals(key, "nodes:")) {
            continue;
        }
        std::string_view value;
        if (!fields.next(value)) {
            HALO_INPUT_ERROR_AT(name, ln, "header comment gives 'Nodes:' without a count");
        }
        const auto n = int_field(value, name, ln, "node count in the header");
        if (n < 0) {
            HALO_INPUT_ERROR_AT(name, ln, "node count ", quote(value),
                                " in the header is negative");
        }
        return n;
    }
    return -1;
}

[[noreturn]] void throw_id_error(const std::string& name, std::int64_t ln, const char* which,
                                 std::string_view token, const NodeBound& bound)
{
    if (!token.empty() && token.front() == '-') {
        HALO_INPUT_ERROR_AT(name, ln, which, " ", quote(token),
                            " is negative (node ids are 0-based and non-negative)");
    }
    if (bound.value < 0) {
        HALO_INPUT_ERROR_AT(name, ln, which, " ", quote(token),
                            " is too large (node ids must stay below 2^63-1)");
    }
    HALO_INPUT_ERROR_AT(name, ln, which, " ", quote(token), " is not below the node count ",
                        bound.value, " ", bound.origin);
}

EdgeList parse_edge_list(std::string_view text, const std::string& name,
                         const GraphReadOptions& options, bool allow_empty = false)
{
    if (options.num_nodes < -1) {
        HALO_THROW(InputError, name, ": the requested node count ", options.num_nodes,
                   " is negative");
    }
    NodeBound bound;
    if (options.num_nodes >= 0) {
        bound = {options.num_nodes, "given for this graph"};
    }

    // One pass over the bytes to size the arrays is cheaper than their regrowth.
    const auto line_estimate = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
    EdgeList edges;
    edges.src.reserve(line_estimate + 1);
    edges.dst.reserve(line_estimate + 1);

    io_detail::LineReader lines(text);
    ProgressMeter meter(options.progress, "parsing " + name, static_cast<double>(text.size()) / 1e9);
    std::string_view line;
    int columns = 0;  // 2 or 3, fixed by the first edge line
    std::int64_t first_edge_line = 0;
    std::int64_t max_id = -1;
    while (lines.next(line)) {
        Fields fields(line);
        std::string_view a;
        if (!fields.next(a)) {
            continue;  // blank
        }
        const auto ln = lines.line_number();
        if ((ln & 0xfffff) == 0) {  // a clock read per 2^20 lines: nothing next to the parse
            meter.set(static_cast<double>(lines.offset()));
        }
        if (a.front() == '#' || a.front() == '%') {
            if (columns == 0 && bound.value < 0) {
                const auto n = header_node_count(line, name, ln);
                if (n >= 0) {
                    bound = {n, "declared by the header on line " + std::to_string(ln)};
                }
            }
            continue;
        }
        std::string_view b;
        std::string_view c;
        std::string_view extra;
        if (!fields.next(b)) {
            HALO_INPUT_ERROR_AT(name, ln, "truncated line: found 1 field (", quote(a),
                                "), expected 'src dst' or 'src dst weight'");
        }
        const bool weighted = fields.next(c);
        if (weighted && fields.next(extra)) {
            HALO_INPUT_ERROR_AT(name, ln, "found ", 4 + fields.count_rest(),
                                " fields, expected 'src dst' or 'src dst weight' (extra field ",
                                quote(extra), ")");
        }
        const int cols = weighted ? 3 : 2;
        if (columns == 0) {
            columns = cols;
            first_edge_line = ln;
            if (weighted) {
                edges.weights.reserve(line_estimate + 1);
            }
        } else if (cols != columns) {
            HALO_INPUT_ERROR_AT(name, ln, "found ", cols, " columns but line ", first_edge_line,
                                " has ", columns,
                                " (every edge line must have the same column count)");
        }
        // Without a bound, ids stay below INT64_MAX so that max_id + 1 cannot overflow.
        const auto limit =
            bound.value >= 0 ? bound.value : std::numeric_limits<std::int64_t>::max();
        const auto s = int_field(a, name, ln, "source id");
        const auto d = int_field(b, name, ln, "target id");
        if (s < 0 || s >= limit) {
            throw_id_error(name, ln, "source id", a, bound);
        }
        if (d < 0 || d >= limit) {
            throw_id_error(name, ln, "target id", b, bound);
        }
        max_id = std::max({max_id, s, d});
        edges.src.push_back(s);
        edges.dst.push_back(d);
        if (weighted) {
            edges.weights.push_back(io_detail::float_field(c, name, ln, "weight"));
        }
    }
    if (columns == 0 && bound.value < 0 && !allow_empty) {
        if (text.empty()) {
            HALO_THROW(InputError, name, ": the file is empty (expected 'src dst' lines)");
        }
        HALO_THROW(InputError, name, ": no edges (", lines.line_number(),
                   " lines of comments or blanks) and no node count given");
    }
    // A bound from the header or the caller was checked per id; it may exceed max_id + 1
    // (isolated nodes at the end).
    edges.num_nodes = bound.value >= 0 ? bound.value : max_id + 1;
    return edges;
}

// The node count of a SNAP header among the comment lines that open the text (-1: none).
std::int64_t leading_header_node_count(std::string_view text, const std::string& name)
{
    const auto last_newline = text.rfind('\n');
    text =
        last_newline == std::string_view::npos ? std::string_view{} : text.substr(0, last_newline);
    io_detail::LineReader lines(text);
    std::string_view line;
    while (lines.next(line)) {
        const auto trimmed = io_detail::trim_left(line);
        if (trimmed.empty()) {
            continue;
        }
        if (trimmed.front() != '#' && trimmed.front() != '%') {
            break;
        }
        const auto n = header_node_count(line, name, lines.line_number());
        if (n >= 0) {
            return n;
        }
    }
    return -1;
}

// [first, last) of the lines that start in the byte range [begin, end) of `text`, where `text`
// holds the file's bytes from offset `base` on (it covers begin - 1 when begin > 0).
std::pair<std::size_t, std::size_t> line_range(std::string_view text, std::size_t base,
                                               std::size_t begin, std::size_t end)
{
    auto at = [&](std::size_t offset) { return text[offset - base]; };
    auto after_newline = [&](std::size_t offset) {
        // First line start at or after `offset`.
        if (offset == 0 || at(offset - 1) == '\n') {
            return offset;
        }
        const auto nl = text.find('\n', offset - base);
        return nl == std::string_view::npos ? base + text.size() : base + nl + 1;
    };
    const auto first = after_newline(begin);
    const auto last = after_newline(end);
    return {first, std::max(first, last)};
}

}  // namespace

EdgeList read_edge_list_slice(const std::filesystem::path& path, int slice, int num_slices,
                              const GraphReadOptions& options)
{
    HALO_EXPECTS(num_slices >= 1 && slice >= 0 && slice < num_slices, "slice ", slice, " of ",
                 num_slices);
    const auto name = path.string();
    auto prefix = io_detail::read_file_prefix(path, std::size_t{1} << 16);
    const bool gzipped = io_detail::has_gzip_magic(prefix);
    if (gzipped) {
        prefix = io_detail::gunzip_prefix(prefix, std::size_t{1} << 16);
    }
    GraphReadOptions slice_options = options;
    if (slice_options.num_nodes < 0) {
        slice_options.num_nodes = leading_header_node_count(prefix, name);
    }
    const auto where =
        name + " (slice " + std::to_string(slice) + " of " + std::to_string(num_slices) + ")";
    std::string text;
    std::size_t base = 0;
    std::size_t size = 0;
    if (gzipped) {
        // A gzip stream cannot be entered in the middle: every rank inflates it and keeps its
        // range of the text.
        text = io_detail::read_text(path);
        size = text.size();
    } else {
        size = static_cast<std::size_t>(std::filesystem::file_size(path));
    }
    const auto begin = static_cast<std::size_t>(size * static_cast<std::size_t>(slice) /
                                                static_cast<std::size_t>(num_slices));
    const auto end = static_cast<std::size_t>(size * static_cast<std::size_t>(slice + 1) /
                                              static_cast<std::size_t>(num_slices));
    if (!gzipped) {
        // Read [begin - 1, end) and then on to the end of the line that crosses `end`.
        base = begin > 0 ? begin - 1 : 0;
        std::ifstream in(path, std::ios::binary);
        if (!in) {
            HALO_THROW(IoError, name, ": cannot open for reading");
        }
        in.seekg(static_cast<std::streamoff>(base));
        text.resize(end - base);
        in.read(text.data(), static_cast<std::streamsize>(text.size()));
        if (static_cast<std::size_t>(in.gcount()) != text.size()) {
            HALO_THROW(IoError, name, ": short read at byte ", base);
        }
        std::string tail(std::size_t{1} << 16, '\0');
        while (end > 0 && !text.empty() && text.back() != '\n' && base + text.size() < size) {
            in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
            const auto got = static_cast<std::size_t>(in.gcount());
            if (got == 0) {
                break;
            }
            const auto nl = std::string_view(tail.data(), got).find('\n');
            text.append(tail.data(), nl == std::string_view::npos ? got : nl + 1);
            if (nl != std::string_view::npos) {
                break;
            }
        }
    }
    const auto [first, last] = line_range(text, base, begin, end);
    const std::string_view mine(text.data() + (first - base), last - first);
    auto edges = parse_edge_list(mine, where, slice_options, true);
    if (edges.src.empty() && slice_options.num_nodes < 0) {
        edges.num_nodes = 0;
    }
    return edges;
}

namespace {

}  // namespace

EdgeList read_edge_list(const std::filesystem::path& path, const GraphReadOptions& options)
{
    const auto text = io_detail::read_text(path);
    return parse_edge_list(text, path.string(), options);
}

}  // namespace halo
