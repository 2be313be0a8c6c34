// The MPI halo exchanger for device matrices: the transport when ranks share a GPU (NCCL refuses
// that) or NCCL is absent.
//
// start() orders the comm stream after the compute stream, packs the send rows on the GPU, copies
// them to a pinned host buffer and waits for that copy (MPI reads host memory from this thread),
// then posts the receives into a pinned host buffer and the sends, splitting blocks larger than
// max_message_bytes as the host exchanger does. finish() waits for MPI, copies the received rows
// into the halo region on the comm stream (one 2D copy, so a strided x needs no extra buffer) and
// makes the compute stream wait for that copy; the host does not wait for it. With cuda_aware, MPI
// gets the device buffers themselves: receives land straight in the halo region (in a device
// staging buffer for a strided x) and nothing crosses to the host.
//
// The receives are posted only after start() has waited for the comm stream: that wait covers the
// previous finish()'s copy out of the pinned receive buffer and, through the event, the compute
// stream's earlier kernels that may still read the halo rows about to be overwritten.
#include <cuda_runtime_api.h>
#include <mpi.h>

#if defined(OPEN_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // MPIX_Query_cuda_support
#endif

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "device_exchange.hpp"
#include "halo/cuda_error.hpp"
#include "halo/error.hpp"
#include "halo/mpi_error.hpp"
#include "halo/nccl_exchanger.hpp"

namespace halo {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Whether the MPI library says it can read and write device memory: 1 yes, 0 no, -1 it has no way
// to say (then the caller's word is taken).
int mpi_cuda_support()
{
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    return MPIX_Query_cuda_support() == 1 ? 1 : 0;
#else
    return -1;
#endif
}

// One message of a (possibly split) block: `count` floats at element `offset` of the packed send
// buffer or of the receive buffer. A private copy of the host exchanger's splitting.
struct Piece {
    int peer = 0;
    std::int64_t offset = 0;
    int count = 0;
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

// Splits each block of `ranks`/`offsets` (rows) of width `cols` into pieces of at most
// `max_elements` floats. Pieces of one block go out in order on one tag; MPI's non-overtaking
// rule matches them with the receives in the same order.
void split(const std::vector<std::int32_t>& ranks, const std::vector<std::int64_t>& offsets,
           std::int64_t cols, std::int64_t max_elements, std::vector<Piece>& pieces)
{
    for (std::size_t b = 0; b < ranks.size(); ++b) {
        const auto end = offsets[b + 1] * cols;
        for (auto offset = offsets[b] * cols; offset < end; offset += max_elements) {
            pieces.push_back(
                {ranks[b], offset, static_cast<int>(std::min(max_elements, end - offset))});
        }
    }
}

class MpiDeviceExchanger final : public HaloExchanger {
public:
    MpiDeviceExchanger(cuda::Context& ctx, MPI_Comm comm, const Shard& shard, std::int64_t max_dim,
                       const MpiDeviceExchangerOptions& options);
    ~MpiDeviceExchanger() override;
    MpiDeviceExchanger(const MpiDeviceExchanger&) = delete;
    MpiDeviceExchanger& operator=(const MpiDeviceExchanger&) = delete;

    void start(DenseView<float> x) override;
    void finish() override;
    const ExchangeStats& stats() const override { return stats_; }

private:
    cuda::Context& ctx_;
    MPI_Comm comm_;
    int tag_;
    bool cuda_aware_;
    std::int64_t max_dim_;
    std::int64_t max_elements_;  // floats per message
    std::int64_t num_owned_;
    std::int64_t num_halo_;
    std::int64_t num_send_;
    std::vector<std::int32_t> recv_ranks_;
    std::vector<std::int64_t> recv_offsets_;
    std::vector<std::int32_t> send_ranks_;
    std::vector<std::int64_t> send_offsets_;

    cuda::DeviceBuffer<std::int32_t> send_rows_;  // the plan's send rows, on the device
    cuda::DeviceBuffer<float> send_device_;       // num_send x max_dim, packed on the GPU
    cuda::PinnedBuffer<float> send_host_;         // num_send x max_dim (staged MPI only)
    cuda::PinnedBuffer<float> recv_host_;         // num_halo x max_dim (staged MPI only)
    cuda::DeviceBuffer<float> recv_device_;       // CUDA-aware MPI, once x is strided
    detail::CudaEvent ready_;                     // compute -> comm, in start()
    detail::CudaEvent done_;                      // comm -> compute, in finish()

    std::vector<Piece> recv_pieces_;
    std::vector<Piece> send_pieces_;
    std::vector<MPI_Request> requests_;  // receives first, then sends
    std::vector<MPI_Status> statuses_;

