#include "dataset_ledger.hpp"
#include "dataset_reader.hpp"
#include "halo/store/store.hpp"

namespace halo {

void check_dataset(const std::filesystem::path& path)
{
    const store::QuietErrors quiet;
    const store::DatasetReader reader(path);
    const auto& info = reader.info();
    const auto owner = reader.owner();
    store::DatasetLedger ledger(owner, info.num_parts);
    for (int p = 0; p < info.num_parts; ++p) {
        // One part in memory at a time; the ledger keeps only its transfer lists.
        const auto shard = reader.part(p);
        ledger.add(shard, reader.file() + ": /parts/" + std::to_string(p));
    }
    ledger.finish(info.num_nonzeros, reader.file());
}

}  // namespace halo
