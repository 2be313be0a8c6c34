// The MPI halo exchanger for device matrices: the transport when ranks share a GPU (NCCL refuses
// that) or NCCL is absent.
//
// start() orders the comm stream after the compute stream, packs the send rows on the GPU, copies
// them to a pinned host buffer and waits for that copy (MPI reads host memory from this thread),
// then posts the receives into a pinned host buffer and the sends, through the MpiMessenger the
// host exchanger uses too (same splitting, same checks). finish() waits for MPI, copies the
// received rows into the halo region on the comm stream (one 2D copy, so a strided x needs no extra
// buffer) and makes the compute stream wait for that copy; the host does not wait for it. With
// cuda_aware, MPI gets the device buffers themselves: receives land straight in the halo region (in
// a device staging buffer for a strided x) and nothing crosses to the host.
//
// The receives are posted only after start() has waited for the comm stream: that wait covers the
// previous finish()'s copy out of the pinned receive buffer and, through the event, the compute
// stream's earlier kernels that may still read the halo rows about to be overwritten.
#include <cuda_runtime_api.h>
#include <mpi.h>

#if defined(OPEN_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // MPIX_Query_cuda_support
#endif

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "device_exchange.hpp"
#include "halo/comm/nccl_exchanger.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/mpi/mpi_error.hpp"
#include "mpi_messages.hpp"

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

class MpiDeviceExchanger final : public CountingExchanger {
public:
    MpiDeviceExchanger(cuda::Context& ctx, MPI_Comm comm, const Shard& shard, std::int64_t max_dim,
                       const MpiDeviceExchangerOptions& options);
    ~MpiDeviceExchanger() override;

    void start(DenseView<float> x) override;
    void finish() override;
    void barrier() override { messenger_.barrier(); }

private:
    cuda::Context& ctx_;
    bool cuda_aware_;
    std::int64_t max_dim_;
    std::int64_t num_owned_;
    std::int64_t num_halo_;
    std::int64_t num_send_;

    cuda::DeviceBuffer<std::int32_t> send_rows_;  // the plan's send rows, on the device
    cuda::DeviceBuffer<float> send_device_;       // num_send x max_dim, packed on the GPU
    cuda::PinnedBuffer<float> send_host_;         // num_send x max_dim (staged MPI only)
    cuda::PinnedBuffer<float> recv_host_;         // num_halo x max_dim (staged MPI only)
    cuda::DeviceBuffer<float> recv_device_;       // CUDA-aware MPI, once x is strided
    detail::CudaEvent ready_;                     // compute -> comm, in start()
    detail::CudaEvent done_;                      // comm -> compute, in finish()
    // After the members above, so that the plan is checked before anything is sized from it.
    detail::MpiMessenger messenger_;

    bool staged_ = false;  // x is strided and CUDA-aware MPI received into recv_device_
    DenseView<float> x_{};
};

MpiDeviceExchanger::MpiDeviceExchanger(cuda::Context& ctx, MPI_Comm comm, const Shard& shard,
                                       std::int64_t max_dim,
                                       const MpiDeviceExchangerOptions& options)
    : ctx_(ctx),
      cuda_aware_(options.cuda_aware),
      max_dim_(max_dim),
      num_owned_(shard.num_owned),
      num_halo_(shard.num_halo),
      num_send_(static_cast<std::int64_t>(shard.plan.send_rows.size())),
      ready_(ctx.device()),
      done_(ctx.device()),
      messenger_(comm, detail::checked_plan(comm, shard), max_dim, options.mpi)
{
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
}

MpiDeviceExchanger::~MpiDeviceExchanger()
{
    // Errors are ignored throughout: a destructor must not throw.
    if (messenger_.abandon()) {
        // Destroyed mid-exchange (an exception between start and finish), as in the host
        // exchanger: the sends still reading the send buffer are released, not completed, so the
        // buffer is leaked rather than freed under MPI's feet.
        if (cuda_aware_) {
            static_cast<void>(new cuda::DeviceBuffer<float>(std::move(send_device_)));
        } else {
            static_cast<void>(new cuda::PinnedBuffer<float>(std::move(send_host_)));
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
    HALO_EXPECTS(!messenger_.in_flight(), "start() called again before finish()");
    detail::check_device_matrix(x, num_owned_, num_halo_, max_dim_, ctx_.device());

    const auto t0 = Clock::now();
    const std::int64_t cols = x.cols;
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
    messenger_.post_receives(recv_base, cols);
    messenger_.post_sends(cuda_aware_ ? send_device_.data() : send_host_.data());
    messenger_.add_stats(stats_);
    stats_.start_seconds += seconds_since(t0);
}

void MpiDeviceExchanger::finish()
{
    HALO_EXPECTS(messenger_.in_flight(), "finish() called without start()");
    const auto t0 = Clock::now();
    messenger_.wait();

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
