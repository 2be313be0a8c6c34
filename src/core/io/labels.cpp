// One-integer-per-line node data: class labels and node id lists (e.g. a test split).
#include <algorithm>
#include <limits>
#include <span>
#include <string>

#include "halo/core/io.hpp"
#include "io_detail.hpp"

namespace halo {
namespace {

// Calls visit(token, line) for the single field of every line that is neither blank nor a '#'/'%'
// comment; returns the number of such lines.
template <typename Visit>
std::int64_t for_each_value(std::string_view text, const std::string& name, const char* what,
                            Visit visit)
{
    io_detail::LineReader lines(text);
    std::string_view line;
    std::int64_t count = 0;
    while (lines.next(line)) {
        io_detail::Fields fields(line);
        std::string_view token;
        if (!fields.next(token) || token.front() == '#' || token.front() == '%') {
            continue;
        }
        std::string_view extra;
        if (fields.next(extra)) {
            HALO_INPUT_ERROR_AT(name, lines.line_number(), "unexpected ", io_detail::quote(extra),
                                " after the ", what, " (expected one ", what, " per line)");
        }
        visit(token, lines.line_number());
        ++count;
    }
    if (count == 0) {
        HALO_THROW(InputError, name, ": ",
                   text.empty() ? "the file is empty" : "the file holds no values",
                   " (expected one ", what, " per line)");
    }
    return count;
}

}  // namespace

std::vector<std::int32_t> read_labels(const std::filesystem::path& path)
{
    const auto name = path.string();
    const auto text = io_detail::read_text(path);
    std::vector<std::int32_t> labels;
    for_each_value(text, name, "label", [&](std::string_view token, std::int64_t ln) {
        const auto value = io_detail::int_field(token, name, ln, "label");
        if (value < no_label || value > std::numeric_limits<std::int32_t>::max()) {
            HALO_INPUT_ERROR_AT(name, ln, "label ", io_detail::quote(token),
                                " is outside [-1, 2^31-1] (-1 marks a node without a label)");
        }
        labels.push_back(static_cast<std::int32_t>(value));
    });
    return labels;
}

std::vector<global_id> read_index_list(const std::filesystem::path& path, std::int64_t num_nodes)
{
    const auto name = path.string();
    const auto text = io_detail::read_text(path);
    std::vector<global_id> ids;
    for_each_value(text, name, "node id", [&](std::string_view token, std::int64_t ln) {
        const auto value = io_detail::int_field(token, name, ln, "node id");
        if (value < 0) {
            HALO_INPUT_ERROR_AT(name, ln, "node id ", io_detail::quote(token), " is negative");
        }
        if (num_nodes >= 0 && value >= num_nodes) {
            HALO_INPUT_ERROR_AT(name, ln, "node id ", io_detail::quote(token),
                                " is not below the node count ", num_nodes);
        }
        ids.push_back(value);
    });
    return ids;
}

std::vector<std::int32_t> read_part_file(const std::filesystem::path& path, std::int64_t num_nodes,
                                         int num_parts)
{
    const auto name = path.string();
    HALO_EXPECTS(num_parts >= 1, "read_part_file needs at least one part, got ", num_parts);
    const auto text = io_detail::read_text(path);
    std::vector<std::int32_t> owner;
    owner.reserve(static_cast<std::size_t>(std::max<std::int64_t>(num_nodes, 0)));
    std::vector<std::int64_t> owned(static_cast<std::size_t>(num_parts), 0);
    const auto count = for_each_value(text, name, "part id", [&](std::string_view token,
                                                                 std::int64_t ln) {
        const auto value = io_detail::int_field(token, name, ln, "part id");
        if (value < 0 || value >= num_parts) {
            HALO_INPUT_ERROR_AT(name, ln, "part id ", io_detail::quote(token), " of node ",
                                owner.size(), " is outside [0, ", num_parts, ") (--parts ",
                                num_parts, ")");
        }
        if (static_cast<std::int64_t>(owner.size()) == num_nodes) {
            HALO_INPUT_ERROR_AT(name, ln, "more part ids than the graph's ", num_nodes,
                                " nodes (one line per node, in node order)");
        }
        owner.push_back(static_cast<std::int32_t>(value));
        ++owned[static_cast<std::size_t>(value)];
    });
    if (count != num_nodes) {
        HALO_THROW(InputError, name, ": ", count, " part ids, but the graph has ", num_nodes,
                   " nodes (one line per node, in node order)");
    }
    for (int p = 0; p < num_parts; ++p) {
        if (owned[static_cast<std::size_t>(p)] == 0) {
            HALO_THROW(InputError, name, ": part ", p, " of ", num_parts,
                       " owns no node (every part becomes a rank's shard and must be non-empty)");
        }
    }
    return owner;
}

void write_part_file(const std::filesystem::path& path, std::span<const std::int32_t> owner)
{
    std::string text;
    text.reserve(owner.size() * 2);
    for (const auto part : owner) {
        text += std::to_string(part);
        text += '\n';
    }
    write_file_atomic(path, text);
}

}  // namespace halo
