// Halo exchange between GPUs: NCCL point-to-point (grouped ncclSend/ncclRecv straight into the
// halo region, on the Context's communication stream), and MPI over device buffers (host staging,
// or CUDA-aware MPI when the library has it) for several ranks sharing one GPU and for clusters
// without NCCL. Both order themselves after the compute stream's earlier work in start(), and make
// the compute stream wait for the received rows in finish() (events, no host blocking for NCCL).
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <memory>

#include "halo/cuda/context.hpp"
#include "halo/exchanger.hpp"
#include "halo/mpi_exchanger.hpp"
#include "halo/shard.hpp"

namespace halo {

/// An NCCL communicator bootstrapped over MPI: rank 0 creates the unique id, MPI_Bcast, then
/// ncclCommInitRank, every call checked. Each rank must already have selected its device (the
/// Context does). abort() tears the communicator down without waiting (ncclCommAbort), for the
/// error path: a failed rank never leaves the others blocked in a collective.
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

private:
    ncclComm_t comm_ = nullptr;
    int rank_ = 0;
    int size_ = 1;
};

/// NCCL exchanger for `shard` (rank == shard.part); matrices exchanged are device views on
/// ctx's device, at most `max_dim` wide.
std::unique_ptr<HaloExchanger> make_nccl_exchanger(cuda::Context& ctx, NcclComm& comm,
                                                   const Shard& shard, std::int64_t max_dim);

/// MPI exchanger for device matrices: pack on the GPU, copy to pinned host buffers, MPI, copy
/// back into the halo region (or pass device pointers when MPI is CUDA-aware and
/// options.cuda_aware is set).
struct MpiDeviceExchangerOptions {
    MpiExchangerOptions mpi;
    bool cuda_aware = false;
};
std::unique_ptr<HaloExchanger> make_mpi_device_exchanger(cuda::Context& ctx, MPI_Comm comm,
                                                         const Shard& shard, std::int64_t max_dim,
                                                         const MpiDeviceExchangerOptions& options = {});

}  // namespace halo
