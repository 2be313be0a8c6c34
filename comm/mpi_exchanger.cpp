// The MPI halo exchanger on host buffers.
//
// Receives are posted first, straight into the halo region of x when its rows are contiguous
// (ld == cols): the shard's numbering puts each peer's block there in the order the peer sends it,
// so no unpack is needed. Send rows are gathered into one packed buffer, and a block larger than
// max_message_bytes goes out as several messages on the same tag; MPI's non-overtaking rule (same
// source, tag and communicator match in posting order) puts the pieces back in order.
#include "halo/mpi_exchanger.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "halo/error.hpp"
#include "halo/mpi_error.hpp"

namespace halo {
namespace {

// One message of a (possibly split) block: `count` floats at element `offset` of the packed send
// buffer, of the halo region, or of the staging buffer.
struct Piece {
    int peer = 0;
    std::int64_t offset = 0;
    int count = 0;
};

class MpiExchanger final : public HaloExchanger {
public:
    MpiExchanger(MPI_Comm comm, const Shard& shard, std::int64_t max_dim,
                 const MpiExchangerOptions& options);
    ~MpiExchanger() override;
    MpiExchanger(const MpiExchanger&) = delete;
    MpiExchanger& operator=(const MpiExchanger&) = delete;

    void start(DenseView<float> x) override;
    void finish() override;
    const ExchangeStats& stats() const override { return stats_; }

private:
    // Splits each block of `ranks`/`offsets` (rows) of width `cols` into pieces of at most
    // max_elements_ floats, appending to `pieces`.
    void split(const std::vector<std::int32_t>& ranks, const std::vector<std::int64_t>& offsets,
               std::int64_t cols, std::vector<Piece>& pieces) const;

    MPI_Comm comm_;
    int tag_;
    std::int64_t max_dim_;
    std::int64_t max_elements_;  // floats per message
    std::int64_t num_owned_;
    std::int64_t num_halo_;
    std::vector<std::int32_t> recv_ranks_;
    std::vector<std::int64_t> recv_offsets_;
    std::vector<std::int32_t> send_ranks_;
    std::vector<std::int64_t> send_offsets_;
    std::vector<std::int32_t> send_rows_;

    // Sized for max_dim at construction; unique_ptr rather than vector so that the destructor can
    // leak the send buffer when sends it cannot complete still point into it.
    std::unique_ptr<float[]> send_buffer_;
    std::unique_ptr<float[]> staging_;  // receives of a strided x (ld > cols)

    std::vector<Piece> recv_pieces_;
    std::vector<Piece> send_pieces_;
    std::vector<MPI_Request> requests_;  // receives first, then sends
    std::vector<MPI_Status> statuses_;

