#include "halo/comm/mpi_world.hpp"

#include <cstdio>
#include <cstdlib>

#include "halo/mpi/mpi_error.hpp"

namespace halo {

MpiWorld::MpiWorld(int* argc, char*** argv, int thread_level)
{
    int initialized = 0;
    HALO_MPI_TRY(MPI_Initialized(&initialized));
    if (!initialized) {
        int provided = 0;
        HALO_MPI_TRY(MPI_Init_thread(argc, argv, thread_level, &provided));
        owns_init_ = true;
    }
    HALO_MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    HALO_MPI_TRY(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    HALO_MPI_TRY(MPI_Comm_rank(comm_, &rank_));
    HALO_MPI_TRY(MPI_Comm_size(comm_, &size_));
    HALO_MPI_TRY(
        MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm_));
    HALO_MPI_TRY(MPI_Comm_rank(node_comm_, &local_rank_));
    HALO_MPI_TRY(MPI_Comm_size(node_comm_, &local_size_));
    char name[MPI_MAX_PROCESSOR_NAME];
    int length = 0;
    HALO_MPI_TRY(MPI_Get_processor_name(name, &length));
    node_name_.assign(name, length);
}

MpiWorld::~MpiWorld()
{
    // Destructors must not throw: failures while tearing down are ignored.
    if (node_comm_ != MPI_COMM_NULL) {
        MPI_Comm_free(&node_comm_);
    }
    if (comm_ != MPI_COMM_NULL) {
        MPI_Comm_free(&comm_);
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_init_ && !finalized) {
        MPI_Finalize();
    }
}

void MpiWorld::abort(const std::string& message, int code) const
{
    std::fprintf(stderr, "rank %d: %s\n", rank_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort();  // MPI_Abort does not return; this is for the compiler and broken MPIs.
}

}  // namespace halo
