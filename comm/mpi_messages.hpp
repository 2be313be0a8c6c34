// Private to comm/: the MPI messaging the two MPI exchangers share (host buffers; device buffers
// staged through pinned host memory or handed to a CUDA-aware MPI). The exchangers own the buffers
// and decide where rows are packed and received; this class splits each peer block into messages
// of at most max_message_bytes (MPI counts are int), posts them, waits for them and checks that
// every receive got what the plan says.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "halo/comm/mpi_exchanger.hpp"
#include "halo/core/exchanger.hpp"
#include "halo/core/shard.hpp"

namespace halo::detail {

class MpiMessenger {
public:
    /// Messages for `plan` over `comm` with rows of up to `max_dim` floats. Throws halo::LogicError
    /// when max_dim < 1, options.max_message_bytes is below one float or options.tag is outside
    /// MPI's tag range. The plan must already have passed the exchanger's local checks (peers in
    /// range, offsets growing from 0): the piece lists and requests are reserved from it here, so
    /// posting allocates nothing.
    MpiMessenger(MPI_Comm comm, const HaloPlan& plan, std::int64_t max_dim,
                 const MpiExchangerOptions& options);
    MpiMessenger(const MpiMessenger&) = delete;
    MpiMessenger& operator=(const MpiMessenger&) = delete;

    /// Between post_receives() and the wait() (or abandon()) that ends the exchange.
    bool in_flight() const { return in_flight_; }

    /// Begins an exchange of rows `cols` (<= max_dim) wide: posts every receive into
    /// `recv_buffer`, which holds the halo rows packed (num_recv x cols, in plan order). Receives
    /// go first so that a peer's message finds its buffer already posted.
    void post_receives(float* recv_buffer, std::int64_t cols);
    /// Posts every send from `send_buffer`, the send rows packed (num_send x cols, in plan order).
    /// Call once after post_receives(); the buffer must stay unchanged until wait() returns.
    void post_sends(const float* send_buffer);
    /// Waits for every message and ends the exchange. Throws halo::MpiError when a receive got
    /// fewer floats than the plan says (the peers' plans disagree).
    void wait();
    /// Ends an exchange that will not be waited for (an exchanger destroyed mid-exchange), without
    /// throwing: receives are cancelled and completed, so nothing is written after this returns;
    /// sends are released, since waiting for them could hang when a peer never receives. Returns
    /// whether any send may still read its buffer: the owner must then leak that buffer.
    bool abandon() noexcept;

    /// MPI_Barrier over the communicator (HaloExchanger::barrier). Throws halo::MpiError.
    void barrier() const;

    /// Adds the bytes and messages of the exchange posted last to `stats`.
    void add_stats(ExchangeStats& stats) const;

private:
    // One message of a (possibly split) block: `count` floats at element `offset` of the packed
    // send buffer or of the receive buffer.
    struct Piece {
        int peer = 0;
        std::int64_t offset = 0;
        int count = 0;
    };

    // Splits each block of `ranks`/`offsets` (rows) of width `cols` into pieces of at most
    // max_elements_ floats. Pieces of one block go out in order on one tag; MPI's non-overtaking
    // rule (same source, tag and communicator match in posting order) puts them back in order.
    void split(const std::vector<std::int32_t>& ranks, const std::vector<std::int64_t>& offsets,
               std::int64_t cols, std::vector<Piece>& pieces) const;

    MPI_Comm comm_;
    int tag_;
    std::int64_t max_elements_;  // floats per message
    std::int64_t num_recv_;      // rows
    std::int64_t num_send_;      // rows
    std::vector<std::int32_t> recv_ranks_;
    std::vector<std::int64_t> recv_offsets_;
    std::vector<std::int32_t> send_ranks_;
    std::vector<std::int64_t> send_offsets_;

    std::vector<Piece> recv_pieces_;
    std::vector<Piece> send_pieces_;
    std::vector<MPI_Request> requests_;  // receives first, then sends
    std::vector<MPI_Status> statuses_;

    bool in_flight_ = false;
    std::int64_t cols_ = 0;
};

/// The checks a rank can make alone that keep an exchanger's memory accesses in bounds: the shard
/// is this rank's part of a `size`-part plan, peers are in range and not the rank itself, offsets
/// start at 0 and grow, they end at num_halo and at send_rows.size(), and every send row is owned.
/// Throws halo::LogicError naming the first violation. check_halo_plan verifies the plans against
/// the peers (collectively); this one is what an exchanger needs to be memory-safe.
void check_local_plan(const Shard& shard, int rank, int size);

/// The shard's plan, once check_local_plan passed for this rank of `comm`: check_halo_plan
/// verifies the plan against the peers, this only keeps this rank's memory accesses (into x, the
/// buffers and the messenger's pieces) in bounds.
const HaloPlan& checked_plan(MPI_Comm comm, const Shard& shard);

}  // namespace halo::detail
