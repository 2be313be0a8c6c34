// Halo exchange between GPUs: NCCL point-to-point (grouped ncclSend/ncclRecv straight into the
// halo region, on the Context's communication stream), and MPI over device buffers (host staging,
// or CUDA-aware MPI when the library has it) for several ranks sharing one GPU and for clusters
// without NCCL. Both order themselves after the compute stream's earlier work in start(), and make
// the compute stream wait for the received rows in finish() (events, no host blocking for NCCL).
//
// For both: x is a device matrix on ctx's device (a host pointer is refused with
// halo::LogicError); rows == num_owned + num_halo, cols <= max_dim, any ld >= cols (NCCL and
// CUDA-aware MPI receive a strided x into a device staging buffer allocated on its first use). Work
// issued to the compute stream before start() is seen by the exchange; work issued after finish()
// sees the halo rows; between the two, compute-stream work may read the owned rows but must not
// write the rows being sent nor touch the halo rows. Either works whichever device is current.
// Construction throws halo::LogicError when the shard is not this rank's part, its plan indexes
// outside the shard, or max_dim < 1. The Context (and the NcclComm) must outlive the exchanger.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "halo/comm/mpi_exchanger.hpp"
#include "halo/core/exchanger.hpp"
#include "halo/core/shard.hpp"
#include "halo/kernels/cuda/context.hpp"

namespace halo {

/// An NCCL communicator bootstrapped over MPI (collective over `comm`): rank 0 creates the unique
/// id, MPI_Bcast, cudaSetDevice(ctx.device()) (left current on return), then ncclCommInitRank,
/// every call checked. A rank that fails before ncclCommInitRank makes every rank throw
/// halo::NcclError instead of leaving the others inside it. NCCL needs one GPU per rank: ranks
/// sharing a device fail in ncclCommInitRank (use make_mpi_device_exchanger there). abort()
/// tears the communicator down without waiting (ncclCommAbort), for the error path: a failed rank
/// never leaves the others blocked in a collective; get() is null afterwards.
class NcclComm {
public:
    NcclComm(MPI_Comm comm, const cuda::Context& ctx);
    ~NcclComm();
    NcclComm(const NcclComm&) = delete;
    NcclComm& operator=(const NcclComm&) = delete;

    ncclComm_t get() const noexcept { return comm_; }
    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    void abort() noexcept;
    /// MPI_Barrier over the communicator it was bootstrapped on (HaloExchanger::barrier).
    void barrier() const;

    /// ncclCommRegister of `bytes` at `data` (NCCL user buffer registration); the handle is
    /// kept until deregister_buffer(handle), abort() or destruction, which deregister what is
    /// left before they tear the communicator down. Throws halo::NcclError naming the rank.
    void* register_buffer(void* data, std::size_t bytes);
    /// Deregisters one handle of register_buffer(); nothing once aborted or deregistered.
    void deregister_buffer(void* handle) noexcept;

private:
    void deregister_all() noexcept;

    MPI_Comm mpi_comm_;
    ncclComm_t comm_ = nullptr;
    int rank_ = 0;
    int size_ = 1;
    std::mutex registered_mutex_;
    std::vector<void*> registered_;
};

struct NcclExchangerOptions {
    /// NCCL user buffer registration: the send buffer, the staging buffer and the matrices
    /// allocate() hands out are allocated with ncclMemAlloc and registered (ncclCommRegister),
    /// so that NCCL copies each row once, from the sender's buffer into the receiver's matrix,
    /// rather than through its internal buffers. Every rank of a communicator must choose alike.
    /// An x from elsewhere (or strided) receives through the registered staging buffer and a copy.
    bool register_buffers = false;
    /// Each peer's rows move in this many pieces (at least 1), one NCCL group each: piece c + 1
    /// is packed on a stream of the exchanger's own while piece c moves, so that only the first
    /// piece's packing comes before the transfer. Every rank of a communicator must choose alike.
    int pieces = 1;
};

/// NCCL exchanger for `shard` (rank == shard.part); matrices exchanged are device views on
/// ctx's device, at most `max_dim` wide. Allocates its packed send buffer (num_send x max_dim
/// floats) here, so start() allocates nothing for a contiguous x. finish() never blocks the host;
/// it throws halo::NcclError when NCCL reports an asynchronous error. NCCL matches operations in
/// the order they are issued: exchangers that share one NcclComm must be started in the same
/// order on every rank. Plans that disagree hang NCCL: run check_halo_plan first. The matrices of
/// allocate() (registered buffers only) may outlive the exchanger; they are freed as they go,
/// after a device wait (ncclMemFree is not stream-ordered).
std::unique_ptr<HaloExchanger> make_nccl_exchanger(cuda::Context& ctx, NcclComm& comm,
                                                   const Shard& shard, std::int64_t max_dim,
                                                   const NcclExchangerOptions& options = {});

/// MPI exchanger for device matrices: pack on the GPU, copy to pinned host buffers, MPI, copy
/// back into the halo region (or pass device pointers when MPI is CUDA-aware and
/// options.cuda_aware is set). Messages, tags and splitting follow options.mpi as in
/// make_mpi_exchanger, and so does finish()'s halo::MpiError for a block shorter than the plan.
/// start() blocks the host until the compute stream's earlier work and the packing are done (MPI
/// reads the packed rows from the host); finish() waits for MPI, and the copy into the halo region
/// (strided or not) stays asynchronous on the comm stream. cuda_aware with an MPI that reports no
/// CUDA support (MPIX_Query_cuda_support) throws halo::LogicError; an MPI that cannot tell is
/// trusted.
struct MpiDeviceExchangerOptions {
    MpiExchangerOptions mpi;
    bool cuda_aware = false;
};
std::unique_ptr<HaloExchanger> make_mpi_device_exchanger(
    cuda::Context& ctx, MPI_Comm comm, const Shard& shard, std::int64_t max_dim,
    const MpiDeviceExchangerOptions& options = {});

}  // namespace halo
