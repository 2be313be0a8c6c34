// What every exchanger shares, and the exchanger of a single-part run
// (include/halo/core/exchanger.hpp).
#include "halo/core/exchanger.hpp"

#include <memory>

#include "halo/core/error.hpp"

namespace halo {
namespace {

class LocalExchanger final : public CountingExchanger {
public:
    void start(DenseView<float>) override { ++stats_.exchanges; }
    void finish() override {}
};

}  // namespace

std::shared_ptr<float> HaloExchanger::allocate(std::int64_t)
{
    return nullptr;
}

void check_exchanged_matrix(const DenseView<float>& x, std::int64_t num_owned,
                            std::int64_t num_halo, std::int64_t min_cols, std::int64_t max_cols,
                            const char* exchanger)
{
    HALO_EXPECTS(x.rows == num_owned + num_halo, "x has ", x.rows, " rows, the shard ", num_owned,
                 " owned + ", num_halo, " halo");
    HALO_EXPECTS(x.cols >= min_cols && x.cols <= max_cols, "x has ", x.cols, " columns, ",
                 exchanger, " was built for at most ", max_cols);
    HALO_EXPECTS(x.ld >= x.cols, "x has leading dimension ", x.ld, " below its ", x.cols,
                 " columns");
    HALO_EXPECTS(x.data != nullptr || x.rows * x.cols == 0, "x has no data");
}

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
