#include "halo/partition/partition.hpp"

#include <metis.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "halo/core/enum_names.hpp"
#include "halo/core/error.hpp"
#ifdef HALO_HAVE_KAMINPAR
#include "kaminpar_partition.hpp"
#endif

namespace halo {
namespace {

// METIS wants a symmetric graph without self-loops in its own index type. Build that from the
// pattern of `a` (A | A^T minus the diagonal), checking that it fits idx_t.
void metis_graph(const CsrView& a, std::vector<idx_t>& xadj, std::vector<idx_t>& adjncy)
{
    const auto n = a.num_rows;
    // Degree counting over A and A^T; duplicates are removed after sorting each row.
    std::vector<std::int64_t> count(n + 1, 0);
    for (std::int64_t i = 0; i < n; ++i) {
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            const auto j = a.indices[k];
            if (j != i) {
                ++count[i + 1];
                ++count[j + 1];
            }
        }
    }
    std::partial_sum(count.begin(), count.end(), count.begin());
    check_metis_limit(n, count[n]);
    std::vector<idx_t> entries(count[n]);
    std::vector<std::int64_t> next(count.begin(), count.end() - 1);
    for (std::int64_t i = 0; i < n; ++i) {
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            const auto j = a.indices[k];
            if (j != i) {
                entries[next[i]++] = static_cast<idx_t>(j);
                entries[next[j]++] = static_cast<idx_t>(i);
            }
        }
    }
    xadj.assign(n + 1, 0);
    adjncy.clear();
    adjncy.reserve(entries.size() / 2 + 1);
    for (std::int64_t i = 0; i < n; ++i) {
        auto first = entries.begin() + count[i];
        auto last = entries.begin() + count[i + 1];
        std::sort(first, last);
        last = std::unique(first, last);
        adjncy.insert(adjncy.end(), first, last);
        xadj[i + 1] = static_cast<idx_t>(adjncy.size());
    }
}

std::vector<std::int32_t> metis_partition(const CsrView& a, const PartitionOptions& options)
{
    std::vector<idx_t> xadj;
    std::vector<idx_t> adjncy;
    metis_graph(a, xadj, adjncy);
    idx_t n = static_cast<idx_t>(a.num_rows);
    idx_t ncon = options.balance_rows ? 2 : 1;
    idx_t nparts = options.num_parts;
    std::vector<idx_t> vwgt;
    if (options.balance_rows) {
        vwgt.resize(2 * static_cast<std::size_t>(n));  // per node: rows, then nonzeros
        for (idx_t i = 0; i < n; ++i) {
            vwgt[2 * static_cast<std::size_t>(i)] = 1;
            vwgt[2 * static_cast<std::size_t>(i) + 1] = 1 + (xadj[i + 1] - xadj[i]);
        }
    } else if (options.weight_by_degree) {
        vwgt.resize(n);
        for (idx_t i = 0; i < n; ++i) {
            vwgt[i] = 1 + (xadj[i + 1] - xadj[i]);
        }
    }
    idx_t metis_options[METIS_NOPTIONS];
    METIS_SetDefaultOptions(metis_options);
    metis_options[METIS_OPTION_SEED] = static_cast<idx_t>(options.seed % 1000000007ULL);
    metis_options[METIS_OPTION_UFACTOR] =
        static_cast<idx_t>(std::lround(std::max(0.0, options.imbalance - 1.0) * 1000.0));
    metis_options[METIS_OPTION_NUMBERING] = 0;
    // ubvec: each constraint's tolerance (METIS's default for ncon > 1 is 1.05, not UFACTOR).
    std::vector<real_t> ubvec(static_cast<std::size_t>(ncon),
                              static_cast<real_t>(std::max(1.001, options.imbalance)));
    idx_t objval = 0;
    std::vector<idx_t> part(n, 0);
    const int status = METIS_PartGraphKway(
        &n, &ncon, xadj.data(), adjncy.data(), vwgt.empty() ? nullptr : vwgt.data(), nullptr,
        nullptr, &nparts, nullptr, ncon > 1 ? ubvec.data() : nullptr, metis_options, &objval,
        part.data());
    if (status != METIS_OK) {
        HALO_THROW(Error, "METIS_PartGraphKway failed with status ", status,
                   status == METIS_ERROR_MEMORY ? " (out of memory)" : "",
                   status == METIS_ERROR_INPUT ? " (input error)" : "", " for ", n, " nodes and ",
                   options.num_parts, " parts");
    }
    return {part.begin(), part.end()};
}

}  // namespace

