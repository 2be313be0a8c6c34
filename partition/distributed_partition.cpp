// Distributed partitioning with PT-Scotch or dKaMinPar
// (include/halo/partition_mpi/distributed_partition.hpp): the pipeline, its steps 1 (each rank's
// slice), 2 (block rows of the CSR) and 4 (owners and boundary flags); step 3 is in
// distributed_scotch.cpp, 5 and 6 in distributed_shards.cpp. A failure that one rank finds in local
// work is agreed on by every rank (collectively), so that every rank throws and none waits in a
// later collective.
#include "halo/partition_mpi/distributed_partition.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "distributed_steps.hpp"
#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/mpi/failure_watch.hpp"
#include "halo/mpi/mpi_error.hpp"
#include "halo/partition/shard_builder.hpp"
#include "kaminpar_partition.hpp"  // require_preset
#include "mpi_comm.hpp"
#ifdef HALO_HAVE_KAMINPAR
#include "dkaminpar_partition.hpp"
#endif

namespace halo {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start)
{
    return std::chrono::duration<double>(Clock::now() - start).count();
}

using detail::Blocks;
using detail::Comm;

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

// What needs no input: the same on every rank.
void check_request(const DistributedOptions& o)
{
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
        detail::strategy_flags(o.strategy);
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
}

struct Slice {
    EdgeList edges;
    std::int64_t num_nodes = 0;
    bool weighted = false;
};

// Step 1: this rank's slice, checked.
Slice read_checked_slice(const Comm& c, const std::string& input, const DistributedOptions& o)
{
    Slice s;
    auto& edges = s.edges;
    collectively(c.comm, "reading its slice", [&] { edges = read_slice(c, input, o.read); });
    const auto n = c.max(edges.num_nodes);
    s.num_nodes = n;
    collectively(c.comm, "checking its slice", [&] {
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
        if (o.num_parts > std::max<std::int64_t>(n, 1)) {
            HALO_THROW(InputError, "cannot split ", n, " nodes into ", o.num_parts,
                       " parts: some part would be empty");
        }
    });
    const auto any_weights = c.max(edges.has_weights() ? 1 : 0) == 1;
    s.weighted = o.build.use_weights && any_weights;
    collectively(c.comm, "checking weights", [&] {
        if (s.weighted && !edges.has_weights() && edges.num_edges() > 0) {
            HALO_THROW(InputError, input, ": some slices have weights and this one has none");
        }
    });
    return s;
}

// Step 2: this rank's block rows of the CSR (symmetrized, self-loops, normalized).
Csr build_block(const Comm& c, const Blocks& blocks, Slice slice, const DistributedOptions& o,
                std::int64_t chunk)
{
    const auto n = slice.num_nodes;
    const auto first_row = blocks.first[c.rank];
    const auto num_local = blocks.first[c.rank + 1] - first_row;
    const auto& edges = slice.edges;
    const bool weighted = slice.weighted;
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
    slice = {};
    Csr block;
    collectively(c.comm, "building its block rows", [&] {
        block = build_csr_rows(first_row, num_local, n, entries.rows, entries.cols, entries.weights,
                               o.build.self_loops);
    });
    entries = {};
    normalize_block(c, block, first_row, o.build.normalization);
    return block;
}

// Step 3: the part of each block row, with PT-Scotch (its strategy resolved) or dKaMinPar.
std::vector<std::int32_t> partition_block(const Comm& c, const Blocks& blocks, const Csr& block,
                                          const DistributedOptions& o, std::int64_t chunk,
                                          DistributedPartition& result, double& refine_seconds)
{
    const auto first_row = blocks.first[c.rank];
    const auto num_local = block.num_rows;
    std::vector<std::int32_t> my_parts;
    auto resolved = o;
    if (o.num_parts == 1) {
        my_parts.assign(num_local, 0);
    } else if (o.build.symmetrize) {
        resolved.strategy = resolve_strategy(o.strategy, result.num_nonzeros);
        my_parts = detail::partition_pattern(c, block, first_row, resolved, refine_seconds);
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
        Csr pattern;
        collectively(c.comm, "building its symmetric pattern", [&] {
            pattern = build_csr_rows(first_row, num_local, block.num_cols, sym.rows, sym.cols, {},
                                     SelfLoops::drop);
        });
        sym = {};
        resolved.strategy = resolve_strategy(o.strategy, c.sum(pattern.nnz()));
        my_parts = detail::partition_pattern(c, pattern, first_row, resolved, refine_seconds);
    }
    result.strategy = o.num_parts == 1                   ? "none (one part)"
                      : o.method == Partitioner::ptscotch ? resolved.strategy
                                                          : o.kaminpar_preset;
#ifdef HALO_HAVE_KAMINPAR
    if (o.method == Partitioner::dkaminpar) {
        result.threads = detail::dkaminpar_threads(c, o.threads);
    }
#endif
    return my_parts;
}

// Step 4: every node's part (result.owner), no part empty, every node's boundary flag, the cut.
std::vector<std::uint8_t> owners_and_boundary(const Comm& c, const Csr& block,
                                              std::int64_t first_row,
                                              const std::vector<std::int32_t>& my_parts,
                                              const DistributedOptions& o,
                                              DistributedPartition& result)
{
    result.owner = c.allgatherv(my_parts);
    const auto& owner = result.owner;
    std::vector<std::int64_t> owned(o.num_parts, 0);
    for (const auto p : my_parts) {
        ++owned[p];
    }
    c.sum(owned);
    collectively(c.comm, "checking the parts", [&] {  // the same sums on every rank
        for (int p = 0; p < o.num_parts; ++p) {
            if (owned[p] == 0) {
                HALO_THROW(InputError, to_string(o.method), " left part ", p, " of ", o.num_parts,
                           " empty (", result.num_nodes,
                           " nodes): every part must own at least one; use fewer parts");
            }
        }
    });
    const auto num_local = block.num_rows;
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
    result.quality.edge_cut = c.sum(cut);
    return c.allgatherv(my_boundary);
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
    collectively(c.comm, "checking the options", [&] { check_request(o); });
    const auto chunk = std::clamp<std::int64_t>(o.chunk_entries, 1, std::int64_t{1} << 28);
    auto start = Clock::now();

    auto slice = read_checked_slice(c, input, o);
    const auto n = slice.num_nodes;
    result.seconds["read"] = since(start);
    start = Clock::now();

    const Blocks blocks(n, c.size);
    const auto first_row = blocks.first[c.rank];
    auto block = build_block(c, blocks, std::move(slice), o, chunk);
    result.num_nodes = n;
    result.num_nonzeros = c.sum(block.nnz());
    result.has_values = c.max(block.has_values() ? 1 : 0) == 1;
    result.seconds["build_csr"] = since(start);
    start = Clock::now();

    double refine_seconds = 0;
    const auto my_parts = partition_block(c, blocks, block, o, chunk, result, refine_seconds);
    result.seconds["partition"] = since(start) - refine_seconds;
    result.seconds["refine"] = refine_seconds;
    start = Clock::now();

    const auto boundary = owners_and_boundary(c, block, first_row, my_parts, o, result);
    auto rows =
        detail::send_rows_to_parts(c, block, first_row, result.owner, chunk, result.has_values);
    block = {};
    result.seconds["redistribute"] = since(start);
    start = Clock::now();

    result.shards =
        detail::build_rank_shards(c, std::move(rows), n, result.owner, o.num_parts, boundary);
    detail::part_quality(c, result.shards, o.num_parts, n, result.num_nonzeros, result.quality);
    result.seconds["shards"] = since(start);
    return result;
}

}  // namespace halo
