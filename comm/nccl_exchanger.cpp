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
#include "halo/nccl_exchanger.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device_exchange.hpp"
#include "halo/cuda_error.hpp"
#include "halo/error.hpp"
#include "halo/nccl_error.hpp"

namespace halo {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// NCCL's last error message in parentheses, or nothing when it recorded none.
std::string last_error(ncclComm_t comm)
{
    const char* text = ncclGetLastError(comm);
    return text != nullptr && *text != '\0' ? detail::concat(" (", text, ')') : std::string();
}

class NcclExchanger final : public CountingExchanger {
public:
    NcclExchanger(cuda::Context& ctx, NcclComm& comm, const Shard& shard, std::int64_t max_dim);
    ~NcclExchanger() override;

    void start(DenseView<float> x) override;
    void finish() override;
    void barrier() override { comm_.barrier(); }

private:
    // The grouped receives into `halo` (num_halo x cols, contiguous) and sends of the packed rows;
    // returns the number of sends.
    std::int64_t post(float* halo, std::int64_t cols);

    cuda::Context& ctx_;
    NcclComm& comm_;
    std::int64_t max_dim_;
    std::int64_t num_owned_;
    std::int64_t num_halo_;
    std::int64_t num_send_;
    std::vector<std::int32_t> recv_ranks_;
    std::vector<std::int64_t> recv_offsets_;
    std::vector<std::int32_t> send_ranks_;
    std::vector<std::int64_t> send_offsets_;

    cuda::DeviceBuffer<std::int32_t> send_rows_;  // the plan's send rows, on the device
    cuda::DeviceBuffer<float> send_buffer_;       // num_send x max_dim
    cuda::DeviceBuffer<float> staging_;           // num_halo x max_dim, once x is strided
    detail::CudaEvent ready_;                     // compute -> comm, in start()
    detail::CudaEvent done_;                      // comm -> compute, in finish()

    bool in_flight_ = false;
};

NcclExchanger::NcclExchanger(cuda::Context& ctx, NcclComm& comm, const Shard& shard,
                             std::int64_t max_dim)
    : ctx_(ctx),
      comm_(comm),
      max_dim_(max_dim),
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
    HALO_EXPECTS(comm.get() != nullptr, "the NCCL communicator was aborted");
    HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
    detail::check_local_plan(shard, comm.rank(), comm.size());
    const detail::DeviceGuard guard(ctx.device());
    send_rows_ = detail::upload_send_rows(ctx, shard.plan);
    send_buffer_ = cuda::DeviceBuffer<float>(ctx, static_cast<std::size_t>(num_send_ * max_dim));
}

NcclExchanger::~NcclExchanger()
{
    // The buffers are freed stream-ordered on the compute stream; sends and receives still queued
    // on the comm stream (finish() does not wait for them, and an exception may have skipped
    // finish()) must come first. No host wait: a peer that never posts its side would hang it.
    try {
        const detail::DeviceGuard guard(ctx_.device());
        done_.order_noexcept(ctx_.comm_stream(), ctx_.compute_stream());
    } catch (...) {  // a destructor must not throw; the device could not even be selected
    }
}

std::int64_t NcclExchanger::post(float* halo, std::int64_t cols)
{
    const cudaStream_t stream = ctx_.comm_stream();
    std::int64_t sends = 0;
    HALO_NCCL_TRY(ncclGroupStart());
    try {
        for (std::size_t b = 0; b < recv_ranks_.size(); ++b) {
            const auto count = (recv_offsets_[b + 1] - recv_offsets_[b]) * cols;
            if (count > 0) {
                HALO_NCCL_TRY(ncclRecv(halo + recv_offsets_[b] * cols,
                                       static_cast<std::size_t>(count), ncclFloat, recv_ranks_[b],
                                       comm_.get(), stream));
            }
        }
        for (std::size_t b = 0; b < send_ranks_.size(); ++b) {
            const auto count = (send_offsets_[b + 1] - send_offsets_[b]) * cols;
            if (count > 0) {
                HALO_NCCL_TRY(ncclSend(send_buffer_.data() + send_offsets_[b] * cols,
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
        const bool staged = x.ld != cols && num_halo_ > 0;
        if (staged && staging_.size() == 0) {
            // Allocated on the compute stream, so before ready_ is recorded there.
            staging_ =
                cuda::DeviceBuffer<float>(ctx_, static_cast<std::size_t>(num_halo_ * max_dim_));
        }
        const cudaStream_t stream = ctx_.comm_stream();
        ready_.order(ctx_.compute_stream(), stream);
        detail::pack_rows(x.data, x.ld, send_rows_.data(), num_send_, cols, send_buffer_.data(),
                          stream);
        const auto sends = post(staged ? staging_.data() : x.row(num_owned_), cols);
        if (staged) {
            const auto row_bytes = static_cast<std::size_t>(cols) * sizeof(float);
            HALO_CUDA_TRY(cudaMemcpy2DAsync(
                x.row(num_owned_), static_cast<std::size_t>(x.ld) * sizeof(float), staging_.data(),
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
        done_.order(ctx_.comm_stream(), ctx_.compute_stream());
    }
    // A failure NCCL detected while the operations ran (a peer lost, a network error) is reported
    // here rather than left to surface as a hang or as garbage in the halo rows.
    HALO_EXPECTS(comm_.get() != nullptr, "the NCCL communicator was aborted during an exchange");
    ncclResult_t async = ncclSuccess;
    HALO_NCCL_TRY(ncclCommGetAsyncError(comm_.get(), &async));
    if (async != ncclSuccess && async != ncclInProgress) {
        HALO_THROW(NcclError, "halo exchange on rank ", comm_.rank(), ": NCCL reports ",
                   ncclGetErrorString(async), last_error(comm_.get()));
    }
    stats_.exchanges += 1;
    stats_.finish_seconds += seconds_since(t0);
}

}  // namespace

std::unique_ptr<HaloExchanger> make_nccl_exchanger(cuda::Context& ctx, NcclComm& comm,
                                                   const Shard& shard, std::int64_t max_dim)
{
    return std::make_unique<NcclExchanger>(ctx, comm, shard, max_dim);
}

}  // namespace halo
