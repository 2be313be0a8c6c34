// The CPU backend's host matrices, and its MaxK and attention plans (reference kernels on the
// host).
#pragma once

#include <memory>
#include <optional>
#include <vector>

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

/// Matrices of 16-bit elements on the host (cpu_features.cpp): x widened exactly into dst, or
/// into a new rows x cols vector; Backend::store_features and gemm_features of the CPU backend.
void widen_host(FeatureView x, DenseView<float> dst);
std::vector<float> widened(FeatureView x);
/// The first element (row-major) of v that is finite and `type` stores as infinity, tagged
/// `store`; nullopt where none (fp32: never).
std::optional<ActivationOverflow> first_overflow(DenseView<const float> v, FeatureType type,
                                                 std::int32_t store);
std::optional<ActivationOverflow> store_host(DenseView<const float> src, const float* bias,
                                             Activation act, MutableFeatureView dst,
                                             std::int32_t store);
std::optional<ActivationOverflow> gemm_host(FeatureView a, FeatureView b, MutableFeatureView c,
                                            std::int32_t store, float beta);

/// run_features of a CPU plan: `plan.run` on x widened to fp32 (X of every type).
inline void run_widened(SpmmPlan& plan, FeatureView x, DenseView<float> y, RowRange rows)
{
    if (x.type == FeatureType::fp32) {
        plan.run({static_cast<const float*>(x.data), x.rows, x.cols, x.ld}, y, rows);
        return;
    }
    const auto wide = widened(x);
    plan.run(dense_view(wide.data(), x.rows, x.cols), y, rows);
}

}  // namespace halo::reference
