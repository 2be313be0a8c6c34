// What the readers accept and round trips through the writers: binary CSR and .npy write/read,
// edge lists with weights, tabs and CRLF, Matrix Market symmetric expansion, gzip equal to plain,
// format detection, COO features, labels and index lists.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo_test.hpp"
#include "io_bytes.hpp"
#include "io_test_util.hpp"

namespace {

halo::GraphReadOptions with_nodes(std::int64_t n)
{
    halo::GraphReadOptions options;
    options.num_nodes = n;
    return options;
}

namespace fs = std::filesystem;
using halo::testing::gzip;
using halo::testing::write_file;

void expect_same_edges(const halo::EdgeList& a, const halo::EdgeList& b)
{
    EXPECT_EQ(a.num_nodes, b.num_nodes);
    EXPECT_EQ(a.src, b.src);
    EXPECT_EQ(a.dst, b.dst);
    EXPECT_EQ(a.weights, b.weights);
}

void expect_same_csr(const halo::Csr& a, const halo::Csr& b)
{
    EXPECT_EQ(a.num_rows, b.num_rows);
    EXPECT_EQ(a.num_cols, b.num_cols);
    EXPECT_EQ(a.indptr, b.indptr);
    EXPECT_EQ(a.indices, b.indices);
    EXPECT_EQ(a.values, b.values);
}

// A random directed graph built into a CSR, weighted or not.
halo::Csr random_csr(std::int64_t n, std::int64_t m, bool weighted, std::uint64_t seed)
{
    const auto r = halo::testing::random_floats(static_cast<std::size_t>(3 * m), seed, 0.0f, 1.0f);
    halo::EdgeList edges;
    edges.num_nodes = n;
    for (std::int64_t e = 0; e < m; ++e) {
        edges.src.push_back(static_cast<std::int64_t>(r[3 * e] * static_cast<float>(n)) % n);
        edges.dst.push_back(static_cast<std::int64_t>(r[3 * e + 1] * static_cast<float>(n)) % n);
        if (weighted) {
            edges.weights.push_back(r[3 * e + 2] * 10.0f - 5.0f);
        }
    }
    halo::BuildOptions options;
    options.symmetrize = false;
    return halo::build_csr(edges, options);
}

// ---- binary CSR -------------------------------------------------------------------------------

TEST(BinaryCsr, PatternRoundTrip)
{
    const auto dir = halo::testing::scratch_dir("io-hcsr");
    const auto csr = random_csr(500, 3000, false, 1);
    ASSERT_FALSE(csr.has_values());
    halo::write_binary_csr(dir / "g.hcsr", csr);
    expect_same_csr(halo::read_binary_csr(dir / "g.hcsr"), csr);
    // Only the final file remains: the temporary one was renamed.
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST(BinaryCsr, ValuedRoundTrip)
{
    const auto dir = halo::testing::scratch_dir("io-hcsr");
    const auto csr = random_csr(300, 2000, true, 2);
    ASSERT_TRUE(csr.has_values());
    halo::write_binary_csr(dir / "g.hcsr", csr);
    const auto back = halo::read_binary_csr(dir / "g.hcsr");
    expect_same_csr(back, csr);
    EXPECT_EQ(fs::file_size(dir / "g.hcsr"), 40 + 8 * (300 + 1) + 8 * csr.nnz() + 4);
}

TEST(BinaryCsr, EmptyAndRectangularRoundTrip)
{
    const auto dir = halo::testing::scratch_dir("io-hcsr");
    halo::Csr empty;
    halo::write_binary_csr(dir / "empty.hcsr", empty);
    expect_same_csr(halo::read_binary_csr(dir / "empty.hcsr"), empty);

    halo::Csr rect;
    rect.num_rows = 2;
    rect.num_cols = 5;
    rect.indptr = {0, 2, 3};
    rect.indices = {1, 4, 0};
    rect.values = {0.5f, -1.0f, 2.0f};
    halo::write_binary_csr(dir / "rect.hcsr", rect);
    expect_same_csr(halo::read_binary_csr(dir / "rect.hcsr"), rect);
}

TEST(BinaryCsr, WriterProducesTheDocumentedBytes)
{
    const auto dir = halo::testing::scratch_dir("io-hcsr");
    halo::Csr csr;
    csr.num_rows = 3;
    csr.num_cols = 3;
    csr.indptr = {0, 2, 3, 4};
    csr.indices = {0, 2, 1, 0};
    csr.values = {1.f, 2.f, 3.f, 4.f};
    halo::write_binary_csr(dir / "g.hcsr", csr);
    EXPECT_EQ(halo::testing::read_bytes(dir / "g.hcsr"),
              halo::testing::hcsr_bytes(3, 3, csr.indptr, csr.indices, csr.values));
    csr.values.clear();
    halo::write_binary_csr(dir / "g.hcsr", csr);  // overwrites
    EXPECT_EQ(halo::testing::read_bytes(dir / "g.hcsr"),
              halo::testing::hcsr_bytes(3, 3, csr.indptr, csr.indices));
}

TEST(BinaryCsr, ReadGraphTurnsNonzerosIntoEdges)
{
    const auto dir = halo::testing::scratch_dir("io-hcsr");
    const auto csr = random_csr(50, 200, true, 3);
    halo::write_binary_csr(dir / "g.hcsr", csr);
    const auto edges = halo::read_graph(dir / "g.hcsr");
    halo::BuildOptions options;
    options.symmetrize = false;
    expect_same_csr(halo::build_csr(edges, options), csr);
}

// ---- .npy and raw features ---------------------------------------------------------------------

TEST(Npy, RoundTrip)
{
    const auto dir = halo::testing::scratch_dir("io-npy");
    halo::DenseMatrix m{7, 5, halo::testing::random_floats(35, 4)};
    halo::write_npy(dir / "x.npy", m);
    const auto back = halo::read_npy(dir / "x.npy");
    EXPECT_EQ(back.rows, 7);
    EXPECT_EQ(back.cols, 5);
    EXPECT_EQ(back.values, m.values);
    // Data starts 64-byte aligned, as NumPy writes it.
    EXPECT_EQ((fs::file_size(dir / "x.npy") - 35 * 4) % 64, 0u);
    EXPECT_EQ(halo::read_features(dir / "x.npy").values, m.values);

    halo::DenseMatrix none{0, 3, {}};
    halo::write_npy(dir / "none.npy", none);
    const auto empty = halo::read_npy(dir / "none.npy");
    EXPECT_EQ(empty.rows, 0);
    EXPECT_EQ(empty.cols, 3);
}

TEST(Npy, ReadsFloat64AndVersion2Headers)
{
    const auto dir = halo::testing::scratch_dir("io-npy");
    const std::vector<double> data = {0.5, -1.25, 3.0, 1e-3, 2.0, 7.0};
    write_file(dir / "d.npy",
               halo::testing::npy_bytes("<f8", "False", "(3, 2)", halo::testing::raw_bytes(data)));
    const auto m = halo::read_npy(dir / "d.npy");
    ASSERT_EQ(m.rows, 3);
    ASSERT_EQ(m.cols, 2);
    for (std::size_t k = 0; k < data.size(); ++k) {
        EXPECT_EQ(m.values[k], static_cast<float>(data[k]));
    }
    // Version 2.0: a 4-byte header length; a double-quoted dict with keys in another order.
    std::string header = "{\"shape\": (1, 2), \"fortran_order\": False, \"descr\": \"<f4\"}";
    header += std::string(64 - (12 + header.size() + 1) % 64, ' ') + "\n";
    std::string bytes("\x93NUMPY\x02\x00", 8);
    halo::testing::append_pod(bytes, static_cast<std::uint32_t>(header.size()));
    bytes += header + halo::testing::raw_bytes(std::vector<float>{4.0f, 8.0f});
    write_file(dir / "v2.npy", bytes);
    EXPECT_EQ(halo::read_npy(dir / "v2.npy").values, (std::vector<float>{4.0f, 8.0f}));
}

TEST(RawFeatures, ReadsRowsOfTheGivenWidth)
{
    const auto dir = halo::testing::scratch_dir("io-raw");
    const auto values = halo::testing::random_floats(12, 5);
    write_file(dir / "x.f32", halo::testing::raw_bytes(values));
    const auto m = halo::read_features(dir / "x.f32", 4);
    EXPECT_EQ(m.rows, 3);
    EXPECT_EQ(m.cols, 4);
    EXPECT_EQ(m.values, values);
    EXPECT_EQ(halo::read_raw_features(dir / "x.f32", 6).rows, 2);
}

// ---- edge lists ---------------------------------------------------------------------------------

TEST(EdgeList, WeightsTabsCommentsAndCrlf)
{
    const auto dir = halo::testing::scratch_dir("io-el");
    write_file(dir / "g.txt",
               "# a weighted graph\r\n% another comment style\r\n\r\n0\t1\t0.5\r\n"
               "  2 0   -1.5e2\r\n1 1 +3\r\n\t\r\n3 2 7\r\n");
    const auto e = halo::read_edge_list(dir / "g.txt");
    EXPECT_EQ(e.num_nodes, 4);
    EXPECT_EQ(e.src, (std::vector<halo::global_id>{0, 2, 1, 3}));
    EXPECT_EQ(e.dst, (std::vector<halo::global_id>{1, 0, 1, 2}));
    EXPECT_EQ(e.weights, (std::vector<float>{0.5f, -150.0f, 3.0f, 7.0f}));
}

TEST(EdgeList, NodeCountFromHeaderOrOption)
{
    const auto dir = halo::testing::scratch_dir("io-el");
    write_file(dir / "g.el", "# Directed graph: g\n# Nodes: 10 Edges: 2\n0 1\n1 2");
    const auto from_header = halo::read_edge_list(dir / "g.el");
    EXPECT_EQ(from_header.num_nodes, 10);  // isolated nodes 3..9
    EXPECT_FALSE(from_header.has_weights());
    EXPECT_EQ(from_header.num_edges(), 2);
    EXPECT_EQ(halo::read_edge_list(dir / "g.el", with_nodes(3)).num_nodes, 3);  // the option wins
    write_file(dir / "h.el", "0 1\n1 2\n");
    EXPECT_EQ(halo::read_edge_list(dir / "h.el").num_nodes, 3);
    EXPECT_EQ(halo::read_edge_list(dir / "h.el", with_nodes(8)).num_nodes, 8);
    // Comments only, with a node count: a graph without edges.
    write_file(dir / "i.el", "# Nodes: 4\n");
    EXPECT_EQ(halo::read_edge_list(dir / "i.el").num_nodes, 4);
    EXPECT_EQ(halo::read_edge_list(dir / "i.el").num_edges(), 0);
}

TEST(EdgeList, GzipAndPlainGiveTheSameGraph)
{
    const auto dir = halo::testing::scratch_dir("io-el");
    std::string text = "# Nodes: 1000\n";
    const auto r = halo::testing::random_floats(4000, 6, 0.0f, 1000.0f);
    for (std::size_t k = 0; k < r.size(); k += 2) {
        text += std::to_string(static_cast<int>(r[k])) + " " +
                std::to_string(static_cast<int>(r[k + 1])) + " " + std::to_string(r[k] / 7) + "\n";
    }
    write_file(dir / "g.el", text);
    // The extension does not matter: gzip is found by its magic bytes.
    write_file(dir / "g-compressed.el", gzip(text));
    // Concatenated gzip members read as one stream.
    const auto half = text.find('\n', text.size() / 2) + 1;
    write_file(dir / "g-members.el.gz", gzip(text.substr(0, half)) + gzip(text.substr(half)));
    const auto plain = halo::read_edge_list(dir / "g.el");
    EXPECT_EQ(plain.num_edges(), 2000);
    expect_same_edges(halo::read_edge_list(dir / "g-compressed.el"), plain);
    expect_same_edges(halo::read_edge_list(dir / "g-members.el.gz"), plain);
}

// ---- Matrix Market
// --------------------------------------------------------------------------------

TEST(MatrixMarket, SymmetricEntriesStandForBothDirections)
{
    const auto dir = halo::testing::scratch_dir("io-mm");
    write_file(dir / "s.mtx",
               "%%matrixmarket MATRIX Coordinate Real Symmetric\n% comment\n%\n4 4 4\n"
               "2 1 0.5\n3 3 2\n4 1 -1\n4 2 1e1\n");
    const auto e = halo::read_matrix_market(dir / "s.mtx");
    EXPECT_EQ(e.num_nodes, 4);
    EXPECT_EQ(e.src, (std::vector<halo::global_id>{1, 0, 2, 3, 0, 3, 1}));
    EXPECT_EQ(e.dst, (std::vector<halo::global_id>{0, 1, 2, 0, 3, 1, 3}));
    EXPECT_EQ(e.weights, (std::vector<float>{0.5f, 0.5f, 2.0f, -1.0f, -1.0f, 10.0f, 10.0f}));
    halo::BuildOptions options;
    options.symmetrize = false;
    const auto csr = halo::build_csr(e, options);
    EXPECT_EQ(csr.nnz(), 7);
}

TEST(MatrixMarket, PatternAndIntegerGeneral)
{
    const auto dir = halo::testing::scratch_dir("io-mm");
    write_file(dir / "p.mtx",
               "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 3\n\n3 2\n");
    const auto p = halo::read_matrix_market(dir / "p.mtx");
    EXPECT_EQ(p.num_nodes, 3);
    EXPECT_EQ(p.src, (std::vector<halo::global_id>{0, 2}));
    EXPECT_EQ(p.dst, (std::vector<halo::global_id>{2, 1}));
    EXPECT_FALSE(p.has_weights());
    write_file(dir / "i.mtx",
               "%%MatrixMarket matrix coordinate integer general\r\n2 2 1\r\n2 1 -7\r\n");
    const auto i = halo::read_matrix_market(dir / "i.mtx");
    EXPECT_EQ(i.weights, (std::vector<float>{-7.0f}));
    EXPECT_THROW(halo::read_matrix_market(dir / "i.mtx", with_nodes(5)), halo::InputError);
}

TEST(MatrixMarket, GzipAndPlainGiveTheSameGraph)
{
    const auto dir = halo::testing::scratch_dir("io-mm");
    const std::string text =
        "%%MatrixMarket matrix coordinate real symmetric\n5 5 4\n2 1 1\n3 2 2\n5 4 3\n5 5 4\n";
    write_file(dir / "g.mtx", text);
    write_file(dir / "g.mtx.gz", gzip(text));
    expect_same_edges(halo::read_matrix_market(dir / "g.mtx.gz"),
                      halo::read_matrix_market(dir / "g.mtx"));
    expect_same_edges(halo::read_graph(dir / "g.mtx.gz"), halo::read_matrix_market(dir / "g.mtx"));
}

// ---- format detection
// -----------------------------------------------------------------------------

TEST(DetectGraphFormat, ByContentThroughGzip)
{
    const auto dir = halo::testing::scratch_dir("io-detect");
    const std::string mm = "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n";
    write_file(dir / "a.txt", mm);
    write_file(dir / "b.el", gzip(mm));
    write_file(dir / "c.mtx", "0 1\n");
    write_file(dir / "d.mtx.gz", gzip("# comment\n0 1\n"));
    halo::Csr csr;
    halo::write_binary_csr(dir / "e.el", csr);
    EXPECT_EQ(halo::detect_graph_format(dir / "a.txt"), halo::GraphFormat::matrix_market);
    EXPECT_EQ(halo::detect_graph_format(dir / "b.el"), halo::GraphFormat::matrix_market);
    EXPECT_EQ(halo::detect_graph_format(dir / "c.mtx"), halo::GraphFormat::edge_list);
    EXPECT_EQ(halo::detect_graph_format(dir / "d.mtx.gz"), halo::GraphFormat::edge_list);
    EXPECT_EQ(halo::detect_graph_format(dir / "e.el"), halo::GraphFormat::binary_csr);
    EXPECT_EQ(halo::to_string(halo::GraphFormat::edge_list), "edge_list");
    EXPECT_EQ(halo::to_string(halo::GraphFormat::matrix_market), "matrix_market");
    EXPECT_EQ(halo::to_string(halo::GraphFormat::binary_csr), "binary_csr");
    EXPECT_EQ(halo::read_graph(dir / "c.mtx").num_edges(), 1);
}

// ---- COO features, labels, index lists
// ------------------------------------------------------------

TEST(CooFeatures, DenseMatrixWithDuplicatesAdded)
{
    const auto dir = halo::testing::scratch_dir("io-coo");
    const std::string text = "# 3 4 5\n0 1 1\n2 3 0.5\n% comment\n\n1 0 -2\n2 3 0.25\n0 0 1e-2\n";
    write_file(dir / "f.coo.txt", text);
    write_file(dir / "f.coo.txt.gz", gzip(text));
    const auto m = halo::read_features(dir / "f.coo.txt");
    EXPECT_EQ(m.rows, 3);
    EXPECT_EQ(m.cols, 4);
    EXPECT_EQ(m.values, (std::vector<float>{0.01f, 1, 0, 0, -2, 0, 0, 0, 0, 0, 0, 0.75f}));
    EXPECT_EQ(halo::read_features(dir / "f.coo.txt.gz").values, m.values);
    EXPECT_EQ(m.view()(2, 3), 0.75f);
}

TEST(Labels, LabelsAndIndexListsPlainOrGzip)
{
    const auto dir = halo::testing::scratch_dir("io-labels");
    write_file(dir / "l.txt", "3\n-1\n0\r\n2\n");
    write_file(dir / "l.txt.gz", gzip("3\n-1\n0\n2"));
    const std::vector<std::int32_t> expected = {3, halo::no_label, 0, 2};
    EXPECT_EQ(halo::read_labels(dir / "l.txt"), expected);
    EXPECT_EQ(halo::read_labels(dir / "l.txt.gz"), expected);
    write_file(dir / "i.txt.gz", gzip("# test split\n5\n0\n9\n"));
    EXPECT_EQ(halo::read_index_list(dir / "i.txt.gz", 10), (std::vector<halo::global_id>{5, 0, 9}));
}

TEST(Labels, PartFilesRoundTripAndReadGpmetisOutput)
{
    const auto dir = halo::testing::scratch_dir("io-part");
    const std::vector<std::int32_t> owner{2, 0, 1, 1, 0, 2, 2};
    halo::write_part_file(dir / "g.part.3", owner);
    EXPECT_EQ(halo::read_part_file(dir / "g.part.3", 7, 3), owner);
    // gpmetis's files: one id per line, nothing else; gzip, blank and comment lines are read too.
    write_file(dir / "g.part.gz", gzip("% from gpmetis\n1\n\n0\n1\n"));
    EXPECT_EQ(halo::read_part_file(dir / "g.part.gz", 3, 2), (std::vector<std::int32_t>{1, 0, 1}));
}

}  // namespace
