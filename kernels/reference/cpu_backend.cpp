// The CPU execution backend: host memory, OpenMP, and the reference kernels.
#include <cstring>
#include <new>

#include "halo/backend.hpp"
#include "halo/dense_ops.hpp"
#include "halo/error.hpp"
#include "halo/spmm.hpp"

namespace halo {
namespace {

class CpuSpmmPlan final : public SpmmPlan {
public:
    explicit CpuSpmmPlan(const Csr& a) : a_(a) {}

    void run(DenseView<const float> x, DenseView<float> y, RowRange rows) override
    {
        reference::spmm(a_.view(), x, y, rows);
    }

    std::string algorithm() const override { return "reference"; }

private:
    Csr a_;  // own copy: the plan outlives the caller's matrix
};

class CpuBackend final : public Backend {
public:
    std::string name() const override { return "cpu"; }

    Matrix allocate(std::int64_t rows, std::int64_t cols) override
    {
        HALO_EXPECTS(rows >= 0 && cols >= 0, "cannot allocate ", rows, " x ", cols);
        const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
        std::shared_ptr<float> storage(new (std::nothrow) float[count > 0 ? count : 1],
                                       std::default_delete<float[]>());
        if (!storage) {
            HALO_THROW(Error, "out of host memory allocating a ", rows, " x ", cols,
                       " float matrix (", count * sizeof(float) / (1 << 20),
                       " MiB); use more ranks");
        }
        return Matrix(std::move(storage), rows, cols);
    }

    void copy_from_host(const float* host, DenseView<float> dst) override
    {
        for (std::int64_t i = 0; i < dst.rows; ++i) {
            std::memcpy(dst.row(i), host + i * dst.cols, dst.cols * sizeof(float));
        }
    }

    void copy_to_host(DenseView<const float> src, float* host) override
    {
        for (std::int64_t i = 0; i < src.rows; ++i) {
            std::memcpy(host + i * src.cols, src.row(i), src.cols * sizeof(float));
        }
    }

    std::unique_ptr<SpmmPlan> make_spmm_plan(const Csr& a) override
    {
        return std::make_unique<CpuSpmmPlan>(a);
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
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend()
{
    return std::make_unique<CpuBackend>();
}

}  // namespace halo
