// The thread/element mapping of the Fused3S kernel (fused3s.cu), written once for the device and
// the host: the kernel indexes its fragments with these functions, and the CPU emulation in
// tests/kernels/reference/test_fused3s_format.cpp runs the kernel's schedule lane by lane through the same
// functions against an mma emulated from the PTX ISA's own layout tables, so a mapping bug shows up
// in CI without a GPU.
//
// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (PTX ISA 9.7.14.5.8), per lane: group
// g = lane / 4, thread-in-group t = lane % 4;
//   A (16 x 16, row-major), 8 halves a0..a7 in 4 registers:
//       row g + 8 * ((i / 2) % 2), column 2 t + (i % 2) + 8 * (i / 4)
//   B (16 x 8, k x n), 4 halves b0..b3 in 2 registers: row (k) 2 t + (i % 2) + 8 * (i / 2), col g
//   C, D (16 x 8, fp32), 4 floats c0..c3: row g + 8 * (i / 2), column 2 t + (i % 2)
// The lower-numbered element of a register is its low 16 bits.
//
// Register remapping (paper 002 section 3.4): the contraction dimension of S = Q K^T (the feature
// dimension) may be permuted freely as long as Q and K get the same permutation. Within each chunk
// of 32 features (two k-steps) lane t's eight B elements are made the eight consecutive features
// [8 t, 8 t + 8) of its K row, one 128-bit load, and Q is stored permuted in shared memory to
// match. For O += P V the output columns are permuted instead: in n-tile j of a warp's nt tiles,
// logical column n is physical column n * nt + j, so a lane's nt B elements of one V row are
// contiguous (one load of nt halves) and the output is un-permuted when it is written.
#pragma once

#include <cstdint>

#include "halo/core/detail/host_device.hpp"

namespace halo::cuda::fused3s {

inline constexpr int kWarp = 32;
/// Warps per thread block; each owns one block of S per iteration and D / kWarps output columns.
inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarp * kWarps;
/// Row-window height and block width (kBsbWindowRows, kBsbBlockCols).
inline constexpr int kRows = 16;
inline constexpr int kBlockCols = 8;
/// Compacted columns that one iteration covers (one block per warp): the k extent of P V.
inline constexpr int kGroupCols = kWarps * kBlockCols;
/// Shared-memory row paddings in elements: row starts shift by 4 banks, so the 8 groups of a
/// fragment load hit distinct banks, and rows stay 16-byte aligned.
inline constexpr int kHalfPad = 8;
inline constexpr int kFloatPad = 4;

static_assert(kGroupCols % 16 == 0, "P V needs whole k-steps of 16");

struct Coord {
    int row = 0;
    int col = 0;
};

HALO_HOST_DEVICE constexpr int group_of(int lane)
{
    return lane >> 2;
}

HALO_HOST_DEVICE constexpr int thread_in_group(int lane)
{
    return lane & 3;
}

/// Element i (0..7) of the A fragment.
HALO_HOST_DEVICE constexpr Coord a_coord(int lane, int i)
{
    return {group_of(lane) + 8 * ((i >> 1) & 1),
            2 * thread_in_group(lane) + (i & 1) + 8 * (i >> 2)};
}

/// Element i (0..3) of the B fragment: row is k, col is n.
HALO_HOST_DEVICE constexpr Coord b_coord(int lane, int i)
{
    return {2 * thread_in_group(lane) + (i & 1) + 8 * (i >> 1), group_of(lane)};
}

/// Element i (0..3) of the C/D fragment.
HALO_HOST_DEVICE constexpr Coord c_coord(int lane, int i)
{
    return {group_of(lane) + 8 * (i >> 1), 2 * thread_in_group(lane) + (i & 1)};
}

/// The physical feature that logical feature `f` (position in the k order of S = Q K^T) reads
/// under register remapping: f = 32 c + 16 kk + k with k = 2 t + e + 8 h (B's row k of lane t,
/// e = k % 2, h = k / 8) reads 32 c + 8 t + 4 kk + 2 h + e.
HALO_HOST_DEVICE constexpr int remap_feature(int f)
{
    const int chunk = f & ~31;
    const int kk = (f >> 4) & 1;
    const int k = f & 15;
    return chunk + 8 * ((k & 7) >> 1) + 4 * kk + 2 * (k >> 3) + (k & 1);
}

/// The logical position (in 32-bit words, each two features) of physical word `w` of a Q row:
/// the inverse of remap_feature on pairs, used to store Q permuted in shared memory. Word
/// w = 16 c + 4 t + 2 kk + h holds features 32 c + 8 t + 4 kk + 2 h + {0, 1}, which sit at
/// logical word 16 c + 8 kk + 4 h + t.
HALO_HOST_DEVICE constexpr int remap_q_word(int w)
{
    const int chunk = w & ~15;
    const int t = (w >> 2) & 3;
    const int kk = (w >> 1) & 1;
    const int h = w & 1;
    return chunk + 8 * kk + 4 * h + t;
}

/// The feature that lane `lane` reads for B element i of k-step `kk` (0..D/16-1) of S = Q K^T.
HALO_HOST_DEVICE constexpr int k_feature(int lane, int kk, int i, bool remap)
{
    const int f = 16 * kk + b_coord(lane, i).row;
    return remap ? remap_feature(f) : f;
}

/// Physical output column, relative to the warp's first column, of logical column n (0..7) of
/// n-tile j among the warp's nt tiles.
HALO_HOST_DEVICE constexpr int o_column(int n, int j, int nt, bool remap)
{
    return remap ? n * nt + j : 8 * j + n;
}

/// The physical V column that lane `lane` reads for n-tile j (B's column is the group).
HALO_HOST_DEVICE constexpr int v_column(int lane, int j, int nt, bool remap)
{
    return o_column(group_of(lane), j, nt, remap);
}

/// Bit of entry (r, s) of a block in its bitmap word r / 8.
HALO_HOST_DEVICE constexpr int bitmap_shift(int r, int s)
{
    return 8 * (r & 7) + s;
}

}  // namespace halo::cuda::fused3s