void check_metis_limit(std::int64_t num_nodes, std::int64_t adjacency_entries)
{
    constexpr auto limit = static_cast<std::int64_t>(std::numeric_limits<idx_t>::max());
    if (num_nodes > limit || adjacency_entries > limit) {
        HALO_THROW(InputError, "the graph has ", num_nodes, " nodes and ", adjacency_entries,
                   " symmetrized adjacency entries; METIS (", sizeof(idx_t) * 8,
                   "-bit idx_t) takes at most 2^31 - 1 = ", limit,
                   " of each: use --partitioner kaminpar (64-bit edge ids), or dkaminpar or "
                   "ptscotch under mpirun");
    }
}

std::vector<std::int32_t> partition_graph(const CsrView& a, const PartitionOptions& options)
{
    HALO_EXPECTS(a.num_rows == a.num_cols, "partitioning needs a square adjacency, got ",
                 a.num_rows, " x ", a.num_cols);
    const auto n = a.num_rows;
    if (options.num_parts < 1) {
        HALO_THROW(InputError, "number of parts must be at least 1, got ", options.num_parts);
    }
    if (options.num_parts > std::max<std::int64_t>(n, 1)) {
        HALO_THROW(InputError, "cannot split ", n, " nodes into ", options.num_parts,
                   " parts: some part would be empty");
    }
    if (options.imbalance < 1.0) {
        HALO_THROW(InputError, "imbalance tolerance must be >= 1.0, got ", options.imbalance);
    }
    if (options.num_parts == 1) {
        return std::vector<std::int32_t>(n, 0);
    }
    switch (options.method) {
        case Partitioner::metis:
            return metis_partition(a, options);
        case Partitioner::block: {
            std::vector<std::int32_t> owner(n);
            const auto p = options.num_parts;
            for (std::int64_t v = 0; v < n; ++v) {
                owner[v] = static_cast<std::int32_t>(v * p / n);
            }
            return owner;
        }
        case Partitioner::random: {
            // A seeded shuffle of an even assignment, so parts differ by at most one node.
            std::vector<std::int32_t> owner(n);
            for (std::int64_t v = 0; v < n; ++v) {
                owner[v] = static_cast<std::int32_t>(v % options.num_parts);
            }
            std::mt19937_64 rng(options.seed);
            for (std::int64_t v = n - 1; v > 0; --v) {
                std::uniform_int_distribution<std::int64_t> pick(0, v);
                std::swap(owner[v], owner[pick(rng)]);
            }
            return owner;
        }
        case Partitioner::kaminpar:
#ifdef HALO_HAVE_KAMINPAR
            return detail::kaminpar_partition(a, options);
#else
            HALO_THROW(InputError, "this build has no KaMinPar (configured with "
                                   "-DHALO_WITH_KAMINPAR=OFF): use --partitioner metis");
#endif
        case Partitioner::ptscotch:
        case Partitioner::dkaminpar:
            HALO_THROW(InputError, "the ", to_string(options.method),
                       " partitioner runs distributed "
                       "(halo::partition_distributed, halo-partition under mpirun), "
                       "not through partition_graph");
    }
    HALO_THROW(LogicError, "unknown partitioner");
}

namespace {

// In the order the error message lists them.
constexpr std::array<EnumName<Partitioner>, 6> partitioner_names{
    {{Partitioner::metis, "metis"},
     {Partitioner::kaminpar, "kaminpar"},
     {Partitioner::dkaminpar, "dkaminpar"},
     {Partitioner::ptscotch, "ptscotch"},
     {Partitioner::block, "block"},
     {Partitioner::random, "random"}}};

}  // namespace

int kaminpar_threads(int requested)
{
    // OpenMP's count: OMP_NUM_THREADS where set, else the processors of this process's affinity.
    return requested > 0 ? requested : std::max(1, omp_get_max_threads());
}

int kaminpar_tries(int requested, std::int64_t nonzeros)
{
    if (requested > 0) {
        return requested;
    }
    return nonzeros <= (std::int64_t{1} << 24) ? 4 : 1;
}

