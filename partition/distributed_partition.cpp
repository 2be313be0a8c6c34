// Distributed partitioning with PT-Scotch or dKaMinPar (include/halo/distributed_partition.hpp).
#include "halo/distributed_partition.hpp"

#include <ptscotch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "halo/distributed_refine.hpp"
#include "halo/error.hpp"
#include "halo/generators.hpp"
#include "halo/mpi_error.hpp"
#include "halo/shard_builder.hpp"
#include "kaminpar_partition.hpp"  // require_preset
#include "mpi_comm.hpp"
#ifdef HALO_HAVE_KAMINPAR
#include "dkaminpar_partition.hpp"
#endif

static_assert(sizeof(SCOTCH_Num) == 8,
              "HaloGNN needs PT-Scotch with 64-bit SCOTCH_Num (Debian's scotch-int64 variant)");

namespace halo {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start)
{
    return std::chrono::duration<double>(Clock::now() - start).count();
}

using detail::Blocks;
using detail::Comm;

// Runs `body`; when it throws on some rank, every rank throws (the failing one its own error, the
// others one naming it), so that no rank waits in a later collective for a rank that left.
template <typename Body>
void collectively(const Comm& c, const char* what, Body&& body)
{
    int failed_rank = -1;
    std::exception_ptr error;
    try {
        body();
    } catch (...) {
        error = std::current_exception();
        failed_rank = c.rank;
    }
    int first_failed = failed_rank < 0 ? c.size : failed_rank;
    HALO_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, c.comm));
    if (error) {
        std::rethrow_exception(error);
    }
    if (first_failed < c.size) {
        HALO_THROW(Error, "rank ", first_failed, " failed ", what, " (its error is above)");
    }
}

bool is_generator_spec(const std::string& input)
{
    return input.rfind("rmat:", 0) == 0 || input.rfind("er:", 0) == 0;
}

// Step 1: this rank's slice of the input.
EdgeList read_slice(const Comm& c, const std::string& input, const GraphReadOptions& read)
{
    if (is_generator_spec(input)) {
        const auto spec = parse_graph_spec(input);
        const auto m = num_edges(spec);
        return generate(spec, m * c.rank / c.size, m * (c.rank + 1) / c.size);
    }
    const auto format = detect_graph_format(input);
    if (format == GraphFormat::edge_list) {
        return read_edge_list_slice(input, c.rank, c.size, read);
    }
    // Matrix Market and binary CSR: read whole, keep an edge range (not memory-scalable).
    auto all = read_graph(input, read);
    const auto m = all.num_edges();
    const auto begin = m * c.rank / c.size;
    const auto end = m * (c.rank + 1) / c.size;
    EdgeList mine;
    mine.num_nodes = all.num_nodes;
    mine.src.assign(all.src.begin() + begin, all.src.begin() + end);
    mine.dst.assign(all.dst.begin() + begin, all.dst.begin() + end);
    if (all.has_weights()) {
        mine.weights.assign(all.weights.begin() + begin, all.weights.begin() + end);
    }
    return mine;
}

// Entries for the block rows: (row inside the block, column, weight).
struct BlockEntries {
    std::vector<local_id> rows;
    std::vector<local_id> cols;
    std::vector<float> weights;
};

