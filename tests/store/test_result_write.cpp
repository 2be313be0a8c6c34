// Result pieces written the three ways halo-infer can (synced, unsynced, outputs fetched batch
// by batch while earlier ones are written) read back alike, and read_results puts rows in global
// id order on each of its paths (one ascending piece moved, ids 0 .. n - 1 placed directly,
// anything else sorted), naming the parts of a repeated node on each.
#include <omp.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/result.hpp"
#include "halo_test.hpp"
#include "hdf5_util.hpp"
#include "store_test_util.hpp"

namespace {

using halo::testing::expect_error;

class ThreadCount {
public:
    explicit ThreadCount(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
    ~ThreadCount() { omp_set_num_threads(saved_); }

private:
    int saved_;
};

halo::ResultPiece make_piece(int part, int num_parts, std::vector<halo::global_id> ids,
                             std::int64_t dim, unsigned seed)
{
    halo::ResultPiece piece;
    piece.part = part;
    piece.num_parts = num_parts;
    piece.global_ids = std::move(ids);
    piece.output_dim = dim;
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-5.0f, 5.0f);
    piece.output.resize(piece.global_ids.size() * static_cast<std::size_t>(dim));
    for (auto& x : piece.output) {
        x = dist(gen);
    }
    piece.prediction = halo::argmax_rows(piece.output, dim);
    return piece;
}

void expect_same_piece(const halo::ResultPiece& got, const halo::ResultPiece& want)
{
    EXPECT_EQ(got.part, want.part);
    EXPECT_EQ(got.num_parts, want.num_parts);
    EXPECT_EQ(got.output_dim, want.output_dim);
    EXPECT_EQ(got.global_ids, want.global_ids);
    EXPECT_EQ(got.output, want.output);
    EXPECT_EQ(got.prediction, want.prediction);
}

void write_manifest(const std::filesystem::path& dir, int num_parts, std::int64_t dim)
{
    std::ofstream out(dir / "manifest.json");
    out << R"({"format": "halo-result-manifest", "version": 1, "num_parts": )" << num_parts
        << R"(, "output_dim": )" << dim << R"(, "pieces": [)";
    for (int p = 0; p < num_parts; ++p) {
        out << (p > 0 ? ", " : "") << R"({"part": )" << p << R"(, "file": "part-)" << p
            << R"(.h5"})";
    }
    out << "]}";
}

TEST(ResultWrite, SyncedUnsyncedAndStreamedPiecesReadBackAlike)
{
    // 300000 rows of 8 floats (9.6 MB): the parallel chunk writer's path; ids descending.
    const std::int64_t rows = 300000;
    const std::int64_t dim = 8;
    std::vector<halo::global_id> ids(rows);
    std::iota(ids.rbegin(), ids.rend(), 0);
    const auto piece = make_piece(0, 1, ids, dim, 1);
    for (const int threads : {1, 3}) {
        SCOPED_TRACE("threads " + std::to_string(threads));
        const ThreadCount tc(threads);
        const halo::testing::ScratchDir dir{"result-write"};
        const auto synced = dir.file("synced");
        const auto unsynced = dir.file("unsynced");
        const auto streamed = dir.file("streamed");
        for (const auto& d : {synced, unsynced, streamed}) {
            std::filesystem::create_directories(d);
        }
        halo::write_result_piece(synced, piece);
        halo::write_result_piece(unsynced, piece, halo::ResultWriteOptions{.sync = false});
        // Rows handed out from two buffers in turn, as a download into pinned staging would.
        std::vector<float> staging[2];
        int calls = 0;
        std::int64_t next = 0;
        halo::ResultPiece without_output = piece;
        without_output.output.clear();
        halo::write_result_piece(
            streamed, without_output,
            [&](std::int64_t first, std::int64_t count) {
                EXPECT_EQ(first, next);
                next = first + count;
                auto& buffer = staging[calls++ % 2];
                buffer.assign(piece.output.begin() + first * dim,
                              piece.output.begin() + (first + count) * dim);
                return static_cast<const float*>(buffer.data());
            },
            halo::ResultWriteOptions{.sync = false});
        EXPECT_EQ(next, rows);
        for (const auto& d : {synced, unsynced, streamed}) {
            SCOPED_TRACE(d.string());
            expect_same_piece(halo::read_result_piece(halo::result_piece_path(d, 0)), piece);
            // Only the piece: no temporary file left behind.
            EXPECT_EQ(std::distance(std::filesystem::directory_iterator(d),
                                    std::filesystem::directory_iterator()),
                      1);
        }
    }
}

