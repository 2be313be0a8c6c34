// The NCCL halo exchanger: everything runs on the Context's communication stream and the host
// never waits for the GPU.
//
// start() orders the comm stream after the compute stream's earlier work (the owned rows being
// sent were produced there, and earlier kernels may still read the halo rows about to be
// overwritten), packs the send rows into one buffer, and posts one grouped ncclRecv per peer
// straight into the halo region (the shard's numbering lays each peer's block there in the order
// it is sent) and one ncclSend per peer from the packed buffer. finish() only makes the compute
// stream wait for the comm stream. A strided x (ld > cols) receives into a staging buffer that is
// allocated on the first such exchange and copied into place on the comm stream.
//
// In pieces (NcclExchangerOptions::pieces > 1) each peer's block is split into that many row
// ranges: the rows of piece c are packed on a stream of the exchanger's own while piece c - 1
// moves on another, one NCCL group per piece, so that only the first piece's packing delays the
// transfer instead of all of it. Both streams have the device's greatest priority: a piece's
// kernels become ready while the overlapped SpMM's grid is queued, and at equal priority they
// would wait for its blocks to be dispatched (measured on 4 H100s: the exchange then ran after
// the SpMM instead of beside it).
//
// With registered buffers (register_buffers), the send buffer, the staging buffer and the matrices
// allocate() hands out come from ncclMemAlloc and are registered with the communicator
// (ncclCommRegister): NCCL's intra-node transport then copies between the ranks' own buffers
// rather than through its internal FIFOs (one copy of each row instead of two, NCCL's user buffer
// registration). NCCL requires a peer's buffers to be registered when ours are, so every operation
// uses registered memory then: an x that is not (or is strided) receives through the staging
// buffer.
#include "halo/comm/nccl_exchanger.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device_exchange.hpp"
#include "halo/comm/nccl_error.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The rows [first, last) of a block of `rows` rows that piece `piece` of `pieces` moves: the same
// on the sending and the receiving side, which both know the block's length. Min(rows, pieces)
// pieces are not empty.
struct PieceRows {
    std::int64_t first;
    std::int64_t last;
};
PieceRows piece_rows(std::int64_t rows, int piece, int pieces)
{
    return {rows * piece / pieces, rows * (piece + 1) / pieces};
}

// The memory an exchanger registered with its communicator: its own buffers and the matrices
// allocate() handed out. Shared with those matrices' deleters, so it lives as long as the last of
// them. While the exchanger lives, a released block stays allocated (and registered) until close();
// the exchanger's destructor closes the registry: every block is deregistered there (NCCL needs the
// communicator), the released ones freed, and the others freed by their deleters afterwards.
// ncclMemFree is not stream-ordered: each free waits for the device first.
class Registry : public std::enable_shared_from_this<Registry> {
public:
    explicit Registry(int device) : device_(device) {}
    ~Registry();
    Registry(const Registry&) = delete;
    Registry& operator=(const Registry&) = delete;

    /// `floats` floats (at least one) from ncclMemAlloc, registered with `comm`; the deleter hands
    /// them back here. Throws halo::NcclError naming the rank and the size.
    std::shared_ptr<float> allocate(NcclComm& comm, std::int64_t floats);
    /// Whether [begin, end) lies inside one registered block.
    bool contains(const float* begin, const float* end) const;
    /// Deregisters every block from `comm` (nothing where NcclComm::abort() did it already) and
    /// frees those released, and later each one as it is released; `may_wait` false leaves them
    /// all allocated (a device wait could hang on a peer that never came; the process is on its
    /// error path then).
    void close(NcclComm& comm, bool may_wait) noexcept;

private:
    struct Block {
        float* data;
        std::int64_t floats;
        void* handle;
        bool held;
    };
    void release(float* data) noexcept;
    void wait_and_free(float* data) const noexcept;

    int device_;
    mutable std::mutex mutex_;
    std::vector<Block> blocks_;
    bool open_ = true;
    bool may_wait_ = true;
};

// Blocks still listed here were closed without a wait allowed: left allocated on purpose.
Registry::~Registry() = default;

std::shared_ptr<float> Registry::allocate(NcclComm& comm, std::int64_t floats)
{
    const auto n = std::max<std::int64_t>(floats, 1);
    const auto bytes = static_cast<std::size_t>(n) * sizeof(float);
    const detail::DeviceGuard guard(device_);
    void* data = nullptr;
    const auto allocated = ncclMemAlloc(&data, bytes);
    if (allocated != ncclSuccess) {
        HALO_THROW(NcclError, "rank ", comm.rank(), ": ncclMemAlloc of ", bytes,
                   " bytes for a registered exchange buffer failed: ",
                   ncclGetErrorString(allocated), detail::nccl_last_error(comm.get()),
                   "; run with --nccl-register off, or with more ranks");
    }
    void* handle = nullptr;
    try {
        handle = comm.register_buffer(data, bytes);
    } catch (...) {
        static_cast<void>(ncclMemFree(data));
        throw;
    }
    auto* p = static_cast<float*>(data);
    {
        const std::lock_guard lock(mutex_);
        blocks_.push_back({p, n, handle, true});
    }
    return {p, [owner = shared_from_this()](float* q) { owner->release(q); }};
}

