// Halo exchange: before a layer aggregates, every rank sends the feature rows its neighbours need
// (HaloPlan::send_rows) and receives theirs into the halo region of its own feature matrix,
// rows [num_owned, num_owned + num_halo). The exchange is split into start() and finish() so that
// the aggregation of interior rows runs while it is in flight (docs/ARCHITECTURE.md).
//
// Implementations: the local one of a single part (here, halo_core), MPI on host buffers, NCCL and
// MPI on device buffers (comm/; make_exchanger picks one). The engine sees only this interface.
#pragma once

#include <cstdint>
#include <memory>

#include "halo/core/dense.hpp"
#include "halo/core/shard.hpp"

namespace halo {

/// Counters an exchanger accumulates over its lifetime (for the per-layer report).
struct ExchangeStats {
    std::int64_t exchanges = 0;
    std::int64_t bytes_sent = 0;
    std::int64_t bytes_received = 0;
    std::int64_t messages_sent = 0;  // after splitting large blocks
    double start_seconds = 0.0;      // time inside start(): posting and packing
    double finish_seconds = 0.0;     // time inside finish(): waiting for completion
    // Device memory the exchanger allocated and registered itself (NCCL's registered buffers,
    // those allocate() handed out included): outside the backend's pool.
    std::int64_t registered_bytes = 0;
};

class HaloExchanger {
public:
    virtual ~HaloExchanger() = default;

    /// Begins an exchange of `x`, a matrix of num_owned + num_halo rows: packs the send rows of
    /// the owned region and posts all sends and receives. `x` must stay valid and its owned rows
    /// unmodified, and its halo rows untouched, until finish() returns.
    virtual void start(DenseView<float> x) = 0;

    /// Completes the exchange begun by start(): on return the halo rows of x hold the neighbours'
    /// rows and every send buffer may be reused.
    virtual void finish() = 0;

    virtual const ExchangeStats& stats() const = 0;

    /// Returns once every rank of the exchange has called it (a host barrier over the ranks'
    /// communicator; one part has no peers and returns at once). For measurements only: called
    /// before start() with the device idle, the time spent here is how much later the slowest
    /// peer arrived (arrival skew), which the exchange's own time then leaves out. Every rank
    /// must call it at the same point; never between start() and finish().
    virtual void barrier() {}

    /// Device memory for `floats` floats (all of a matrix the caller will hand to start()) that
    /// this exchanger moves without copies of its own: NCCL with registered buffers
    /// (make_nccl_exchanger's register_buffers) allocates it with ncclMemAlloc and registers it,
    /// so that its sends and receives copy straight between the ranks' matrices. Null where the
    /// exchanger has no such memory (the default): the caller allocates as it would otherwise.
    /// Every exchanger still takes matrices from anywhere; those from here take fewer copies.
    virtual std::shared_ptr<float> allocate(std::int64_t floats);

    /// Device memory start() may allocate for a matrix that allocate() did not hand out (NCCL
    /// with registered buffers: a staging buffer of num_halo x max_dim floats, kept), beyond the
    /// backend's pool: the out-of-core driver takes it off its memory limit. 0 by default.
    virtual std::int64_t staging_bytes() const { return 0; }
};

/// The base of the exchangers that keep their own counters: not copyable; stats() reads stats_.
class CountingExchanger : public HaloExchanger {
public:
    CountingExchanger(const CountingExchanger&) = delete;
    CountingExchanger& operator=(const CountingExchanger&) = delete;
    const ExchangeStats& stats() const override { return stats_; }

protected:
    CountingExchanger() = default;
    ExchangeStats stats_;
};

/// Checks a matrix handed to an exchanger's start(): num_owned + num_halo rows, min_cols to
/// max_cols columns, ld >= cols, data unless it is empty. Throws halo::LogicError; `exchanger`
/// names the exchanger in the message ("the exchanger was built for at most ...").
void check_exchanged_matrix(const DenseView<float>& x, std::int64_t num_owned,
                            std::int64_t num_halo, std::int64_t min_cols, std::int64_t max_cols,
                            const char* exchanger);

/// The exchanger of a single-part run (no peers: start and finish do nothing). Throws
/// halo::InputError when the shard's plan has any peer.
std::unique_ptr<HaloExchanger> make_local_exchanger(const Shard& shard);

}  // namespace halo