TEST(ResultWrite, UncommittedFilesLeaveNothingEitherWay)
{
    const halo::testing::ScratchDir dir{"result-write"};
    for (const auto durability :
         {halo::store::Durability::synced, halo::store::Durability::unsynced}) {
        const auto target = dir.file("x.h5");
        {
            halo::store::AtomicH5File file(target, durability);
            const std::vector<float> values(3 << 20, 1.5f);  // 12 MB, written while syncing
            halo::store::write_array<float>(file.get(), {file.name(), "/"}, "v", values);
            EXPECT_TRUE(std::filesystem::exists(file.temp_path()));
        }
        EXPECT_TRUE(std::filesystem::is_empty(dir.file("")));
        {
            halo::store::AtomicH5File file(target, durability);
            const std::vector<float> values(1000, 2.5f);
            halo::store::write_array<float>(file.get(), {file.name(), "/"}, "v", values);
            file.commit();
        }
        EXPECT_TRUE(std::filesystem::exists(target));
        std::filesystem::remove(target);
    }
}

TEST(ResultWrite, ReadResultsOrdersRowsOnEveryPath)
{
    const std::int64_t dim = 3;
    struct Case {
        const char* name;
        std::vector<std::vector<halo::global_id>> ids;
    };
    // Large enough (100000 rows) that the parallel loops run with their OpenMP teams.
    std::vector<halo::global_id> ascending(100000);
    std::iota(ascending.begin(), ascending.end(), 0);
    std::vector<halo::global_id> evens;
    std::vector<halo::global_id> odds;
    for (halo::global_id g = 0; g < 100000; ++g) {
        (g % 2 == 0 ? evens : odds).push_back(99999 - g);
    }
    std::vector<halo::global_id> gaps(ascending.rbegin(), ascending.rend());
    for (auto& g : gaps) {
        g *= 3;
    }
    const std::vector<Case> cases = {
        {"one ascending piece", {ascending}},
        {"ids 0..n-1 over two pieces", {evens, odds}},
        {"ids with gaps", {gaps}},
        {"small, with gaps", {{9, 2}, {4}}},
    };
    const ThreadCount tc(3);
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const halo::testing::ScratchDir dir{"result-read"};
        const auto parts = static_cast<int>(c.ids.size());
        std::vector<std::pair<halo::global_id, std::pair<int, std::size_t>>> expected;
        std::vector<halo::ResultPiece> pieces;
        for (int p = 0; p < parts; ++p) {
            pieces.push_back(make_piece(p, parts, c.ids[p], dim, 10 + p));
            halo::write_result_piece(dir.file(""), pieces.back());
            for (std::size_t r = 0; r < c.ids[p].size(); ++r) {
                expected.push_back({c.ids[p][r], {p, r}});
            }
        }
        write_manifest(dir.file(""), parts, dim);
        std::sort(expected.begin(), expected.end());
        const auto set = halo::read_results(dir.file(""));
        ASSERT_EQ(set.global_ids.size(), expected.size());
        bool same = true;
        for (std::size_t k = 0; k < expected.size() && same; ++k) {
            const auto [p, r] = expected[k].second;
            same = set.global_ids[k] == expected[k].first &&
                   set.prediction[k] == pieces[p].prediction[r] &&
                   std::equal(set.output.begin() + k * dim, set.output.begin() + (k + 1) * dim,
                              pieces[p].output.begin() + r * dim);
        }
        EXPECT_TRUE(same);
    }
    // A node in two pieces, with ids 0..n-1 in number (the direct path notices) and with gaps.
    for (const auto& ids : std::vector<std::vector<std::vector<halo::global_id>>>{
             {{0, 1}, {1, 2}}, {{0, 7}, {9, 7}}}) {
        const halo::testing::ScratchDir dir{"result-read"};
        for (int p = 0; p < 2; ++p) {
            halo::write_result_piece(dir.file(""), make_piece(p, 2, ids[p], dim, 20 + p));
        }
        write_manifest(dir.file(""), 2, dim);
        expect_error<halo::InputError>([&] { halo::read_results(dir.file("")); },
                                       {"appears in parts 0 and 1"});
    }
}

}  // namespace
