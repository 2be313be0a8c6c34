// The operator a scaled SpMM plan computes (Backend::make_scaled_spmm_plan), formed on the host:
// `pattern` with the values scaling.row[i] * scaling.col[j] (an empty scaling counts as ones), for
// tests that run such plans on the CPU or compare them with a reference.
#pragma once

#include <cstdint>

#include "halo/core/csr.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo::testing {

inline Csr scaled_operator(const Csr& pattern, const OperatorScaling& scaling)
{
    Csr valued = pattern;
    valued.values.resize(pattern.indices.size());
    for (std::int64_t i = 0; i < pattern.num_rows; ++i) {
        const float r = scaling.row.empty() ? 1.0f : scaling.row[i];
        for (auto k = pattern.indptr[i]; k < pattern.indptr[i + 1]; ++k) {
            valued.values[k] = scaling.col.empty() ? r : r * scaling.col[pattern.indices[k]];
        }
    }
    return valued;
}

}  // namespace halo::testing
