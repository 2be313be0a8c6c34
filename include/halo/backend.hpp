// Execution backends: where the engine's matrices live and what runs the kernels on them.
// The CPU backend (OpenMP, kernels/reference) is here; the CUDA backend implements the same
// interface with device memory, cuSPARSE/cuBLAS and the custom kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "halo/csr.hpp"
#include "halo/dense.hpp"
#include "halo/kernel_metadata.hpp"

namespace halo {

/// A dense row-major matrix in a backend's memory (host or device); movable, owning.
class Matrix {
public:
    Matrix() = default;
    Matrix(std::shared_ptr<float> storage, std::int64_t rows, std::int64_t cols)
        : storage_(std::move(storage)), rows_(rows), cols_(cols)
    {
    }

    float* data() const noexcept { return storage_.get(); }
    std::int64_t rows() const noexcept { return rows_; }
    std::int64_t cols() const noexcept { return cols_; }
    DenseView<float> view() const noexcept { return {storage_.get(), rows_, cols_, cols_}; }
    /// Rows [begin, end) as a view (the matrix stays the owner).
    DenseView<float> rows_view(std::int64_t begin, std::int64_t end) const noexcept
    {
        return {storage_.get() + begin * cols_, end - begin, cols_, cols_};
    }

private:
    std::shared_ptr<float> storage_;
    std::int64_t rows_ = 0;
    std::int64_t cols_ = 0;
};

/// A prepared sparse operator (plan / execute): preprocessing happens once when the plan is made,
/// run() many times. y rows outside `rows` are untouched.
class SpmmPlan {
public:
    virtual ~SpmmPlan() = default;
    virtual void run(DenseView<const float> x, DenseView<float> y, RowRange rows) = 0;
    virtual std::string algorithm() const = 0;
    /// What the plan decided at run time (an autotuned plan's choices), one line per decision;
    /// empty for plans that decide nothing.
    virtual std::string report() const { return {}; }
    /// Decisions made in this process that are worth keeping in the dataset (the autotuner's
    /// new choices) as kernel metadata of the plan's operator; empty when there are none.
    virtual std::vector<KernelMetadata> tuning_metadata() const { return {}; }
};

/// What the engine knows about an operator beyond its matrix, for plans that can use it.
struct SpmmPlanHints {
    /// The operator's pattern name in the dataset's kernel metadata (kernel_operator_adjacency or
    /// kernel_operator_gcn).
    std::string op;
    /// The row ranges run() will be asked for (the interior and the boundary rows).
    std::vector<RowRange> ranges;
    /// This operator's kernel metadata from the dataset (any kernel; a plan takes what it uses).
    std::vector<KernelMetadata> stored;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;

    /// Uninitialized rows x cols matrix in this backend's memory.
    virtual Matrix allocate(std::int64_t rows, std::int64_t cols) = 0;
    /// Host <-> backend copies of a whole contiguous view.
    virtual void copy_from_host(const float* host, DenseView<float> dst) = 0;
    virtual void copy_to_host(DenseView<const float> src, float* host) = 0;

    /// Takes a host CSR (the shard's local operator) into the backend and prepares it.
    virtual std::unique_ptr<SpmmPlan> make_spmm_plan(const Csr& a) = 0;
    /// The same with what the engine knows about the operator; backends that use no hints
    /// ignore them.
    virtual std::unique_ptr<SpmmPlan> make_spmm_plan(const Csr& a, const SpmmPlanHints& hints)
    {
        static_cast<void>(hints);
        return make_spmm_plan(a);
    }

    /// c = alpha * a * b + beta * c (row-major; beta == 0: c is not read).
    virtual void gemm(DenseView<const float> a, DenseView<const float> b, DenseView<float> c,
                      float alpha, float beta) = 0;
    /// y = alpha * x + beta * y, element-wise over equal shapes (beta == 0: y is not read).
    virtual void axpby(float alpha, DenseView<const float> x, float beta, DenseView<float> y) = 0;
    /// y[i, :] = act(y[i, :] + bias) for i in rows; bias (backend memory, y.cols entries) may be
    /// null.
    virtual void bias_activation(DenseView<float> y, const float* bias, Activation act,
                                 RowRange rows) = 0;
    /// Waits for all work issued so far.
    virtual void synchronize() = 0;
};

/// The CPU backend: host memory, OpenMP, the reference kernels.
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace halo
