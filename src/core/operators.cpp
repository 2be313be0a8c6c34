#include "halo/operators.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "halo/detail/resident_memory.hpp"
#include "halo/enum_names.hpp"
#include "halo/error.hpp"
#include "halo/kernel_metadata.hpp"

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

}  // namespace

const char* kernel_operator_name(Aggregation kind)
{
    return kind == Aggregation::gcn ? kernel_operator_gcn.data() : kernel_operator_adjacency.data();
}

std::vector<float> gcn_degrees(const Shard& shard)
{
    const auto& a = shard.csr;
    std::vector<float> degree(shard.num_owned);
#pragma omp parallel for schedule(dynamic, 1024)
    for (std::int64_t i = 0; i < shard.num_owned; ++i) {
        double sum = 0.0;
        bool diagonal = false;
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            sum += a.has_values() ? a.values[k] : 1.0;
            diagonal = diagonal || a.indices[k] == i;
        }
        degree[i] = static_cast<float>(diagonal ? sum : sum + 1.0);
    }
    return degree;
}

namespace {

// The adjacency with a diagonal entry added to every row without one, where global column order
// puts it; with `degree`, the values a_ij / sqrt(d_i d_j) (a_ii = 1 where added), else none.
Csr with_self_loops(const Shard& shard, const std::vector<float>* degree)
{
    const auto& a = shard.csr;
    const auto n = shard.num_owned;
    Csr out;
    out.num_rows = a.num_rows;
    out.num_cols = a.num_cols;
    std::vector<char> has_diagonal(n, 0);
    out.indptr.assign(n + 1, 0);
    // Row counts on every core, then their prefix sum (the offsets are the same either way).
#pragma omp parallel for schedule(dynamic, 4096)
    for (std::int64_t i = 0; i < n; ++i) {
        bool diagonal = false;
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            diagonal = diagonal || a.indices[k] == i;
        }
        has_diagonal[i] = diagonal ? 1 : 0;
        out.indptr[i + 1] = a.row_nnz(i) + (diagonal ? 0 : 1);
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
        const auto self = shard.global_ids[i];
        auto o = out.indptr[i];
        bool placed = has_diagonal[i] != 0;
        auto emit = [&](local_id col, double value) {
            out.indices[o] = col;
            if (degree != nullptr) {
                out.values[o] = static_cast<float>(
                    value / std::sqrt(static_cast<double>((*degree)[i]) * (*degree)[col]));
            }
            ++o;
        };
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            if (!placed && column_global_id(shard, a.indices[k]) > self) {
                emit(static_cast<local_id>(i), 1.0);
                placed = true;
            }
            emit(a.indices[k], a.has_values() ? a.values[k] : 1.0);
        }
        if (!placed) {
            emit(static_cast<local_id>(i), 1.0);
        }
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
