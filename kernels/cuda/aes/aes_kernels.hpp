// Host-callable launchers of the AES-SpMM kernels (aes.cu) for the plans beside them (aes.cpp),
// and the launch layout the plans need to prepare a schedule. Internal to halo_kernels. Each
// launcher issues its work on `stream`, checks the launches (HALO_CUDA_CHECK_LAUNCH) and returns
// at once; an empty row range or width launches nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "halo/core/dense.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo::cuda::detail {

/// Threads of every AES block, and the shared-memory staging of one block (below the 48 KiB
/// default, so no opt-in is needed and several blocks share an SM).
inline constexpr int kAesBlock = 256;
inline constexpr int kAesStagingBytes = 32 * 1024;
inline constexpr int kAesSlotBytes = 8;  // int32 column + float value

/// How one launch maps onto the device: `group` lanes (8, 16 or 32) own a row or a piece of one,
/// each lane `vec` consecutive columns (4: float4 / char4 accesses), and each group stages up to
/// `capacity` slots. A row with more slots than `capacity` is cut into pieces of `capacity` slots.
struct AesLayout {
    int group = 32;
    int vec = 1;
    int capacity = 32;
};

/// The smallest group that spans the width's lanes; the group's share of the staging (16 slots
/// per lane), but no more than the longest row (or W) needs, rounded up to 32.
inline AesLayout aes_layout(std::int64_t dim, bool vec4, std::int64_t sample_width,
                            std::int64_t max_row_nnz)
{
    AesLayout l;
    l.vec = vec4 ? 4 : 1;
    const std::int64_t lanes = (dim + l.vec - 1) / l.vec;
    l.group = lanes <= 8 ? 8 : (lanes <= 16 ? 16 : 32);
    const std::int64_t most =
        std::int64_t{kAesStagingBytes} / kAesSlotBytes / (kAesBlock / l.group);
    const std::int64_t need = sample_width > 0 ? std::min(max_row_nnz, sample_width) : max_row_nnz;
    l.capacity = static_cast<int>(
        std::clamp<std::int64_t>((std::max<std::int64_t>(need, 1) + 31) / 32 * 32, 32, most));
    return l;
}

/// One AES launch: the device CSR, the rows, the rule and the output.
struct AesLaunch {
    const std::int64_t* indptr = nullptr;
    const std::int32_t* indices = nullptr;
    const float* values = nullptr;  // null: pattern matrix
    std::int64_t row_begin = 0;
    std::int64_t row_end = 0;
    std::int64_t sample_width = 0;  // W; 0: exact (every nonzero of every row)
    bool rescaled = false;
    std::int64_t dim = 0;
    float* y = nullptr;
    std::int64_t ldy = 0;
};

/// The rows of the launch's range that have more slots than the layout's capacity (sorted), the
/// prefix of their piece counts (`first[s]` is the first piece of split row s; pieces are
/// numbered over the whole schedule) and the workspace that holds one partial row of `dim`
/// floats per piece. [begin, end) is the slice of split rows inside the row range.
struct AesSplit {
    const std::int64_t* rows = nullptr;
    const std::int64_t* first = nullptr;
    std::int64_t begin = 0;
    std::int64_t end = 0;
    std::int64_t pieces = 0;  // first[end] - first[begin], known on the host
    float* partials = nullptr;
};

/// Whether the launch can use 16-byte fp32 accesses (4-byte int8 ones) for x and y.
bool aes_vec4(const float* x, std::int64_t ldx, const float* y, std::int64_t ldy, std::int64_t dim);
bool aes_vec4(const QuantizedView& x, const float* y, std::int64_t ldy, std::int64_t dim);

/// y[rows, 0:dim] from fp32 features x (leading dimension ldx): rows within the capacity in one
/// pass; split rows piece by piece into the workspace, then summed in piece order.
void aes_spmm(cudaStream_t stream, const AesLaunch& launch, const AesLayout& layout,
              const AesSplit& split, const float* x, std::int64_t ldx);

/// The same with int8 features dequantized per column in the gather.
void aes_spmm(cudaStream_t stream, const AesLaunch& launch, const AesLayout& layout,
              const AesSplit& split, const QuantizedView& x);

/// out[0] += sum (approx - exact)^2, out[1] += sum exact^2 over the rows x cols elements (double
/// accumulation; out must be zeroed first).
void frobenius_sums(cudaStream_t stream, DenseView<const float> approx,
                    DenseView<const float> exact, double* out);

}  // namespace halo::cuda::detail
