// Step 3 of the distributed path (include/halo/partition_mpi/distributed_partition.hpp): PT-Scotch
// on the symmetric pattern of the block rows (its strategies, tuned variants and tries, then the
// distributed refinement), or dKaMinPar.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "distributed_steps.hpp"
// After <cstdint>, <cstdio> and <mpi.h> (distributed_steps.hpp), which ptscotch.h expects.
#include <ptscotch.h>

#include "halo/core/error.hpp"
#include "halo/mpi/mpi_error.hpp"
#include "halo/partition_mpi/distributed_refine.hpp"
#ifdef HALO_HAVE_KAMINPAR
#include "dkaminpar_partition.hpp"
#endif

static_assert(sizeof(SCOTCH_Num) == 8,
              "HaloGNN needs PT-Scotch with 64-bit SCOTCH_Num (Debian's scotch-int64 variant)");

namespace halo::detail {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start)
{
    return std::chrono::duration<double>(Clock::now() - start).count();
}

#define HALO_SCOTCH_TRY(call)                                    \
    do {                                                         \
        if ((call) != 0) {                                       \
            HALO_THROW(Error, #call, " failed on rank ", c.rank, \
                       " (PT-Scotch printed the reason above)"); \
        }                                                        \
    } while (0)

// The text of a strategy, as SCOTCH_stratSave writes it.
std::string strat_string(const Comm& c, SCOTCH_Strat& strat)
{
    char* buffer = nullptr;
    std::size_t length = 0;
    FILE* stream = open_memstream(&buffer, &length);
    HALO_EXPECTS(stream != nullptr, "open_memstream failed on rank ", c.rank);
    const int status = SCOTCH_stratSave(&strat, stream);
    std::fclose(stream);
    std::string text(buffer, length);
    std::free(buffer);
    if (status != 0) {
        HALO_THROW(Error, "SCOTCH_stratSave failed on rank ", c.rank);
    }
    return text;
}

// Variants of PT-Scotch's quality strategy that "tuned" runs besides it: 1, a more thorough
// sequential bipartitioning (100 instead of 10 greedy graph growing passes at the coarsest level,
// FM giving up after 400 instead of 80 moves without gain); 2, that and coarsening that goes on
// while a level keeps up to 90% of the vertices (80%: on citation graphs with many leaves,
// heavy-edge matching shrinks the graph slowly and coarsening stopped early). No variant wins on
// every graph (docs/PARTITION.md), hence the three runs.
std::string tune_strategy(const Comm& c, std::string text, int variant)
{
    const std::pair<const char*, const char*> changes[] = {
        {"h{pass=10}", "h{pass=100}"}, {"move=80,", "move=400,"}, {"rat=0.8", "rat=0.9"}};
    const int used = variant == 1 ? 2 : 3;
    for (int k = 0; k < used; ++k) {
        const std::string a(changes[k].first);
        const std::string b(changes[k].second);
        std::size_t found = 0;
        for (auto at = text.find(a); at != std::string::npos; at = text.find(a, at + b.size())) {
            text.replace(at, a.size(), b);
            ++found;
        }
        HALO_EXPECTS(found > 0, "rank ", c.rank, ": PT-Scotch's quality strategy has no '", a,
                     "' to tune (another Scotch version?): ", text);
    }
    return text;
}