    bool in_flight_ = false;
    bool staged_ = false;
    DenseView<float> x_{};
    ExchangeStats stats_;
};

std::int64_t max_pieces(const std::vector<std::int64_t>& offsets, std::int64_t max_dim,
                        std::int64_t max_elements)
{
    std::int64_t pieces = 0;
    for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
        const auto elements = (offsets[b + 1] - offsets[b]) * max_dim;
        pieces += (elements + max_elements - 1) / max_elements;
    }
    return pieces;
}

void check_blocks(const char* ranks_name, const std::vector<std::int32_t>& ranks,
                  const std::vector<std::int64_t>& offsets, int rank, int size)
{
    HALO_EXPECTS(offsets.empty() ? ranks.empty() : offsets.size() == ranks.size() + 1, ranks_name,
                 " has ", ranks.size(), " peers but ", offsets.size(), " offsets");
    for (std::size_t b = 0; b < ranks.size(); ++b) {
        HALO_EXPECTS(ranks[b] >= 0 && ranks[b] < size && ranks[b] != rank, ranks_name, '[', b,
                     "] = ", ranks[b], " is not a peer of rank ", rank, " of ", size);
        HALO_EXPECTS(offsets[b] <= offsets[b + 1], "offsets of ", ranks_name, " decrease at ",
                     b + 1);
    }
    HALO_EXPECTS(offsets.empty() || offsets.front() == 0, "offsets of ", ranks_name, " start at ",
                 offsets.front());
}

MpiExchanger::MpiExchanger(MPI_Comm comm, const Shard& shard, std::int64_t max_dim,
                           const MpiExchangerOptions& options)
    : comm_(comm),
      tag_(options.tag),
      max_dim_(max_dim),
      max_elements_(std::min<std::int64_t>(
          options.max_message_bytes / static_cast<std::int64_t>(sizeof(float)), INT_MAX)),
      num_owned_(shard.num_owned),
      num_halo_(shard.num_halo),
      recv_ranks_(shard.plan.recv_ranks),
      recv_offsets_(shard.plan.recv_offsets),
      send_ranks_(shard.plan.send_ranks),
      send_offsets_(shard.plan.send_offsets),
      send_rows_(shard.plan.send_rows)
{
    int rank = 0;
    int size = 0;
    HALO_MPI_TRY(MPI_Comm_rank(comm_, &rank));
    HALO_MPI_TRY(MPI_Comm_size(comm_, &size));
    HALO_EXPECTS(rank == shard.part && size == shard.num_parts, "rank ", rank, " of ", size,
                 " was given part ", shard.part, " of ", shard.num_parts);
    HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
    HALO_EXPECTS(max_elements_ >= 1, "max_message_bytes ", options.max_message_bytes,
                 " is smaller than one float");
    int* tag_ub = nullptr;
    int found = 0;
    HALO_MPI_TRY(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &found));
    HALO_EXPECTS(options.tag >= 0 && (!found || options.tag <= *tag_ub), "tag ", options.tag,
                 " is outside MPI's tag range");

    // The plan indexes into x and into the buffers below; check_halo_plan verifies it against the
    // peers, these checks only keep this rank's memory accesses in bounds.
    check_blocks("recv_ranks", recv_ranks_, recv_offsets_, rank, size);
    check_blocks("send_ranks", send_ranks_, send_offsets_, rank, size);
    HALO_EXPECTS(shard.plan.num_recv() == num_halo_, "recv_offsets end at ", shard.plan.num_recv(),
                 " for ", num_halo_, " halo rows");
    HALO_EXPECTS(shard.plan.num_send() == static_cast<std::int64_t>(send_rows_.size()),
                 "send_offsets end at ", shard.plan.num_send(), " for ", send_rows_.size(),
                 " send rows");
    for (auto row : send_rows_) {
        HALO_EXPECTS(row >= 0 && row < num_owned_, "send row ", row, " is not one of the ",
                     num_owned_, " owned rows");
    }

    send_buffer_ = std::make_unique<float[]>(static_cast<std::size_t>(send_rows_.size() * max_dim));
    staging_ = std::make_unique<float[]>(static_cast<std::size_t>(num_halo_ * max_dim));
    const auto recv_capacity = max_pieces(recv_offsets_, max_dim, max_elements_);
    const auto send_capacity = max_pieces(send_offsets_, max_dim, max_elements_);
    recv_pieces_.reserve(static_cast<std::size_t>(recv_capacity));
    send_pieces_.reserve(static_cast<std::size_t>(send_capacity));
    requests_.reserve(static_cast<std::size_t>(recv_capacity + send_capacity));
    statuses_.resize(static_cast<std::size_t>(recv_capacity + send_capacity));
}

MpiExchanger::~MpiExchanger()
{
    if (!in_flight_) {
        return;
    }
    // Destroyed mid-exchange (an exception between start and finish). Waiting for the sends could
    // hang when a peer never posts its receives, so they are released and their buffer is leaked
    // rather than freed under MPI's feet. A cancelled receive completes locally, so those are
    // cancelled and waited for: nothing may write into x after this returns. Errors are ignored:
    // a destructor must not throw.
    const auto num_recv = recv_pieces_.size();
    for (std::size_t i = 0; i < requests_.size(); ++i) {
        if (requests_[i] == MPI_REQUEST_NULL) {
            continue;
        }
        if (i < num_recv) {
            MPI_Cancel(&requests_[i]);
            MPI_Wait(&requests_[i], MPI_STATUS_IGNORE);
        } else {
            MPI_Request_free(&requests_[i]);
        }
    }
    if (!send_pieces_.empty()) {
        static_cast<void>(send_buffer_.release());
    }
}

