// Host-callable launchers of the attention kernels (fused3s.cu, attention_unfused.cu) for the plan
// code beside them (fused3s.cpp, attention_unfused.cpp). Internal to halo_kernels. Every launcher
// issues its work on `stream`, checks the launch (HALO_CUDA_CHECK_LAUNCH) and returns at once.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace halo::cuda::detail {

/// One launch of the fused kernel over the windows that intersect [row_begin, row_end).
struct Fused3sArgs {
    const std::int64_t* window_blocks = nullptr;
    const std::int32_t* block_columns = nullptr;
    const std::uint64_t* block_bitmaps = nullptr;
    /// Processing order of the windows; null: natural order.
    const std::int32_t* window_order = nullptr;
    std::int64_t num_windows = 0;
    std::int64_t num_rows = 0;
    const __half* q = nullptr;
    std::int64_t ldq = 0;
    const __half* k = nullptr;
    std::int64_t ldk = 0;
    const __half* v = nullptr;
    std::int64_t ldv = 0;
    float* out = nullptr;
    std::int64_t ldo = 0;
    float scale = 1.0f;
    std::int64_t row_begin = 0;
    std::int64_t row_end = 0;
    /// out and ldo allow 16-byte stores (and out_cols and out_head are multiples of 4).
    bool vector_out = false;
    /// Heads, one grid row each: head h reads q + h q_head, k + h k_head, v + h v_head and
    /// writes out + h out_head (offsets in elements).
    int heads = 1;
    std::int64_t q_head = 0;
    std::int64_t k_head = 0;
    std::int64_t v_head = 0;
    std::int64_t out_head = 0;
    /// Columns of O stored per head: the kernel's width, or fewer where Q, K and V are a narrower
    /// width zero-padded to it (the padding columns of O are zeros and not stored).
    int out_cols = 0;
};

/// dim is 32, 64, 128 or 256; remap selects the register-remapped loads.
void launch_fused3s(cudaStream_t stream, int dim, bool remap, const Fused3sArgs& args);

/// Zero-padded fp16 copy of `groups` column groups: dst[i, g padded + j] = half(src[i, g width +
/// j]) for j < width and 0 for width <= j < padded, rows x groups groups (leading dimensions in
/// elements; ldd >= groups * padded).
void convert_groups_to_half(cudaStream_t stream, const float* src, std::int64_t lds, __half* dst,
                            std::int64_t ldd, std::int64_t rows, std::int64_t groups,
                            std::int64_t width, std::int64_t padded);

/// dst[i, j] = half(src[i, j]) for a rows x cols block (leading dimensions in elements).
void convert_to_half(cudaStream_t stream, const float* src, std::int64_t lds, __half* dst,
                     std::int64_t ldd, std::int64_t rows, std::int64_t cols);

/// The unfused baseline's score and softmax steps over rows [row_begin, row_end) of a CSR
/// pattern (int64 offsets, int32 columns); scores has one entry per nonzero, in CSR order.
struct SddmmArgs {
    const std::int64_t* offsets = nullptr;
    const std::int32_t* columns = nullptr;
    std::int64_t row_begin = 0;
    std::int64_t row_end = 0;
    float* scores = nullptr;
};

/// scores[k] = scale * dot(q[i, :], k[j, :]) for nonzero k = (i, j), width = q's columns.
void sddmm_dot(cudaStream_t stream, const SddmmArgs& args, const float* q, std::int64_t ldq,
               const float* k, std::int64_t ldk, std::int64_t width, float scale);

/// scores[k] = LeakyReLU(el[i] + er[j]) with the given negative slope (GAT's additive scores).
void sddmm_additive(cudaStream_t stream, const SddmmArgs& args, const float* el, const float* er,
                    float negative_slope);

/// Softmax over each row's nonzeros, in place, subtracting the row maximum first.
void csr_row_softmax(cudaStream_t stream, const SddmmArgs& args);

}  // namespace halo::cuda::detail
