// KaMinPar behind halo::partition_graph (partition/kaminpar_partition.hpp).
#include "kaminpar_partition.hpp"

#include <kaminpar.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>
#include <vector>

#include "halo/core/error.hpp"

namespace halo::detail {
namespace {

using kaminpar::shm::BlockID;
using kaminpar::shm::EdgeID;
using kaminpar::shm::NodeID;
using kaminpar::shm::NodeWeight;

// Arrays of KaMinPar's types, left uninitialized (std::vector would write every entry once more,
// 8 GiB for the adjacency of R-MAT 26) and filled by the threads that later read them.
template <typename T>
struct Buffer {
    std::unique_ptr<T[]> data;
    std::size_t size = 0;

    explicit Buffer(std::size_t n) : data(new T[std::max<std::size_t>(n, 1)]), size(n) {}
    std::span<T> span() { return {data.get(), size}; }
    T& operator[](std::size_t i) { return data[i]; }
};

struct Graph {
    Buffer<EdgeID> xadj;
    Buffer<NodeID> adjncy;
};

// The pattern of a symmetric `a` without its diagonal: every row as it is (sorted, no duplicates).
Graph symmetric_graph(const CsrView& a)
{
    const auto n = a.num_rows;
    Buffer<EdgeID> xadj(static_cast<std::size_t>(n) + 1);
    xadj[0] = 0;
#pragma omp parallel for schedule(dynamic, 4096)
    for (std::int64_t i = 0; i < n; ++i) {
        EdgeID degree = 0;
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            degree += a.indices[k] != i ? 1 : 0;
        }
        xadj[static_cast<std::size_t>(i) + 1] = degree;
    }
    std::partial_sum(xadj.data.get(), xadj.data.get() + n + 1, xadj.data.get());
    Buffer<NodeID> adjncy(xadj[static_cast<std::size_t>(n)]);
#pragma omp parallel for schedule(dynamic, 4096)
    for (std::int64_t i = 0; i < n; ++i) {
        auto out = xadj[static_cast<std::size_t>(i)];
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            if (a.indices[k] != i) {
                adjncy[out++] = static_cast<NodeID>(a.indices[k]);
            }
        }
    }
    return {std::move(xadj), std::move(adjncy)};
}

// A | A^T without the diagonal, for an `a` that may not be symmetric (as metis_graph builds it):
// every off-diagonal entry and its transpose, then each row sorted and deduplicated in place.
Graph symmetrized_graph(const CsrView& a)
{
    const auto n = a.num_rows;
    std::vector<EdgeID> count(static_cast<std::size_t>(n) + 1, 0);
    for (std::int64_t i = 0; i < n; ++i) {
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            const auto j = a.indices[k];
            if (j != i) {
                ++count[static_cast<std::size_t>(i) + 1];
                ++count[static_cast<std::size_t>(j) + 1];
            }
        }
    }
    std::partial_sum(count.begin(), count.end(), count.begin());
    Buffer<NodeID> adjncy(count.back());
    {
        std::vector<EdgeID> next(count.begin(), count.end() - 1);
        for (std::int64_t i = 0; i < n; ++i) {
            for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
                const auto j = a.indices[k];
                if (j != i) {
                    adjncy[next[static_cast<std::size_t>(i)]++] = static_cast<NodeID>(j);
                    adjncy[next[static_cast<std::size_t>(j)]++] = static_cast<NodeID>(i);
                }
            }
        }
    }
    std::vector<EdgeID> length(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(dynamic, 4096)
    for (std::int64_t i = 0; i < n; ++i) {
        auto* first = adjncy.data.get() + count[static_cast<std::size_t>(i)];
        auto* last = adjncy.data.get() + count[static_cast<std::size_t>(i) + 1];
        std::sort(first, last);
        length[static_cast<std::size_t>(i)] = static_cast<EdgeID>(std::unique(first, last) - first);
    }
    // Compact: a row only moves towards the front, never over a row not yet moved.
    Buffer<EdgeID> xadj(static_cast<std::size_t>(n) + 1);
    xadj[0] = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const auto at = static_cast<std::size_t>(i);
        auto* first = adjncy.data.get() + count[at];
        std::copy(first, first + length[at], adjncy.data.get() + xadj[at]);
        xadj[at + 1] = xadj[at] + length[at];
    }
    adjncy.size = xadj[static_cast<std::size_t>(n)];
    return {std::move(xadj), std::move(adjncy)};
}

