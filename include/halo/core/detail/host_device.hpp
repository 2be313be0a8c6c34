// HALO_HOST_DEVICE marks functions written once for the host and the device: nvcc compiles them
// for both, a host compiler sees plain functions. So a kernel and its CPU emulation (or reference)
// run the same code.
#pragma once

#ifdef __CUDACC__
#define HALO_HOST_DEVICE __host__ __device__
#else
#define HALO_HOST_DEVICE
#endif
