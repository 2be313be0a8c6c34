// Malformed inputs: each case writes a bad file, runs a reader and checks that the InputError
// message starts with "<file>:<line>: " (or "<file>: " where no line applies) and says what is
// wrong, quoting the offending token.
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/io.hpp"
#include "halo_test.hpp"
#include "io_bytes.hpp"
#include "io_test_util.hpp"

namespace {

namespace fs = std::filesystem;
using Reader = std::function<void(const fs::path&)>;

struct BadInput {
    std::string name;                    // gtest name
    std::string file;                    // file name in the scratch directory
    std::function<std::string()> bytes;  // the file's content
    Reader read;
    std::int64_t line;   // line the message must name; 0: none ("<file>: ")
    std::string expect;  // text the message must contain
};

std::function<std::string()> text(std::string content)
{
    return [content] { return content; };
}

std::function<std::string()> gzipped(std::string content)
{
    return [content] { return halo::testing::gzip(content); };
}

const Reader edge_list = [](const fs::path& p) { halo::read_edge_list(p); };
const Reader matrix_market = [](const fs::path& p) { halo::read_matrix_market(p); };
const Reader binary_csr = [](const fs::path& p) { halo::read_binary_csr(p); };
const Reader npy = [](const fs::path& p) { halo::read_npy(p); };
const Reader coo = [](const fs::path& p) { halo::read_coo_features(p); };
const Reader labels = [](const fs::path& p) { halo::read_labels(p); };

Reader edge_list_with_nodes(std::int64_t n)
{
    return [n](const fs::path& p) {
        halo::GraphReadOptions options;
        options.num_nodes = n;
        halo::read_edge_list(p, options);
    };
}

// A valid 3 x 3 binary CSR with values, for the cases that damage one part of it.
std::string good_hcsr()
{
    return halo::testing::hcsr_bytes(3, 3, {0, 2, 3, 4}, {0, 2, 1, 0}, {1.f, 2.f, 3.f, 4.f});
}

std::string big_text(std::size_t lines)
{
    std::string s;
    for (std::size_t i = 0; i < lines; ++i) {
        s += std::to_string(i) + " " + std::to_string((i * 7919) % lines) + "\n";
    }
    return s;
}

std::vector<BadInput> cases()
{
    using halo::testing::hcsr_bytes;
    using halo::testing::npy_bytes;
    using halo::testing::raw_bytes;
    std::vector<BadInput> c;
    // ---- edge lists
    c.push_back({"EdgeListTruncatedLine", "g.el", text("0 1\n2\n"), edge_list, 2,
                 "truncated line: found 1 field ('2')"});
    c.push_back({"EdgeListIdNotBelowGivenCount", "g.el", text("0 1\n1 3\n"),
                 edge_list_with_nodes(3), 2,
                 "target id '3' is not below the node count 3 given for this graph"});
    c.push_back({"EdgeListIdNotBelowHeaderCount", "g.el",
                 text("# Directed graph\n# Nodes: 4 Edges: 2\n0 1\n7 2\n"), edge_list, 4,
                 "source id '7' is not below the node count 4 declared by the header on line 2"});
    c.push_back({"EdgeListNegativeId", "g.el", text("0 1\n-4 2\n"), edge_list, 2,
                 "source id '-4' is negative"});
    c.push_back({"EdgeListNonNumericToken", "g.el", text("0 1\n1 x7\n"), edge_list, 2,
                 "target id 'x7' is not an integer"});
    c.push_back({"EdgeListTrailingJunkInToken", "g.el", text("0 1\n1 2.5\n"), edge_list, 2,
                 "target id '2.5' is not an integer"});
    c.push_back({"EdgeListOverflowingId", "g.el", text("99999999999999999999 1\n"), edge_list, 1,
                 "source id '99999999999999999999' is out of range"});
    c.push_back({"EdgeListEmptyFile", "g.el", text(""), edge_list, 0, "the file is empty"});
    c.push_back({"EdgeListOnlyComments", "g.el", text("# nothing here\n\n% at all\n"), edge_list, 0,
                 "no edges (3 lines of comments or blanks)"});
    c.push_back({"EdgeListMixedColumnCounts", "g.el", text("0 1 0.5\n1 2 1.5\n2 0\n"), edge_list, 3,
                 "found 2 columns but line 1 has 3"});
    c.push_back({"EdgeListTooManyFields", "g.el", text("0 1 2 3 4\n"), edge_list, 1,
                 "found 5 fields, expected 'src dst' or 'src dst weight' (extra field '3')"});
    c.push_back({"EdgeListNanWeight", "g.el", text("0 1 1.0\n1 0 nan\n"), edge_list, 2,
                 "weight 'nan' is not a finite number"});
    c.push_back({"EdgeListWeightOutOfFloatRange", "g.el", text("0 1 1e39\n"), edge_list, 1,
                 "weight '1e39' is out of the float32 range"});
    c.push_back({"EdgeListBinaryJunk", "g.el", text(std::string("0 1\n\x01\x02\0\xff 1\n", 11)),
                 edge_list, 2, "source id '\\x01\\x02\\x00\\xff' is not an integer"});
    c.push_back({"EdgeListTenMegabyteLine", "g.el",
                 [] { return "0 1\n" + std::string(10'000'000, '7') + " 1\n"; }, edge_list, 2,
                 "is out of range"});
    c.push_back({"EdgeListTenMegabyteLineIsQuotedShort", "g.el",
                 [] { return std::string(10'000'000, 'z') + "\n"; }, edge_list, 1,
                 "truncated line: found 1 field ('" + std::string(40, 'z') +
                     "'... (10000000 characters))"});
    c.push_back({"EdgeListBadHeaderCount", "g.el", text("# Nodes: many\n0 1\n"), edge_list, 1,
                 "node count in the header 'many' is not an integer"});
    c.push_back({"EdgeListGzipErrorLine", "g.el.gz", gzipped("0 1\n1 2\n\n2 three\n"), edge_list, 4,
                 "target id 'three' is not an integer"});
    c.push_back({"TruncatedGzip", "g.el.gz",
                 [] {
                     const auto z = halo::testing::gzip(big_text(20000));
                     return z.substr(0, z.size() / 2);
                 },
                 edge_list, 0, "truncated gzip stream"});
    c.push_back(
        {"GzipMagicOnly", "g.el.gz", text("\x1f\x8b"), edge_list, 0, "truncated gzip stream"});
    c.push_back({"CorruptGzip", "g.el.gz",
                 [] {
                     auto z = halo::testing::gzip(big_text(20000));
                     for (std::size_t k = z.size() / 3; k < z.size() / 3 + 64; ++k) {
                         z[k] = static_cast<char>(z[k] ^ 0x5a);
                     }
                     return z;
                 },
                 edge_list, 0, "corrupt gzip data"});
    c.push_back({"GzipTrailingGarbage", "g.el.gz",
                 [] { return halo::testing::gzip("0 1\n") + "garbage"; }, edge_list, 0,
                 "unexpected bytes after the end of the gzip stream"});
    // ---- Matrix Market
    const std::string mm_real = "%%MatrixMarket matrix coordinate real general\n";
    c.push_back({"MatrixMarketBadBanner", "g.mtx",
                 text("%%MatrixMarkt matrix coordinate real general\n3 3 1\n1 1 1\n"),
                 matrix_market, 1, "missing Matrix Market banner"});
    c.push_back({"MatrixMarketMissingBanner", "g.mtx", text("3 3 1\n1 1 1\n"), matrix_market, 1,
                 "missing Matrix Market banner: the first line must be '%%MatrixMarket matrix "
                 "coordinate"});
    c.push_back({"MatrixMarketIncompleteBanner", "g.mtx",
                 text("%%MatrixMarket matrix coordinate\n3 3 1\n1 1\n"), matrix_market, 1,
                 "incomplete Matrix Market banner"});
    c.push_back({"MatrixMarketArrayFormat", "g.mtx",
                 text("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n"), matrix_market,
                 1, "Matrix Market format 'array' (dense) is not supported"});
    c.push_back({"MatrixMarketComplex", "g.mtx",
                 text("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 0\n"),
                 matrix_market, 1, "field 'complex' is not supported"});
    c.push_back({"MatrixMarketHermitian", "g.mtx",
                 text("%%MatrixMarket matrix coordinate real hermitian\n2 2 1\n1 1 1\n"),
                 matrix_market, 1, "symmetry 'hermitian' is not supported"});
    c.push_back({"MatrixMarketSkewSymmetric", "g.mtx",
                 text("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 1\n"),
                 matrix_market, 1, "symmetry 'skew-symmetric' is not supported"});
    c.push_back({"MatrixMarketNonSquare", "g.mtx", text(mm_real + "% c\n3 4 1\n1 1 1\n"),
                 matrix_market, 3, "the matrix is 3 x 4, not square"});
    c.push_back({"MatrixMarketTooFewEntries", "g.mtx", text(mm_real + "3 3 3\n1 1 1\n2 2 1\n"),
                 matrix_market, 4,
                 "the file ends after 2 of the 3 entries declared on the size "
                 "line (line 2)"});
    c.push_back({"MatrixMarketTooManyEntries", "g.mtx",
                 text(mm_real + "3 3 2\n1 1 1\n2 2 1\n3 3 1\n"), matrix_market, 5,
                 "more entries than the 2 declared on the size line (line 2)"});
    c.push_back({"MatrixMarketIndexZero", "g.mtx", text(mm_real + "3 3 1\n0 1 1\n"), matrix_market,
                 3,
                 "row index '0' is outside 1..3 (Matrix Market indices are "
                 "1-based)"});
    c.push_back({"MatrixMarketIndexAboveN", "g.mtx", text(mm_real + "3 3 1\n1 4 1\n"),
                 matrix_market, 3, "column index '4' is outside 1..3"});
    c.push_back({"MatrixMarketMissingValue", "g.mtx", text(mm_real + "3 3 2\n1 2 1\n2 3\n"),
                 matrix_market, 4, "missing value: a real matrix needs 'row col value'"});
    c.push_back({"MatrixMarketNonNumericValue", "g.mtx", text(mm_real + "3 3 1\n1 2 abc\n"),
                 matrix_market, 3, "value 'abc' is not a number"});
    c.push_back({"MatrixMarketNonNumericSize", "g.mtx", text(mm_real + "3 3 x\n"), matrix_market, 2,
                 "entry count 'x' is not an integer"});
    c.push_back({"MatrixMarketPatternWithValue", "g.mtx",
                 text("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2 5\n"),
                 matrix_market, 3, "unexpected '5' after the entry"});
    c.push_back({"MatrixMarketIntegerFieldWithReal", "g.mtx",
                 text("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 2 0.5\n"),
                 matrix_market, 3, "integer value '0.5' is not an integer"});
    c.push_back({"MatrixMarketNoSizeLine", "g.mtx", text(mm_real + "% only a comment\n"),
                 matrix_market, 2, "the file ends before the size line"});
    c.push_back(
        {"MatrixMarketEmptyFile", "g.mtx", text(""), matrix_market, 0, "the file is empty"});
    // ---- binary CSR
    c.push_back({"BinaryCsrTruncated", "g.hcsr",
                 [] {
                     auto b = good_hcsr();
                     return b.substr(0, b.size() - 9);
                 },
                 binary_csr, 0, "truncated: the header describes 3 rows and 4 nonzeros"});
    c.push_back({"BinaryCsrTrailingBytes", "g.hcsr", [] { return good_hcsr() + "x"; }, binary_csr,
                 0, "trailing bytes"});
    c.push_back({"BinaryCsrHeaderOnly", "g.hcsr", [] { return good_hcsr().substr(0, 20); },
                 binary_csr, 0, "truncated: 20 bytes, shorter than a header and checksum"});
    c.push_back({"BinaryCsrBadChecksum", "g.hcsr",
                 [] {
                     auto b = good_hcsr();
                     b[b.size() - 10] ^= 0x01;  // a bit of the last value
                     return b;
                 },
                 binary_csr, 0, "checksum mismatch"});
    c.push_back({"BinaryCsrBadMagic", "g.hcsr",
                 [] {
                     auto b = good_hcsr();
                     b[0] = 'X';
                     return b;
                 },
                 binary_csr, 0, "bad magic: not a binary CSR file (first bytes 58 41 4c 4f"});
    c.push_back({"BinaryCsrBadVersion", "g.hcsr",
                 [] {
                     return hcsr_bytes(1, 1, {0, 1}, {0}, {}, 7);
                 },
                 binary_csr, 0, "unsupported binary CSR version 7"});
    c.push_back({"BinaryCsrUnknownFlags", "g.hcsr",
                 [] {
                     auto b = hcsr_bytes(1, 1, {0, 1}, {0});
                     b[12] = 0x06;
                     halo::testing::reseal_hcsr(b);
                     return b;
                 },
                 binary_csr, 0, "unknown flag bits 0x00000006"});
    c.push_back({"BinaryCsrHugeSizes", "g.hcsr",
                 [] {
                     auto b = good_hcsr();
                     const std::int64_t huge = std::numeric_limits<std::int64_t>::max();
                     std::memcpy(b.data() + 16, &huge, 8);
                     return b;
                 },
                 binary_csr, 0, "more bytes than the file has"});
    c.push_back({"BinaryCsrBrokenInvariant", "g.hcsr",
                 [] {
                     return hcsr_bytes(3, 3, {0, 2, 1, 3}, {0, 1, 2});
                 },
                 binary_csr, 0, "indptr decreases at row 1"});
    c.push_back({"BinaryCsrColumnOutOfRange", "g.hcsr",
                 [] {
                     return hcsr_bytes(2, 2, {0, 1, 2}, {0, 5});
                 },
                 binary_csr, 0, "column index 5 at nonzero 1 is outside [0, 2)"});
    c.push_back({"BinaryCsrGzipped", "g.hcsr", [] { return halo::testing::gzip(good_hcsr()); },
                 binary_csr, 0, "is gzip-compressed"});
    c.push_back({"BinaryCsrEmptyFile", "g.hcsr", text(""), binary_csr, 0,
                 "not a binary CSR file: 0 bytes"});
    // ---- .npy and raw features
    const auto six_floats = raw_bytes(std::vector<float>{1, 2, 3, 4, 5, 6});
    c.push_back({"NpyWrongDtype", "x.npy",
                 [] { return npy_bytes("<i8", "False", "(2, 1)", std::string(16, '\0')); }, npy, 0,
                 "dtype '<i8' is not supported (expected '<f4' float32 or '<f8' float64"});
    c.push_back({"NpyBigEndian", "x.npy",
                 [=] { return npy_bytes(">f4", "False", "(2, 3)", six_floats); }, npy, 0,
                 "dtype '>f4' is not supported"});
    c.push_back({"NpyFortranOrder", "x.npy",
                 [=] { return npy_bytes("<f4", "True", "(2, 3)", six_floats); }, npy, 0,
                 "fortran_order True (column-major) is not supported"});
    c.push_back({"NpyOneDimensional", "x.npy",
                 [=] { return npy_bytes("<f4", "False", "(6,)", six_floats); }, npy, 0,
                 "shape (6,) is 1-D; node features must be a 2-D array"});
    c.push_back({"NpyTruncatedData", "x.npy",
                 [=] { return npy_bytes("<f4", "False", "(3, 3)", six_floats); }, npy, 0,
                 "truncated: shape (3, 3) of <f4 needs 36 data bytes, the file has 24"});
    c.push_back({"NpyBadMagic", "x.npy", text("PK\x03\x04 this is a zip file"), npy, 0,
                 "bad magic: not a .npy file"});
    c.push_back({"NpyMalformedHeader", "x.npy",
                 [=] { return npy_bytes("<f4", "Maybe", "(2, 3)", six_floats); }, npy, 0,
                 "malformed .npy header"});
    c.push_back({"NpyNanFeature", "x.npy",
                 [] {
                     const float nan = std::numeric_limits<float>::quiet_NaN();
                     return npy_bytes("<f4", "False", "(2, 3)",
                                      raw_bytes(std::vector<float>{1, 2, 3, 4, 5, nan}));
                 },
                 npy, 0, "non-finite feature value nan at row 1, column 2"});
    c.push_back(
        {"NpyF8OutOfFloatRange", "x.npy",
         [] {
             return npy_bytes("<f8", "False", "(1, 2)", raw_bytes(std::vector<double>{1.0, 1e300}));
         },
         npy, 0, "feature value 1e+300 at row 0, column 1 is out of the float32 range"});
    c.push_back({"RawSizeNotMultipleOfWidth", "x.f32", [=] { return six_floats; },
                 [](const fs::path& p) { halo::read_raw_features(p, 4); }, 0,
                 "size 24 bytes is not a multiple of 16 (rows of 4 float32 values)"});
    c.push_back({"RawInfinity", "x.bin",
                 [] {
                     const float inf = std::numeric_limits<float>::infinity();
                     return raw_bytes(std::vector<float>{0, inf});
                 },
                 [](const fs::path& p) { halo::read_features(p, 1); }, 0,
                 "non-finite feature value inf at row 1, column 0"});
    c.push_back({"RawNeedsWidth", "x.bin", [=] { return six_floats; },
                 [](const fs::path& p) { halo::read_features(p); }, 0,
                 "raw float32 features need the row width"});
    c.push_back({"UnknownFeatureExtension", "x.csv", text("1,2\n"),
                 [](const fs::path& p) { halo::read_features(p); }, 0,
                 "unknown feature file type"});
    // ---- COO features
    c.push_back({"CooColumnOutOfRange", "f.coo.txt", text("# 2 3 2\n0 1 1\n1 3 1\n"), coo, 3,
                 "column '3' is outside [0, 3) (F from the header)"});
    c.push_back({"CooRowOutOfRange", "f.coo.txt", text("# 2 3 1\n2 0 1\n"), coo, 2,
                 "row '2' is outside [0, 2)"});
    c.push_back({"CooNanFeature", "f.coo.txt.gz", gzipped("# 2 3 2\n0 1 1\n1 1 NaN\n"), coo, 3,
                 "feature value 'NaN' is not a finite number"});
    c.push_back({"CooBadHeader", "f.coo.txt", text("2 3 1\n0 0 1\n"), coo, 1,
                 "expected the header '# N F NNZ'"});
    c.push_back({"CooTooFewEntries", "f.coo.txt", text("# 2 3 3\n0 1 1\n"), coo, 2,
                 "the file ends after 1 of the 3 entries declared in the header (line 1)"});
    c.push_back({"CooHugeHeader", "f.coo.txt", text("# 99999999999 99999999999 1\n0 0 1\n"), coo, 1,
                 "99999999999 x 99999999999 float32 matrix"});
    // ---- labels and index lists
    c.push_back(
        {"LabelsNonNumeric", "l.txt", text("3\n1\nx\n"), labels, 3, "label 'x' is not an integer"});
    c.push_back({"LabelsBelowMinusOne", "l.txt", text("3\n-2\n"), labels, 2,
                 "label '-2' is outside [-1, 2^31-1]"});
    c.push_back({"LabelsTwoPerLine", "l.txt", text("3\n1 2\n"), labels, 2,
                 "unexpected '2' after the label"});
    c.push_back({"LabelsEmpty", "l.txt", text(""), labels, 0, "the file is empty"});
    c.push_back({"IndexListNegative", "i.txt.gz", gzipped("4\n-1\n"),
                 [](const fs::path& p) { halo::read_index_list(p); }, 2,
                 "node id '-1' is negative"});
    c.push_back({"IndexListAboveNodeCount", "i.txt", text("4\n10\n"),
                 [](const fs::path& p) { halo::read_index_list(p, 10); }, 2,
                 "node id '10' is not below the node count 10"});
    const Reader parts = [](const fs::path& p) { halo::read_part_file(p, 4, 2); };
    c.push_back({"PartFileIdAboveParts", "g.part.2", text("0\n1\n2\n0\n"), parts, 3,
                 "part id '2' of node 2 is outside [0, 2)"});
    c.push_back({"PartFileNegativeId", "g.part.2", gzipped("0\n-1\n"), parts, 2,
                 "part id '-1' of node 1 is outside [0, 2)"});
    c.push_back({"PartFileNotAnInteger", "g.part.2", text("0\n1\nx\n"), parts, 3, "'x'"});
    c.push_back({"PartFileTwoFields", "g.part.2", text("0\n1 1\n"), parts, 2,
                 "one part id per line"});
    c.push_back({"PartFileTooFew", "g.part.2", text("0\n1\n1\n"), parts, 0,
                 "3 part ids, but the graph has 4 nodes"});
    c.push_back({"PartFileTooMany", "g.part.2", text("0\n1\n1\n0\n1\n"), parts, 5,
                 "more part ids than the graph's 4 nodes"});
    c.push_back({"PartFileEmptyPart", "g.part.2", text("1\n1\n% comment\n1\n1\n"), parts, 0,
                 "part 0 of 2 owns no node"});
    c.push_back({"PartFileEmpty", "g.part.2", text(""), parts, 0, "the file is empty"});
    return c;
}

class BadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputTest, ThrowsInputErrorNamingFileLineAndValue)
{
    const auto& c = GetParam();
    const auto dir = halo::testing::scratch_dir("io-bad");
    const auto path = dir / c.file;
    halo::testing::write_file(path, c.bytes());
    const std::string prefix =
        path.string() + (c.line > 0 ? ":" + std::to_string(c.line) + ": " : ": ");
    try {
        c.read(path);
        FAIL() << "no exception for " << c.name;
    } catch (const halo::InputError& e) {
        EXPECT_EQ(e.message().rfind(prefix, 0), 0u)
            << "message should start with '" << prefix << "': " << e.message();
        EXPECT_NE(e.message().find(c.expect), std::string::npos)
            << "message should contain '" << c.expect << "': " << e.message();
    }
    std::filesystem::remove_all(dir);  // some inputs are 10 MB; scratch_dir keeps its files
}

