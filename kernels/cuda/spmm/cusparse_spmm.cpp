// cuSPARSE SpMM plan (the vendor baseline of docs/KERNELS.md "Families"): the operator on the
// device as cuSPARSE reads it, one CSR descriptor per row range asked for, and a workspace reused
// across runs (kernels/cuda/primitives/cusparse_csr.hpp says how). Pattern matrices get an
// explicit array of ones: cuSPARSE has no implicit-value CSR. An operator given as its pattern and
// an OperatorScaling gets its values made on the device from the scalings (the host neither
// builds nor uploads them: Backend::make_scaled_spmm_plan).
#include <memory>
#include <string>

#include "cuda/primitives/cusparse_csr.hpp"
#include "cuda/primitives/spmm_checks.hpp"
#include "cuda/primitives/upload.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo::cuda {
namespace {

class CusparseSpmmPlan final : public SpmmPlan {
public:
    // `scaling`: the values are scaling.row[i] * scaling.col[j], made on the device (a's values
    // are not read).
    CusparseSpmmPlan(Context& ctx, const Csr& a, std::int64_t max_dim, IndexWidth indices,
                     const OperatorScaling* scaling = nullptr)
        : ctx_(ctx),
          num_rows_(a.num_rows),
          num_cols_(a.num_cols),
          max_dim_(max_dim),
          csr_(ctx, checked(a, max_dim, scaling), indices, false),
          scaled_(scaling != nullptr)
    {
        const cudaStream_t stream = ctx_.compute_stream();
        if (scaling != nullptr) {
            // The scalings live until the values are made (the synchronization below).
            const auto row = detail::upload(ctx_, scaling->row);
            const auto col = detail::upload(ctx_, scaling->col);
            csr_.scale_values(scaling->row.empty() ? nullptr : row.data(),
                              scaling->col.empty() ? nullptr : col.data());
            HALO_CUDA_TRY(cudaStreamSynchronize(stream));
            return;
        }
        if (a.has_values()) {
            HALO_CUDA_TRY(cudaMemcpyAsync(csr_.values(), a.values.data(),
                                          a.values.size() * sizeof(float), cudaMemcpyHostToDevice,
                                          stream));
        } else {
            detail::fill(stream, csr_.values(), csr_.nnz(), 1.0f);
        }
        // Once, at setup: any failure of the uploads surfaces here rather than in a later run.
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
    }

    CusparseSpmmPlan(const CusparseSpmmPlan&) = delete;
    CusparseSpmmPlan& operator=(const CusparseSpmmPlan&) = delete;

    void run(DenseView<const float> x, DenseView<float> y, RowRange rows) override
    {
        detail::check_spmm_operands(x, y, rows, num_rows_, num_cols_, max_dim_);
        csr_.spmm(x, y, rows);
    }

    bool adds_in_place() const override { return true; }

    void run_add(DenseView<const float> x, DenseView<float> y, RowRange rows) override
    {
        detail::check_spmm_operands(x, y, rows, num_rows_, num_cols_, max_dim_);
        csr_.spmm(x, y, rows, true);
    }

    std::string algorithm() const override
    {
        const auto pieces = csr_.pieces();
        return std::string(csr_.wide() ? "cusparse-csr-alg2-i64" : "cusparse-csr-alg2") +
               (pieces > 1 ? " (" + std::to_string(pieces) + " pieces)" : "") +
               (scaled_ ? ", values made on the device" : "");
    }

    // cuSPARSE reads values, so a pattern operator still gets an array of ones here.
    MemoryReport memory() const override { return csr_.memory(); }

private:
    // `a` (and the scalings' lengths), once checked: before anything is uploaded.
    static const Csr& checked(const Csr& a, std::int64_t max_dim, const OperatorScaling* scaling)
    {
        HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
        validate(a, "the operator of a cuSPARSE SpMM plan");
        if (scaling != nullptr) {
            detail::check_scaling(a, *scaling);
        }
        return a;
    }

    Context& ctx_;
    std::int64_t num_rows_ = 0;
    std::int64_t num_cols_ = 0;
    std::int64_t max_dim_ = 0;
    detail::CusparseCsr csr_;
    bool scaled_ = false;
};

}  // namespace

std::unique_ptr<SpmmPlan> make_cusparse_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                  IndexWidth indices)
{
    return std::make_unique<CusparseSpmmPlan>(ctx, a, max_dim, indices);
}

std::unique_ptr<SpmmPlan> make_scaled_cusparse_spmm_plan(Context& ctx, const Csr& pattern,
                                                         std::int64_t max_dim,
                                                         const OperatorScaling& scaling,
                                                         IndexWidth indices)
{
    return std::make_unique<CusparseSpmmPlan>(ctx, pattern, max_dim, indices, &scaling);
}

std::unique_ptr<SpmmPlan> cusparse_scaled_factory(Context& ctx, const Csr& pattern,
                                                  const SpmmPlanRequest& request,
                                                  const OperatorScaling& scaling)
{
    return make_scaled_cusparse_spmm_plan(ctx, pattern, request.max_dim, scaling);
}

std::unique_ptr<SpmmPlan> cusparse_spmm_factory(Context& ctx, const Csr& a,
                                                const SpmmPlanRequest& request)
{
    return make_cusparse_spmm_plan(ctx, a, request.max_dim);
}

}  // namespace halo::cuda
