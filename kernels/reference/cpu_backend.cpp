// The CPU execution backend: host memory, OpenMP, and the reference kernels.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <span>

#include "cpu_plans.hpp"
#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/kernels_host/aes.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/dense_ops.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo {
namespace {

class CpuSpmmPlan final : public SpmmPlan {
public:
    explicit CpuSpmmPlan(const Csr& a) : a_(a) {}

    void run(DenseView<const float> x, DenseView<float> y, RowRange rows) override
    {
        reference::spmm(a_.view(), x, y, rows);
    }

    bool adds_in_place() const override { return true; }

    void run_add(DenseView<const float> x, DenseView<float> y, RowRange rows) override
    {
        reference::spmm_add(a_.view(), x, y, rows);
    }

    bool reads_features(FeatureType) const override { return true; }
    void run_features(FeatureView x, DenseView<float> y, RowRange rows) override
    {
        reference::run_widened(*this, x, y, rows);
    }

    std::string algorithm() const override { return "reference"; }

private:
    Csr a_;  // own copy: the plan outlives the caller's matrix
};

class CpuAesPlan final : public SpmmPlan {
public:
    CpuAesPlan(const Csr& a, const AesOptions& options) : a_(a), options_(options)
    {
        validate(options_);
    }

    void run(DenseView<const float> x, DenseView<float> y, RowRange rows) override
    {
        reference::aes_spmm(a_.view(), x, y, rows, options_);
    }

    bool reads_features(FeatureType) const override { return true; }
    void run_features(FeatureView x, DenseView<float> y, RowRange rows) override
    {
        reference::run_widened(*this, x, y, rows);
    }

    std::string algorithm() const override
    {
        return "reference-aes-w" + std::to_string(options_.sample_width) + "-" +
               to_string(options_.scaling);
    }

    bool exact() const override { return false; }

    std::string report() const override
    {
        const auto stats = aes_sample_stats(a_.view(), a_.view().all_rows(), options_.sample_width);
        return "aes W = " + std::to_string(options_.sample_width) + ": " +
               std::to_string(stats.sampled_rows) + " of " + std::to_string(stats.rows) +
               " rows sampled, " + std::to_string(stats.distinct) + " distinct of their " +
               std::to_string(stats.nonzeros) + " nonzeros kept\n";
    }

private:
    Csr a_;
    AesOptions options_;
};

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(CpuBackendOptions options) : options_(std::move(options))
    {
        if (options_.aes) {
            validate(*options_.aes);
        }
    }

    std::string name() const override { return "cpu"; }
    bool uses_host_memory() const override { return true; }
    bool stores_activations(FeatureType) const override { return true; }
    bool stores_16bit() const override { return true; }
    std::optional<ActivationOverflow> gemm_features(FeatureView a, FeatureView b,
                                                    MutableFeatureView c, std::int32_t store,
                                                    float beta) override
    {
        return reference::gemm_host(a, b, c, store, beta);
    }
    std::optional<ActivationOverflow> store_features(DenseView<const float> src, const float* bias,
                                                     Activation act, MutableFeatureView dst,
                                                     std::int32_t store) override
    {
        return reference::store_host(src, bias, act, dst, store);
    }
    void widen_features(FeatureView src, DenseView<float> dst) override
    {
        reference::widen_host(src, dst);
    }

    // The 16-bit stores of a device, in fp32 memory: each element as round_feature makes it.
    std::optional<ActivationOverflow> round_activations(DenseView<float> y, FeatureType type,
                                                        std::int32_t store) override
    {
        if (type == FeatureType::fp32 || y.rows == 0 || y.cols == 0) {
            return std::nullopt;
        }
        const auto out = reference::first_overflow(y, type, store);
#pragma omp parallel for schedule(static) if (y.rows > (1 << 10))
        for (std::int64_t i = 0; i < y.rows; ++i) {
            round_features({y.row(i), static_cast<std::size_t>(y.cols)}, type);
        }
        return out;
    }

