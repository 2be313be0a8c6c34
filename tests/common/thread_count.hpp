// Sets the OpenMP thread count for one scope and restores the previous one, also when a check
// throws: for tests that a result does not depend on the thread count. Dynamic adjustment is off
// so that the team really has the requested size.
#pragma once

#include <omp.h>

namespace halo::testing {

class ThreadCount {
public:
    explicit ThreadCount(int threads)
        : saved_threads_(omp_get_max_threads()), saved_dynamic_(omp_get_dynamic())
    {
        omp_set_dynamic(0);
        omp_set_num_threads(threads);
    }
    ~ThreadCount()
    {
        omp_set_num_threads(saved_threads_);
        omp_set_dynamic(saved_dynamic_);
    }
    ThreadCount(const ThreadCount&) = delete;
    ThreadCount& operator=(const ThreadCount&) = delete;

    // The size of the team a parallel region gets now.
    static int team_size()
    {
        int size = 0;
#pragma omp parallel
        {
#pragma omp single
            size = omp_get_num_threads();
        }
        return size;
    }

private:
    int saved_threads_;
    int saved_dynamic_;
};

}  // namespace halo::testing
