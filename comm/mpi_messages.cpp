#include "mpi_messages.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>

#include "halo/core/error.hpp"
#include "halo/mpi/mpi_error.hpp"

namespace halo::detail {
namespace {

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

}  // namespace

MpiMessenger::MpiMessenger(MPI_Comm comm, const HaloPlan& plan, std::int64_t max_dim,
                           const MpiExchangerOptions& options)
    : comm_(comm),
      tag_(options.tag),
      max_elements_(std::min<std::int64_t>(
          options.max_message_bytes / static_cast<std::int64_t>(sizeof(float)), INT_MAX)),
      num_recv_(plan.num_recv()),
      num_send_(plan.num_send()),
      recv_ranks_(plan.recv_ranks),
      recv_offsets_(plan.recv_offsets),
      send_ranks_(plan.send_ranks),
      send_offsets_(plan.send_offsets)
{
    HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
    HALO_EXPECTS(max_elements_ >= 1, "max_message_bytes ", options.max_message_bytes,
                 " is smaller than one float");
    int* tag_ub = nullptr;
    int found = 0;
    HALO_MPI_TRY(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &found));
    HALO_EXPECTS(tag_ >= 0 && (!found || tag_ <= *tag_ub), "tag ", tag_,
                 " is outside MPI's tag range");

    const auto recv_capacity = max_pieces(recv_offsets_, max_dim, max_elements_);
    const auto send_capacity = max_pieces(send_offsets_, max_dim, max_elements_);
    recv_pieces_.reserve(static_cast<std::size_t>(recv_capacity));
    send_pieces_.reserve(static_cast<std::size_t>(send_capacity));
    requests_.reserve(static_cast<std::size_t>(recv_capacity + send_capacity));
    statuses_.resize(static_cast<std::size_t>(recv_capacity + send_capacity));
}

void MpiMessenger::split(const std::vector<std::int32_t>& ranks,
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

void MpiMessenger::post_receives(float* recv_buffer, std::int64_t cols)
{
    HALO_EXPECTS(!in_flight_, "post_receives() called again before wait()");
    recv_pieces_.clear();
    send_pieces_.clear();
    requests_.clear();
    cols_ = cols;
    if (cols > 0) {
        split(recv_ranks_, recv_offsets_, cols, recv_pieces_);
        split(send_ranks_, send_offsets_, cols, send_pieces_);
    }
    in_flight_ = true;
    for (const auto& piece : recv_pieces_) {
        requests_.push_back(MPI_REQUEST_NULL);
        HALO_MPI_TRY(MPI_Irecv(recv_buffer + piece.offset, piece.count, MPI_FLOAT, piece.peer, tag_,
                               comm_, &requests_.back()));
    }
}

void MpiMessenger::post_sends(const float* send_buffer)
{
    HALO_EXPECTS(in_flight_ && requests_.size() == recv_pieces_.size(),
                 "post_sends() called without post_receives() or twice");
    for (const auto& piece : send_pieces_) {
        requests_.push_back(MPI_REQUEST_NULL);
        HALO_MPI_TRY(MPI_Isend(send_buffer + piece.offset, piece.count, MPI_FLOAT, piece.peer, tag_,
                               comm_, &requests_.back()));
    }
}

void MpiMessenger::wait()
{
    HALO_EXPECTS(in_flight_, "wait() called without post_receives()");
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
}

bool MpiMessenger::abandon() noexcept
{
    if (!in_flight_) {
        return false;
    }
    in_flight_ = false;
    // Errors are ignored: this runs in destructors.
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
    return !send_pieces_.empty();
}

void MpiMessenger::barrier() const
{
    HALO_EXPECTS(!in_flight_, "barrier() during an exchange");
    HALO_MPI_TRY(MPI_Barrier(comm_));
}

void MpiMessenger::add_stats(ExchangeStats& stats) const
{
    const auto row_bytes = cols_ * static_cast<std::int64_t>(sizeof(float));
    stats.bytes_sent += num_send_ * row_bytes;
    stats.bytes_received += num_recv_ * row_bytes;
    stats.messages_sent += static_cast<std::int64_t>(send_pieces_.size());
}

namespace {

void check_blocks(const char* ranks_name, const std::vector<std::int32_t>& ranks,
                  const std::vector<std::int64_t>& offsets, int rank, int size)
{
    HALO_EXPECTS(offsets.empty() ? ranks.empty() : offsets.size() == ranks.size() + 1, ranks_name,
                 " has ", ranks.size(), " peers but ", offsets.size(), " offsets");
    HALO_EXPECTS(offsets.empty() || offsets.front() == 0, "offsets of ", ranks_name, " start at ",
                 offsets.front());
    for (std::size_t b = 0; b < ranks.size(); ++b) {
        HALO_EXPECTS(ranks[b] >= 0 && ranks[b] < size && ranks[b] != rank, ranks_name, '[', b,
                     "] = ", ranks[b], " is not a peer of rank ", rank, " of ", size);
        HALO_EXPECTS(offsets[b] <= offsets[b + 1], "offsets of ", ranks_name, " decrease at ",
                     b + 1);
    }
}
}  // namespace

void check_local_plan(const Shard& shard, int rank, int size)
{
    HALO_EXPECTS(rank == shard.part && size == shard.num_parts, "rank ", rank, " of ", size,
                 " was given part ", shard.part, " of ", shard.num_parts);
    const HaloPlan& plan = shard.plan;
    check_blocks("recv_ranks", plan.recv_ranks, plan.recv_offsets, rank, size);
    check_blocks("send_ranks", plan.send_ranks, plan.send_offsets, rank, size);
    HALO_EXPECTS(plan.num_recv() == shard.num_halo, "recv_offsets end at ", plan.num_recv(),
                 " for ", shard.num_halo, " halo rows");
    HALO_EXPECTS(plan.num_send() == static_cast<std::int64_t>(plan.send_rows.size()),
                 "send_offsets end at ", plan.num_send(), " for ", plan.send_rows.size(),
                 " send rows");
    for (auto row : plan.send_rows) {
        HALO_EXPECTS(row >= 0 && row < shard.num_owned, "send row ", row, " is not one of the ",
                     shard.num_owned, " owned rows");
    }
}

const HaloPlan& checked_plan(MPI_Comm comm, const Shard& shard)
{
    int rank = 0;
    int size = 0;
    HALO_MPI_TRY(MPI_Comm_rank(comm, &rank));
    HALO_MPI_TRY(MPI_Comm_size(comm, &size));
    check_local_plan(shard, rank, size);
    return shard.plan;
}

}  // namespace halo::detail