INSTANTIATE_TEST_SUITE_P(Io, BadInputTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<BadInput>& info) {
                             return info.param.name;
                         });

TEST(IoErrors, MissingFileIsIoErrorNamingIt)
{
    const auto path = halo::testing::scratch_dir("io-missing") / "no-such-graph.el.gz";
    const std::vector<Reader> readers = {
        edge_list,
        matrix_market,
        binary_csr,
        npy,
        coo,
        labels,
        [](const fs::path& p) { halo::detect_graph_format(p); },
        [](const fs::path& p) { halo::read_raw_features(p, 3); },
        [](const fs::path& p) { halo::read_index_list(p); },
    };
    for (const auto& read : readers) {
        try {
            read(path);
            FAIL() << "no exception for a missing file";
        } catch (const halo::IoError& e) {
            EXPECT_EQ(e.message().rfind(path.string() + ": cannot open for reading", 0), 0u)
                << e.message();
        }
    }
}

TEST(IoErrors, DirectoryIsIoError)
{
    const auto dir = halo::testing::scratch_dir("io-dir");
    EXPECT_THROW(halo::read_edge_list(dir), halo::IoError);
    EXPECT_THROW(halo::read_binary_csr(dir), halo::IoError);
}

TEST(IoErrors, WriteIntoMissingDirectoryIsIoError)
{
    const auto path = halo::testing::scratch_dir("io-nodir") / "absent" / "g.hcsr";
    halo::Csr csr;
    EXPECT_THROW(halo::write_binary_csr(path, csr), halo::IoError);
    EXPECT_THROW(halo::write_npy(path.parent_path() / "x.npy", {}), halo::IoError);
}

