// Every edge list in ../shared/data/MANIFEST.tsv reads with the statistics the manifest records,
// and the Planetoid node data (features, labels, test split) loads with the right shapes.
//
// The manifest's columns, as the files bear out (each row was checked against a direct count):
//   nodes                   the graph's node count; the reader infers the largest id + 1, which
//                           the README allows to fall short of it (isolated trailing nodes), so
//                           the inferred count must not exceed it and the CSR is built with it
//   edges_in_file           number of edge lines
//   self_loops              number of lines "i i"
//   max_out_degree          most lines with the same source id (a self-loop counts once)
//   nnz_symmetrized         nonzeros of A | A^T: build_csr with symmetrize, self-loops kept, each
//                           diagonal entry counted once
//   max_degree_symmetrized  largest row nonzero count of that CSR (its self-loop included)
//   symmetric_in_file       "yes" exactly when A == A^T, i.e. nnz_symmetrized == edges_in_file
//                           (the files hold no duplicate lines)
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo_test.hpp"

namespace {

using Row = std::map<std::string, std::string>;

std::vector<Row> read_manifest(const std::filesystem::path& path)
{
    std::ifstream in(path);
    std::string line;
    std::vector<std::string> columns;
    std::vector<Row> rows;
    while (std::getline(in, line)) {
        std::vector<std::string> fields;
        std::istringstream split(line);
        std::string field;
        while (std::getline(split, field, '\t')) {
            fields.push_back(field);
        }
        if (columns.empty()) {
            columns = fields;
            continue;
        }
        Row row;
        for (std::size_t k = 0; k < columns.size() && k < fields.size(); ++k) {
            row[columns[k]] = fields[k];
        }
        rows.push_back(row);
    }
    return rows;
}

std::int64_t number(const Row& row, const std::string& column)
{
    const auto it = row.find(column);
    if (it == row.end()) {
        ADD_FAILURE() << "MANIFEST row lacks column " << column;
        return -1;
    }
    return std::stoll(it->second);
}

bool ends_with(const std::string& text, const std::string& suffix)
{
    return text.size() >= suffix.size() &&
           text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST(SharedGraphs, EdgeListsMatchTheManifest)
{
    HALO_REQUIRE_SHARED_FILE(manifest, "MANIFEST.tsv");
    int graphs = 0;
    for (const auto& row : read_manifest(manifest)) {
        const auto& file = row.at("file");
        if (!ends_with(file, ".el.gz")) {
            continue;
        }
        SCOPED_TRACE(file);
        const auto path = halo::testing::shared_data_file(file);
        ASSERT_FALSE(path.empty()) << file << " is listed in MANIFEST.tsv but absent";
        ++graphs;

        EXPECT_EQ(halo::detect_graph_format(path), halo::GraphFormat::edge_list);
        const auto start = std::chrono::steady_clock::now();
        auto edges = halo::read_edge_list(path);
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        std::cout << "[ read     ] " << file << ": " << edges.num_edges() << " edges in "
                  << took.count() << " s\n";

        const auto nodes = number(row, "nodes");
        EXPECT_LE(edges.num_nodes, nodes);
        edges.num_nodes = nodes;
        EXPECT_EQ(edges.num_edges(), number(row, "edges_in_file"));
        EXPECT_FALSE(edges.has_weights());

        std::int64_t self_loops = 0;
        std::vector<std::int64_t> out_degree(static_cast<std::size_t>(nodes), 0);
        for (std::int64_t e = 0; e < edges.num_edges(); ++e) {
            self_loops += edges.src[e] == edges.dst[e] ? 1 : 0;
            ++out_degree[static_cast<std::size_t>(edges.src[e])];
        }
        EXPECT_EQ(self_loops, number(row, "self_loops"));
        EXPECT_EQ(*std::max_element(out_degree.begin(), out_degree.end()),
                  number(row, "max_out_degree"));

        halo::BuildOptions options;
        options.symmetrize = true;
        options.self_loops = halo::SelfLoops::keep;
        const auto csr = halo::build_csr(edges, options);
        EXPECT_EQ(csr.nnz(), number(row, "nnz_symmetrized"));
        EXPECT_EQ(halo::max_row_nnz(csr.view()), number(row, "max_degree_symmetrized"));
        EXPECT_EQ(halo::count_diagonal(csr.view()), number(row, "self_loops"));
        EXPECT_EQ(row.at("symmetric_in_file") == "yes", csr.nnz() == edges.num_edges());
    }
    EXPECT_GT(graphs, 0) << "MANIFEST.tsv lists no .el.gz file";
}

// The "# N F NNZ" first line of a gzip COO feature file, read with zlib directly so that the
// expected shape does not come from the reader under test.
std::vector<std::int64_t> coo_header(const std::filesystem::path& path)
{
    gzFile file = gzopen(path.c_str(), "rb");
    char line[256] = {};
    const bool ok = file != nullptr && gzgets(file, line, sizeof line) != nullptr;
    if (file != nullptr) {
        gzclose(file);
    }
    std::istringstream in(ok ? line : "");
    std::string hash;
    std::vector<std::int64_t> sizes(3, -1);
    in >> hash >> sizes[0] >> sizes[1] >> sizes[2];
    return sizes;
}

TEST(SharedGraphs, PlanetoidFeaturesLabelsAndSplits)
{
    HALO_REQUIRE_SHARED_FILE(manifest, "MANIFEST.tsv");
    std::map<std::string, std::int64_t> nodes;
    for (const auto& row : read_manifest(manifest)) {
        nodes[row.at("file")] = number(row, "nodes");
    }
    for (const std::string name : {"cora", "citeseer", "pubmed"}) {
        SCOPED_TRACE(name);
        ASSERT_EQ(nodes.count(name + ".el.gz"), 1u) << "MANIFEST.tsv lacks " << name;
        const auto n = nodes[name + ".el.gz"];

        HALO_REQUIRE_SHARED_FILE(labels_path, name + ".labels.txt.gz");
        const auto labels = halo::read_labels(labels_path);
        EXPECT_EQ(static_cast<std::int64_t>(labels.size()), n);
        EXPECT_GE(*std::min_element(labels.begin(), labels.end()), halo::no_label);
        EXPECT_GE(*std::max_element(labels.begin(), labels.end()), 1);

        // The standard split's 1000 test nodes (README.md).
        HALO_REQUIRE_SHARED_FILE(split_path, name + ".test_index.txt.gz");
        const auto test_ids = halo::read_index_list(split_path, n);
        EXPECT_EQ(test_ids.size(), 1000u);

        const auto feature_path = halo::testing::shared_data_file(name + ".feat.coo.txt.gz");
        if (feature_path.empty()) {
            continue;  // pubmed ships no features
        }
        const auto header = coo_header(feature_path);
        const auto x = halo::read_features(feature_path);
        EXPECT_EQ(x.rows, n);
        EXPECT_EQ(x.rows, header[0]);
        EXPECT_EQ(x.cols, header[1]);
        // Bag-of-words: every listed entry is a distinct 1, so there are NNZ ones and no other
        // nonzero.
        const auto nonzeros =
            std::count_if(x.values.begin(), x.values.end(), [](float v) { return v != 0.0f; });
        EXPECT_EQ(std::count(x.values.begin(), x.values.end(), 1.0f), nonzeros);
        EXPECT_EQ(nonzeros, header[2]);
    }
}

}  // namespace