// Sends the entries that emit(k, put) produces for each item k of [0, count) to the rank of their
// row, in rounds of at most `chunk` items; every rank takes part in every round.
template <typename Emit>
BlockEntries exchange_entries(const Comm& c, const Blocks& blocks, std::int64_t count,
                              std::int64_t chunk, bool weighted, Emit&& emit)
{
    BlockEntries out;
    const std::int64_t rounds = c.max((count + chunk - 1) / chunk);
    std::vector<local_id> rows;
    std::vector<local_id> cols;
    std::vector<float> weights;
    std::vector<int> counts(c.size);
    std::vector<std::int64_t> cursor(c.size);
    struct Entry {
        global_id row;
        global_id col;
        float weight;
    };
    std::vector<Entry> staged;
    for (std::int64_t round = 0; round < rounds; ++round) {
        const auto begin = std::min(count, round * chunk);
        const auto end = std::min(count, begin + chunk);
        staged.clear();
        for (auto k = begin; k < end; ++k) {
            emit(k, [&](global_id r, global_id col, float w) { staged.push_back({r, col, w}); });
        }
        std::fill(counts.begin(), counts.end(), 0);
        for (const auto& e : staged) {
            ++counts[blocks.rank_of(e.row)];
        }
        std::int64_t at = 0;
        for (int r = 0; r < c.size; ++r) {
            cursor[r] = at;
            at += counts[r];
        }
        rows.resize(staged.size());
        cols.resize(staged.size());
        weights.resize(weighted ? staged.size() : 0);
        for (const auto& e : staged) {
            const int r = blocks.rank_of(e.row);
            const auto k = cursor[r]++;
            rows[k] = static_cast<local_id>(e.row - blocks.first[r]);
            cols[k] = static_cast<local_id>(e.col);
            if (weighted) {
                weights[k] = e.weight;
            }
        }
        c.alltoallv_append(rows, counts, out.rows);
        c.alltoallv_append(cols, counts, out.cols);
        if (weighted) {
            c.alltoallv_append(weights, counts, out.weights);
        }
    }
    return out;
}

// Normalizes the block rows exactly as normalize() does the whole CSR, with the degrees of all
// nodes allgathered for gcn.
void normalize_block(const Comm& c, Csr& block, std::int64_t first_row, Normalization kind)
{
    if (kind == Normalization::none) {
        return;
    }
    const auto degree = normalization_degrees(block);
    std::vector<double> all_degrees;
    if (kind == Normalization::gcn) {
        all_degrees = c.allgatherv(degree);
    }
    normalize_rows(block, first_row, kind, degree, all_degrees);
}

SCOTCH_Num strategy_flags(const std::string& name)
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

}  // namespace

std::vector<std::string> dkaminpar_presets()
{
#ifdef HALO_HAVE_KAMINPAR
    return detail::dkaminpar_preset_names();
#else
    return {};
#endif
}

std::filesystem::path part_file_path(const std::filesystem::path& path, int rank, int size)
{
    return std::filesystem::path(path.string() + ".rank" + std::to_string(rank) + "-of-" +
                                 std::to_string(size));
}

