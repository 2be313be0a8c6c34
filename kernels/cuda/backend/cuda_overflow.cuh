// The device record of the first element a 16-bit store turned infinite (cuda_activations.hpp):
// one per CUDA backend, shared by every kernel that stores activations (round_activations,
// store_features, gemm_features' range check), all on the compute stream, so that the first
// overflow in issue order is the one take_activation_overflow() reports. Internal to
// halo_kernels.
#pragma once

#include <cstddef>
#include <cstdint>

namespace halo::cuda::detail {

// Zero: empty. `first` and `blocks_done` belong to the launch in flight and are zero between
// launches; the rest is the first overflow since the last take().
struct OverflowRecord {
    unsigned long long first;  // ~(the launch's order key of its first overflow); 0: none
    unsigned int blocks_done;  // blocks of the launch that finished
    int set;                   // 1: row, col, value and store hold an overflow
    long long row;
    long long col;
    float value;
    int store;
};
constexpr std::size_t kRecordWords = (sizeof(OverflowRecord) + 7) / 8;

#ifdef __CUDACC__
/// Called once by every thread of every block of a launch after its work: offers the thread's
/// largest key `mine` (~order of its first overflow; 0: none) and counts the block done. Returns
/// true in the last block to finish, with `first` the launch's largest key (0: no overflow);
/// that block then fills the record where it is empty and calls end_launch().
__device__ __forceinline__ bool last_block_of_launch(OverflowRecord* rec, unsigned long long mine,
                                                     unsigned long long& first)
{
    if (mine != 0) {
        atomicMax(&rec->first, mine);
    }
    __threadfence();
    __syncthreads();
    __shared__ bool last;
    if (threadIdx.x == 0) {
        last = atomicAdd(&rec->blocks_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) {
        return false;
    }
    first = atomicAdd(&rec->first, 0ull);  // every block's offer is in
    return true;
}

/// Resets the launch's fields for the next launch (the last block, after reading them).
__device__ __forceinline__ void end_launch(OverflowRecord* rec)
{
    if (threadIdx.x == 0) {
        rec->first = 0;
        rec->blocks_done = 0;
    }
}
#endif

}  // namespace halo::cuda::detail
