// Sparse attention on the GPU, O = softmax_row(mask(Q K^T * scale)) V over a CSR pattern
// (docs/KERNELS.md "Families", family fused3s; docs/FUSED3S.md; paper 002): the fused Fused3S
// kernel on tensor cores and the unfused fp32 baseline it is measured against. The CPU oracle is
// halo/kernels_host/attention.hpp.
//
// Fused3S: one kernel per call, fp16 Q, K, V (the fp32 entry point converts them first into the
// plan's workspace), fp32 softmax and accumulation, fp32 output. Approximate: fp16 inputs and fp16
// attention weights give a relative error around 1e-3 against the fp64 reference (never chosen
// silently; the user asks for it). Widths d = 32, 64, 128, 256 (the fp32 entry points pad
// narrower heads with zeros to the next of these); inputs must fit fp16 (|x| < 65504). A layer
// builds the plan once per shard (or from the BSB stored in the dataset) and calls
// Fused3sPlan::run_heads per layer (every head in one launch).
//
// Unfused baseline: SDDMM (one fp32 score per nonzero) -> row softmax -> cuSPARSE SpMM with the
// normalized scores as values, all fp32; also GAT's additive scores LeakyReLU(el_i + er_j).
//
// Both are asynchronous on ctx.compute_stream(), take device views, allocate nothing per call
// after their first run, write only the rows of the requested range, and write zeros for rows
// without a nonzero. The pattern's values are ignored (the mask is binary).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <memory>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/fused3s.hpp"

namespace halo::cuda {

/// The two switches of the paper's ablation (section 4.3); both on by default.
struct Fused3sOptions {
    /// Thread blocks take row windows in decreasing block count (section 3.2).
    bool reorder_windows = true;
    /// Permuted Q/K/V layouts so that K and V fragments load with wide accesses (section 3.4).
    bool remap_registers = true;
};

/// True for the widths the fused kernel is instantiated for (32, 64, 128, 256).
bool fused3s_supports_dim(std::int64_t dim);

/// The instance a head of width `dim` runs on through the fp32 entry points (the smallest of 32,
/// 64, 128, 256 at least dim; narrower heads are zero-padded to it), 0 outside [1, 256].
std::int64_t fused3s_padded_dim(std::int64_t dim);

/// The fused kernel's prepared operator: the BSB on the device (and a host copy to store), and
/// fp16 workspaces for the fp32 entry point, sized for widths up to max_dim (0: none).
class Fused3sPlan {
public:
    /// Uploads `bsb` after validate(bsb, what) (a stored BSB is checked before use).
    Fused3sPlan(Context& ctx, Bsb bsb, std::int64_t max_dim, Fused3sOptions options = {});
    ~Fused3sPlan();
    Fused3sPlan(const Fused3sPlan&) = delete;
    Fused3sPlan& operator=(const Fused3sPlan&) = delete;

    std::int64_t num_rows() const noexcept;
    std::int64_t num_cols() const noexcept;
    std::int64_t max_dim() const noexcept;
    /// The host copy of the format (what the store writes under kernels/fused3s).
    const Bsb& bsb() const noexcept;
    const Fused3sOptions& options() const noexcept;
    void set_options(const Fused3sOptions& options) noexcept;

    /// The kernel alone, on fp16 inputs: q is num_rows x d, k and v num_cols x d (d supported,
    /// equal widths), out num_rows x d fp32. q, k and v rows must be 16-byte aligned (data
    /// 16-byte aligned, ld a multiple of 8). Throws halo::LogicError for other operands.
    void run(DenseView<const __half> q, DenseView<const __half> k, DenseView<const __half> v,
             float scale, DenseView<float> out, RowRange rows);

    /// Converts q, k and v (fp32, any leading dimension) to fp16 in the plan's workspace, then
    /// runs the kernel. Requires d <= max_dim and fused3s_padded_dim(d) > 0 (d from 1 to 256).
    void run(DenseView<const float> q, DenseView<const float> k, DenseView<const float> v,
             float scale, DenseView<float> out, RowRange rows);
    /// `heads` attentions at once: q, k, v and out are heads x d columns wide, head h being
    /// columns [h d, (h + 1) d) of each (d from 1 to 256). One conversion of each operand (of k
    /// and v together where v's columns follow k's in one matrix) and one launch for all heads.
    void run_heads(DenseView<const float> q, DenseView<const float> k, DenseView<const float> v,
                   std::int64_t heads, float scale, DenseView<float> out, RowRange rows);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// Builds the BSB of `a` on the host (build_bsb) and the plan over it.
std::unique_ptr<Fused3sPlan> make_fused3s_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                               Fused3sOptions options = {});

/// The plan over a stored BSB (checked with validate(bsb, "...") first).
std::unique_ptr<Fused3sPlan> make_fused3s_plan(Context& ctx, Bsb bsb, std::int64_t max_dim,
                                               Fused3sOptions options = {});

/// O = softmax_row(mask(Q K^T * scale)) V for every row (or the rows of `rows`): fp32 device
/// views in and out, fp16 inside (see Fused3sPlan::run).
void fused_attention(Fused3sPlan& plan, DenseView<const float> q, DenseView<const float> k,
                     DenseView<const float> v, float scale, DenseView<float> out);
void fused_attention(Fused3sPlan& plan, DenseView<const float> q, DenseView<const float> k,
                     DenseView<const float> v, float scale, DenseView<float> out, RowRange rows);

/// dst = half(src) element-wise (rows x cols; dst's shape must match), asynchronous on stream.
void convert_to_half(DenseView<const float> src, DenseView<__half> dst, cudaStream_t stream);

/// The unfused fp32 baseline over a device copy of `a`'s pattern: a score per nonzero in a
/// workspace of nnz floats (allocated here), a row softmax in place, then cusparseSpMM (CSR_ALG2,
/// deterministic) with the scores as the matrix values.
class UnfusedAttentionPlan {
public:
    /// Throws halo::InputError when `a` is not a valid CSR matrix.
    UnfusedAttentionPlan(Context& ctx, const Csr& a);
    ~UnfusedAttentionPlan();
    UnfusedAttentionPlan(const UnfusedAttentionPlan&) = delete;
    UnfusedAttentionPlan& operator=(const UnfusedAttentionPlan&) = delete;

    std::int64_t num_rows() const noexcept;
    std::int64_t num_cols() const noexcept;
    std::int64_t nnz() const noexcept;

    /// Dot-product scores scale * Q[i] . K[j]; q num_rows x d, k num_cols x d, v num_cols x dv,
    /// out num_rows x dv.
    void run(DenseView<const float> q, DenseView<const float> k, DenseView<const float> v,
             float scale, DenseView<float> out, RowRange rows);

    /// GAT's additive scores LeakyReLU(el[i] + er[j]) (el: num_rows floats, er: num_cols floats,
    /// device pointers, typically X a_l and X a_r).
    void run_additive(const float* el, const float* er, float negative_slope,
                      DenseView<const float> v, DenseView<float> out, RowRange rows);

    /// The normalized scores of the latest run, one per nonzero in CSR order (device memory);
    /// entries of rows outside that run's range hold older values.
    const float* scores() const noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

std::unique_ptr<UnfusedAttentionPlan> make_unfused_attention_plan(Context& ctx, const Csr& a);

}  // namespace halo::cuda
