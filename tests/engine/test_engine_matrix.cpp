// The correctness matrix on the CPU (issue 48; docs/RELIABILITY.md "The correctness matrix"):
// every layer type x widths {1, 8, 32, 100, 128, 256} x 1-3 ranks x overlap {interior, split,
// none} x plan form {the CPU backend, the CPU backend making its SpMM plans from each operator's
// pattern and scalings as the CUDA backend does}, on three generated graphs of different shapes:
// a power-law R-MAT, a regular 2D mesh, and two components of which one is a whole part (a part
// without halo rows, all interior; at P = 2 no part has halo rows at all).
//
// Against the one-rank run of the same plan form: the interior mode and no overlap equal it bit
// for bit (engine.hpp, "Reduction order"); the split overlap adds each boundary row's halo
// columns after its local ones (another summation order, by design) and is checked within 1e-5
// of the output's largest magnitude, with every prediction (row argmax) identical except where
// the reference's two largest logits are closer than that bound.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "distributed_run.hpp"
#include "engine_test_util.hpp"
#include "halo/comm/mpi_exchanger.hpp"
#include "halo/engine/engine.hpp"
#include "halo/partition/shard_builder.hpp"

namespace {

using halo::testing::with_group;
using halo::testing::world_size;

constexpr std::int64_t kClasses = 7;

// R-MAT 9 and, after its nodes, a 10 x 10 mesh: two components.
halo::Csr two_components()
{
    auto edges = halo::generate_rmat({.scale = 9, .edge_factor = 8, .seed = 11});
    const std::int64_t first = std::int64_t{1} << 9;
    const auto mesh = halo::testing::grid_edges(10);
    edges.num_nodes = first + mesh.num_nodes;
    for (std::int64_t e = 0; e < mesh.num_edges(); ++e) {
        edges.src.push_back(first + mesh.src[e]);
        edges.dst.push_back(first + mesh.dst[e]);
    }
    halo::BuildOptions b;
    b.symmetrize = true;
    return halo::build_csr(edges, b);
}

struct Graph {
    std::string name;
    halo::Csr csr;
    // The owner of every node for P parts (METIS; two_components: the mesh is the last part).
    std::vector<std::int32_t> owner(int parts) const
    {
        HALO_EXPECTS(parts >= 1, "parts ", parts);
        if (parts == 1) {
            return std::vector<std::int32_t>(static_cast<std::size_t>(csr.num_rows), 0);
        }
        halo::PartitionOptions popt;
        popt.num_parts = parts;
        popt.method = halo::Partitioner::metis;
        if (name != "two-components") {
            return halo::partition_graph(csr.view(), popt);
        }
        const std::int64_t first = std::int64_t{1} << 9;
        std::vector<std::int32_t> out(static_cast<std::size_t>(csr.num_rows), parts - 1);
        for (std::int64_t v = 0; v < first; ++v) {
            // The R-MAT part cut into the other parts by node id blocks.
            out[v] = parts == 2 ? 0 : static_cast<std::int32_t>(v * (parts - 1) / first);
        }
        return out;
    }
};

const std::vector<Graph>& graphs()
{
    static const std::vector<Graph> out{
        {"rmat:10", halo::testing::engine_test_graph("rmat:10")},
        {"mesh-20x20", halo::testing::grid_graph(20)},
        {"two-components", two_components()},
    };
    return out;
}

// The widths; under AddressSanitizer (scripts/sanitize.sh, 3-10x slower) every other one.
std::vector<std::int64_t> widths()
{
#if defined(__SANITIZE_ADDRESS__)
    return {1, 32, 128};
#else
    return {1, 8, 32, 100, 128, 256};
#endif
}

enum class Overlap { interior, split, none };

const char* to_string(Overlap o)
{
    return o == Overlap::interior ? "interior" : o == Overlap::split ? "split" : "none";
}

halo::EngineOptions engine_options(Overlap o)
{
    halo::EngineOptions options;
    options.overlap = o != Overlap::none;
    options.overlap_mode = o == Overlap::split ? halo::OverlapMode::split
                                               : halo::OverlapMode::interior;
    return options;
}

// The model's output rows in global id order at the lead rank of `comm` (others: empty), from
// this rank's shard of a `parts`-part partition.
std::vector<float> run(MPI_Comm comm, const Graph& g, const halo::Shard& shard, int parts,
                       const halo::Model& model, Overlap overlap, bool scaled_plans)
{
    std::unique_ptr<halo::Backend> backend;
    if (scaled_plans) {
        auto r = std::make_unique<halo::testing::ScalingRecorder>();
        r->make_scaled = true;
        backend = std::move(r);
    } else {
        backend = halo::make_cpu_backend();
    }
    std::unique_ptr<halo::HaloExchanger> exchanger;
    if (parts == 1) {
        exchanger = halo::make_local_exchanger(shard);
    } else {
        exchanger = halo::make_mpi_exchanger(comm, shard, model.exchange_width());
    }
    halo::Engine engine(*backend, *exchanger, shard, model, engine_options(overlap));
    const auto x = halo::random_node_features(shard.global_ids, model.input_dim(), 17);
    return halo::testing::gather_by_global_id(comm, shard, engine.run(x), model.output_dim(),
                                              g.csr.num_rows);
}

// This rank's shard of g cut into `parts` parts (empty for ranks past the parts), the halo plans
// checked collectively among the first `parts` ranks.
halo::Shard shard_of(const Graph& g, int parts)
{
    halo::Shard shard;
    with_group(parts, [&](MPI_Comm group, bool) {
        int rank = 0;
        MPI_Comm_rank(group, &rank);
        shard = halo::build_shard(g.csr, g.owner(parts), parts, rank);
        if (parts > 1) {
            halo::check_halo_plan(group, shard, "matrix");
        }
    });
    return shard;
}

// Rows whose argmax differs, leaving out rows whose reference top two are within `bound`.
std::int64_t prediction_flips(const std::vector<float>& ref, const std::vector<float>& got,
                              std::int64_t m, double bound)
{
    std::int64_t flips = 0;
    for (std::size_t r = 0; r * m < ref.size(); ++r) {
        const float* a = &ref[r * m];
        const float* b = &got[r * m];
        const auto ia = std::max_element(a, a + m) - a;
        const auto ib = std::max_element(b, b + m) - b;
        if (ia == ib) {
            continue;
        }
        if (std::abs(double(a[ia]) - double(a[ib])) > bound) {
            ++flips;
        }
    }
    return flips;
}

// One cell's verdict at the lead rank: empty when it passes.
std::string compare(const std::vector<float>& single, const std::vector<float>& multi,
                    bool bitwise, std::int64_t m)
{
    std::ostringstream why;
    if (multi.size() != single.size()) {
        why << multi.size() << " values, expected " << single.size();
        return why.str();
    }
    double scale = 0.0;
    double worst = 0.0;
    std::int64_t differ = 0;
    for (std::size_t k = 0; k < single.size(); ++k) {
        if (!std::isfinite(multi[k])) {
            why << "value " << k << " is " << multi[k];
            return why.str();
        }
        scale = std::max(scale, double(std::abs(single[k])));
        worst = std::max(worst, double(std::abs(multi[k] - single[k])));
        differ += std::memcmp(&multi[k], &single[k], sizeof(float)) != 0 ? 1 : 0;
    }
    const double bound = 1e-5 * std::max(scale, 1.0);
    if (bitwise && differ != 0) {
        why << differ << " of " << single.size() << " values differ (largest by " << worst << ")";
    } else if (!bitwise && worst > bound) {
        why << "largest difference " << worst << " > " << bound;
    } else if (const auto flips = prediction_flips(single, multi, m, bound); flips != 0) {
        why << flips << " predictions differ";
    }
    return why.str();
}

class EngineMatrix : public ::testing::TestWithParam<halo::LayerType> {};

TEST_P(EngineMatrix, EveryWidthRankCountOverlapAndPlanFormMatchesOneRank)
{
    const auto type = GetParam();
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    // The plan form matters where the layer aggregates with an SpMM operator.
    const bool spmm = type == halo::LayerType::gcn || type == halo::LayerType::sage ||
                      type == halo::LayerType::gin;
    std::int64_t cells = 0;
    std::vector<std::string> failures;
    for (const auto& g : graphs()) {
        std::vector<halo::Shard> shards(static_cast<std::size_t>(world_size()) + 1);
        for (int parts = 1; parts <= world_size(); ++parts) {
            shards[parts] = shard_of(g, parts);
        }
        for (const std::int64_t w : widths()) {
            const auto model = halo::random_model(type, {w, w, kClasses}, 29 + w);
            // The reference of each plan form: one rank of the same backend (scaled plans make
            // the values r_i * c_j, as the CUDA backend does, which round unlike the host's).
            std::vector<float> single[2];
            if (world_rank == 0) {
                for (const bool scaled : {false, true}) {
                    if (!scaled || spmm) {
                        single[scaled] =
                            run(MPI_COMM_SELF, g, shards[1], 1, model, Overlap::interior, scaled);
                    }
                }
            }
            for (int parts = 1; parts <= world_size(); ++parts) {
                for (const auto overlap : {Overlap::interior, Overlap::split, Overlap::none}) {
                    for (const bool scaled : {false, true}) {
                        if (scaled && !spmm) {
                            continue;
                        }
                        with_group(parts, [&](MPI_Comm group, bool lead) {
                            const auto multi =
                                run(group, g, shards[parts], parts, model, overlap, scaled);
                            if (!lead) {
                                return;
                            }
                            ++cells;
                            // Split rounds where boundary rows have halo columns: P > 1.
                            const bool bitwise = overlap != Overlap::split || parts == 1;
                            const auto why = compare(single[scaled], multi, bitwise, kClasses);
                            if (!why.empty()) {
                                failures.push_back(g.name + " d=" + std::to_string(w) +
                                                   " P=" + std::to_string(parts) + " overlap " +
                                                   to_string(overlap) +
                                                   (scaled ? " scaled plans" : "") + ": " + why);
                            }
                        });
                    }
                }
            }
        }
    }
    if (world_rank == 0) {
        EXPECT_EQ(cells, static_cast<std::int64_t>(3 * widths().size()) * world_size() * 3 *
                             (spmm ? 2 : 1));
        std::string all;
        for (const auto& f : failures) {
            all += "\n  " + f;
        }
        EXPECT_TRUE(failures.empty()) << halo::to_string(type) << ": " << failures.size()
                                      << " of " << cells << " cells failed:" << all;
    }
}

INSTANTIATE_TEST_SUITE_P(
    AllLayers, EngineMatrix,
    ::testing::Values(halo::LayerType::gcn, halo::LayerType::sage, halo::LayerType::gin,
                      halo::LayerType::linear, halo::LayerType::maxk, halo::LayerType::agnn,
                      halo::LayerType::transformer, halo::LayerType::gat),
    [](const ::testing::TestParamInfo<halo::LayerType>& info) {
        return halo::to_string(info.param);
    });

// A backend that made a plan of an operator from its pattern and scalings but declines one of a
// block (the bug of issue 48, where the CUDA backend's choice depended on the block's shape) is
// reported as an internal error naming the layer, the operator, the kernel and the block, not
// as the user's.
TEST(EngineMatrixErrors, ABlockWithoutAScaledPlanIsAnInternalErrorNamingWhere)
{
    const auto& g = graphs().front();
    const auto model = halo::random_model(halo::LayerType::gcn, {32, 32, 8}, 5);
    with_group(2, [&](MPI_Comm group, bool) {
        int rank = 0;
        MPI_Comm_rank(group, &rank);
        const auto shard = halo::build_shard(g.csr, g.owner(2), 2, rank);
        ASSERT_GT(shard.num_halo, 0);
        halo::testing::ScalingRecorder backend;
        backend.make_scaled = true;
        backend.scaled_limit = 1;  // the whole operator's plan (asked first): yes; a block's: no
        auto exchanger = halo::make_mpi_exchanger(group, shard, model.exchange_width());
        try {
            halo::Engine engine(backend, *exchanger, shard, model,
                                engine_options(Overlap::split));
            ADD_FAILURE() << "rank " << rank << ": no error";
        } catch (const halo::LogicError& e) {
            const std::string what = e.what();
            for (const char* part : {"internal error", "layer 0 (gcn, 32 -> 32)",
                                     "gcn operator", "local column block", "rows"}) {
                EXPECT_NE(what.find(part), std::string::npos) << part << " in: " << what;
            }
        }
    });
}

}  // namespace
