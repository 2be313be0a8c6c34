// Telling the graph formats apart by content, and reading any of them as an edge list.
#include <algorithm>
#include <array>
#include <cstring>

#include "halo/core/enum_names.hpp"
#include "halo/core/io.hpp"
#include "io_detail.hpp"

namespace halo {
namespace {

// Enough of the file to see past a gzip header and a byte-order mark.
constexpr std::size_t sniff_bytes = 4096;

}  // namespace

std::string to_string(GraphFormat format)
{
    static constexpr std::array<EnumName<GraphFormat>, 3> names{
        {{GraphFormat::edge_list, "edge_list"},
         {GraphFormat::matrix_market, "matrix_market"},
         {GraphFormat::binary_csr, "binary_csr"}}};
    return std::string(enum_name(names, format));
}

GraphFormat detect_graph_format(const std::filesystem::path& path)
{
    auto head = io_detail::read_file_prefix(path, sniff_bytes);
    if (io_detail::has_gzip_magic(head)) {
        head = io_detail::gunzip_prefix(head, 64);
    }
    if (head.size() >= 8 && std::memcmp(head.data(), "HALOCSR\0", 8) == 0) {
        return GraphFormat::binary_csr;
    }
    const auto text = io_detail::trim_left(head);
    constexpr std::string_view banner = "%%MatrixMarket";
    if (text.size() >= banner.size() && io_detail::iequals(text.substr(0, banner.size()), banner)) {
        return GraphFormat::matrix_market;
    }
    return GraphFormat::edge_list;
}

EdgeList read_graph(const std::filesystem::path& path, const GraphReadOptions& options)
{
    switch (detect_graph_format(path)) {
        case GraphFormat::edge_list:
            return read_edge_list(path, options);
        case GraphFormat::matrix_market:
            return read_matrix_market(path, options);
        case GraphFormat::binary_csr:
            break;
    }
    const auto csr = read_binary_csr(path);
    const auto name = path.string();
    if (csr.num_rows != csr.num_cols) {
        HALO_THROW(InputError, name, ": the matrix is ", csr.num_rows, " x ", csr.num_cols,
                   ", not square; a graph adjacency must be square");
    }
    if (options.num_nodes >= 0 && options.num_nodes != csr.num_rows) {
        HALO_THROW(InputError, name, ": the matrix has ", csr.num_rows,
                   " rows but the graph was given ", options.num_nodes, " nodes");
    }
    EdgeList edges;
    edges.num_nodes = csr.num_rows;
    edges.src.resize(csr.indices.size());
    edges.dst.assign(csr.indices.begin(), csr.indices.end());
    for (std::int64_t i = 0; i < csr.num_rows; ++i) {
        std::fill(edges.src.begin() + csr.indptr[i], edges.src.begin() + csr.indptr[i + 1], i);
    }
    edges.weights = csr.values;
    return edges;
}

}  // namespace halo
