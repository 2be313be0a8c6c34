// The CPU backend's host matrices, and its MaxK and attention plans (reference kernels on the
// host).
#pragma once

#include <memory>
#include <optional>

#include "halo/kernels_host/backend.hpp"

namespace halo::reference {

/// A rows x cols matrix in plain host memory (at least one element: never a null pointer).
/// Throws halo::LogicError for a negative shape and halo::Error, ending with `advice`, when the
/// host is out of memory.
Matrix host_matrix(std::int64_t rows, std::int64_t cols, const char* advice);

/// Top-k, CBSR records and reference::ssd over a copy of `a` (num_cols CBSR rows).
std::unique_ptr<MaxkPlan> make_cpu_maxk_plan(const Csr& a, std::int64_t dim, std::int64_t k);

/// reference::spmm_int8, or reference::aes_spmm over int8 when `aes` is set.
std::unique_ptr<QuantizedSpmmPlan> make_cpu_quantized_spmm_plan(const Csr& a,
                                                                std::optional<AesOptions> aes);

/// Attention in double precision (reference::sparse_attention / additive_attention), rounded to
/// float; the kernel choice does not matter on the host (both are exact).
std::unique_ptr<AttentionPlan> make_cpu_attention_plan(const Csr& a);

}  // namespace halo::reference
