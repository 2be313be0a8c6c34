#include <mpi.h>

#include <set>
#include <vector>

#include "halo/mpi_world.hpp"
#include "halo_test.hpp"

TEST(MpiWorld, RankSizeAndLocalRankAgreeWithMpi)
{
    halo::MpiWorld world(nullptr, nullptr);  // MPI is already initialized by the test main
    int rank = -1;
    int size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    EXPECT_EQ(world.rank(), rank);
    EXPECT_EQ(world.size(), size);
    EXPECT_GE(world.local_rank(), 0);
    EXPECT_LT(world.local_rank(), world.local_size());
    EXPECT_LE(world.local_size(), world.size());
    EXPECT_FALSE(world.node_name().empty());

    // Local ranks on one node are 0..local_size-1, each exactly once.
    std::vector<int> locals(world.size());
    int mine = world.local_rank();
    MPI_Allgather(&mine, 1, MPI_INT, locals.data(), 1, MPI_INT, world.comm());
    if (world.local_size() == world.size()) {
        std::set<int> distinct(locals.begin(), locals.end());
        EXPECT_EQ(static_cast<int>(distinct.size()), world.size());
        EXPECT_EQ(*distinct.rbegin(), world.size() - 1);
    }
}

TEST(MpiWorld, CommunicatorReturnsErrorsInsteadOfAborting)
{
    halo::MpiWorld world(nullptr, nullptr);
    int value = 1;
    // An invalid root: with MPI_ERRORS_RETURN the call reports an error code and the job lives.
    const int status = MPI_Bcast(&value, 1, MPI_INT, world.size() + 5, world.comm());
    EXPECT_NE(status, MPI_SUCCESS);
}
