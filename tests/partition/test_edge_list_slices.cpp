// Edge list slices for distributed reading (io.hpp, read_edge_list_slice): every line in exactly
// one slice whatever the slice count, lines cut by a slice boundary read whole once, empty slices
// (more slices than lines) allowed, and the SNAP header's node count seen by every slice.
#include <fstream>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/io.hpp"
#include "halo_test.hpp"

namespace {

halo::EdgeList concat_slices(const std::filesystem::path& path, int slices)
{
    halo::EdgeList all;
    for (int s = 0; s < slices; ++s) {
        const auto part = halo::read_edge_list_slice(path, s, slices);
        all.num_nodes = std::max(all.num_nodes, part.num_nodes);
        all.src.insert(all.src.end(), part.src.begin(), part.src.end());
        all.dst.insert(all.dst.end(), part.dst.begin(), part.dst.end());
        all.weights.insert(all.weights.end(), part.weights.begin(), part.weights.end());
    }
    return all;
}

void expect_same(const halo::EdgeList& a, const halo::EdgeList& b, const std::string& what)
{
    EXPECT_EQ(a.num_nodes, b.num_nodes) << what;
    EXPECT_EQ(a.src, b.src) << what;
    EXPECT_EQ(a.dst, b.dst) << what;
    EXPECT_EQ(a.weights, b.weights) << what;
}

}  // namespace

TEST(EdgeListSlices, EveryLineOnceForAnySliceCount)
{
    const auto dir = halo::testing::scratch_dir("slices");
    for (const std::string& text :
         {std::string("# Nodes: 40\n0 1 0.5\n% c\n\n12   13 2\n7\t8 1.25\n39 0 3\n"),
          std::string("5 6\n100000 2\n3 4"),  // no final newline
          std::string("1 2\r\n3 4\r\n"), std::string("# only a comment\n0 0\n")}) {
        const auto path = dir / "g.el";
        {
            std::ofstream out(path, std::ios::binary);
            out << text;
        }
        const auto whole = halo::read_edge_list(path);
        for (int slices = 1; slices <= static_cast<int>(text.size()) + 3; ++slices) {
            expect_same(concat_slices(path, slices), whole,
                        "'" + text + "' in " + std::to_string(slices) + " slices");
        }
    }
}

TEST(EdgeListSlices, EmptySliceHasNoEdges)
{
    const auto dir = halo::testing::scratch_dir("slices_empty");
    const auto path = dir / "g.el";
    {
        std::ofstream out(path);
        out << "0 1\n";
    }
    const auto last = halo::read_edge_list_slice(path, 5, 6);
    EXPECT_EQ(last.num_edges(), 0);
    EXPECT_EQ(last.num_nodes, 0);
    EXPECT_THROW(halo::read_edge_list_slice(path, 6, 6), halo::Error);
}

TEST(EdgeListSlices, GzipSlicesOfASharedGraph)
{
    HALO_REQUIRE_SHARED_FILE(path, "cora.el.gz");
    const auto whole = halo::read_edge_list(path);
    for (const int slices : {1, 2, 3, 7}) {
        expect_same(concat_slices(path, slices), whole, std::to_string(slices) + " slices");
    }
}

TEST(EdgeListSlices, BadLineNamesTheSlice)
{
    const auto dir = halo::testing::scratch_dir("slices_bad");
    const auto path = dir / "g.el";
    {
        std::ofstream out(path);
        out << "0 1\n2 x\n";
    }
    try {
        (void)halo::read_edge_list_slice(path, 1, 2);
        FAIL() << "no error";
    } catch (const halo::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("slice 1 of 2"), std::string::npos) << e.what();
    }
}