DistributedPartition partition_distributed(MPI_Comm comm, const std::string& input,
                                           const DistributedOptions& o)
{
    const Comm c(comm);
    DistributedPartition result;
    int provided = 0;
    HALO_MPI_TRY(MPI_Query_thread(&provided));
    if (provided < MPI_THREAD_MULTIPLE) {
        HALO_THROW(LogicError, "PT-Scotch needs MPI initialized with MPI_THREAD_MULTIPLE");
    }
    if (o.num_parts < 1) {
        HALO_THROW(InputError, "number of parts must be at least 1, got ", o.num_parts);
    }
    if (o.imbalance < 1.0) {
        HALO_THROW(InputError, "imbalance tolerance must be >= 1.0, got ", o.imbalance);
    }
    if (o.method == Partitioner::ptscotch) {
        strategy_flags(o.strategy);
    } else if (o.method == Partitioner::dkaminpar) {
        if (!kaminpar_available()) {
            HALO_THROW(InputError, "this build has no dKaMinPar (configured with "
                                   "-DHALO_WITH_KAMINPAR=OFF): use --partitioner ptscotch");
        }
        detail::require_preset(o.kaminpar_preset, dkaminpar_presets(), "dKaMinPar");
    } else {
        HALO_THROW(InputError, "the distributed path runs ptscotch or dkaminpar, not ",
                   to_string(o.method));
    }
    const auto chunk = std::clamp<std::int64_t>(o.chunk_entries, 1, std::int64_t{1} << 28);
    auto start = Clock::now();

    // 1. This rank's slice.
    EdgeList edges;
    collectively(c, "reading its slice", [&] { edges = read_slice(c, input, o.read); });
    const auto n = c.max(edges.num_nodes);
    collectively(c, "checking its slice", [&] {
        if (n > std::numeric_limits<local_id>::max()) {
            HALO_THROW(InputError, "graph has ", n,
                       " nodes; supported are 0 to 2^31-1 (int32 column ids)");
        }
        for (std::int64_t e = 0; e < edges.num_edges(); ++e) {
            if (edges.src[e] >= n || edges.dst[e] >= n) {
                HALO_THROW(InputError, input, ": edge (", edges.src[e], ", ", edges.dst[e],
                           ") has a node id outside [0, ", n, ")");
            }
        }
    });
    if (o.num_parts > std::max<std::int64_t>(n, 1)) {
        HALO_THROW(InputError, "cannot split ", n, " nodes into ", o.num_parts,
                   " parts: some part would be empty");
    }
    const auto any_weights = c.max(edges.has_weights() ? 1 : 0) == 1;
    const bool weighted = o.build.use_weights && any_weights;
    collectively(c, "checking weights", [&] {
        if (weighted && !edges.has_weights() && edges.num_edges() > 0) {
            HALO_THROW(InputError, input, ": some slices have weights and this one has none");
        }
    });
    result.seconds["read"] = since(start);
    start = Clock::now();

    // 2. Block rows of the CSR.
    const Blocks blocks(n, c.size);
    const auto first_row = blocks.first[c.rank];
    const auto num_local = blocks.first[c.rank + 1] - first_row;
    const auto& src = o.build.transpose ? edges.dst : edges.src;
    const auto& dst = o.build.transpose ? edges.src : edges.dst;
    auto entries = exchange_entries(c, blocks, edges.num_edges(), chunk, weighted,
                                    [&](std::int64_t e, auto&& put) {
                                        const float w = weighted ? edges.weights[e] : 0.0f;
                                        put(src[e], dst[e], w);
                                        if (o.build.symmetrize && src[e] != dst[e]) {
                                            put(dst[e], src[e], w);
                                        }
                                    });
    edges = {};
    auto block = build_csr_rows(first_row, num_local, n, entries.rows, entries.cols,
                                entries.weights, o.build.self_loops);
    entries = {};
    normalize_block(c, block, first_row, o.build.normalization);
    result.num_nodes = n;
    result.num_nonzeros = c.sum(block.nnz());
    result.has_values = c.max(block.has_values() ? 1 : 0) == 1;
    result.seconds["build_csr"] = since(start);
    start = Clock::now();

    // 3. PT-Scotch on the symmetric pattern, then the refinement.
    std::vector<std::int32_t> my_parts;
    double refine_seconds = 0;
    auto resolved = o;
    if (o.num_parts == 1) {
        my_parts.assign(num_local, 0);
    } else if (o.build.symmetrize) {
        resolved.strategy = resolve_strategy(o.strategy, result.num_nonzeros);
        my_parts = partition_pattern(c, block, first_row, resolved, refine_seconds);
    } else {
        // A | A^T: each off-diagonal entry also goes to its column's rank, transposed.
        auto sym =
            exchange_entries(c, blocks, num_local, chunk, false, [&](std::int64_t i, auto&& put) {
                for (auto k = block.indptr[i]; k < block.indptr[i + 1]; ++k) {
                    const global_id j = block.indices[k];
                    if (j != first_row + i) {
                        put(first_row + i, j, 0.0f);
                        put(j, first_row + i, 0.0f);
                    }
                }
            });
        const auto pattern =
            build_csr_rows(first_row, num_local, n, sym.rows, sym.cols, {}, SelfLoops::drop);
        sym = {};
        resolved.strategy = resolve_strategy(o.strategy, c.sum(pattern.nnz()));
        my_parts = partition_pattern(c, pattern, first_row, resolved, refine_seconds);
    }
    result.strategy = o.num_parts == 1                   ? "none (one part)"
                      : o.method == Partitioner::ptscotch ? resolved.strategy
                                                          : o.kaminpar_preset;
#ifdef HALO_HAVE_KAMINPAR
    if (o.method == Partitioner::dkaminpar) {
        result.threads = dkaminpar_threads(c, o.threads);
    }
#endif
    result.seconds["partition"] = since(start) - refine_seconds;
    result.seconds["refine"] = refine_seconds;
    start = Clock::now();

    // 4. Owner, boundary flags, quality.
    result.owner = c.allgatherv(my_parts);
    const auto& owner = result.owner;
    std::vector<std::int64_t> owned(o.num_parts, 0);
    for (const auto p : my_parts) {
        ++owned[p];
    }
    c.sum(owned);
    for (int p = 0; p < o.num_parts; ++p) {
        if (owned[p] == 0) {
            HALO_THROW(InputError, to_string(o.method), " left part ", p, " of ", o.num_parts,
                       " empty (", n, " nodes): every part must own at least one; use fewer parts");
        }
    }
    std::vector<std::uint8_t> my_boundary(num_local, 0);
    std::int64_t cut = 0;
#pragma omp parallel for schedule(dynamic, 1024) reduction(+ : cut)
    for (std::int64_t i = 0; i < num_local; ++i) {
        const auto g = first_row + i;
        for (auto k = block.indptr[i]; k < block.indptr[i + 1]; ++k) {
            const auto j = block.indices[k];
            if (owner[j] != owner[g]) {
                my_boundary[i] = 1;
                cut += g < j ? 1 : 0;
            }
        }
    }
    const auto boundary = c.allgatherv(my_boundary);
    my_boundary = {};
    result.quality.edge_cut = c.sum(cut);

    // 5. Rows to the rank handling their part, in rounds of about `chunk` nonzeros.
    std::vector<local_id> got_ids;
    std::vector<std::int64_t> got_lengths;
    std::vector<local_id> got_cols;
    std::vector<float> got_values;
    {
        std::vector<std::int64_t> order(num_local);
        std::iota(order.begin(), order.end(), 0);
        std::int64_t next_row = 0;
        std::vector<int> row_counts(c.size);
        std::vector<int> nz_counts(c.size);
        std::vector<local_id> ids;
        std::vector<std::int64_t> lengths;
        std::vector<local_id> cols;
        std::vector<float> values;
        while (true) {
            auto end_row = next_row;
            std::int64_t nz = 0;
            while (end_row < num_local && (nz == 0 || nz + block.row_nnz(end_row) <= chunk)) {
                nz += block.row_nnz(end_row);
                ++end_row;
            }
            if (c.max(end_row > next_row ? 1 : 0) == 0) {
                break;
            }
            // Rows of this round grouped by destination rank (stable: ascending global id).
            std::fill(row_counts.begin(), row_counts.end(), 0);
            std::fill(nz_counts.begin(), nz_counts.end(), 0);
            for (auto i = next_row; i < end_row; ++i) {
                const auto d = part_rank(owner[first_row + i], c.size);
                ++row_counts[d];
                nz_counts[d] += static_cast<int>(block.row_nnz(i));
            }
            std::stable_sort(order.begin() + next_row, order.begin() + end_row,
                             [&](std::int64_t a, std::int64_t b) {
                                 return part_rank(owner[first_row + a], c.size) <
                                        part_rank(owner[first_row + b], c.size);
                             });
            ids.clear();
            lengths.clear();
            cols.clear();
            values.clear();
            for (auto k = next_row; k < end_row; ++k) {
                const auto i = order[k];
                ids.push_back(static_cast<local_id>(first_row + i));
                lengths.push_back(block.row_nnz(i));
                cols.insert(cols.end(), block.indices.begin() + block.indptr[i],
                            block.indices.begin() + block.indptr[i + 1]);
                if (block.has_values()) {
                    values.insert(values.end(), block.values.begin() + block.indptr[i],
                                  block.values.begin() + block.indptr[i + 1]);
                }
            }
            c.alltoallv_append(ids, row_counts, got_ids);
            c.alltoallv_append(lengths, row_counts, got_lengths);
            c.alltoallv_append(cols, nz_counts, got_cols);
            if (result.has_values) {
                if (!block.has_values()) {
                    values.assign(cols.size(), 1.0f);
                }
                c.alltoallv_append(values, nz_counts, got_values);
            }
            next_row = end_row;
        }
    }
    block = {};
    result.seconds["redistribute"] = since(start);
    start = Clock::now();

    // 6. Shards of the parts this rank handles.
    Csr rows;
    rows.num_rows = n;
    rows.num_cols = n;
    rows.indptr.assign(n + 1, 0);
    for (std::size_t r = 0; r < got_ids.size(); ++r) {
        rows.indptr[got_ids[r] + 1] = got_lengths[r];
    }
    std::partial_sum(rows.indptr.begin(), rows.indptr.end(), rows.indptr.begin());
    rows.indices.resize(got_cols.size());
    rows.values.resize(got_values.size());
    {
        std::int64_t at = 0;
        for (std::size_t r = 0; r < got_ids.size(); ++r) {
            const auto out = rows.indptr[got_ids[r]];
            std::copy_n(got_cols.begin() + at, got_lengths[r], rows.indices.begin() + out);
            if (!got_values.empty()) {
                std::copy_n(got_values.begin() + at, got_lengths[r], rows.values.begin() + out);
            }
            at += got_lengths[r];
        }
    }
    got_ids = {};
    got_lengths = {};
    got_cols = {};
    got_values = {};
    for (int p = c.rank; p < o.num_parts; p += c.size) {
        result.shards.push_back(build_shard_rows(rows, owner, o.num_parts, p, boundary));
    }
    rows = {};

    // Send plans: every receive block of part q from part p tells p which rows q expects.
    {
        std::vector<std::int64_t> send;
        std::vector<int> counts(c.size, 0);
        std::vector<std::vector<std::int64_t>> per_rank(c.size);
        for (const auto& shard : result.shards) {
            const auto& plan = shard.plan;
            for (std::size_t b = 0; b < plan.recv_ranks.size(); ++b) {
                const auto p = plan.recv_ranks[b];
                auto& out = per_rank[part_rank(p, c.size)];
                out.push_back(p);
                out.push_back(shard.part);
                out.push_back(plan.recv_offsets[b + 1] - plan.recv_offsets[b]);
                out.insert(out.end(), shard.halo_global_ids.begin() + plan.recv_offsets[b],
                           shard.halo_global_ids.begin() + plan.recv_offsets[b + 1]);
            }
        }
        for (int r = 0; r < c.size; ++r) {
            counts[r] = static_cast<int>(per_rank[r].size());
            send.insert(send.end(), per_rank[r].begin(), per_rank[r].end());
            per_rank[r] = {};
        }
        std::vector<std::int64_t> got;
        c.alltoallv_append(send, counts, got);
        send = {};
        // (receiver part q, global ids) per sending part p.
        std::vector<std::vector<std::pair<std::int32_t, std::vector<global_id>>>> requests(
            result.shards.size());
        for (std::size_t at = 0; at < got.size();) {
            const auto p = static_cast<int>(got[at]);
            const auto q = static_cast<std::int32_t>(got[at + 1]);
            const auto count = got[at + 2];
            at += 3;
            auto& list = requests[static_cast<std::size_t>(p / c.size)];
            list.emplace_back(q,
                              std::vector<global_id>(got.begin() + at, got.begin() + at + count));
            at += count;
        }
        got = {};
        std::vector<local_id> local_of(n, -1);
        for (std::size_t s = 0; s < result.shards.size(); ++s) {
            auto& shard = result.shards[s];
            for (std::int64_t l = 0; l < shard.num_owned; ++l) {
                local_of[shard.global_ids[l]] = static_cast<local_id>(l);
            }
            auto& list = requests[s];
            std::sort(list.begin(), list.end(),
                      [](const auto& a, const auto& b) { return a.first < b.first; });
            auto& plan = shard.plan;
            plan.send_ranks.clear();
            plan.send_offsets.assign(1, 0);
            plan.send_rows.clear();
            for (const auto& [q, ids] : list) {
                plan.send_ranks.push_back(q);
                for (const auto g : ids) {
                    HALO_EXPECTS(local_of[g] >= 0, "part ", q, " expects node ", g, " from part ",
                                 shard.part, ", which does not own it");
                    plan.send_rows.push_back(local_of[g]);
                }
                plan.send_offsets.push_back(static_cast<std::int64_t>(plan.send_rows.size()));
            }
            for (std::int64_t l = 0; l < shard.num_owned; ++l) {
                local_of[shard.global_ids[l]] = -1;
            }
            validate_shard(shard, "part " + std::to_string(shard.part));
        }
    }

    // Quality, as partition_quality reports it.
    result.quality.parts.assign(o.num_parts, {});
    {
        std::vector<std::int64_t> stats(4 * static_cast<std::size_t>(o.num_parts), 0);
        for (const auto& shard : result.shards) {
            const auto p = static_cast<std::size_t>(shard.part);
            stats[4 * p] = shard.num_owned;
            stats[4 * p + 1] = shard.csr.nnz();
            stats[4 * p + 2] = shard.num_halo;
            stats[4 * p + 3] = static_cast<std::int64_t>(shard.plan.recv_ranks.size());
        }
        c.sum(stats);
        auto& q = result.quality;
        double max_rows = 0;
        double max_nnz = 0;
        for (int p = 0; p < o.num_parts; ++p) {
            auto& part = q.parts[p];
            part.owned_rows = stats[4 * p];
            part.nnz = stats[4 * p + 1];
            part.halo_rows = stats[4 * p + 2];
            part.neighbours = static_cast<std::int32_t>(stats[4 * p + 3]);
            q.halo_volume += part.halo_rows;
            max_rows = std::max(max_rows, static_cast<double>(part.owned_rows));
            max_nnz = std::max(max_nnz, static_cast<double>(part.nnz));
        }
        q.row_imbalance = n > 0 ? max_rows / (static_cast<double>(n) / o.num_parts) : 1.0;
        q.nnz_imbalance = result.num_nonzeros > 0
                              ? max_nnz / (static_cast<double>(result.num_nonzeros) / o.num_parts)
                              : 1.0;
    }
    result.seconds["shards"] = since(start);
    return result;
}