void MpiExchanger::split(const std::vector<std::int32_t>& ranks,
                         const std::vector<std::int64_t>& offsets, std::int64_t cols,
                         std::vector<Piece>& pieces) const
{
    for (std::size_t b = 0; b < ranks.size(); ++b) {
        const auto end = offsets[b + 1] * cols;
        for (auto offset = offsets[b] * cols; offset < end; offset += max_elements_) {
            pieces.push_back(
                {ranks[b], offset, static_cast<int>(std::min(max_elements_, end - offset))});
        }
    }
}

void MpiExchanger::start(DenseView<float> x)
{
    HALO_EXPECTS(!in_flight_, "start() called again before finish()");
    HALO_EXPECTS(x.rows == num_owned_ + num_halo_, "x has ", x.rows, " rows, the shard ",
                 num_owned_, " owned + ", num_halo_, " halo");
    HALO_EXPECTS(x.cols >= 0 && x.cols <= max_dim_, "x has ", x.cols,
                 " columns, the exchanger was built for at most ", max_dim_);
    HALO_EXPECTS(x.ld >= x.cols, "x has leading dimension ", x.ld, " below its ", x.cols,
                 " columns");
    HALO_EXPECTS(x.data != nullptr || x.rows * x.cols == 0, "x has no data");

    const double t0 = MPI_Wtime();
    const std::int64_t cols = x.cols;
    recv_pieces_.clear();
    send_pieces_.clear();
    requests_.clear();
    if (cols > 0) {
        split(recv_ranks_, recv_offsets_, cols, recv_pieces_);
        split(send_ranks_, send_offsets_, cols, send_pieces_);
    }
    x_ = x;
    staged_ = x.ld != x.cols && num_halo_ > 0;
    float* const halo = staged_ ? staging_.get() : x.row(num_owned_);
    in_flight_ = true;

    // Receives go first so that a peer's message finds its buffer already posted.
    for (const auto& piece : recv_pieces_) {
        requests_.push_back(MPI_REQUEST_NULL);
        HALO_MPI_TRY(MPI_Irecv(halo + piece.offset, piece.count, MPI_FLOAT, piece.peer, tag_, comm_,
                               &requests_.back()));
    }
    if (cols > 0) {
        for (std::size_t i = 0; i < send_rows_.size(); ++i) {
            std::memcpy(send_buffer_.get() + static_cast<std::int64_t>(i) * cols,
                        x.row(send_rows_[i]), static_cast<std::size_t>(cols) * sizeof(float));
        }
    }
    for (const auto& piece : send_pieces_) {
        requests_.push_back(MPI_REQUEST_NULL);
        HALO_MPI_TRY(MPI_Isend(send_buffer_.get() + piece.offset, piece.count, MPI_FLOAT,
                               piece.peer, tag_, comm_, &requests_.back()));
    }

    const auto row_bytes = cols * static_cast<std::int64_t>(sizeof(float));
    stats_.bytes_sent += static_cast<std::int64_t>(send_rows_.size()) * row_bytes;
    stats_.bytes_received += num_halo_ * row_bytes;
    stats_.messages_sent += static_cast<std::int64_t>(send_pieces_.size());
    stats_.start_seconds += MPI_Wtime() - t0;
}

void MpiExchanger::finish()
{
    HALO_EXPECTS(in_flight_, "finish() called without start()");
    const double t0 = MPI_Wtime();
    const int status =
        MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), statuses_.data());
    in_flight_ = false;
    HALO_MPI_TRY(status);

    // A peer whose plan sends fewer rows than this one expects completes the receive short, and
    // silently so; check_halo_plan catches that up front, this catches it if it was skipped.
    for (std::size_t i = 0; i < recv_pieces_.size(); ++i) {
        int count = 0;
        HALO_MPI_TRY(MPI_Get_count(&statuses_[i], MPI_FLOAT, &count));
        if (count != recv_pieces_[i].count) {
            HALO_THROW(MpiError, "halo exchange: received ", count, " floats from part ",
                       recv_pieces_[i].peer, " where the plan expects ", recv_pieces_[i].count,
                       " (the halo plans disagree; check_halo_plan finds where)");
        }
    }

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
