#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "cuda/primitives/grid_stride.cuh"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/gather_rows.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda {
namespace {

constexpr int kBlock = 256;
constexpr std::int64_t kMaxBlocks = 16384;
constexpr std::size_t kChunkBytes = std::size_t{64} << 20;

__global__ void gather_rows_kernel(const float* src, std::int64_t ld, std::int64_t cols,
                                   const std::int64_t* rows, std::int64_t total, float* dst)
{
    for (std::int64_t e = detail::first_index(); e < total; e += detail::stride()) {
        dst[e] = src[rows[e / cols] * ld + e % cols];
    }
}

// cudaMalloc'd scratch. release() frees with a checked call on the normal path; the destructor
// only frees what an exception left behind (and cannot report a failure).
class Scratch {
public:
    explicit Scratch(std::size_t bytes) { HALO_CUDA_TRY(cudaMalloc(&ptr_, bytes)); }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    ~Scratch()
    {
        if (ptr_ != nullptr) {
            (void)cudaFree(ptr_);
        }
    }

    template <typename T>
    T* as() const noexcept
    {
        return static_cast<T*>(ptr_);
    }

    void release() { HALO_CUDA_TRY(cudaFree(std::exchange(ptr_, nullptr))); }

private:
    void* ptr_ = nullptr;
};

}  // namespace

void gather_rows_to_host(DenseView<const float> src, const std::int64_t* rows, std::int64_t count,
                         float* dst, cudaStream_t stream)
{
    HALO_EXPECTS(count >= 0 && src.cols >= 0 && src.ld >= src.cols, "count ", count, " cols ",
                 src.cols, " ld ", src.ld);
    for (std::int64_t r = 0; r < count; ++r) {
        HALO_EXPECTS(rows[r] >= 0 && rows[r] < src.rows, "row ", rows[r], " outside [0, ", src.rows,
                     ")");
    }
    if (count == 0 || src.cols == 0) {
        return;
    }
    const auto cols = static_cast<std::size_t>(src.cols);
    const std::size_t chunk =
        std::max<std::size_t>(1, std::min<std::size_t>(static_cast<std::size_t>(count),
                                                       kChunkBytes / (cols * sizeof(float))));
    Scratch index(chunk * sizeof(std::int64_t));
    Scratch packed(chunk * cols * sizeof(float));
    for (std::size_t done = 0; done < static_cast<std::size_t>(count); done += chunk) {
        const std::size_t n = std::min(chunk, static_cast<std::size_t>(count) - done);
        const auto total = static_cast<std::int64_t>(n * cols);
        // Stream order keeps the next chunk's upload behind this chunk's gather.
        HALO_CUDA_TRY(cudaMemcpyAsync(index.as<void>(), rows + done, n * sizeof(std::int64_t),
                                      cudaMemcpyHostToDevice, stream));
        gather_rows_kernel<<<detail::grid_blocks(total, kBlock, kMaxBlocks), kBlock, 0, stream>>>(
            src.data, src.ld, src.cols, index.as<std::int64_t>(), total, packed.as<float>());
        HALO_CUDA_CHECK_LAUNCH();
        HALO_CUDA_TRY(cudaMemcpyAsync(dst + done * cols, packed.as<void>(),
                                      n * cols * sizeof(float), cudaMemcpyDeviceToHost, stream));
    }
    HALO_CUDA_TRY(cudaStreamSynchronize(stream));
    HALO_CUDA_TRY(cudaGetLastError());
    packed.release();
    index.release();
}

}  // namespace halo::cuda