bool Registry::contains(const float* begin, const float* end) const
{
    const std::lock_guard lock(mutex_);
    return std::any_of(blocks_.begin(), blocks_.end(),
                       [&](const Block& b) { return begin >= b.data && end <= b.data + b.floats; });
}

void Registry::wait_and_free(float* data) const noexcept
{
    try {
        const detail::DeviceGuard guard(device_);
        static_cast<void>(cudaDeviceSynchronize());
        static_cast<void>(ncclMemFree(data));
    } catch (...) {  // the device could not even be selected: the block leaks
    }
}

void Registry::release(float* data) noexcept
{
    const std::lock_guard lock(mutex_);
    const auto it = std::find_if(blocks_.begin(), blocks_.end(),
                                 [&](const Block& b) { return b.data == data; });
    if (it == blocks_.end()) {
        return;
    }
    if (open_) {
        it->held = false;  // freed by close()
        return;
    }
    if (may_wait_) {
        wait_and_free(data);  // deregistered by close() already
        blocks_.erase(it);
    }
}

void Registry::close(NcclComm& comm, bool may_wait) noexcept
{
    const std::lock_guard lock(mutex_);
    open_ = false;
    may_wait_ = may_wait;
    for (const auto& b : blocks_) {
        comm.deregister_buffer(b.handle);
    }
    if (!may_wait) {
        return;
    }
    std::erase_if(blocks_, [&](const Block& b) {
        if (b.held) {
            return false;
        }
        wait_and_free(b.data);  // the first waits for the device, the others find it idle
        return true;
    });
}

class NcclExchanger final : public CountingExchanger {
public:
    NcclExchanger(cuda::Context& ctx, NcclComm& comm, const Shard& shard, std::int64_t max_dim,
                  const NcclExchangerOptions& options);
    ~NcclExchanger() override;

    void start(DenseView<float> x) override;
    void finish() override;
    void barrier() override { comm_.barrier(); }
    std::int64_t staging_bytes() const override
    {
        return registry_ ? num_halo_ * max_dim_ * static_cast<std::int64_t>(sizeof(float)) : 0;
    }
    std::shared_ptr<float> allocate(std::int64_t floats) override
    {
        if (!registry_) {
            return nullptr;
        }
        const detail::DeviceGuard guard(ctx_.device());
        return buffer(floats);
    }

private:
    // Piece `piece`'s grouped receives into `halo` (num_halo x cols, contiguous) and sends of the
    // packed rows; returns the number of sends.
    std::int64_t post(float* halo, std::int64_t cols, int piece);
    // Packs piece `piece` of every peer's rows of x on `stream`.
    void pack(const DenseView<float>& x, int piece, cudaStream_t stream);
    std::shared_ptr<float> buffer(std::int64_t floats);

    cuda::Context& ctx_;
    NcclComm& comm_;
    std::int64_t max_dim_;
    int pieces_;
    std::int64_t num_owned_;
    std::int64_t num_halo_;
    std::int64_t num_send_;
    std::vector<std::int32_t> recv_ranks_;
    std::vector<std::int64_t> recv_offsets_;
    std::vector<std::int32_t> send_ranks_;
    std::vector<std::int64_t> send_offsets_;

    cuda::DeviceBuffer<std::int32_t> send_rows_;  // the plan's send rows, on the device
    std::shared_ptr<Registry> registry_;          // with registered buffers only
    // The packed send rows (num_send x max_dim) and, once an x needs it (strided, or not
    // registered where buffers are), the halo rows' staging (num_halo x max_dim): registered
    // memory or the Context's pool.
    std::shared_ptr<float> send_buffer_;
    std::shared_ptr<float> staging_;
    detail::CudaEvent ready_;                     // compute -> comm (pack), in start()
    detail::CudaEvent done_;                      // comm -> compute, in finish()
    // In pieces only: the packing and the transfers (else both on the Context's comm stream).
    std::unique_ptr<detail::CudaStream> pack_stream_;
    std::unique_ptr<detail::CudaStream> send_stream_;
    cudaStream_t transfer_stream() const
    {
        return send_stream_ ? send_stream_->get() : ctx_.comm_stream();
    }
    detail::CudaEvent packed_;                         // pack -> comm, per piece

    bool in_flight_ = false;
    int exceptions_ = std::uncaught_exceptions();  // at construction
};