    bool in_flight_ = false;
    bool staged_ = false;  // x is strided and CUDA-aware MPI received into recv_device_
    DenseView<float> x_{};
    ExchangeStats stats_;
};

MpiDeviceExchanger::MpiDeviceExchanger(cuda::Context& ctx, MPI_Comm comm, const Shard& shard,
                                       std::int64_t max_dim,
                                       const MpiDeviceExchangerOptions& options)
    : ctx_(ctx),
      comm_(comm),
      tag_(options.mpi.tag),
      cuda_aware_(options.cuda_aware),
      max_dim_(max_dim),
      max_elements_(std::min<std::int64_t>(
          options.mpi.max_message_bytes / static_cast<std::int64_t>(sizeof(float)), INT_MAX)),
      num_owned_(shard.num_owned),
      num_halo_(shard.num_halo),
      num_send_(static_cast<std::int64_t>(shard.plan.send_rows.size())),
      recv_ranks_(shard.plan.recv_ranks),
      recv_offsets_(shard.plan.recv_offsets),
      send_ranks_(shard.plan.send_ranks),
      send_offsets_(shard.plan.send_offsets),
      ready_(ctx.device()),
      done_(ctx.device())
{
    int rank = 0;
    int size = 0;
    HALO_MPI_TRY(MPI_Comm_rank(comm_, &rank));
    HALO_MPI_TRY(MPI_Comm_size(comm_, &size));
    detail::check_local_plan(shard, rank, size);
    HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
    HALO_EXPECTS(max_elements_ >= 1, "max_message_bytes ", options.mpi.max_message_bytes,
                 " is smaller than one float");
    int* tag_ub = nullptr;
    int found = 0;
    HALO_MPI_TRY(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &found));
    HALO_EXPECTS(tag_ >= 0 && (!found || tag_ <= *tag_ub), "tag ", tag_,
                 " is outside MPI's tag range");
    // Handing device pointers to an MPI that cannot read them crashes or corrupts memory.
    HALO_EXPECTS(!cuda_aware_ || mpi_cuda_support() != 0,
                 "options.cuda_aware is set but this MPI library is not CUDA-aware "
                 "(MPIX_Query_cuda_support() says no); leave cuda_aware off to stage through "
                 "host memory");

    const detail::DeviceGuard guard(ctx.device());
    send_rows_ = detail::upload_send_rows(ctx, shard.plan);
    send_device_ = cuda::DeviceBuffer<float>(ctx, static_cast<std::size_t>(num_send_ * max_dim));
    if (!cuda_aware_) {
        if (num_send_ > 0) {
            send_host_ = cuda::PinnedBuffer<float>(static_cast<std::size_t>(num_send_ * max_dim));
        }
        if (num_halo_ > 0) {
            recv_host_ = cuda::PinnedBuffer<float>(static_cast<std::size_t>(num_halo_ * max_dim));
        }
    }
    const auto recv_capacity = max_pieces(recv_offsets_, max_dim, max_elements_);
    const auto send_capacity = max_pieces(send_offsets_, max_dim, max_elements_);
    recv_pieces_.reserve(static_cast<std::size_t>(recv_capacity));
    send_pieces_.reserve(static_cast<std::size_t>(send_capacity));
    requests_.reserve(static_cast<std::size_t>(recv_capacity + send_capacity));
    statuses_.resize(static_cast<std::size_t>(recv_capacity + send_capacity));
}

MpiDeviceExchanger::~MpiDeviceExchanger()
{
    // Errors are ignored throughout: a destructor must not throw.
    if (in_flight_) {
        // Destroyed mid-exchange (an exception between start and finish), as in the host
        // exchanger: waiting for the sends could hang when a peer never posts its receives, so
        // they are released and their buffer is leaked rather than freed under MPI's feet; the
        // receives are cancelled and waited for, so nothing writes into x or the buffers after
        // this returns.
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
            if (cuda_aware_) {
                static_cast<void>(new cuda::DeviceBuffer<float>(std::move(send_device_)));
            } else {
                static_cast<void>(new cuda::PinnedBuffer<float>(std::move(send_host_)));
            }
        }
    }
    // The last finish()'s copy out of recv_host_ may still be queued on the comm stream (it
    // depends on nothing outside this rank, so waiting cannot hang); the device buffers are
    // freed stream-ordered on the compute stream, after the comm stream's work.
    try {
        const detail::DeviceGuard guard(ctx_.device());
        static_cast<void>(cudaStreamSynchronize(ctx_.comm_stream()));
        done_.order_noexcept(ctx_.comm_stream(), ctx_.compute_stream());
    } catch (...) {  // the device could not even be selected
    }
}