// Step 3: PT-Scotch on the symmetric pattern of the block rows (no diagonal), with the strategy
// variant `variant` (0: as named; 1, 2: tune_strategy). Returns the part of each block row.
std::vector<std::int32_t> scotch_partition_once(const Comm& c, const Csr& pattern,
                                                std::int64_t first_row, const DistributedOptions& o,
                                                std::uint64_t seed, int variant)
{
    const auto n_local = pattern.num_rows;
    std::vector<SCOTCH_Num> vertloctab(n_local + 1, 0);
    std::vector<SCOTCH_Num> veloloctab(o.weight_by_degree ? n_local : 0);
    std::vector<SCOTCH_Num> edgeloctab;
    edgeloctab.reserve(pattern.indices.size());
    for (std::int64_t i = 0; i < n_local; ++i) {
        for (auto k = pattern.indptr[i]; k < pattern.indptr[i + 1]; ++k) {
            if (pattern.indices[k] != first_row + i) {
                edgeloctab.push_back(pattern.indices[k]);
            }
        }
        vertloctab[i + 1] = static_cast<SCOTCH_Num>(edgeloctab.size());
        if (o.weight_by_degree) {
            veloloctab[i] = 1 + (vertloctab[i + 1] - vertloctab[i]);
        }
    }
    const auto edgelocnbr = static_cast<SCOTCH_Num>(edgeloctab.size());
    // Valid pointers even for a rank without rows.
    edgeloctab.reserve(1);
    veloloctab.reserve(1);

    // A context of our own: deterministic (no thread-order dependent steps) with its own
    // generator seeded from `seed`, so that a run repeats exactly for the same rank count.
    SCOTCH_Context context;
    SCOTCH_Dgraph graph;
    SCOTCH_Dgraph bound;
    SCOTCH_Strat strat;
    HALO_SCOTCH_TRY(SCOTCH_contextInit(&context));
    struct Cleanup {
        SCOTCH_Context* context;
        SCOTCH_Dgraph* graph = nullptr;
        SCOTCH_Dgraph* bound = nullptr;
        SCOTCH_Strat* strat = nullptr;
        ~Cleanup()
        {
            if (strat != nullptr) {
                SCOTCH_stratExit(strat);
            }
            if (bound != nullptr) {
                SCOTCH_dgraphExit(bound);
            }
            if (graph != nullptr) {
                SCOTCH_dgraphExit(graph);
            }
            SCOTCH_contextExit(context);
        }
    } cleanup{&context};
    HALO_SCOTCH_TRY(SCOTCH_contextRandomClone(&context));
    HALO_SCOTCH_TRY(SCOTCH_contextOptionSetNum(&context, SCOTCH_OPTIONNUMDETERMINISTIC, 1));
    SCOTCH_contextRandomSeed(&context, static_cast<SCOTCH_Num>(seed % 1000000007ULL));
    HALO_SCOTCH_TRY(SCOTCH_dgraphInit(&graph, c.comm));
    cleanup.graph = &graph;
    std::vector<SCOTCH_Num> part(std::max<std::int64_t>(n_local, 1), 0);
    HALO_SCOTCH_TRY(SCOTCH_stratInit(&strat));
    cleanup.strat = &strat;
    HALO_SCOTCH_TRY(SCOTCH_dgraphBuild(
        &graph, 0, static_cast<SCOTCH_Num>(n_local), static_cast<SCOTCH_Num>(n_local),
        vertloctab.data(), nullptr, o.weight_by_degree ? veloloctab.data() : nullptr, nullptr,
        edgelocnbr, edgelocnbr, edgeloctab.data(), nullptr, nullptr));
    HALO_SCOTCH_TRY(SCOTCH_contextBindDgraph(&context, &graph, &bound));
    cleanup.bound = &bound;
    HALO_SCOTCH_TRY(SCOTCH_stratDgraphMapBuild(
        &strat, strategy_flags(o.strategy), static_cast<SCOTCH_Num>(c.size),
        static_cast<SCOTCH_Num>(o.num_parts), std::max(0.0, o.imbalance - 1.0)));
    if (variant > 0) {
        auto tuned = tune_strategy(c, strat_string(c, strat), variant);
        SCOTCH_stratExit(&strat);
        HALO_SCOTCH_TRY(SCOTCH_stratInit(&strat));
        HALO_SCOTCH_TRY(SCOTCH_stratDgraphMap(&strat, tuned.c_str()));
    }
    HALO_SCOTCH_TRY(
        SCOTCH_dgraphPart(&bound, static_cast<SCOTCH_Num>(o.num_parts), &strat, part.data()));
    std::vector<std::int32_t> result(n_local);
    for (std::int64_t i = 0; i < n_local; ++i) {
        HALO_EXPECTS(part[i] >= 0 && part[i] < o.num_parts, "PT-Scotch put node ", first_row + i,
                     " into part ", part[i], " of ", o.num_parts);
        result[i] = static_cast<std::int32_t>(part[i]);
    }
    return result;
}

