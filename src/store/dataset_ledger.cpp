#include "dataset_ledger.hpp"

#include <set>

#include "halo/core/error.hpp"

namespace halo::store {

DatasetLedger::DatasetLedger(const std::vector<std::int32_t>& owner, int num_parts)
    : owner_(owner), owned_count_(static_cast<std::size_t>(num_parts), 0), seen_(owner.size())
{
    for (const auto o : owner_) {
        ++owned_count_[static_cast<std::size_t>(o)];
    }
}

void DatasetLedger::add(const Shard& shard, const std::string& where)
{
    const auto num_nodes = static_cast<std::int64_t>(owner_.size());
    const auto p = shard.part;
    auto check_id = [&](const char* dataset, std::size_t i, global_id g) {
        if (g < 0 || g >= num_nodes) {
            HALO_THROW(InputError, where, "/", dataset, "[", i, "] = ", g, " outside [0, ",
                       num_nodes, ") (num_nodes)");
        }
    };

    for (std::size_t i = 0; i < shard.global_ids.size(); ++i) {
        const auto g = shard.global_ids[i];
        check_id("global_ids", i, g);
        const auto o = owner_[static_cast<std::size_t>(g)];
        if (o != p) {
            HALO_THROW(InputError, where, "/global_ids[", i, "] = ", g, " is owned by part ", o,
                       " according to /partition/owner, not by part ", p);
        }
        if (seen_[static_cast<std::size_t>(g)]) {
            HALO_THROW(InputError, where, "/global_ids[", i, "] = ", g,
                       " is listed twice (global ids of all parts must be a permutation of [0, ",
                       num_nodes, "))");
        }
        seen_[static_cast<std::size_t>(g)] = true;
    }
    if (shard.num_owned != owned_count_[static_cast<std::size_t>(p)]) {
        HALO_THROW(InputError, where, ": owns ", shard.num_owned,
                   " rows but /partition/owner assigns ", owned_count_[static_cast<std::size_t>(p)],
                   " nodes to part ", p);
    }

    const auto& plan = shard.plan;
    for (std::size_t b = 0; b < plan.recv_ranks.size(); ++b) {
        const auto from = plan.recv_ranks[b];
        auto& block = received_[{from, p}];
        for (auto k = plan.recv_offsets[b]; k < plan.recv_offsets[b + 1]; ++k) {
            const auto g = shard.halo_global_ids[static_cast<std::size_t>(k)];
            check_id("halo/global_ids", static_cast<std::size_t>(k), g);
            const auto o = owner_[static_cast<std::size_t>(g)];
            if (o != from) {
                HALO_THROW(InputError, where, "/halo/global_ids[", k, "] = ", g,
                           " is owned by part ", o,
                           " according to /partition/owner, but it lies in the receive block "
                           "from part ",
                           from, " (halo/recv_ranks[", b, "])");
            }
            block.push_back(g);
        }
    }
    for (std::size_t b = 0; b < plan.send_ranks.size(); ++b) {
        auto& block = sent_[{p, plan.send_ranks[b]}];
        for (auto k = plan.send_offsets[b]; k < plan.send_offsets[b + 1]; ++k) {
            const auto row = plan.send_rows[static_cast<std::size_t>(k)];
            block.push_back(shard.global_ids[static_cast<std::size_t>(row)]);
        }
    }
    nnz_ += shard.csr.nnz();
}

void DatasetLedger::finish(std::int64_t num_nonzeros, const std::string& file) const
{
    if (nnz_ != num_nonzeros) {
        HALO_THROW(InputError, file, ": the parts hold ", nnz_,
                   " nonzeros in all (sum of the nnz attributes) but the root attribute "
                   "num_nonzeros is ",
                   num_nonzeros);
    }
    static const std::vector<global_id> none;
    std::set<Peers> pairs;
    for (const auto& [peers, ids] : sent_) {
        pairs.insert(peers);
    }
    for (const auto& [peers, ids] : received_) {
        pairs.insert(peers);
    }
    for (const auto& [from, to] : pairs) {
        const auto s = sent_.find({from, to});
        const auto r = received_.find({from, to});
        const auto& sent = s == sent_.end() ? none : s->second;
        const auto& received = r == received_.end() ? none : r->second;
        if (sent.size() != received.size()) {
            HALO_THROW(InputError, file, ": halo plans disagree: part ", from, " sends ",
                       sent.size(), " rows to part ", to, " (/parts/", from,
                       "/halo/send_*) but part ", to, " receives ", received.size(),
                       " rows from part ", from, " (/parts/", to, "/halo/recv_*)");
        }
        for (std::size_t k = 0; k < sent.size(); ++k) {
            if (sent[k] != received[k]) {
                HALO_THROW(InputError, file, ": halo plans disagree: row ", k,
                           " of the block part ", from, " sends to part ", to, " is global id ",
                           sent[k], " but part ", to, " expects global id ", received[k],
                           " there (/parts/", to, "/halo/global_ids)");
            }
        }
    }
}

}  // namespace halo::store
