// NcclComm: the one bootstrap (docs/CONTRIBUTING.md; RAFT mpi_comms, nccl-tests): the device is
// selected, rank 0 makes the unique id, MPI_Bcast carries it, ncclCommInitRank joins.
//
// A rank that fails before ncclCommInitRank must not leave the others inside it (they would wait
// for it forever in NCCL's bootstrap), so every rank first says over MPI whether it got that far;
// either all ranks join or all throw.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <string>

#include "halo/comm/nccl_error.hpp"
#include "halo/comm/nccl_exchanger.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/mpi/mpi_error.hpp"

namespace halo {

NcclComm::NcclComm(MPI_Comm comm, const cuda::Context& ctx) : mpi_comm_(comm)
{
    HALO_MPI_TRY(MPI_Comm_rank(comm, &rank_));
    HALO_MPI_TRY(MPI_Comm_size(comm, &size_));

    std::string failure;
    const cudaError_t selected = cudaSetDevice(ctx.device());
    if (selected != cudaSuccess) {
        failure =
            detail::concat("cudaSetDevice(", ctx.device(), ") failed: ", cudaGetErrorName(selected),
                           ": ", cudaGetErrorString(selected));
    }
    // Rank 0 broadcasts the id together with the result of making it.
    struct Bootstrap {
        ncclUniqueId id;
        ncclResult_t result;
    } bootstrap{};
    bootstrap.result = ncclSuccess;
    if (rank_ == 0) {
        bootstrap.result = ncclGetUniqueId(&bootstrap.id);
    }
    HALO_MPI_TRY(MPI_Bcast(&bootstrap, static_cast<int>(sizeof(bootstrap)), MPI_BYTE, 0, comm));
    if (bootstrap.result != ncclSuccess && failure.empty()) {
        failure = detail::concat("ncclGetUniqueId failed on rank 0: ",
                                 ncclGetErrorString(bootstrap.result));
    }

    // The lowest rank that failed, or size_ when none did.
    int first_failed = failure.empty() ? size_ : rank_;
    HALO_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, comm));
    if (!failure.empty()) {
        HALO_THROW(NcclError, "NCCL bootstrap on rank ", rank_, " of ", size_, ": ", failure);
    }
    if (first_failed < size_) {
        HALO_THROW(NcclError, "NCCL bootstrap on rank ", rank_, " of ", size_, " abandoned: rank ",
                   first_failed, " failed before ncclCommInitRank");
    }
    ncclComm_t created = nullptr;
    const ncclResult_t joined = ncclCommInitRank(&created, size_, bootstrap.id, rank_);
    if (joined != ncclSuccess) {
        const char* last = ncclGetLastError(created);
        const std::string detail = last != nullptr ? last : "";
        if (created != nullptr) {
            static_cast<void>(ncclCommAbort(created));
        }
        const bool usage = joined == ncclInvalidArgument || joined == ncclInvalidUsage;
        HALO_THROW(NcclError, "ncclCommInitRank(rank ", rank_, " of ", size_, ", device ",
                   ctx.device(), ") failed: ", ncclGetErrorString(joined), " (", detail, ')',
                   usage ? "; NCCL needs a GPU of its own for each rank (ranks that share a GPU "
                           "exchange through make_mpi_device_exchanger)"
                         : "");
    }
    comm_ = created;
}

NcclComm::~NcclComm()
{
    if (comm_ != nullptr) {
        deregister_all();
        static_cast<void>(ncclCommDestroy(comm_));  // a destructor must not throw
    }
}

void* NcclComm::register_buffer(void* data, std::size_t bytes)
{
    HALO_EXPECTS(comm_ != nullptr, "the NCCL communicator was aborted");
    void* handle = nullptr;
    const auto registered = ncclCommRegister(comm_, data, bytes, &handle);
    if (registered != ncclSuccess) {
        HALO_THROW(NcclError, "rank ", rank_, ": ncclCommRegister of ", bytes,
                   " bytes failed: ", ncclGetErrorString(registered),
                   detail::nccl_last_error(comm_));
    }
    const std::lock_guard lock(registered_mutex_);
    registered_.push_back(handle);
    return handle;
}

void NcclComm::deregister_buffer(void* handle) noexcept
{
    const std::lock_guard lock(registered_mutex_);
    const auto it = std::find(registered_.begin(), registered_.end(), handle);
    if (it == registered_.end() || comm_ == nullptr) {
        return;  // deregistered already (abort(), or twice)
    }
    static_cast<void>(ncclCommDeregister(comm_, handle));
    registered_.erase(it);
}

void NcclComm::deregister_all() noexcept
{
    const std::lock_guard lock(registered_mutex_);
    for (void* handle : registered_) {
        static_cast<void>(ncclCommDeregister(comm_, handle));
    }
    registered_.clear();
}

void NcclComm::barrier() const
{
    HALO_MPI_TRY(MPI_Barrier(mpi_comm_));
}

void NcclComm::abort() noexcept
{
    if (comm_ != nullptr) {
        // Registrations first: NCCL 2.28 faults inside ncclCommAbort when some remain (seen
        // with an injected fault on 4 H200s). Deregistering is local and does not wait for
        // the device.
        deregister_all();
        static_cast<void>(ncclCommAbort(comm_));
        comm_ = nullptr;
    }
}

}  // namespace halo
