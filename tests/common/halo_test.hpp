// Helpers shared by every test suite: where the shared real graphs are, skipping when a resource
// is absent, the one tolerance rule, and scratch directories.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/graph.hpp"

namespace halo::testing {

/// Directory of ../shared/data: $HALO_DATA_DIR if set, else the path configured at build time.
std::filesystem::path shared_data_dir();

/// Full path of one shared data file; empty when the file (or the directory) is absent.
std::filesystem::path shared_data_file(const std::string& name);

/// A fresh, empty directory under the system temp dir, unique to this process and test; removed
/// when the process ends unless HALO_KEEP_SCRATCH is set.
std::filesystem::path scratch_dir(const std::string& tag);

/// Number of CUDA devices visible to this process (0 without CUDA or without a device).
int gpu_count();

/// True when the test runs under compute-sanitizer: `scripts/gpu-check.sh --sanitize` sets
/// HALO_TEST_UNDER_SANITIZER to the tool's name. The sanitizer slows every kernel 10-1000x, so
/// the longest GPU sweeps then take a reduced set of their cases (each still covering every code
/// path its full sweep does, RELIABILITY.md "GPU tests under compute-sanitizer"); the full sweep
/// runs without the sanitizer.
bool under_sanitizer();

/// `full` normally, `reduced` under compute-sanitizer (under_sanitizer()).
template <typename T>
T sweep(T full, T reduced)
{
    return under_sanitizer() ? reduced : full;
}

/// The tolerance rule of every comparison (docs/CONTRIBUTING.md): k * eps<T> * scale, where scale
/// is the largest magnitude of an intermediate (for a dot product of length n: n * max|a| * max|b|)
/// and k a small count of operations whose rounding can accumulate. Reason: a sum of n terms in
/// floating point carries an error bounded by about n * eps * sum|terms|; scale states that bound.
template <typename T>
T tolerance(double k, double scale)
{
    return static_cast<T>(k * std::numeric_limits<T>::epsilon() * scale);
}

/// The edges of a side x side grid, node r * side + c linked to its right and lower neighbours
/// (one direction; build_csr symmetrizes by default): partitioners with locality cut few edges.
EdgeList grid_edges(int side);

/// build_csr(grid_edges(side), {}): the symmetric grid adjacency.
Csr grid_graph(int side);

/// Seeded uniform floats in [lo, hi): every test draws fresh inputs from its own seed.
std::vector<float> random_floats(std::size_t count, std::uint64_t seed, float lo = -1.0f,
                                 float hi = 1.0f);

}  // namespace halo::testing

/// Skips the current test with a message when the shared data file is absent.
#define HALO_REQUIRE_SHARED_FILE(path_var, name)                                        \
    const auto path_var = ::halo::testing::shared_data_file(name);                      \
    if (path_var.empty()) {                                                             \
        GTEST_SKIP() << "shared data file " << (name) << " not found under "            \
                     << ::halo::testing::shared_data_dir()                              \
                     << " (set HALO_DATA_DIR to the directory holding ../shared/data)"; \
    }

/// Skips the current test with a message when fewer than n CUDA devices are present.
#define HALO_REQUIRE_GPUS(n)                                         \
    if (::halo::testing::gpu_count() < (n)) {                        \
        GTEST_SKIP() << "needs " << (n) << " CUDA device(s), found " \
                     << ::halo::testing::gpu_count();                \
    }