NcclExchanger::NcclExchanger(cuda::Context& ctx, NcclComm& comm, const Shard& shard,
                             std::int64_t max_dim, const NcclExchangerOptions& options)
    : ctx_(ctx),
      comm_(comm),
      max_dim_(max_dim),
      pieces_(options.pieces),
      num_owned_(shard.num_owned),
      num_halo_(shard.num_halo),
      num_send_(static_cast<std::int64_t>(shard.plan.send_rows.size())),
      recv_ranks_(shard.plan.recv_ranks),
      recv_offsets_(shard.plan.recv_offsets),
      send_ranks_(shard.plan.send_ranks),
      send_offsets_(shard.plan.send_offsets),
      ready_(ctx.device()),
      done_(ctx.device()),
      packed_(ctx.device())
{
    HALO_EXPECTS(comm.get() != nullptr, "the NCCL communicator was aborted");
    HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
    HALO_EXPECTS(options.pieces >= 1, "pieces ", options.pieces, " must be at least 1");
    if (pieces_ > 1) {
        pack_stream_ = std::make_unique<detail::CudaStream>(ctx.device(), true);
        send_stream_ = std::make_unique<detail::CudaStream>(ctx.device(), true);
    }
    detail::check_local_plan(shard, comm.rank(), comm.size());
    const detail::DeviceGuard guard(ctx.device());
    send_rows_ = detail::upload_send_rows(ctx, shard.plan);
    if (options.register_buffers) {
        registry_ = std::make_shared<Registry>(ctx.device());
    }
    send_buffer_ = buffer(num_send_ * max_dim);
}

// Registered memory where buffers are registered, else a block of the Context's pool (freed
// stream-ordered on the compute stream).
std::shared_ptr<float> NcclExchanger::buffer(std::int64_t floats)
{
    if (registry_) {
        auto memory = registry_->allocate(comm_, floats);
        stats_.registered_bytes +=
            std::max<std::int64_t>(floats, 1) * static_cast<std::int64_t>(sizeof(float));
        return memory;
    }
    return detail::shared_floats(ctx_, floats);
}

NcclExchanger::~NcclExchanger()
{
    // The buffers are freed stream-ordered on the compute stream; sends and receives still queued
    // on the comm stream (finish() does not wait for them, and an exception may have skipped
    // finish()) must come first. No host wait: a peer that never posts its side would hang it.
    try {
        const detail::DeviceGuard guard(ctx_.device());
        if (pack_stream_) {  // packing left behind by an exception, before the buffer goes
            packed_.order_noexcept(pack_stream_->get(), ctx_.compute_stream());
        }
        done_.order_noexcept(transfer_stream(), ctx_.compute_stream());
    } catch (...) {  // a destructor must not throw; the device could not even be selected
    }
    if (registry_) {
        // An aborted communicator stopped its kernels. Otherwise an exchange left in flight, or
        // any exchange while an exception unwinds (a peer may have failed before posting its
        // side), may wait for a peer that never comes, and a device wait would hang with it: the
        // memory is left allocated then.
        const bool unwinding = std::uncaught_exceptions() > exceptions_;
        send_buffer_.reset();
        staging_.reset();
        registry_->close(comm_, comm_.get() == nullptr || (!in_flight_ && !unwinding));
    }
}

void NcclExchanger::pack(const DenseView<float>& x, int piece, cudaStream_t stream)
{
    for (std::size_t b = 0; b < send_ranks_.size(); ++b) {
        const auto rows = piece_rows(send_offsets_[b + 1] - send_offsets_[b], piece, pieces_);
        const auto first = send_offsets_[b] + rows.first;
        if (rows.last > rows.first) {
            detail::pack_rows(x.data, x.ld, send_rows_.data() + first, rows.last - rows.first,
                              x.cols, send_buffer_.get() + first * x.cols, stream);
        }
    }
}

std::int64_t NcclExchanger::post(float* halo, std::int64_t cols, int piece)
{
    const cudaStream_t stream = transfer_stream();
    std::int64_t sends = 0;
    HALO_NCCL_TRY(ncclGroupStart());
    try {
        for (std::size_t b = 0; b < recv_ranks_.size(); ++b) {
            const auto rows = piece_rows(recv_offsets_[b + 1] - recv_offsets_[b], piece, pieces_);
            const auto count = (rows.last - rows.first) * cols;
            if (count > 0) {
                HALO_NCCL_TRY(ncclRecv(halo + (recv_offsets_[b] + rows.first) * cols,
                                       static_cast<std::size_t>(count), ncclFloat, recv_ranks_[b],
                                       comm_.get(), stream));
            }
        }
        for (std::size_t b = 0; b < send_ranks_.size(); ++b) {
            const auto rows = piece_rows(send_offsets_[b + 1] - send_offsets_[b], piece, pieces_);
            const auto count = (rows.last - rows.first) * cols;
            if (count > 0) {
                HALO_NCCL_TRY(ncclSend(send_buffer_.get() + (send_offsets_[b] + rows.first) * cols,
                                       static_cast<std::size_t>(count), ncclFloat, send_ranks_[b],
                                       comm_.get(), stream));
                sends += 1;
            }
        }
    } catch (...) {
        // NCCL records an error raised inside a group and ncclGroupEnd then discards the group
        // without launching it; the group must be closed either way.
        static_cast<void>(ncclGroupEnd());
        throw;
    }
    HALO_NCCL_TRY(ncclGroupEnd());
    return sends;
}

