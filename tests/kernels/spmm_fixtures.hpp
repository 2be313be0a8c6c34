// Inputs shared by the SpMM tests, CPU only (the unit tests that emulate GPU schedules on the host
// build without CUDA): seeded R-MAT and Erdos-Renyi CSR matrices, matrices of given row lengths,
// the shared graphs as the tests build them, and a host matrix with a leading dimension whose
// padding starts as NaN. Every builder is deterministic in its arguments, so each test keeps its
// own seeds and shapes; the variations between tests (edge factor, normalization, value seeds)
// are parameters, not unified values.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo_test.hpp"

namespace halo::testing {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// R-MAT of 2^scale nodes, symmetrized, built with `normalization`; values as built.
inline Csr rmat_graph(int scale, double edge_factor, std::uint64_t seed,
                      Normalization normalization = Normalization::none)
{
    RmatOptions o;
    o.scale = scale;
    o.edge_factor = edge_factor;
    o.seed = seed;
    BuildOptions b;
    b.normalization = normalization;
    return build_csr(generate_rmat(o), b);
}

// Erdos-Renyi with m edges on n nodes, directed (not symmetrized): with m < n most rows are empty.
inline Csr directed_erdos_renyi(std::int64_t n, std::int64_t m, std::uint64_t seed)
{
    BuildOptions b;
    b.symmetrize = false;
    return build_csr(generate_erdos_renyi({n, m, seed}), b);
}

// Drops `a`'s values and, when `valued`, draws new ones in [-1, 1) from `value_seed`.
inline Csr with_values(Csr a, bool valued, std::uint64_t value_seed)
{
    a.values.clear();
    if (valued) {
        a.values = random_floats(a.indices.size(), value_seed);
    }
    return a;
}

// R-MAT with edge factor 8, symmetrized; pattern or seeded values (seed + 17).
inline Csr rmat_csr(int scale, std::uint64_t seed, bool valued)
{
    return with_values(rmat_graph(scale, 8, seed), valued, seed + 17);
}

// Sparse Erdos-Renyi with n / 3 directed edges; pattern or seeded values (seed + 17).
inline Csr erdos_renyi_csr(std::int64_t n, std::uint64_t seed, bool valued)
{
    return with_values(directed_erdos_renyi(n, n / 3, seed), valued, seed + 17);
}

// kind "rmat": rmat_csr(scale, ...); any other kind: erdos_renyi_csr(2^scale, ...).
inline Csr graph_csr(const std::string& kind, int scale, std::uint64_t seed, bool valued)
{
    return kind == "rmat" ? rmat_csr(scale, seed, valued)
                          : erdos_renyi_csr(std::int64_t{1} << scale, seed, valued);
}

// Rows of the given lengths, columns cycling over num_cols (repeated within a long row).
inline Csr csr_with_rows(const std::vector<std::int64_t>& lengths, std::int64_t num_cols,
                         bool valued = false, std::uint64_t seed = 0)
{
    Csr a;
    a.num_rows = static_cast<std::int64_t>(lengths.size());
    a.num_cols = num_cols;
    for (const auto len : lengths) {
        for (std::int64_t k = 0; k < len; ++k) {
            a.indices.push_back(static_cast<local_id>((k * 7919) % num_cols));
        }
        a.indptr.push_back(static_cast<offset_t>(a.indices.size()));
    }
    if (valued) {
        a.values = random_floats(a.indices.size(), seed);
    }
    return a;
}

// A shared edge list symmetrized, as a pattern matrix.
inline Csr read_symmetric_graph(const std::filesystem::path& path)
{
    BuildOptions b;
    b.symmetrize = true;
    return build_csr(read_edge_list(path), b);
}

// A shared edge list as a GCN layer sees it: symmetrized, self-loops added, D^-1/2 (A+I) D^-1/2.
inline Csr read_gcn_graph(const std::filesystem::path& path)
{
    BuildOptions b;
    b.self_loops = SelfLoops::add;
    b.normalization = Normalization::gcn;
    return build_csr(read_edge_list(path), b);
}

// The largest |a_ik| of row i (1 for a pattern matrix's ones, 0 for an empty row): with x in
// [-1, 1), the scale of the row's products in a tolerance.
inline float row_max_abs(const Csr& a, std::int64_t i)
{
    float m = 0.0f;
    for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
        m = std::max(m, a.has_values() ? std::abs(a.values[k]) : 1.0f);
    }
    return m;
}

// Row-major host storage with a leading dimension (ld < 0: ld = cols); every element, padding
// included, starts as `fill`, so a write into the padding or an unwritten row shows up.
struct HostMatrix {
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t ld = 0;
    std::vector<float> data;

    HostMatrix(std::int64_t r, std::int64_t c, std::int64_t l = -1, float fill = kNaN)
        : rows(r), cols(c), ld(l < 0 ? c : l), data(static_cast<std::size_t>(r * ld), fill)
    {
    }

    float& operator()(std::int64_t i, std::int64_t j) { return data[i * ld + j]; }
    float operator()(std::int64_t i, std::int64_t j) const { return data[i * ld + j]; }
    DenseView<float> view() { return {data.data(), rows, cols, ld}; }
    DenseView<const float> cview() const { return {data.data(), rows, cols, ld}; }
    float max_abs() const
    {
        float m = 0.0f;
        for (std::int64_t i = 0; i < rows; ++i) {
            for (std::int64_t j = 0; j < cols; ++j) {
                m = std::max(m, std::abs((*this)(i, j)));
            }
        }
        return m;
    }
};

// Seeded values in [-1, 1) in the rows x cols block (row-major in the order drawn), NaN padding.
inline HostMatrix random_matrix(std::int64_t rows, std::int64_t cols, std::int64_t ld,
                                std::uint64_t seed)
{
    HostMatrix m(rows, cols, ld);
    const auto values = random_floats(static_cast<std::size_t>(rows * cols), seed);
    for (std::int64_t i = 0; i < rows; ++i) {
        std::copy_n(values.begin() + i * cols, cols, m.data.begin() + i * m.ld);
    }
    return m;
}

}  // namespace halo::testing
