// The CUDA backend's matrices stored in 16 bits (Backend::stores_16bit; halo/core/
// feature_view.hpp): gemm_features through cuBLAS with 16-bit operands and fp32 products and
// sums, store_features and widen_features as one kernel each (cuda_features.cu). Range checks go
// into the record of the backend's round_activations (cuda_activations.hpp), read by
// take_activation_overflow(), so that no call synchronizes and every call can be recorded in a
// CUDA graph (after the record's allocation on the first 16-bit call).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "cuda/backend/cuda_activations.hpp"
#include "cuda/backend/cuda_features.hpp"
#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/feature_view.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {
namespace {

int checked_int(std::int64_t value, const char* what)
{
    HALO_EXPECTS(value >= 0 && value <= INT_MAX, what, " = ", value,
                 " is outside cuBLAS's 32-bit range");
    return static_cast<int>(value);
}

cudaDataType_t cuda_type(FeatureType type)
{
    switch (type) {
        case FeatureType::fp32:
            return CUDA_R_32F;
        case FeatureType::fp16:
            return CUDA_R_16F;
        case FeatureType::bf16:
            return CUDA_R_16BF;
    }
    HALO_THROW(LogicError, "unknown feature type ", static_cast<int>(type));
}

// The handle's math mode with split-K reductions kept in fp32 (the compute type) rather than in
// a 16-bit output type, which cuBLAS allows by default: c is then the fp32 sums rounded once, as
// the definition stores it. Restores the mode it found.
class FullPrecisionReductions {
public:
    explicit FullPrecisionReductions(cublasHandle_t handle) : handle_(handle)
    {
        HALO_CUBLAS_TRY(cublasGetMathMode(handle_, &saved_));
        HALO_CUBLAS_TRY(cublasSetMathMode(
            handle_,
            static_cast<cublasMath_t>(saved_ | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    }
    ~FullPrecisionReductions() { static_cast<void>(cublasSetMathMode(handle_, saved_)); }
    FullPrecisionReductions(const FullPrecisionReductions&) = delete;
    FullPrecisionReductions& operator=(const FullPrecisionReductions&) = delete;

private:
    cublasHandle_t handle_;
    cublasMath_t saved_ = CUBLAS_DEFAULT_MATH;
};

}  // namespace

// Row-major c = a b is column-major c^T = b^T a^T: cuBLAS gets b as its first operand (as the
// fp32 gemm). fp32 throughout is the fp32 gemm itself.
std::optional<ActivationOverflow> ActivationStoringBackend::gemm_features(FeatureView a,
                                                                          FeatureView b,
                                                                          MutableFeatureView c,
                                                                          std::int32_t store,
                                                                          float beta)
{
    check_gemm_features(a, b, c, beta);
    if (a.type == FeatureType::fp32) {
        gemm({static_cast<const float*>(a.data), a.rows, a.cols, a.ld},
             {static_cast<const float*>(b.data), b.rows, b.cols, b.ld},
             {static_cast<float*>(c.data), c.rows, c.cols, c.ld}, 1.0f, beta);
        return std::nullopt;
    }
    const int m = checked_int(c.rows, "gemm rows");
    const int n = checked_int(c.cols, "gemm columns");
    const int k = checked_int(a.cols, "gemm inner dimension");
    if (m == 0 || n == 0) {
        return std::nullopt;
    }
    Context& ctx = stores_.context();
    const cudaStream_t stream = ctx.compute_stream();
    const auto bytes = feature_bytes(c.type);
    if (k == 0 && beta != 0.0f) {
        return std::nullopt;  // c + 0 = c
    }
    if (k == 0) {
        // No products: c = 0 (all-zero bits: +0 in every type), as the fp32 gemm with beta 0.
        HALO_CUDA_TRY(cudaMemset2DAsync(c.data, static_cast<std::size_t>(c.ld) * bytes, 0,
                                        static_cast<std::size_t>(c.cols) * bytes,
                                        static_cast<std::size_t>(c.rows), stream));
        return std::nullopt;
    }
    // The record before cuBLAS: its allocation is what may not happen in a capture.
    OverflowRecord* rec = c.type == FeatureType::fp32 ? nullptr : stores_.record();
    const float alpha = 1.0f;  // beta 0: c is not read
    {
        const FullPrecisionReductions mode(ctx.cublas());
        HALO_CUBLAS_TRY(cublasGemmEx(ctx.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                                     b.data, cuda_type(b.type), checked_int(b.ld, "ldb"), a.data,
                                     cuda_type(a.type), checked_int(a.ld, "lda"), &beta, c.data,
                                     cuda_type(c.type), checked_int(c.ld, "ldc"),
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    if (rec != nullptr) {
        launch_find_infinite(stream, c, rec, store);
    }
    return std::nullopt;
}

std::optional<ActivationOverflow> ActivationStoringBackend::store_features(
    DenseView<const float> src, const float* bias, Activation act, MutableFeatureView dst,
    std::int32_t store)
{
    check_feature_view(dst, "store_features");
    HALO_EXPECTS(src.rows == dst.rows && src.cols == dst.cols && src.ld >= src.cols,
                 "store_features: shapes differ: ", src.rows, "x", src.cols, " (ld ", src.ld,
                 ") into ", dst.rows, "x", dst.cols);
    if (dst.rows == 0 || dst.cols == 0) {
        return std::nullopt;
    }
    HALO_EXPECTS(src.data != nullptr, "store_features: no source data");
    OverflowRecord* rec = dst.type == FeatureType::fp32 ? nullptr : stores_.record();
    launch_store_features(stores_.context().compute_stream(), src, bias, act == Activation::relu,
                          dst, rec, store);
    return std::nullopt;
}

void ActivationStoringBackend::widen_features(FeatureView src, DenseView<float> dst)
{
    check_feature_view(src, "widen_features");
    HALO_EXPECTS(dst.rows == src.rows && dst.cols == src.cols && dst.ld >= dst.cols,
                 "widen_features: shapes differ: ", src.rows, "x", src.cols, " into ", dst.rows,
                 "x", dst.cols, " (ld ", dst.ld, ")");
    if (src.rows == 0 || src.cols == 0) {
        return;
    }
    HALO_EXPECTS(dst.data != nullptr, "widen_features: no destination data");
    launch_widen_features(stores_.context().compute_stream(), src, dst);
}

}  // namespace halo::cuda::detail
