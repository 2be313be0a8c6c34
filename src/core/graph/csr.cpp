#include "halo/core/csr.hpp"

#include <algorithm>

#include "halo/core/detail/parallel_copy.hpp"
#include "halo/core/error.hpp"

namespace halo {

void validate(const Csr& csr, const char* what)
{
    const auto nnz = csr.nnz();
    if (csr.num_rows < 0 || csr.num_cols < 0) {
        HALO_THROW(InputError, what, ": negative shape ", csr.num_rows, " x ", csr.num_cols);
    }
    if (static_cast<std::int64_t>(csr.indptr.size()) != csr.num_rows + 1) {
        HALO_THROW(InputError, what, ": indptr has ", csr.indptr.size(), " entries, expected ",
                   csr.num_rows + 1);
    }
    if (csr.indptr.front() != 0) {
        HALO_THROW(InputError, what, ": indptr[0] is ", csr.indptr.front(), ", expected 0");
    }
    // Both scans count violations on every core (billions of columns at scale) and look for
    // the first one only when there is one.
    std::int64_t decreasing = 0;
#pragma omp parallel for schedule(static) reduction(+ : decreasing)
    for (std::int64_t i = 0; i < csr.num_rows; ++i) {
        decreasing += csr.indptr[i + 1] < csr.indptr[i] ? 1 : 0;
    }
    for (std::int64_t i = 0; decreasing > 0 && i < csr.num_rows; ++i) {
        if (csr.indptr[i + 1] < csr.indptr[i]) {
            HALO_THROW(InputError, what, ": indptr decreases at row ", i, " (", csr.indptr[i],
                       " > ", csr.indptr[i + 1], ")");
        }
    }
    if (csr.indptr.back() != nnz) {
        HALO_THROW(InputError, what, ": indptr ends at ", csr.indptr.back(), " but there are ", nnz,
                   " column indices");
    }
    const auto cols = csr.num_cols;
    std::int64_t outside = 0;
#pragma omp parallel for schedule(static) reduction(+ : outside)
    for (std::int64_t k = 0; k < nnz; ++k) {
        const auto c = csr.indices[k];
        outside += c < 0 || c >= cols ? 1 : 0;
    }
    for (std::int64_t k = 0; outside > 0 && k < nnz; ++k) {
        const auto c = csr.indices[k];
        if (c < 0 || c >= cols) {
            HALO_THROW(InputError, what, ": column index ", c, " at nonzero ", k,
                       " is outside [0, ", cols, ")");
        }
    }
    if (!csr.values.empty() && static_cast<std::int64_t>(csr.values.size()) != nnz) {
        HALO_THROW(InputError, what, ": ", csr.values.size(), " values for ", nnz, " nonzeros");
    }
}

std::int64_t max_row_nnz(const CsrView& csr)
{
    std::int64_t best = 0;
    for (std::int64_t i = 0; i < csr.num_rows; ++i) {
        best = std::max(best, csr.indptr[i + 1] - csr.indptr[i]);
    }
    return best;
}

Csr slice_rows(const Csr& a, RowRange rows)
{
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= a.num_rows, "rows [",
                 rows.begin, ", ", rows.end, ") of a CSR of ", a.num_rows, " rows");
    Csr out;
    out.num_rows = rows.size();
    out.num_cols = a.num_cols;
    const auto first = a.indptr[rows.begin];
    const auto nnz = a.indptr[rows.end] - first;
    out.indptr.resize(static_cast<std::size_t>(out.num_rows + 1));
    for (std::int64_t i = 0; i <= out.num_rows; ++i) {
        out.indptr[i] = a.indptr[rows.begin + i] - first;
    }
    out.indices.resize(static_cast<std::size_t>(nnz));
    detail::parallel_copy(a.indices.data() + first, nnz, out.indices.data());
    if (a.has_values()) {
        out.values.resize(static_cast<std::size_t>(nnz));
        detail::parallel_copy(a.values.data() + first, nnz, out.values.data());
    }
    return out;
}

std::int64_t count_diagonal(const CsrView& csr)
{
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < csr.num_rows; ++i) {
        for (auto k = csr.indptr[i]; k < csr.indptr[i + 1]; ++k) {
            if (csr.indices[k] == i) {
                ++count;
                break;
            }
        }
    }
    return count;
}

std::optional<Csr> sparse_rows(const float* x, std::int64_t rows, std::int64_t cols,
                               double max_density)
{
    HALO_EXPECTS(rows >= 0 && cols >= 0 && (x != nullptr || rows * cols == 0), "a ", rows, " x ",
                 cols, " matrix");
    if (rows == 0 || cols == 0 || !(max_density > 0.0)) {
        return std::nullopt;
    }
    const auto row_count = [&](std::int64_t i) {
        const float* r = x + i * cols;
        std::int64_t n = 0;
        for (std::int64_t j = 0; j < cols; ++j) {
            n += r[j] != 0.0f;
        }
        return n;
    };
    const double limit = max_density * static_cast<double>(rows) * static_cast<double>(cols);
    // A sample of evenly spaced rows first: a dense matrix is refused after a few hundred rows.
    constexpr std::int64_t kSample = 256;
    if (rows > 4 * kSample) {
        std::int64_t sampled = 0;
        for (std::int64_t s = 0; s < kSample; ++s) {
            sampled += row_count(s * rows / kSample);
        }
        if (static_cast<double>(sampled) > 2.0 * max_density * kSample * cols) {
            return std::nullopt;
        }
    }
    Csr out;
    out.num_rows = rows;
    out.num_cols = cols;
    out.indptr.assign(static_cast<std::size_t>(rows + 1), 0);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < rows; ++i) {
        out.indptr[i + 1] = row_count(i);
    }
    for (std::int64_t i = 0; i < rows; ++i) {
        out.indptr[i + 1] += out.indptr[i];
    }
    if (static_cast<double>(out.indptr[rows]) > limit) {
        return std::nullopt;
    }
    out.indices.resize(static_cast<std::size_t>(out.indptr[rows]));
    out.values.resize(out.indices.size());
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < rows; ++i) {
        const float* r = x + i * cols;
        auto k = out.indptr[i];
        for (std::int64_t j = 0; j < cols; ++j) {
            if (r[j] != 0.0f) {
                out.indices[k] = static_cast<local_id>(j);
                out.values[k] = r[j];
                ++k;
            }
        }
    }
    return out;
}

}  // namespace halo
