// Compressed sparse row matrices: the owning host container and the non-owning view that kernels
// take.
//
// Conventions (docs/ARCHITECTURE.md): row offsets are int64 (a matrix may exceed 2^31 nonzeros),
// column indices int32 (a shard has fewer than 2^31 local columns; a global graph fewer than 2^31
// nodes), values float32. An empty `values` array means a pattern matrix whose nonzeros are all 1.
// Row i of an adjacency lists the nodes whose features row i aggregates (Y = A X).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace halo {

/// Global node id (across all shards).
using global_id = std::int64_t;
/// Row or column id inside one matrix or shard.
using local_id = std::int32_t;
/// Position of a nonzero (row offsets).
using offset_t = std::int64_t;

/// Half-open range of rows [begin, end).
struct RowRange {
    std::int64_t begin = 0;
    std::int64_t end = 0;

    std::int64_t size() const noexcept { return end - begin; }
    bool empty() const noexcept { return end <= begin; }
};

/// Non-owning view of a CSR matrix; what kernels take. `values` may be null (pattern: all ones).
struct CsrView {
    std::int64_t num_rows = 0;
    std::int64_t num_cols = 0;
    const offset_t* indptr = nullptr;   // num_rows + 1 entries, indptr[0] == 0
    const local_id* indices = nullptr;  // indptr[num_rows] entries
    const float* values = nullptr;      // indptr[num_rows] entries, or null

    std::int64_t nnz() const noexcept { return num_rows == 0 ? 0 : indptr[num_rows]; }
    RowRange all_rows() const noexcept { return {0, num_rows}; }
};

/// Owning host CSR matrix.
struct Csr {
    std::int64_t num_rows = 0;
    std::int64_t num_cols = 0;
    std::vector<offset_t> indptr{0};  // num_rows + 1 entries
    std::vector<local_id> indices;
    std::vector<float> values;  // empty: pattern matrix

    std::int64_t nnz() const noexcept { return static_cast<std::int64_t>(indices.size()); }
    bool has_values() const noexcept { return !values.empty(); }
    std::int64_t row_nnz(std::int64_t row) const { return indptr[row + 1] - indptr[row]; }

    CsrView view() const noexcept
    {
        return {num_rows, num_cols, indptr.data(), indices.data(),
                values.empty() ? nullptr : values.data()};
    }
};

/// Checks the structural invariants (indptr starts at 0, is monotone and ends at nnz; every column
/// in [0, num_cols); values empty or nnz long). Throws halo::InputError naming `what` (a file or
/// dataset name) and the first violation.
void validate(const Csr& csr, const char* what);

/// Largest number of nonzeros in any row.
std::int64_t max_row_nnz(const CsrView& csr);

/// Rows [rows.begin, rows.end) of `a` as a CSR of their own (same columns; offsets from zero;
/// values when `a` has them), copied with the OpenMP threads.
Csr slice_rows(const Csr& a, RowRange rows);

/// Number of rows i with a diagonal entry (i, i).
std::int64_t count_diagonal(const CsrView& csr);

/// The rows x cols row-major matrix x (leading dimension cols) as a CSR of its nonzero entries
/// (x != 0, so NaN is kept; columns ascending, values kept), when at most max_density of its
/// entries are nonzero; std::nullopt otherwise. A sample of rows is counted first, so a dense
/// matrix costs a few hundred rows' scan, not a whole one. OpenMP threads.
std::optional<Csr> sparse_rows(const float* x, std::int64_t rows, std::int64_t cols,
                               double max_density);

}  // namespace halo
