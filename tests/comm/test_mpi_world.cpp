#include <mpi.h>

#include <set>
#include <string>
#include <vector>

#include "halo/comm/mpi_world.hpp"
#include "halo/mpi/failure_watch.hpp"
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

// halo::collectively (halo/mpi/failure_watch.hpp): an error of some ranks is thrown on every rank,
// as a CollectiveError that the lowest failing rank alone reports, with that rank's type.
TEST(Collectively, OneRanksErrorIsThrownOnEveryRankAndReportedByIt)
{
    int rank = 0;
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ASSERT_GE(size, 2);
    EXPECT_NO_THROW(halo::collectively(MPI_COMM_WORLD, "doing nothing", [] {}));
    // The last rank fails with an InputError: every rank throws one (the caught type).
    try {
        halo::collectively(MPI_COMM_WORLD, "reading", [&] {
            if (rank == size - 1) {
                HALO_THROW(halo::InputError, "bad slice on rank ", rank);
            }
        });
        ADD_FAILURE() << "rank " << rank << " did not throw";
    } catch (const halo::InputError& e) {
        const auto* c = dynamic_cast<const halo::CollectiveError*>(&e);
        ASSERT_NE(c, nullptr);
        EXPECT_EQ(c->failed_rank(), size - 1);
        EXPECT_FALSE(c->every_rank());
        EXPECT_EQ(c->reporter(), rank == size - 1);
        EXPECT_EQ(e.message(), rank == size - 1 ? "bad slice on rank " + std::to_string(rank)
                                                : "rank " + std::to_string(size - 1) +
                                                      " failed reading (its error is above)");
    }
    // Every rank fails, rank 0 with a plain Error: rank 0 reports, the type is its.
    try {
        halo::collectively(MPI_COMM_WORLD, "writing", [&] {
            if (rank == 0) {
                HALO_THROW(halo::Error, "disk full");
            }
            HALO_THROW(halo::InputError, "bad value");
        });
        ADD_FAILURE() << "rank " << rank << " did not throw";
    } catch (const halo::InputError&) {
        ADD_FAILURE() << "rank " << rank << ": the type is rank 0's (Error), not InputError";
    } catch (const halo::CollectiveError& c) {
        EXPECT_EQ(c.failed_rank(), 0);
        EXPECT_TRUE(c.every_rank());
        EXPECT_EQ(c.reporter(), rank == 0);
        if (rank == 0) {
            EXPECT_EQ(c.text(), "disk full");
        }
    }
}
