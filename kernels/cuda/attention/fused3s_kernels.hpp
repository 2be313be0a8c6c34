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
    /// out and ldo allow 16-byte stores.
    bool vector_out = false;
};

/// dim is 32, 64, 128 or 256; remap selects the register-remapped loads.
void launch_fused3s(cudaStream_t stream, int dim, bool remap, const Fused3sArgs& args);

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
