// Host-callable launchers of the small device kernels of the CUDA backend (cuda_backend.cu), for
// the host code beside them (cuda_backend.cpp). Internal to halo_kernels. Every
// launcher issues its work on `stream`, checks the launch (HALO_CUDA_CHECK_LAUNCH) and returns at
// once; a count or shape of zero launches nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace halo::cuda::detail {

/// y = alpha * x + beta * y over a rows x cols block (leading dimensions ldx, ldy, in elements);
/// beta == 0 does not read y, so NaN or garbage in y never reaches the result.
void axpby(cudaStream_t stream, std::int64_t rows, std::int64_t cols, float alpha, const float* x,
           std::int64_t ldx, float beta, float* y, std::int64_t ldy);

/// y[i, j] = act(y[i, j] + bias[j]) for the rows x cols block at y; bias may be null; relu maps
/// v to (v > 0 ? v : 0), as the CPU reference does (NaN becomes 0).
void bias_activation(cudaStream_t stream, float* y, std::int64_t rows, std::int64_t cols,
                     std::int64_t ld, const float* bias, bool relu);

/// y[r * ld + j] = halo::detail::random_feature(seed, ids[r], cols, j): the host generator's
/// values bit for bit (ids on the device).
void random_features(cudaStream_t stream, const std::int64_t* ids, std::int64_t rows,
                     std::int64_t cols, std::uint64_t seed, float* y, std::int64_t ld);

/// best[r] = the index of the largest of x[r * ld + 0 .. cols) (the first among equal maxima;
/// an element is taken only where the best so far compares less than it, as std::max_element
/// does, so NaN rows give what halo::argmax_rows gives), for r < rows; one thread a row.
void argmax_rows(cudaStream_t stream, const float* x, std::int64_t rows, std::int64_t cols,
                 std::int64_t ld, std::int32_t* best);

}  // namespace halo::cuda::detail
