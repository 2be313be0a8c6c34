#include "halo/core/operators.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "halo/core/detail/resident_memory.hpp"
#include "halo/core/enum_names.hpp"
#include "halo/core/error.hpp"
#include "halo/core/kernel_metadata.hpp"
#include "halo/core/shard.hpp"

namespace halo {

namespace {

constexpr std::array<EnumName<Aggregation>, 3> aggregation_names{
    {{Aggregation::gcn, "gcn"}, {Aggregation::mean, "mean"}, {Aggregation::sum, "sum"}}};

}  // namespace

const char* to_string(Aggregation kind)
{
    return enum_name(aggregation_names, kind).data();
}

namespace {

global_id column_global_id(const Shard& shard, local_id col)
{
    return col < shard.num_owned ? shard.global_ids[col]
                                 : shard.halo_global_ids[col - shard.num_owned];
}

// Where row i's own column goes among its columns, which ascend by global id (a shard
// invariant): the first position whose column's global id is not below row i's, found by
// bisection; compared as local ids where they run in global order (`local_order`: no lookups).
// The row has its diagonal entry exactly when that position holds column i.
offset_t self_position(const Shard& shard, std::int64_t i, bool local_order)
{
    const auto& a = shard.csr;
    const auto* first = a.indices.data() + a.indptr[i];
    const auto* last = a.indices.data() + a.indptr[i + 1];
    const auto* pos = local_order ? std::lower_bound(first, last, static_cast<local_id>(i))
                                  : std::partition_point(first, last, [&](local_id c) {
                                        return column_global_id(shard, c) < shard.global_ids[i];
                                    });
    return pos - a.indices.data();
}

bool has_diagonal(const Csr& a, std::int64_t i, offset_t position)
{
    return position < a.indptr[i + 1] && a.indices[position] == i;
}

}  // namespace

const char* kernel_operator_name(Aggregation kind)
{
    return kind == Aggregation::gcn ? kernel_operator_gcn.data() : kernel_operator_adjacency.data();
}

std::vector<float> gcn_degrees(const Shard& shard)
{
    const auto& a = shard.csr;
    const bool local_order = local_order_is_global(shard);
    std::vector<float> degree(shard.num_owned);
#pragma omp parallel for schedule(dynamic, 1024)
    for (std::int64_t i = 0; i < shard.num_owned; ++i) {
        double sum = static_cast<double>(a.row_nnz(i));
        if (a.has_values()) {
            sum = 0.0;
            for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
                sum += a.values[k];
            }
        }
        const bool diagonal = has_diagonal(a, i, self_position(shard, i, local_order));
        degree[i] = static_cast<float>(diagonal ? sum : sum + 1.0);
    }
    return degree;
}

namespace {

// The adjacency with a diagonal entry added to every row without one, where global column order
// puts it; with `degree`, the values a_ij / sqrt(d_i d_j) (a_ii = 1 where added), else none.
// Each row is its stored columns up to its own position, the diagonal where missing, the rest:
// two copies and no id lookup per nonzero.
Csr with_self_loops(const Shard& shard, const std::vector<float>* degree)
{
    const auto& a = shard.csr;
    const auto n = shard.num_owned;
    const bool local_order = local_order_is_global(shard);
    Csr out;
    out.num_rows = a.num_rows;
    out.num_cols = a.num_cols;
    std::vector<offset_t> position(n);
    out.indptr.assign(n + 1, 0);
    // Row counts on every core, then their prefix sum (the offsets are the same either way).
#pragma omp parallel for schedule(dynamic, 4096)
    for (std::int64_t i = 0; i < n; ++i) {
        position[i] = self_position(shard, i, local_order);
        out.indptr[i + 1] = a.row_nnz(i) + (has_diagonal(a, i, position[i]) ? 0 : 1);
    }
    for (std::int64_t i = 0; i < n; ++i) {
        out.indptr[i + 1] += out.indptr[i];
    }
    // Billions of entries at scale: their pages made resident on every core first.
    const auto nnz = static_cast<std::size_t>(out.indptr[n]);
    out.indices = detail::resident_vector<local_id>(nnz);
    if (degree != nullptr) {
        out.values = detail::resident_vector<float>(nnz);
    }
#pragma omp parallel for schedule(dynamic, 1024)
    for (std::int64_t i = 0; i < n; ++i) {
        const auto begin = a.indptr[i];
        const auto end = a.indptr[i + 1];
        const auto split = position[i];
        const bool added = !has_diagonal(a, i, split);
        auto* o = out.indices.data() + out.indptr[i];
        o = std::copy(a.indices.begin() + begin, a.indices.begin() + split, o);
        if (added) {
            *o++ = static_cast<local_id>(i);
        }
        std::copy(a.indices.begin() + split, a.indices.begin() + end, o);
        if (degree == nullptr) {
            continue;
        }
        // The same order for the values: the stored entries around the added diagonal.
        const auto& d = *degree;
        auto k = out.indptr[i];
        auto emit = [&](local_id col, double value) {
            out.values[k++] =
                static_cast<float>(value / std::sqrt(static_cast<double>(d[i]) * d[col]));
        };
        auto emit_stored = [&](offset_t from, offset_t to) {
            for (auto e = from; e < to; ++e) {
                emit(a.indices[e], a.has_values() ? a.values[e] : 1.0);
            }
        };
        emit_stored(begin, split);
        if (added) {
            emit(static_cast<local_id>(i), 1.0);
        }
        emit_stored(split, end);
    }
    return out;
}

}  // namespace

Csr make_aggregation(const Shard& shard, Aggregation kind, const std::string& dataset_normalization,
                     const std::vector<float>& degree)
{
    if (dataset_normalization == to_string(kind)) {
        return shard.csr;  // the dataset holds exactly this operator
    }
    if (dataset_normalization != "none") {
        HALO_THROW(InputError, "the dataset's adjacency is ", dataset_normalization,
                   "-normalized, but a layer needs the ", to_string(kind),
                   " operator; partition with --normalize none (the engine derives every "
                   "operator from the raw adjacency) or --normalize ",
                   to_string(kind));
    }
    const auto& a = shard.csr;
    const auto n = shard.num_owned;
    Csr out;
    out.num_rows = a.num_rows;
    out.num_cols = a.num_cols;
    if (kind == Aggregation::sum) {
        return a;
    }
    if (kind == Aggregation::mean) {
        out = a;
        out.values.resize(a.indices.size());
#pragma omp parallel for schedule(dynamic, 1024)
        for (std::int64_t i = 0; i < n; ++i) {
            double sum = 0.0;
            for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
                sum += a.has_values() ? a.values[k] : 1.0;
            }
            for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
                const double v = a.has_values() ? a.values[k] : 1.0;
                out.values[k] = static_cast<float>(sum > 0.0 ? v / sum : 0.0);
            }
        }
        return out;
    }
    HALO_EXPECTS(static_cast<std::int64_t>(degree.size()) == shard.num_owned + shard.num_halo,
                 "gcn needs ", shard.num_owned + shard.num_halo, " degrees, got ", degree.size());
    return with_self_loops(shard, &degree);
}

Csr gcn_pattern(const Shard& shard)
{
    return with_self_loops(shard, nullptr);
}

Csr self_loop_pattern(const Shard& shard)
{
    auto pattern = with_self_loops(shard, nullptr);
    pattern.values.assign(pattern.indices.size(), 1.0f);
    return pattern;
}

}  // namespace halo