void write_distributed_dataset(MPI_Comm comm, const std::filesystem::path& path, DatasetInfo info,
                               const DistributedPartition& result,
                               const std::function<void(DatasetWriter&, const Shard&)>& extra)
{
    const Comm c(comm);
    info.num_nodes = result.num_nodes;
    info.num_nonzeros = result.num_nonzeros;
    info.has_values = result.has_values;
    // No stale root may outlive this run: part files are about to be replaced under it.
    if (c.rank == 0) {
        std::error_code ignored;
        std::filesystem::remove(path, ignored);
    }
    HALO_MPI_TRY(MPI_Barrier(c.comm));
    if (c.size == 1) {
        DatasetWriter writer(path, info, result.owner);
        for (const auto& shard : result.shards) {
            writer.write_part(shard);
            if (extra) {
                extra(writer, shard);
            }
        }
        writer.commit();
        return;
    }
    collectively(c, "writing its part file", [&] {
        if (result.shards.empty()) {
            return;
        }
        std::vector<int> mine;
        for (const auto& shard : result.shards) {
            mine.push_back(shard.part);
        }
        DatasetWriter writer(part_file_path(path, c.rank, c.size), info, result.owner, mine);
        for (const auto& shard : result.shards) {
            writer.write_part(shard);
            if (extra) {
                extra(writer, shard);
            }
        }
        writer.commit();
    });
    collectively(c, "writing the dataset root", [&] {
        if (c.rank != 0) {
            return;
        }
        DatasetWriter root(path, info, result.owner);
        for (int p = 0; p < info.num_parts; ++p) {
            // Relative: HDF5 looks for an external link's file beside the file that holds it.
            root.link_part(p, part_file_path(path.filename(), part_rank(p, c.size), c.size));
        }
        root.commit();
    });
}

}  // namespace halo
