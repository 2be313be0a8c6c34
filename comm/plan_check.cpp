// check_halo_plan: the collective agreement check run before the first exchange
// (docs/ARCHITECTURE.md, "Core types and conventions"; HPCG's SetupHalo, Tpetra's Import).
//
// A send that no receive matches, or a receive larger than its send, leaves an MPI or NCCL
// exchange waiting forever, so the check itself must never hang: every rank runs exactly the same
// sequence of collectives whatever it finds, and only after the last one do all ranks throw the
// same message (the first problem of the lowest rank that saw one) together.
#include <mpi.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "halo/comm/mpi_exchanger.hpp"
#include "halo/core/error.hpp"
#include "halo/mpi/mpi_error.hpp"

namespace halo {
namespace {

// FNV-1a over the bytes of the global ids in order: cheap, and sensitive to order as well as to
// content, which is what a receiver relies on (rows land in the order they are sent).
class Fnv1a {
public:
    void add(std::int64_t value)
    {
        auto bits = static_cast<std::uint64_t>(value);
        for (int byte = 0; byte < 8; ++byte) {
            hash_ = (hash_ ^ (bits & 0xffu)) * 0x100000001b3ull;
            bits >>= 8;
        }
    }
    std::uint64_t value() const { return hash_; }

private:
    std::uint64_t hash_ = 0xcbf29ce484222325ull;
};

// Per-peer summary exchanged by the all-to-all: the row count (kNotListed when the peer is absent
// from the rank list, kBrokenPlan from a rank whose own plan failed its local checks) and the hash
// of the global ids.
constexpr std::int64_t kNotListed = -1;
constexpr std::int64_t kBrokenPlan = -2;
struct PeerSummary {
    std::int64_t count = kNotListed;
    std::int64_t hash = 0;  // an FNV-1a value carried bit for bit
};

// A rank list must be ascending, distinct, in [0, size) and without the rank itself; its offsets
// must start at 0, be monotone and have one entry more than the list. Returns the first violation.
std::string check_rank_list(const std::string& where, int part, int size, const char* ranks_name,
                            const std::vector<std::int32_t>& ranks, const char* offsets_name,
                            const std::vector<std::int64_t>& offsets)
{
    std::ostringstream os;
    os << where << ": part " << part << ": ";
    if (offsets.empty() && ranks.empty()) {
        return {};
    }
    if (offsets.size() != ranks.size() + 1) {
        os << offsets_name << " has " << offsets.size() << " entries for " << ranks.size() << ' '
           << ranks_name << " (expected " << ranks.size() + 1 << ')';
        return os.str();
    }
    if (offsets.front() != 0) {
        os << offsets_name << "[0] is " << offsets.front() << ", expected 0";
        return os.str();
    }
    for (std::size_t b = 0; b < ranks.size(); ++b) {
        if (ranks[b] < 0 || ranks[b] >= size) {
            os << ranks_name << '[' << b << "] = " << ranks[b] << " is not a rank of the " << size
               << "-rank communicator";
            return os.str();
        }
        if (ranks[b] == part) {
            os << ranks_name << '[' << b << "] names the part itself";
            return os.str();
        }
        if (b > 0 && ranks[b] <= ranks[b - 1]) {
            os << ranks_name << " is not strictly ascending at entry " << b << " (" << ranks[b - 1]
               << ", " << ranks[b] << ')';
            return os.str();
        }
        if (offsets[b + 1] < offsets[b]) {
            os << offsets_name << " decreases at entry " << b + 1 << " (" << offsets[b] << ", "
               << offsets[b + 1] << ')';
            return os.str();
        }
    }
    return {};
}

// The checks a rank can make alone; they guard every index used by the pairwise summaries.
std::string local_plan_error(const Shard& shard, int rank, int size, const std::string& where)
{
    std::ostringstream os;
    if (shard.num_parts != size) {
        os << where << ": the plan is for " << shard.num_parts << " parts but the communicator has "
           << size << " ranks";
        return os.str();
    }
    if (shard.part != rank) {
        os << where << ": rank " << rank << " was given part " << shard.part
           << " (every rank must hold the part of its own rank)";
        return os.str();
    }
    const HaloPlan& plan = shard.plan;
    const int part = shard.part;
    if (auto e = check_rank_list(where, part, size, "recv_ranks", plan.recv_ranks, "recv_offsets",
                                 plan.recv_offsets);
        !e.empty()) {
        return e;
    }
    if (auto e = check_rank_list(where, part, size, "send_ranks", plan.send_ranks, "send_offsets",
                                 plan.send_offsets);
        !e.empty()) {
        return e;
    }
    os << where << ": part " << part << ": ";
    if (plan.num_recv() != shard.num_halo) {
        os << "recv_offsets end at " << plan.num_recv() << " but the part has " << shard.num_halo
           << " halo rows";
        return os.str();
    }
    if (static_cast<std::int64_t>(shard.halo_global_ids.size()) != shard.num_halo) {
        os << "halo_global_ids has " << shard.halo_global_ids.size() << " entries for "
           << shard.num_halo << " halo rows";
        return os.str();
    }
    if (static_cast<std::int64_t>(shard.global_ids.size()) != shard.num_owned) {
        os << "global_ids has " << shard.global_ids.size() << " entries for " << shard.num_owned
           << " owned rows";
        return os.str();
    }
    if (plan.num_send() != static_cast<std::int64_t>(plan.send_rows.size())) {
        os << "send_offsets end at " << plan.num_send() << " but send_rows has "
           << plan.send_rows.size() << " entries";
        return os.str();
    }
    for (std::size_t i = 0; i < plan.send_rows.size(); ++i) {
        if (plan.send_rows[i] < 0 || plan.send_rows[i] >= shard.num_owned) {
            os << "send_rows[" << i << "] = " << plan.send_rows[i] << " is not an owned row (0.."
               << shard.num_owned - 1 << ')';
            return os.str();
        }
    }
    return {};
}

std::string hex(std::int64_t bits)
{
    std::ostringstream os;
    os << "0x" << std::hex << static_cast<std::uint64_t>(bits);
    return os.str();
}

// Describes how what `sender` announced to `receiver` disagrees with what `receiver` expects;
// empty when they agree.
std::string pair_error(const std::string& where, int sender, int receiver, const PeerSummary& sent,
                       const PeerSummary& expected)
{
    std::ostringstream os;
    os << where << ": ";
    if (sent.count == kNotListed && expected.count == kNotListed) {
        return {};
    }
    if (expected.count == kNotListed) {
        os << "part " << sender << " sends " << sent.count << " rows to part " << receiver
           << ", but part " << receiver << " expects none from part " << sender;
    } else if (sent.count == kNotListed) {
        os << "part " << receiver << " expects " << expected.count << " rows from part " << sender
           << ", but part " << sender << " sends none to part " << receiver;
    } else if (sent.count != expected.count) {
        os << "part " << sender << " sends " << sent.count << " rows to part " << receiver
           << ", but part " << receiver << " expects " << expected.count << " from part " << sender;
    } else if (sent.hash != expected.hash) {
        os << "part " << sender << " sends " << sent.count << " rows to part " << receiver
           << ", but their global ids differ from the ones part " << receiver
           << " expects from part " << sender << " (FNV-1a " << hex(sent.hash) << " vs "
           << hex(expected.hash) << ')';
    } else {
        return {};
    }
    return os.str();
}

}  // namespace

void check_halo_plan(MPI_Comm comm, const Shard& shard, const std::string& where)
{
    int rank = 0;
    int size = 0;
    HALO_MPI_TRY(MPI_Comm_rank(comm, &rank));
    HALO_MPI_TRY(MPI_Comm_size(comm, &size));

    // A rank whose own plan is broken still takes part in every collective below, announcing
    // nothing, so that the others never wait for it.
    std::string error = local_plan_error(shard, rank, size, where);
    const bool locally_valid = error.empty();
    std::vector<PeerSummary> announced(size);  // what this rank sends to each peer
    std::vector<PeerSummary> expected(size);   // what this rank expects from each peer
    if (!locally_valid) {
        for (auto& summary : announced) {
            summary.count = kBrokenPlan;
        }
    } else {
        const HaloPlan& plan = shard.plan;
        for (std::size_t b = 0; b < plan.send_ranks.size(); ++b) {
            Fnv1a hash;
            for (auto i = plan.send_offsets[b]; i < plan.send_offsets[b + 1]; ++i) {
                hash.add(shard.global_ids[plan.send_rows[i]]);
            }
            announced[plan.send_ranks[b]] = {plan.send_offsets[b + 1] - plan.send_offsets[b],
                                             static_cast<std::int64_t>(hash.value())};
        }
        for (std::size_t b = 0; b < plan.recv_ranks.size(); ++b) {
            Fnv1a hash;
            for (auto i = plan.recv_offsets[b]; i < plan.recv_offsets[b + 1]; ++i) {
                hash.add(shard.halo_global_ids[i]);
            }
            expected[plan.recv_ranks[b]] = {plan.recv_offsets[b + 1] - plan.recv_offsets[b],
                                            static_cast<std::int64_t>(hash.value())};
        }
    }

    // received[p]: what part p announced it sends to this rank.
    std::vector<PeerSummary> received(size);
    static_assert(sizeof(PeerSummary) == 2 * sizeof(std::int64_t));
    HALO_MPI_TRY(
        MPI_Alltoall(announced.data(), 2, MPI_INT64_T, received.data(), 2, MPI_INT64_T, comm));

    std::int64_t problems = locally_valid ? 0 : 1;
    if (locally_valid) {
        for (int p = 0; p < size; ++p) {
            // A peer with a broken plan reports its own error, which explains any disagreement.
            if (received[p].count == kBrokenPlan) {
                continue;
            }
            auto e = pair_error(where, p, rank, received[p], expected[p]);
            if (!e.empty()) {
                problems += 1;
                if (error.empty()) {
                    error = std::move(e);
                }
            }
        }
    }

    // Local errors outrank pairwise ones (they explain them); among equals the lowest rank wins.
    const int kind = error.empty() ? 2 : (locally_valid ? 1 : 0);
    int key = kind * size + rank;
    std::int64_t total_problems = 0;
    HALO_MPI_TRY(MPI_Allreduce(&problems, &total_problems, 1, MPI_INT64_T, MPI_SUM, comm));
    HALO_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &key, 1, MPI_INT, MPI_MIN, comm));
    if (total_problems == 0) {
        return;
    }
    const int reporter = key % size;
    int length = rank == reporter ? static_cast<int>(error.size()) : 0;
    HALO_MPI_TRY(MPI_Bcast(&length, 1, MPI_INT, reporter, comm));
    error.resize(static_cast<std::size_t>(length));
    HALO_MPI_TRY(MPI_Bcast(error.data(), length, MPI_CHAR, reporter, comm));
    if (total_problems > 1) {
        error += detail::concat(" (and ", total_problems - 1, " more problem",
                                total_problems > 2 ? "s" : "", " in the halo plans)");
    }
    HALO_THROW(InputError, error);
}

}  // namespace halo