void MpiDeviceExchanger::start(DenseView<float> x)
{
    HALO_EXPECTS(!in_flight_, "start() called again before finish()");
    detail::check_device_matrix(x, num_owned_, num_halo_, max_dim_, ctx_.device());

    const auto t0 = Clock::now();
    const std::int64_t cols = x.cols;
    recv_pieces_.clear();
    send_pieces_.clear();
    requests_.clear();
    if (cols > 0) {
        split(recv_ranks_, recv_offsets_, cols, max_elements_, recv_pieces_);
        split(send_ranks_, send_offsets_, cols, max_elements_, send_pieces_);
    }
    x_ = x;
    staged_ = cuda_aware_ && x.ld != cols && num_halo_ > 0;

    const detail::DeviceGuard guard(ctx_.device());  // CUDA-aware MPI may need it current too
    if (cols > 0 && (num_send_ > 0 || num_halo_ > 0)) {
        if (staged_ && recv_device_.size() == 0) {
            // Allocated on the compute stream, so before ready_ is recorded there.
            recv_device_ =
                cuda::DeviceBuffer<float>(ctx_, static_cast<std::size_t>(num_halo_ * max_dim_));
        }
        const cudaStream_t stream = ctx_.comm_stream();
        ready_.order(ctx_.compute_stream(), stream);
        detail::pack_rows(x.data, x.ld, send_rows_.data(), num_send_, cols, send_device_.data(),
                          stream);
        if (!cuda_aware_ && num_send_ > 0) {
            HALO_CUDA_TRY(
                cudaMemcpyAsync(send_host_.data(), send_device_.data(),
                                static_cast<std::size_t>(num_send_ * cols) * sizeof(float),
                                cudaMemcpyDeviceToHost, stream));
        }
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
    }

    float* const recv_base =
        !cuda_aware_ ? recv_host_.data() : (staged_ ? recv_device_.data() : x.row(num_owned_));
    float* const send_base = cuda_aware_ ? send_device_.data() : send_host_.data();
    in_flight_ = true;
    // Receives go first so that a peer's message finds its buffer already posted.
    for (const auto& piece : recv_pieces_) {
        requests_.push_back(MPI_REQUEST_NULL);
        HALO_MPI_TRY(MPI_Irecv(recv_base + piece.offset, piece.count, MPI_FLOAT, piece.peer, tag_,
                               comm_, &requests_.back()));
    }
    for (const auto& piece : send_pieces_) {
        requests_.push_back(MPI_REQUEST_NULL);
        HALO_MPI_TRY(MPI_Isend(send_base + piece.offset, piece.count, MPI_FLOAT, piece.peer, tag_,
                               comm_, &requests_.back()));
    }

    const auto row_bytes = cols * static_cast<std::int64_t>(sizeof(float));
    stats_.bytes_sent += num_send_ * row_bytes;
    stats_.bytes_received += num_halo_ * row_bytes;
    stats_.messages_sent += static_cast<std::int64_t>(send_pieces_.size());
    stats_.start_seconds += seconds_since(t0);
}

void MpiDeviceExchanger::finish()
{
    HALO_EXPECTS(in_flight_, "finish() called without start()");
    const auto t0 = Clock::now();
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

    const detail::DeviceGuard guard(ctx_.device());
    const auto cols = x_.cols;
    if (cols > 0 && num_halo_ > 0 && (!cuda_aware_ || staged_)) {
        const auto row_bytes = static_cast<std::size_t>(cols) * sizeof(float);
        const float* source = cuda_aware_ ? recv_device_.data() : recv_host_.data();
        HALO_CUDA_TRY(cudaMemcpy2DAsync(
            x_.row(num_owned_), static_cast<std::size_t>(x_.ld) * sizeof(float), source, row_bytes,
            row_bytes, static_cast<std::size_t>(num_halo_),
            cuda_aware_ ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice, ctx_.comm_stream()));
    }
    done_.order(ctx_.comm_stream(), ctx_.compute_stream());
    stats_.exchanges += 1;
    stats_.finish_seconds += seconds_since(t0);
}

}  // namespace

std::unique_ptr<HaloExchanger> make_mpi_device_exchanger(cuda::Context& ctx, MPI_Comm comm,
                                                         const Shard& shard, std::int64_t max_dim,
                                                         const MpiDeviceExchangerOptions& options)
{
    return std::make_unique<MpiDeviceExchanger>(ctx, comm, shard, max_dim, options);
}

}  // namespace halo