    Matrix allocate(std::int64_t rows, std::int64_t cols) override
    {
        return reference::host_matrix(rows, cols, "; use more ranks");
    }

    // An empty copy touches neither pointer (either may be null), as on the CUDA backend.
    void copy_from_host(const float* host, DenseView<float> dst) override
    {
        if (dst.rows == 0 || dst.cols == 0) {
            return;
        }
        for (std::int64_t i = 0; i < dst.rows; ++i) {
            std::memcpy(dst.row(i), host + i * dst.cols, dst.cols * sizeof(float));
        }
    }

    void copy_to_host(DenseView<const float> src, float* host) override
    {
        if (src.rows == 0 || src.cols == 0) {
            return;
        }
        for (std::int64_t i = 0; i < src.rows; ++i) {
            std::memcpy(host + i * src.cols, src.row(i), src.cols * sizeof(float));
        }
    }

    std::unique_ptr<SpmmPlan> make_spmm_plan(const Csr& a) override
    {
        if (options_.aes) {
            return std::make_unique<CpuAesPlan>(a, *options_.aes);
        }
        return std::make_unique<CpuSpmmPlan>(a);
    }

    std::unique_ptr<MaxkPlan> make_maxk_plan(const Csr& a, std::int64_t dim, std::int64_t k,
                                             const SpmmPlanHints& hints) override
    {
        static_cast<void>(hints);
        return reference::make_cpu_maxk_plan(a, dim, k);
    }

    std::unique_ptr<AttentionPlan> make_attention_plan(const Csr& a, std::int64_t max_dim,
                                                       AttentionKernel kernel,
                                                       const SpmmPlanHints& hints) override
    {
        static_cast<void>(max_dim);
        static_cast<void>(kernel);
        static_cast<void>(hints);
        return reference::make_cpu_attention_plan(a);
    }

    std::unique_ptr<QuantizedSpmmPlan> make_quantized_spmm_plan(const Csr& a,
                                                                std::int64_t max_dim) override
    {
        static_cast<void>(max_dim);
        return reference::make_cpu_quantized_spmm_plan(a, options_.aes);
    }

    void dequantize(const QuantizedView& x, DenseView<float> y) override { halo::dequantize(x, y); }

    void normalize_rows(DenseView<const float> x, DenseView<float> y) override
    {
        HALO_EXPECTS(x.rows == y.rows && x.cols == y.cols, "normalize_rows shapes differ: ", x.rows,
                     "x", x.cols, " vs ", y.rows, "x", y.cols);
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < x.rows; ++i) {
            double sq = 0.0;
            for (std::int64_t j = 0; j < x.cols; ++j) {
                sq += static_cast<double>(x(i, j)) * static_cast<double>(x(i, j));
            }
            const float norm = std::max(static_cast<float>(std::sqrt(sq)), 1e-12f);
            for (std::int64_t j = 0; j < x.cols; ++j) {
                y(i, j) = x(i, j) / norm;
            }
        }
    }

    void gemm(DenseView<const float> a, DenseView<const float> b, DenseView<float> c, float alpha,
              float beta) override
    {
        reference::gemm(a, b, c, alpha, beta);
    }

    void axpby(float alpha, DenseView<const float> x, float beta, DenseView<float> y) override
    {
        HALO_EXPECTS(x.rows == y.rows && x.cols == y.cols, "axpby shapes differ: ", x.rows, "x",
                     x.cols, " vs ", y.rows, "x", y.cols);
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < y.rows; ++i) {
            for (std::int64_t j = 0; j < y.cols; ++j) {
                y(i, j) = beta == 0.0f ? alpha * x(i, j) : alpha * x(i, j) + beta * y(i, j);
            }
        }
    }

    void bias_activation(DenseView<float> y, const float* bias, Activation act,
                         RowRange rows) override
    {
        reference::bias_activation(y, bias, act, rows);
    }

    void synchronize() override {}

private:
    CpuBackendOptions options_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(CpuBackendOptions options)
{
    return std::make_unique<CpuBackend>(std::move(options));
}

}  // namespace halo
