// The MaxK top-k selection logic, written once for the CUDA kernel (maxk.cu) and its CPU
// emulation test (tests/kernels/reference/test_maxk.cpp): the order key of a float's bits (the tie
// rule of include/halo/kernels_host/maxk.hpp) and the bitwise search for the k-th largest key.
// Internal to halo_kernels; compiles as plain C++ and under nvcc.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define HALO_MAXK_HD __host__ __device__ __forceinline__
#else
#define HALO_MAXK_HD inline
#endif

namespace halo::maxk {

/// halo::maxk_order_key on the bits of a float: numbers in IEEE order (-0 below +0) mapped to an
/// unsigned order, every NaN to the largest key. Keys of numbers are never 0, so 0 marks an
/// absent entry (a column beyond the width) that no threshold selects.
HALO_MAXK_HD std::uint32_t order_key(std::uint32_t bits)
{
    if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
        return 0xFFFFFFFFu;
    }
    return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

struct Threshold {
    std::uint32_t key = 0;   // every entry with a larger key is selected
    std::uint32_t ties = 0;  // and this many entries with key == `key`, lowest columns first
};

/// The selection of the k largest keys of a row (k >= 1, at most the row's entries), given
/// count_at_least(t) = number of entries with key >= t. Builds the largest T with
/// count_at_least(T) >= k bit by bit from the top; T is then the k-th largest key. It stops early
/// once count_at_least(T) == k: the entries >= T are then exactly the k largest, whatever the
/// lower bits would add. Ties: k minus the number of keys above T are taken from the keys equal
/// to T. At most 33 counts.
#ifdef __CUDACC__
// The device kernel passes a device lambda; the host instantiation of this template is never
// called with one.
#pragma nv_exec_check_disable
#endif
template <typename CountAtLeast>
HALO_MAXK_HD Threshold select_threshold(std::uint32_t k, CountAtLeast count_at_least)
{
    std::uint32_t t = 0;
    for (int b = 31; b >= 0; --b) {
        const std::uint32_t candidate = t | (1u << b);
        const std::uint32_t c = count_at_least(candidate);
        if (c >= k) {
            t = candidate;
            if (c == k) {
                break;
            }
        }
    }
    const std::uint32_t above = t == 0xFFFFFFFFu ? 0u : count_at_least(t + 1u);
    return {t, k - above};
}

}  // namespace halo::maxk
