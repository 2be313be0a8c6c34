// The MPI halo exchanger on host buffers.
//
// Receives are posted first, straight into the halo region of x when its rows are contiguous
// (ld == cols): the shard's numbering puts each peer's block there in the order the peer sends it,
// so no unpack is needed. Send rows are gathered into one packed buffer while the receives are
// already posted. MpiMessenger splits large blocks into messages, posts and checks them.
#include "halo/comm/mpi_exchanger.hpp"

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/mpi/mpi_error.hpp"
#include "mpi_messages.hpp"

namespace halo {
namespace {

class MpiExchanger final : public CountingExchanger {
public:
    MpiExchanger(MPI_Comm comm, const Shard& shard, std::int64_t max_dim,
                 const MpiExchangerOptions& options);
    ~MpiExchanger() override;

    void start(DenseView<float> x) override;
    void finish() override;
    void barrier() override { messenger_.barrier(); }

private:
    // First, so that the plan is checked before anything is sized from it.
    detail::MpiMessenger messenger_;
    std::int64_t max_dim_;
    std::int64_t num_owned_;
    std::int64_t num_halo_;
    std::vector<std::int32_t> send_rows_;

    // Sized for max_dim at construction; unique_ptr rather than vector so that the destructor can
    // leak the send buffer when sends it cannot complete still point into it.
    std::unique_ptr<float[]> send_buffer_;
    std::unique_ptr<float[]> staging_;  // receives of a strided x (ld > cols)

    bool staged_ = false;
    DenseView<float> x_{};
};

MpiExchanger::MpiExchanger(MPI_Comm comm, const Shard& shard, std::int64_t max_dim,
                           const MpiExchangerOptions& options)
    : messenger_(comm, detail::checked_plan(comm, shard), max_dim, options),
      max_dim_(max_dim),
      num_owned_(shard.num_owned),
      num_halo_(shard.num_halo),
      send_rows_(shard.plan.send_rows),
      send_buffer_(
          std::make_unique<float[]>(static_cast<std::size_t>(send_rows_.size() * max_dim))),
      staging_(std::make_unique<float[]>(static_cast<std::size_t>(num_halo_ * max_dim)))
{
}

MpiExchanger::~MpiExchanger()
{
    // Destroyed mid-exchange (an exception between start and finish): the sends still reading the
    // send buffer are released, not completed, so the buffer is leaked rather than freed under
    // MPI's feet.
    if (messenger_.abandon()) {
        static_cast<void>(send_buffer_.release());
    }
}

void MpiExchanger::start(DenseView<float> x)
{
    HALO_EXPECTS(!messenger_.in_flight(), "start() called again before finish()");
    check_exchanged_matrix(x, num_owned_, num_halo_, 0, max_dim_, "the exchanger");

    const double t0 = MPI_Wtime();
    const std::int64_t cols = x.cols;
    x_ = x;
    staged_ = x.ld != x.cols && num_halo_ > 0;
    messenger_.post_receives(staged_ ? staging_.get() : x.row(num_owned_), cols);
    if (cols > 0) {
        for (std::size_t i = 0; i < send_rows_.size(); ++i) {
            std::memcpy(send_buffer_.get() + static_cast<std::int64_t>(i) * cols,
                        x.row(send_rows_[i]), static_cast<std::size_t>(cols) * sizeof(float));
        }
    }
    messenger_.post_sends(send_buffer_.get());
    messenger_.add_stats(stats_);
    stats_.start_seconds += MPI_Wtime() - t0;
}

void MpiExchanger::finish()
{
    HALO_EXPECTS(messenger_.in_flight(), "finish() called without start()");
    const double t0 = MPI_Wtime();
    messenger_.wait();
    if (staged_) {
        const auto cols = x_.cols;
        for (std::int64_t h = 0; h < num_halo_; ++h) {
            std::memcpy(x_.row(num_owned_ + h), staging_.get() + h * cols,
                        static_cast<std::size_t>(cols) * sizeof(float));
        }
    }
    stats_.exchanges += 1;
    stats_.finish_seconds += MPI_Wtime() - t0;
}

}  // namespace

std::unique_ptr<HaloExchanger> make_mpi_exchanger(MPI_Comm comm, const Shard& shard,
                                                  std::int64_t max_dim,
                                                  const MpiExchangerOptions& options)
{
    return std::make_unique<MpiExchanger>(comm, shard, max_dim, options);
}

}  // namespace halo