void NcclExchanger::start(DenseView<float> x)
{
    HALO_EXPECTS(!in_flight_, "start() called again before finish()");
    HALO_EXPECTS(comm_.get() != nullptr, "the NCCL communicator was aborted");
    detail::check_device_matrix(x, num_owned_, num_halo_, max_dim_, ctx_.device());

    const auto t0 = Clock::now();
    const std::int64_t cols = x.cols;
    if (cols > 0 && (num_send_ > 0 || num_halo_ > 0)) {
        const detail::DeviceGuard guard(ctx_.device());
        const float* halo_end = x.row(num_owned_) + num_halo_ * cols;
        const bool staged =
            num_halo_ > 0 &&
            (x.ld != cols || (registry_ && !registry_->contains(x.row(num_owned_), halo_end)));
        if (staged && !staging_) {
            // Allocated on the compute stream, so before ready_ is recorded there.
            staging_ = buffer(num_halo_ * max_dim_);
        }
        const cudaStream_t stream = transfer_stream();
        float* halo = staged ? staging_.get() : x.row(num_owned_);
        std::int64_t sends = 0;
        if (!pack_stream_) {
            ready_.order(ctx_.compute_stream(), stream);
            detail::pack_rows(x.data, x.ld, send_rows_.data(), num_send_, cols, send_buffer_.get(),
                              stream);
            sends = post(halo, cols, 0);
        } else {
            // The transfer stream follows the compute stream through the pack stream's events (the
            // receives overwrite halo rows that earlier kernels may read); the pack stream follows
            // the previous exchange's sends through the compute stream (finish()).
            const cudaStream_t packing = pack_stream_->get();
            ready_.order(ctx_.compute_stream(), packing);
            for (int piece = 0; piece < pieces_; ++piece) {
                pack(x, piece, packing);
                packed_.order(packing, stream);
                sends += post(halo, cols, piece);
            }
        }
        if (staged) {
            const auto row_bytes = static_cast<std::size_t>(cols) * sizeof(float);
            HALO_CUDA_TRY(cudaMemcpy2DAsync(
                x.row(num_owned_), static_cast<std::size_t>(x.ld) * sizeof(float), staging_.get(),
                row_bytes, row_bytes, static_cast<std::size_t>(num_halo_), cudaMemcpyDeviceToDevice,
                stream));
        }
        stats_.messages_sent += sends;
    }
    in_flight_ = true;

    const auto row_bytes = cols * static_cast<std::int64_t>(sizeof(float));
    stats_.bytes_sent += num_send_ * row_bytes;
    stats_.bytes_received += num_halo_ * row_bytes;
    stats_.start_seconds += seconds_since(t0);
}

void NcclExchanger::finish()
{
    HALO_EXPECTS(in_flight_, "finish() called without start()");
    const auto t0 = Clock::now();
    in_flight_ = false;
    {
        const detail::DeviceGuard guard(ctx_.device());
        done_.order(transfer_stream(), ctx_.compute_stream());
    }
    // A failure NCCL detected while the operations ran (a peer lost, a network error) is reported
    // here rather than left to surface as a hang or as garbage in the halo rows.
    HALO_EXPECTS(comm_.get() != nullptr, "the NCCL communicator was aborted during an exchange");
    ncclResult_t async = ncclSuccess;
    HALO_NCCL_TRY(ncclCommGetAsyncError(comm_.get(), &async));
    if (async != ncclSuccess && async != ncclInProgress) {
        HALO_THROW(NcclError, "halo exchange on rank ", comm_.rank(), ": NCCL reports ",
                   ncclGetErrorString(async), detail::nccl_last_error(comm_.get()));
    }
    stats_.exchanges += 1;
    stats_.finish_seconds += seconds_since(t0);
}

}  // namespace

std::unique_ptr<HaloExchanger> make_nccl_exchanger(cuda::Context& ctx, NcclComm& comm,
                                                   const Shard& shard, std::int64_t max_dim,
                                                   const NcclExchangerOptions& options)
{
    return std::make_unique<NcclExchanger>(ctx, comm, shard, max_dim, options);
}

}  // namespace halo