// Nodes without an off-diagonal entry ("isolated") cost nothing to cut. They are left out of the
// graph KaMinPar gets (their weight would be a row where the part may hold no nonzero: R-MAT 24
// has millions of them, and with weights 1 + degree the nonzero imbalance came out 1.047 at an
// epsilon of 3%), and spread afterwards. `kept[k]` is the original id of KaMinPar's node k.
std::vector<NodeID> leave_out_isolated(Graph& graph, std::int64_t n)
{
    std::vector<NodeID> kept;
    kept.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        const auto at = static_cast<std::size_t>(i);
        if (graph.xadj[at + 1] > graph.xadj[at]) {
            kept.push_back(static_cast<NodeID>(i));
        }
    }
    if (static_cast<std::int64_t>(kept.size()) == n) {
        return kept;
    }
    std::vector<NodeID> new_id(static_cast<std::size_t>(n), 0);
    for (std::size_t k = 0; k < kept.size(); ++k) {
        new_id[kept[k]] = static_cast<NodeID>(k);
    }
    // Isolated rows are empty, so the adjacency keeps its place; only xadj drops their entries
    // (forwards: kept[k] >= k, so no entry is overwritten before it is read) and ids are renamed.
    for (std::size_t k = 0; k < kept.size(); ++k) {
        graph.xadj[k + 1] = graph.xadj[static_cast<std::size_t>(kept[k]) + 1];
    }
    graph.xadj.size = kept.size() + 1;
    const auto entries = static_cast<std::int64_t>(graph.adjncy.size);
#pragma omp parallel for schedule(static)
    for (std::int64_t e = 0; e < entries; ++e) {
        graph.adjncy[static_cast<std::size_t>(e)] =
            new_id[static_cast<std::size_t>(graph.adjncy[static_cast<std::size_t>(e)])];
    }
    return kept;
}

}  // namespace

std::vector<std::string> kaminpar_preset_names()
{
    const auto names = kaminpar::shm::get_preset_names();
    std::vector<std::string> sorted(names.begin(), names.end());
    std::sort(sorted.begin(), sorted.end());
    return sorted;
}

