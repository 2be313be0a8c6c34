// The phases of a job after start (src/job/job_steps.cpp).
#pragma once

#include <cstddef>

#include "halo/inference_job.hpp"

namespace halo::job {

/// HALO_FAULT_INJECT="rank=R,layer=L": rank R throws before layer L (tests of the abort path).
/// "rank=R,layer=L,sleep=S": rank R sleeps S seconds there instead, its peers waiting in the
/// layer's halo exchange, so that a test can kill it (tests/apps/test_faults.sh). Rank -1 only
/// checks the variable's form (UsageError).
void maybe_inject_fault(int rank, std::size_t layer);

/// read, check, plan, tune and run, write, report; the summary's timings.
JobSummary run_phases(InferenceJob::State& job);

}  // namespace halo::job