bool kaminpar_available()
{
#ifdef HALO_HAVE_KAMINPAR
    return true;
#else
    return false;
#endif
}

std::vector<std::string> kaminpar_presets()
{
#ifdef HALO_HAVE_KAMINPAR
    return detail::kaminpar_preset_names();
#else
    return {};
#endif
}

Partitioner parse_partitioner(std::string_view text)
{
    return parse_enum(partitioner_names, text, "partitioner");
}

std::string to_string(Partitioner method)
{
    return std::string(enum_name(partitioner_names, method));
}

PartitionQuality partition_quality(const CsrView& a, const std::vector<std::int32_t>& owner,
                                   int num_parts)
{
    HALO_EXPECTS(static_cast<std::int64_t>(owner.size()) == a.num_rows, "owner has ", owner.size(),
                 " entries for ", a.num_rows, " rows");
    PartitionQuality q;
    q.parts.resize(num_parts);
    std::vector<std::vector<std::int64_t>> halo(num_parts);
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        const auto p = owner[i];
        HALO_EXPECTS(p >= 0 && p < num_parts, "node ", i, " has owner ", p);
        auto& part = q.parts[p];
        ++part.owned_rows;
        part.nnz += a.indptr[i + 1] - a.indptr[i];
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            const auto j = a.indices[k];
            if (owner[j] != p) {
                halo[p].push_back(j);
                if (i < j) {
                    ++q.edge_cut;
                }
            }
        }
    }
    for (int p = 0; p < num_parts; ++p) {
        auto& h = halo[p];
        std::sort(h.begin(), h.end());
        h.erase(std::unique(h.begin(), h.end()), h.end());
        q.parts[p].halo_rows = static_cast<std::int64_t>(h.size());
        q.halo_volume += q.parts[p].halo_rows;
        std::vector<bool> seen(num_parts, false);
        for (const auto j : h) {
            seen[owner[j]] = true;
        }
        q.parts[p].neighbours =
            static_cast<std::int32_t>(std::count(seen.begin(), seen.end(), true));
    }
    auto imbalance = [&](auto field) {
        double max = 0.0;
        double sum = 0.0;
        for (const auto& part : q.parts) {
            max = std::max(max, static_cast<double>(part.*field));
            sum += static_cast<double>(part.*field);
        }
        return sum > 0.0 ? max / (sum / num_parts) : 1.0;
    };
    q.row_imbalance = imbalance(&PartitionQuality::Part::owned_rows);
    q.nnz_imbalance = imbalance(&PartitionQuality::Part::nnz);
    return q;
}

namespace detail {

void require_preset(const std::string& name, const std::vector<std::string>& known,
                    const char* which)
{
    if (std::find(known.begin(), known.end(), name) != known.end()) {
        return;
    }
    std::string list;
    for (const auto& k : known) {
        list += (list.empty() ? "" : ", ") + k;
    }
    HALO_THROW(InputError, "unknown ", which, " preset '", name, "' (known: ", list, ")");
}

std::vector<std::int64_t> water_fill(const std::vector<std::int64_t>& load, std::int64_t count)
{
    const auto parts = load.size();
    std::vector<std::int64_t> take(parts, 0);
    if (parts == 0 || count <= 0) {
        return take;
    }
    auto taken_at = [&](std::int64_t level) {
        std::int64_t sum = 0;
        for (const auto l : load) {
            sum += std::max<std::int64_t>(0, level - l);
        }
        return sum;
    };
    // The highest level that `count` items reach: every part below it filled up to it.
    std::int64_t low = *std::min_element(load.begin(), load.end());
    std::int64_t high = low + count;  // taken_at(high) >= count
    while (low < high) {
        const auto mid = low + (high - low + 1) / 2;
        if (taken_at(mid) <= count) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    auto left = count;
    for (std::size_t p = 0; p < parts; ++p) {
        take[p] = std::max<std::int64_t>(0, low - load[p]);
        left -= take[p];
    }
    // Fewer left than parts at the level: one more each, lowest part ids first.
    for (std::size_t p = 0; p < parts && left > 0; ++p) {
        if (load[p] + take[p] == low) {
            ++take[p];
            --left;
        }
    }
    HALO_EXPECTS(left == 0, "water_fill left ", left, " of ", count, " items");
    return take;
}

}  // namespace detail
}  // namespace halo
