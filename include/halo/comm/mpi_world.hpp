// The MPI world as HaloGNN sees it: rank, size, and the local rank among the ranks of one node
// (through MPI_Comm_split_type), which picks the GPU. Owns MPI initialization when it did it.
#pragma once

#include <mpi.h>

#include <string>

namespace halo {

class MpiWorld {
public:
    /// Initializes MPI unless it is already initialized, asking for `thread_level` (FUNNELED:
    /// only the main thread calls MPI; halo-infer asks for MULTIPLE, for the thread that listens
    /// for another rank's failure, halo/mpi/failure_watch.hpp), duplicates MPI_COMM_WORLD with
    /// errors returned rather than fatal, and splits it by shared-memory node.
    MpiWorld(int* argc, char*** argv, int thread_level = MPI_THREAD_FUNNELED);
    ~MpiWorld();
    MpiWorld(const MpiWorld&) = delete;
    MpiWorld& operator=(const MpiWorld&) = delete;

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    /// Rank among the processes on this node, and their number.
    int local_rank() const noexcept { return local_rank_; }
    int local_size() const noexcept { return local_size_; }
    /// The world communicator of HaloGNN (a duplicate of MPI_COMM_WORLD).
    MPI_Comm comm() const noexcept { return comm_; }
    /// Name of this node (MPI_Get_processor_name).
    const std::string& node_name() const noexcept { return node_name_; }

    /// Prints "rank r: message" to stderr and aborts every rank of the job with `code`, so a
    /// failure on one rank never leaves the others waiting in a collective.
    [[noreturn]] void abort(const std::string& message, int code = 1) const;

private:
    bool owns_init_ = false;
    MPI_Comm comm_ = MPI_COMM_NULL;
    MPI_Comm node_comm_ = MPI_COMM_NULL;
    int rank_ = 0;
    int size_ = 1;
    int local_rank_ = 0;
    int local_size_ = 1;
    std::string node_name_;
};

}  // namespace halo
