// Rank and size in MPI_COMM_WORLD, for the tests labelled mpi (their main initializes MPI).
#pragma once

#include <mpi.h>

namespace halo::testing {

inline int world_rank()
{
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

inline int world_size()
{
    int s = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}

}  // namespace halo::testing
