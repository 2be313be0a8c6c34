// The CUDA execution backend: matrices in the Context's memory pool, cuBLAS GEMM in fp32, the
// element-wise kernels of cuda_backend.cu and cuSPARSE, row-split or autotuned SpMM plans, all on
// the compute stream.
#include <climits>
#include <cstddef>
#include <memory>
#include <string>

#include "cuda_kernels.hpp"
#include "halo/cuda/autotune.hpp"
#include "halo/cuda/backend.hpp"
#include "halo/cuda/rowsplit.hpp"
#include "halo/cuda_error.hpp"
#include "halo/error.hpp"

namespace halo::cuda {
namespace {

// Widest dense operand a plan of this backend accepts. The engine's widths come from the model;
// the plan sizes its workspace per width on first use, so this bound costs nothing.
constexpr std::int64_t kMaxSpmmWidth = std::int64_t{1} << 20;

int checked_int(std::int64_t value, const char* what)
{
    HALO_EXPECTS(value >= 0 && value <= INT_MAX, what, " = ", value,
                 " is outside cuBLAS's 32-bit range");
    return static_cast<int>(value);
}

class CudaBackend final : public Backend {
public:
    CudaBackend(Context& ctx, SpmmAlgorithm spmm) : ctx_(ctx), spmm_(spmm) {}

    std::string name() const override { return "cuda"; }

    Matrix allocate(std::int64_t rows, std::int64_t cols) override
    {
        HALO_EXPECTS(rows >= 0 && cols >= 0, "cannot allocate ", rows, " x ", cols);
        const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
        HALO_EXPECTS(
            cols == 0 || count / static_cast<std::size_t>(cols) == static_cast<std::size_t>(rows),
            rows, " x ", cols, " overflows size_t");
        // At least one element, as the CPU backend: a matrix never has a null data pointer.
        const std::size_t bytes = (count > 0 ? count : 1) * sizeof(float);
        auto* ptr = static_cast<float*>(ctx_.allocate(bytes));
        Context* ctx = &ctx_;
        return Matrix(std::shared_ptr<float>(ptr, [ctx](float* p) { ctx->deallocate(p); }), rows,
                      cols);
    }

    // Returns once the host buffer may be reused (pinned or pageable alike).
    void copy_from_host(const float* host, DenseView<float> dst) override
    {
        if (dst.rows == 0 || dst.cols == 0) {
            return;
        }
        HALO_EXPECTS(host != nullptr && dst.data != nullptr && dst.ld >= dst.cols,
                     "copy_from_host needs a host buffer and a device view with ld >= cols");
        const auto width = static_cast<std::size_t>(dst.cols) * sizeof(float);
        HALO_CUDA_TRY(cudaMemcpy2DAsync(dst.data, static_cast<std::size_t>(dst.ld) * sizeof(float),
                                        host, width, width, static_cast<std::size_t>(dst.rows),
                                        cudaMemcpyHostToDevice, ctx_.compute_stream()));
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream()));
    }

    void copy_to_host(DenseView<const float> src, float* host) override
    {
        if (src.rows == 0 || src.cols == 0) {
            return;
        }
        HALO_EXPECTS(host != nullptr && src.data != nullptr && src.ld >= src.cols,
                     "copy_to_host needs a host buffer and a device view with ld >= cols");
        const auto width = static_cast<std::size_t>(src.cols) * sizeof(float);
        HALO_CUDA_TRY(cudaMemcpy2DAsync(
            host, width, src.data, static_cast<std::size_t>(src.ld) * sizeof(float), width,
            static_cast<std::size_t>(src.rows), cudaMemcpyDeviceToHost, ctx_.compute_stream()));
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream()));
    }

    std::unique_ptr<SpmmPlan> make_spmm_plan(const Csr& a) override
    {
        if (spmm_ == SpmmAlgorithm::rowsplit) {
            return make_rowsplit_spmm_plan(ctx_, a, kMaxSpmmWidth);
        }
        if (spmm_ == SpmmAlgorithm::autotune) {
            return make_autotuned_spmm_plan(ctx_, a, kMaxSpmmWidth);
        }
        return make_cusparse_spmm_plan(ctx_, a, kMaxSpmmWidth);
    }

    // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS gets B as its first operand.
    void gemm(DenseView<const float> a, DenseView<const float> b, DenseView<float> c, float alpha,
              float beta) override
    {
        HALO_EXPECTS(a.cols == b.rows, "A is ", a.rows, " x ", a.cols, ", B is ", b.rows, " x ",
                     b.cols);
        HALO_EXPECTS(c.rows == a.rows && c.cols == b.cols, "C is ", c.rows, " x ", c.cols,
                     ", expected ", a.rows, " x ", b.cols);
        const int m = checked_int(c.rows, "gemm rows");
        const int n = checked_int(c.cols, "gemm columns");
        const int k = checked_int(a.cols, "gemm inner dimension");
        if (m == 0 || n == 0) {
            return;
        }
        if (k == 0) {
            // No products: C = beta * C, and beta == 0 writes zeros without reading C.
            if (beta == 0.0f) {
                HALO_CUDA_TRY(
                    cudaMemset2DAsync(c.data, static_cast<std::size_t>(c.ld) * sizeof(float), 0,
                                      static_cast<std::size_t>(c.cols) * sizeof(float),
                                      static_cast<std::size_t>(c.rows), ctx_.compute_stream()));
            } else {
                detail::axpby(ctx_.compute_stream(), c.rows, c.cols, beta, c.data, c.ld, 0.0f,
                              c.data, c.ld);
            }
            return;
        }
        HALO_EXPECTS(a.ld >= a.cols && b.ld >= b.cols && c.ld >= c.cols,
                     "leading dimensions below the widths: lda ", a.ld, ", ldb ", b.ld, ", ldc ",
                     c.ld);
        const int lda = checked_int(a.ld, "lda");
        const int ldb = checked_int(b.ld, "ldb");
        const int ldc = checked_int(c.ld, "ldc");
        // cuBLAS follows BLAS: beta == 0 overwrites C without reading it.
        HALO_CUBLAS_TRY(cublasGemmEx(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                                     b.data, CUDA_R_32F, ldb, a.data, CUDA_R_32F, lda, &beta,
                                     c.data, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
    }

    void axpby(float alpha, DenseView<const float> x, float beta, DenseView<float> y) override
    {
        HALO_EXPECTS(x.rows == y.rows && x.cols == y.cols, "axpby shapes differ: ", x.rows, "x",
                     x.cols, " vs ", y.rows, "x", y.cols);
        HALO_EXPECTS(x.ld >= x.cols && y.ld >= y.cols, "leading dimensions below the widths");
        detail::axpby(ctx_.compute_stream(), y.rows, y.cols, alpha, x.data, x.ld, beta, y.data,
                      y.ld);
    }

    void bias_activation(DenseView<float> y, const float* bias, Activation act,
                         RowRange rows) override
    {
        HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= y.rows, "row range [",
                     rows.begin, ", ", rows.end, ") outside [0, ", y.rows, ")");
        if (rows.empty() || y.cols == 0) {
            return;
        }
        detail::bias_activation(ctx_.compute_stream(), y.row(rows.begin), rows.size(), y.cols, y.ld,
                                bias, act == Activation::relu);
    }

    void synchronize() override { HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream())); }

private:
    Context& ctx_;
    SpmmAlgorithm spmm_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(Context& ctx, SpmmAlgorithm spmm)
{
    return std::make_unique<CudaBackend>(ctx, spmm);
}

}  // namespace halo::cuda
