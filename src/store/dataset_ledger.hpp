// The checks of a dataset that span parts: each part's ids against /partition/owner, the global ids
// of all parts forming a permutation of [0, num_nodes), the pairwise agreement of the halo plans
// (what p sends to q is what q expects from p, in count and in order) and the nonzero total.
//
// Parts are added one at a time and only their transfer lists are kept, so neither the writer nor
// check_dataset ever holds all shards: memory is num_nodes bits plus twice the halo volume.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/shard.hpp"

namespace halo::store {

class DatasetLedger {
public:
    /// `owner` must outlive the ledger and hold values in [0, num_parts).
    DatasetLedger(const std::vector<std::int32_t>& owner, int num_parts);

    /// Checks one shard (already through validate_shard) against the owner array and records its
    /// transfers. `where` names the part in errors: "<file>: /parts/<p>".
    void add(const Shard& shard, const std::string& where);

    /// After every part was added: checks the pairwise plan agreement and the nonzero total.
    /// `file` starts the messages.
    void finish(std::int64_t num_nonzeros, const std::string& file) const;

private:
    using Peers = std::pair<std::int32_t, std::int32_t>;  // (sender, receiver)

    const std::vector<std::int32_t>& owner_;
    std::vector<std::int64_t> owned_count_;
    std::vector<bool> seen_;
    std::map<Peers, std::vector<global_id>> sent_;
    std::map<Peers, std::vector<global_id>> received_;
    std::int64_t nnz_ = 0;
};

}  // namespace halo::store
