// MaxK on the host (include/halo/kernels_host/maxk.hpp): CBSR checks, the edge group builder and
// its validation, and the reference kernels (top-k by sorting, SSD by the plain loop, and the GPU
// group schedule emulated).
#include "halo/kernels_host/maxk.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/error.hpp"

namespace halo {

Cbsr::Cbsr(std::int64_t rows_, std::int64_t dim_, std::int64_t k_) : rows(rows_), dim(dim_), k(k_)
{
    check_cbsr_shape(rows, dim, k);
    values.assign(static_cast<std::size_t>(rows * k), 0.0f);
    indices.assign(static_cast<std::size_t>(rows * k), 0);
}

void check_cbsr_shape(std::int64_t rows, std::int64_t dim, std::int64_t k)
{
    HALO_EXPECTS(rows >= 0, "CBSR row count ", rows, " is negative");
    HALO_EXPECTS(dim >= 1 && dim <= kMaxkMaxDim, "CBSR width ", dim, " outside [1, ", kMaxkMaxDim,
                 "]");
    HALO_EXPECTS(k >= 1 && k <= dim, "k = ", k, " outside [1, ", dim, "] (the width)");
}

void validate(CbsrView<const float> s, const char* what)
{
    check_cbsr_shape(s.rows, s.dim, s.k);
    for (std::int64_t i = 0; i < s.rows; ++i) {
        for (std::int64_t t = 0; t < s.k; ++t) {
            const auto j = s.indices[i * s.k + t];
            if (j < 0 || j >= s.dim) {
                HALO_THROW(InputError, what, ": row ", i, " entry ", t, ": column ", j,
                           " outside [0, ", s.dim, ")");
            }
            if (t > 0 && j <= s.indices[i * s.k + t - 1]) {
                HALO_THROW(InputError, what, ": row ", i, " entry ", t, ": column ", j,
                           " does not follow column ", s.indices[i * s.k + t - 1],
                           " (columns must ascend)");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Edge groups.

void validate(const EdgeGroupOptions& options)
{
    if (options.group_size < 1 || options.group_size > (std::int32_t{1} << 30)) {
        HALO_THROW(InputError, "edge group size ", options.group_size, " outside [1, 2^30]");
    }
}

EdgeGroups build_edge_groups(const CsrView& a, const EdgeGroupOptions& options)
{
    validate(options);
    if (a.num_rows > std::numeric_limits<std::int32_t>::max()) {
        HALO_THROW(InputError, "edge groups: ", a.num_rows,
                   " rows do not fit the int32 row ids of a group");
    }
    EdgeGroups g;
    g.group_size = options.group_size;
    g.num_rows = a.num_rows;
    g.nnz = a.nnz();
    const std::int64_t size = options.group_size;
    std::int64_t total = 0;
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        total += std::max<std::int64_t>(1, (a.indptr[i + 1] - a.indptr[i] + size - 1) / size);
    }
    g.row.reserve(total);
    g.count.reserve(total);
    g.first.reserve(total);
    g.update_mode.reserve(total);
    for (std::int64_t i = 0; i < a.num_rows; ++i) {
        const auto begin = a.indptr[i];
        const auto end = a.indptr[i + 1];
        const std::int32_t mode = end - begin > size ? 1 : 0;
        auto pos = begin;
        do {
            const auto n = std::min(size, end - pos);
            g.row.push_back(static_cast<std::int32_t>(i));
            g.count.push_back(static_cast<std::int32_t>(n));
            g.first.push_back(pos);
            g.update_mode.push_back(mode);
            pos += n;
        } while (pos < end);
    }
    return g;
}

void validate(const EdgeGroups& g, const CsrView& a, const char* what)
{
    const auto n = g.size();
    if (static_cast<std::int64_t>(g.count.size()) != n ||
        static_cast<std::int64_t>(g.first.size()) != n ||
        static_cast<std::int64_t>(g.update_mode.size()) != n) {
        HALO_THROW(InputError, what, ": array lengths differ (row ", g.row.size(), ", count ",
                   g.count.size(), ", first ", g.first.size(), ", update_mode ",
                   g.update_mode.size(), ")");
    }
    validate(EdgeGroupOptions{g.group_size});
    if (g.num_rows != a.num_rows || g.nnz != a.nnz()) {
        HALO_THROW(InputError, what, ": built for ", g.num_rows, " rows and ", g.nnz,
                   " nonzeros, the operator has ", a.num_rows, " rows and ", a.nnz());
    }
    // Walk rows and groups together: group q must continue row r where the previous group ended.
    std::int64_t q = 0;
    for (std::int64_t r = 0; r < a.num_rows; ++r) {
        const auto begin = a.indptr[r];
        const auto end = a.indptr[r + 1];
        const std::int64_t q0 = q;
        auto pos = begin;
        do {
            if (q >= n) {
                HALO_THROW(InputError, what, ": ", n, " groups end before row ", r,
                           " is covered (its nonzeros from ", pos, " to ", end, ")");
            }
            if (g.row[q] != r) {
                HALO_THROW(InputError, what, ": group ", q, ": row ", g.row[q], ", expected row ",
                           r, " (rows must ascend and every row needs a group)");
            }
            if (g.first[q] != pos) {
                HALO_THROW(InputError, what, ": group ", q, " (row ", r, "): first ", g.first[q],
                           ", expected ", pos);
            }
            const auto c = g.count[q];
            if (c < 0 || c > g.group_size) {
                HALO_THROW(InputError, what, ": group ", q, " (row ", r, "): count ", c,
                           " outside [0, ", g.group_size, "]");
            }
            if (c == 0 && end > begin) {
                HALO_THROW(InputError, what, ": group ", q, " (row ", r, "): count 0 in a row of ",
                           end - begin, " nonzeros");
            }
            if (pos + c > end) {
                HALO_THROW(InputError, what, ": group ", q, " (row ", r, "): count ", c,
                           " runs past the row's end ", end, " from ", pos);
            }
            pos += c;
            ++q;
        } while (pos < end);
        const std::int32_t mode = q - q0 > 1 ? 1 : 0;
        for (auto p = q0; p < q; ++p) {
            if (g.update_mode[p] != mode) {
                HALO_THROW(InputError, what, ": group ", p, " (row ", r, "): update_mode ",
                           g.update_mode[p], ", expected ", mode, " (the row has ", q - q0,
                           " group", q - q0 > 1 ? "s" : "", ")");
            }
        }
    }
    if (q != n) {
        HALO_THROW(InputError, what, ": group ", q, ": row ", g.row[q], " after the last row ",
                   a.num_rows - 1, " was covered (", n - q, " extra groups)");
    }
}

GroupRange edge_group_range(const EdgeGroups& g, RowRange rows)
{
    const auto lo = std::lower_bound(g.row.begin(), g.row.end(), rows.begin);
    const auto hi = std::lower_bound(lo, g.row.end(), rows.end);
    return {lo - g.row.begin(), hi - g.row.begin()};
}

std::vector<std::int32_t> shared_rows(const EdgeGroups& g)
{
    std::vector<std::int32_t> rows;
    for (std::int64_t q = 0; q < g.size(); ++q) {
        if (g.update_mode[q] != 0 && (rows.empty() || rows.back() != g.row[q])) {
            rows.push_back(g.row[q]);
        }
    }
    return rows;
}

std::vector<std::int32_t> longest_first(const EdgeGroups& g, GroupRange range)
{
    if (range.begin < 0 || range.begin > range.end || range.end > g.size()) {
        HALO_THROW(InputError, "edge group range [", range.begin, ", ", range.end, ") outside [0, ",
                   g.size(), ")");
    }
    if (range.end - 1 > std::numeric_limits<std::int32_t>::max()) {
        HALO_THROW(InputError, "edge group ", range.end - 1,
                   " past the int32 indices of a longest-first order");
    }
    std::vector<std::int32_t> order(static_cast<std::size_t>(range.end - range.begin));
    if (order.empty()) {
        return order;
    }
    constexpr std::int32_t kCountingLimit = 1 << 16;
    if (g.group_size <= kCountingLimit) {
        // Counting sort on count (at most group_size): one pass to count, one to place.
        std::vector<std::int64_t> start(static_cast<std::size_t>(g.group_size) + 2, 0);
        for (auto q = range.begin; q < range.end; ++q) {
            if (g.count[q] < 0 || g.count[q] > g.group_size) {
                HALO_THROW(InputError, "edge group ", q, ": count ", g.count[q], " outside [0, ",
                           g.group_size, "]");
            }
            ++start[static_cast<std::size_t>(g.group_size - g.count[q]) + 1];
        }
        for (std::size_t c = 1; c < start.size(); ++c) {
            start[c] += start[c - 1];
        }
        for (auto q = range.begin; q < range.end; ++q) {
            order[static_cast<std::size_t>(
                start[static_cast<std::size_t>(g.group_size - g.count[q])]++)] =
                static_cast<std::int32_t>(q);
        }
    } else {
        std::iota(order.begin(), order.end(), static_cast<std::int32_t>(range.begin));
        std::stable_sort(order.begin(), order.end(),
                         [&](std::int32_t x, std::int32_t y) { return g.count[x] > g.count[y]; });
    }
    return order;
}

}  // namespace halo

namespace halo::reference {
namespace {

void check_ssd_operands(const CsrView& a, CbsrView<const float> s, DenseView<float> out,
                        RowRange rows)
{
    check_cbsr_shape(s.rows, s.dim, s.k);
    HALO_EXPECTS(s.rows >= a.num_cols, "S has ", s.rows, " rows, A has ", a.num_cols, " columns");
    HALO_EXPECTS(out.rows >= a.num_rows, "out has ", out.rows, " rows, A has ", a.num_rows);
    HALO_EXPECTS(out.cols == s.dim, "out has ", out.cols, " columns, S is ", s.dim, " wide");
    HALO_EXPECTS(out.ld >= out.cols, "leading dimension ", out.ld, " below the width ", out.cols);
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= a.num_rows, "row range [",
                 rows.begin, ", ", rows.end, ") outside [0, ", a.num_rows, ")");
}

}  // namespace

void maxk_topk(DenseView<const float> x, CbsrView<float> out)
{
    check_cbsr_shape(out.rows, out.dim, out.k);
    HALO_EXPECTS(out.rows == x.rows && out.dim == x.cols, "CBSR of ", out.rows, " x ", out.dim,
                 " for an input of ", x.rows, " x ", x.cols);
    const auto dim = x.cols;
    const auto k = out.k;
#pragma omp parallel
    {
        std::vector<std::int64_t> order(static_cast<std::size_t>(dim));
#pragma omp for schedule(static)
        for (std::int64_t i = 0; i < x.rows; ++i) {
            const float* row = x.row(i);
            std::iota(order.begin(), order.end(), std::int64_t{0});
            // The tie rule: key descending, then column ascending.
            std::sort(order.begin(), order.end(), [&](std::int64_t p, std::int64_t q) {
                const auto kp = maxk_order_key(row[p]);
                const auto kq = maxk_order_key(row[q]);
                return kp != kq ? kp > kq : p < q;
            });
            std::sort(order.begin(), order.begin() + k);
            for (std::int64_t t = 0; t < k; ++t) {
                out.values[i * k + t] = row[order[t]];
                out.indices[i * k + t] = static_cast<cbsr_index>(order[t]);
            }
        }
    }
}

Cbsr maxk_topk(DenseView<const float> x, std::int64_t k)
{
    Cbsr out(x.rows, x.cols, k);
    maxk_topk(x, out.view());
    return out;
}

void cbsr_to_dense(CbsrView<const float> s, DenseView<float> out)
{
    HALO_EXPECTS(out.rows == s.rows && out.cols == s.dim, "dense ", out.rows, " x ", out.cols,
                 " for a CBSR of ", s.rows, " x ", s.dim);
    for (std::int64_t i = 0; i < s.rows; ++i) {
        std::fill(out.row(i), out.row(i) + out.cols, 0.0f);
        for (std::int64_t t = 0; t < s.k; ++t) {
            out(i, s.indices[i * s.k + t]) = s.values[i * s.k + t];
        }
    }
}

void ssd(const CsrView& a, CbsrView<const float> s, DenseView<float> out, RowRange rows)
{
    check_ssd_operands(a, s, out, rows);
    const auto dim = s.dim;
    const auto k = s.k;
#pragma omp parallel for schedule(dynamic, 64)
    for (std::int64_t i = rows.begin; i < rows.end; ++i) {
        float* y = out.row(i);
        std::fill(y, y + dim, 0.0f);
        for (auto e = a.indptr[i]; e < a.indptr[i + 1]; ++e) {
            const float v = a.values != nullptr ? a.values[e] : 1.0f;
            const auto c = a.indices[e];
            for (std::int64_t t = 0; t < k; ++t) {
                y[s.indices[c * k + t]] += v * s.values[c * k + t];
            }
        }
    }
}

void ssd_edge_groups(const EdgeGroups& groups, const CsrView& a, CbsrView<const float> s,
                     DenseView<float> out, RowRange rows)
{
    check_ssd_operands(a, s, out, rows);
    HALO_EXPECTS(groups.num_rows == a.num_rows && groups.nnz == a.nnz(), "groups built for ",
                 groups.num_rows, " rows and ", groups.nnz, " nonzeros, A has ", a.num_rows,
                 " and ", a.nnz());
    const auto dim = s.dim;
    const auto k = s.k;
    const auto range = edge_group_range(groups, rows);
    for (auto q = range.begin; q < range.end; ++q) {
        if (groups.update_mode[q] != 0 &&
            (q == range.begin || groups.row[q - 1] != groups.row[q])) {
            std::fill(out.row(groups.row[q]), out.row(groups.row[q]) + dim, 0.0f);
        }
    }
    std::vector<float> buffer(static_cast<std::size_t>(dim));
    for (auto q = range.begin; q < range.end; ++q) {
        std::fill(buffer.begin(), buffer.end(), 0.0f);
        for (auto e = groups.first[q]; e < groups.first[q] + groups.count[q]; ++e) {
            const float v = a.values != nullptr ? a.values[e] : 1.0f;
            const auto c = a.indices[e];
            for (std::int64_t t = 0; t < k; ++t) {
                float& b = buffer[s.indices[c * k + t]];
                b = std::fma(v, s.values[c * k + t], b);
            }
        }
        float* y = out.row(groups.row[q]);
        for (std::int64_t j = 0; j < dim; ++j) {
            y[j] = groups.update_mode[q] != 0 ? y[j] + buffer[j] : buffer[j];
        }
    }
}

namespace {

class CpuSsdPlan final : public SsdPlan {
public:
    CpuSsdPlan(const Csr& a, std::int64_t max_dim) : a_(a), max_dim_(max_dim)
    {
        HALO_EXPECTS(max_dim >= 1 && max_dim <= kMaxkMaxDim, "max_dim ", max_dim, " outside [1, ",
                     kMaxkMaxDim, "]");
        validate(a_, "the operator of a CPU SSD plan");
    }

    void run(CbsrView<const float> s, DenseView<float> out, RowRange rows) override
    {
        HALO_EXPECTS(s.dim <= max_dim_, "width ", s.dim, " exceeds the plan's max_dim ", max_dim_);
        ssd(a_.view(), s, out, rows);
    }

    std::string algorithm() const override { return "ssd-reference"; }

private:
    Csr a_;
    std::int64_t max_dim_ = 0;
};

}  // namespace

std::unique_ptr<SsdPlan> make_cpu_ssd_plan(const Csr& a, std::int64_t max_dim)
{
    return std::make_unique<CpuSsdPlan>(a, max_dim);
}

}  // namespace halo::reference