TEST(IoErrors, WritingAnInvalidCsrLeavesNoFile)
{
    const auto dir = halo::testing::scratch_dir("io-invalid");
    halo::Csr csr;
    csr.num_rows = 2;
    csr.num_cols = 2;
    csr.indptr = {0, 1, 2};
    csr.indices = {0, 9};
    EXPECT_THROW(halo::write_binary_csr(dir / "g.hcsr", csr), halo::InputError);
    EXPECT_TRUE(fs::is_empty(dir));
}

// Random bytes must never crash a reader: every outcome is a value or an InputError.
TEST(IoErrors, RandomBytesGiveInputErrorsOnly)
{
    const auto dir = halo::testing::scratch_dir("io-fuzz");
    const std::vector<std::pair<std::string, Reader>> readers = {
        {"g.el", edge_list}, {"g.mtx", matrix_market}, {"g.hcsr", binary_csr},
        {"x.npy", npy},      {"f.txt", coo},           {"l.txt", labels},
    };
    const auto noise = halo::testing::random_floats(4096, 42, 0.0f, 256.0f);
    for (int trial = 0; trial < 20; ++trial) {
        std::string bytes;
        for (std::size_t k = 0; k < 64 + 200 * static_cast<std::size_t>(trial); ++k) {
            bytes += static_cast<char>(static_cast<int>(noise[(k * 31 + trial) % noise.size()]));
        }
        if (trial % 2 == 1) {
            bytes = halo::testing::gzip(bytes).substr(0, bytes.size() / 2);
        }
        for (const auto& [file, read] : readers) {
            halo::testing::write_file(dir / file, bytes);
            try {
                read(dir / file);
            } catch (const halo::InputError&) {
            }
        }
    }
}

}  // namespace