// Edges {i, j} of the symmetric pattern (each counted once) whose ends lie in different parts.
std::int64_t pattern_cut(const Comm& c, const Csr& pattern, std::int64_t first_row,
                         const std::vector<std::int32_t>& my_parts)
{
    const auto all = c.allgatherv(my_parts);
    std::int64_t cut = 0;
#pragma omp parallel for schedule(dynamic, 1024) reduction(+ : cut)
    for (std::int64_t i = 0; i < pattern.num_rows; ++i) {
        for (auto k = pattern.indptr[i]; k < pattern.indptr[i + 1]; ++k) {
            const auto j = pattern.indices[k];
            cut += (j > first_row + i && all[j] != all[first_row + i]) ? 1 : 0;
        }
    }
    return c.sum(cut);
}

// PT-Scotch with seeds seed, seed + 1, ..., seed + tries - 1 (with "tuned": each seed with the
// three strategy variants), each result refined (distributed_refine.hpp) unless refine_passes is
// 0; the partition with the smallest cut wins
// (the first on ties), so the result stays a function of the options and R. Adds the time of the
// refinement to `refine_seconds`.
std::vector<std::int32_t> scotch_partition(const Comm& c, const Csr& pattern,
                                           std::int64_t first_row, const DistributedOptions& o,
                                           double& refine_seconds)
{
    std::vector<std::int32_t> best;
    std::int64_t best_cut = -1;
    HALO_EXPECTS(o.strategy != "auto", "resolve the strategy first (resolve_strategy)");
    const int variants = o.strategy == "tuned" ? 3 : 1;
    const int runs = std::max(1, o.tries) * variants;
    for (int run = 0; run < runs; ++run) {
        auto parts = scotch_partition_once(c, pattern, first_row, o, o.seed + run / variants,
                                           run % variants);
        std::int64_t cut = -1;
        if (o.refine_passes > 0) {
            const auto start = Clock::now();
            const RefineOptions r{.num_parts = o.num_parts,
                                  .imbalance = o.imbalance,
                                  .passes = o.refine_passes,
                                  .weight_by_degree = o.weight_by_degree,
                                  .chunk_entries = o.chunk_entries};
            cut = refine_partition(c.comm, pattern, first_row, parts, r).cut_after;
            refine_seconds += since(start);
        }
        if (runs == 1) {
            return parts;
        }
        if (cut < 0) {
            cut = pattern_cut(c, pattern, first_row, parts);
        }
        if (best_cut < 0 || cut < best_cut) {
            best_cut = cut;
            best = std::move(parts);
        }
    }
    return best;
}

}  // namespace

std::int64_t strategy_flags(const std::string& name)
{
    if (name == "quality" || name == "tuned" || name == "auto")  // auto: quality or tuned
        return SCOTCH_STRATQUALITY;
    if (name == "speed")
        return SCOTCH_STRATSPEED;
    if (name == "balance")
        return SCOTCH_STRATBALANCE;
    if (name == "scalability")
        return SCOTCH_STRATSCALABILITY;
    if (name == "default")
        return SCOTCH_STRATDEFAULT;
    HALO_THROW(InputError, "unknown PT-Scotch strategy '", name,
               "' (expected auto, tuned, quality, default, speed, balance or scalability)");
}

// Step 3 for either partitioner, on a symmetric pattern of the block rows.
std::vector<std::int32_t> partition_pattern(const Comm& c, const Csr& pattern,
                                            std::int64_t first_row, const DistributedOptions& o,
                                            double& refine_seconds)
{
    if (o.method == Partitioner::ptscotch) {
        return scotch_partition(c, pattern, first_row, o, refine_seconds);
    }
#ifdef HALO_HAVE_KAMINPAR
    return dkaminpar_partition(c, pattern, first_row, o);
#else
    HALO_THROW(LogicError, "dkaminpar in a build without KaMinPar");
#endif
}

}  // namespace halo::detail