std::vector<std::int32_t> kaminpar_partition(const CsrView& a, const PartitionOptions& options)
{
    if (options.balance_rows) {
        HALO_THROW(InputError,
                   "KaMinPar balances one weight per node: --balance rows+nnz (two constraints) "
                   "is METIS's; use --balance nnz (the rows' nonzeros) or rows (weight 1)");
    }
    require_preset(options.kaminpar_preset, kaminpar_preset_names(), "KaMinPar");
    const auto n = a.num_rows;
    auto graph = options.symmetric ? symmetric_graph(a) : symmetrized_graph(a);
    const auto kept = leave_out_isolated(graph, n);
    const auto connected = static_cast<std::int64_t>(kept.size());
    auto row_nnz = [&](NodeID i) { return a.indptr[i + 1] - a.indptr[i]; };
    // --balance nnz: a node weighs its row's nonzeros (diagonal included; at least 1, for a row
    // of a directed graph whose entries are all in its column), so the parts' nonzeros are what
    // KaMinPar balances. --balance rows: weight 1 (KaMinPar's default, an empty vector).
    std::vector<NodeWeight> vwgt;
    if (options.weight_by_degree) {
        vwgt.resize(kept.size());
#pragma omp parallel for schedule(static)
        for (std::int64_t k = 0; k < connected; ++k) {
            const auto at = static_cast<std::size_t>(k);
            vwgt[at] = std::max<NodeWeight>(1, static_cast<NodeWeight>(row_nnz(kept[at])));
        }
    }
    std::vector<BlockID> part(kept.size());
    if (connected > 0) {
        kaminpar::KaMinPar partitioner(
            halo::kaminpar_threads(options.threads),
            kaminpar::shm::create_context_by_preset_name(options.kaminpar_preset));
        partitioner.set_output_level(kaminpar::OutputLevel::QUIET);
        // KaMinPar reorders the arrays it borrows (they are ours and dropped after this call).
        partitioner.borrow_and_mutate_graph(graph.xadj.span(), graph.adjncy.span(), vwgt);
        // KaMinPar takes a positive epsilon only: --imbalance 1.0 runs with 1.001.
        const double epsilon = std::max(1e-3, options.imbalance - 1.0);
        // Several tries (seeds seed, seed + 1, ...): the graph is taken and rearranged once, and
        // each try keeps its assignment only if its cut is smaller than every earlier one, so a
        // try never makes the result worse than the first.
        const int tries = halo::kaminpar_tries(options.kaminpar_tries, a.nnz());
        std::vector<BlockID> candidate(tries > 1 ? kept.size() : 0);
        try {
            kaminpar::shm::EdgeWeight best = 0;
            for (int t = 0; t < tries; ++t) {
                kaminpar::KaMinPar::reseed(
                    static_cast<int>((options.seed + static_cast<std::uint64_t>(t)) %
                                     2147483647ULL));
                auto& into = t == 0 ? part : candidate;
                const auto cut =
                    partitioner.compute_partition(static_cast<BlockID>(options.num_parts),
                                                  epsilon, into);
                if (t == 0 || cut < best) {
                    best = cut;
                    if (t > 0) {
                        part.swap(candidate);
                    }
                }
            }
        } catch (const std::exception& e) {
            HALO_THROW(Error, "KaMinPar failed for ", connected, " nodes and ",
                       options.num_parts, " parts: ", e.what());
        }
    }
    const auto parts = static_cast<std::size_t>(options.num_parts);
    std::vector<std::int32_t> owner(static_cast<std::size_t>(n), -1);
    std::vector<std::int64_t> rows(parts, 0);
    std::vector<std::int64_t> nnz(parts, 0);
    for (std::size_t k = 0; k < kept.size(); ++k) {
        const auto p = static_cast<std::int64_t>(part[k]);
        HALO_EXPECTS(p >= 0 && p < options.num_parts, "KaMinPar returned part ", p, " of ",
                     options.num_parts);
        owner[kept[k]] = static_cast<std::int32_t>(p);
        ++rows[static_cast<std::size_t>(p)];
        nnz[static_cast<std::size_t>(p)] += row_nnz(kept[k]);
    }
    // The isolated nodes, in id order, in runs: with --balance nnz those with a self-loop (one
    // nonzero) onto the parts with the fewest nonzeros, then those without onto the parts with
    // the fewest rows; with --balance rows all of them by rows.
    auto spread = [&](auto&& takes_it, const std::vector<std::int64_t>& load) {
        std::int64_t count = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            count += owner[static_cast<std::size_t>(i)] < 0 && takes_it(i) ? 1 : 0;
        }
        const auto take = water_fill(load, count);
        std::size_t p = 0;
        std::int64_t given = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            auto& o = owner[static_cast<std::size_t>(i)];
            if (o >= 0 || !takes_it(i)) {
                continue;
            }
            while (given == take[p]) {
                ++p;
                given = 0;
            }
            o = static_cast<std::int32_t>(p);
            ++given;
            ++rows[p];
            nnz[p] += row_nnz(static_cast<NodeID>(i));
        }
    };
    if (connected < n) {
        if (options.weight_by_degree) {
            spread([&](std::int64_t i) { return row_nnz(static_cast<NodeID>(i)) > 0; }, nnz);
        }
        spread([](std::int64_t) { return true; }, rows);
    }
    for (int p = 0; p < options.num_parts; ++p) {
        if (rows[static_cast<std::size_t>(p)] == 0) {
            HALO_THROW(InputError, "KaMinPar left part ", p, " of ", options.num_parts,
                       " empty (", n, " nodes, ", connected,
                       " with an edge): every part must own at least one; use fewer parts");
        }
    }
    return owner;
}

}  // namespace halo::detail
