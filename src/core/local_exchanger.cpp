// The exchanger of a single-part run (include/halo/exchanger.hpp).
#include <memory>

#include "halo/error.hpp"
#include "halo/exchanger.hpp"

namespace halo {
namespace {

class LocalExchanger final : public HaloExchanger {
public:
    void start(DenseView<float>) override { ++stats_.exchanges; }
    void finish() override {}
    const ExchangeStats& stats() const override { return stats_; }

private:
    ExchangeStats stats_;
};

}  // namespace

std::unique_ptr<HaloExchanger> make_local_exchanger(const Shard& shard)
{
    if (shard.num_halo != 0 || !shard.plan.send_ranks.empty() || !shard.plan.recv_ranks.empty()) {
        HALO_THROW(InputError, "part ", shard.part, " of ", shard.num_parts, " has ",
                   shard.num_halo, " halo rows and ", shard.plan.send_ranks.size(),
                   " peers: a local run needs a single-part dataset");
    }
    return std::make_unique<LocalExchanger>();
}

}  // namespace halo
