// cuSPARSE SpMM plan (the vendor baseline of DESIGN.md's kernel table): the CSR operator on the
// device, one CSR descriptor per row range asked for, and a workspace reused across runs.
//
// Choices:
// - Algorithm CUSPARSE_SPMM_CSR_ALG2 with row-major dense operands (CUSPARSE_ORDER_ROW): the CSR
//   algorithm meant for row-major B and C, deterministic from run to run (no atomics), so repeated
//   runs and the interior/boundary split give identical rows.
// - Index types: cuSPARSE's generic API is given the same type for row offsets and columns:
//   32-bit when nnz, rows and columns all fit in int32 (offsets narrowed on the device), else
//   64-bit for both (columns widened on the device). Mixing 64-bit offsets with 32-bit columns is
//   not a combination that cusparseSpMM documents, so it is not relied upon.
// - Row ranges: cuSPARSE has no row-range argument, so a range [b, e) is its own CSR descriptor:
//   rows e - b, offsets indptr[b..e] - indptr[b] (the full offsets themselves when b == 0),
//   columns and values starting at indptr[b], and C pointing at row b of y. Rows outside the
//   range are never touched. A range without nonzeros only zeroes its rows.
// - Pattern matrices get an explicit array of ones (cuSPARSE has no implicit-value CSR).
#include <climits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/backend/cuda_kernels.hpp"
#include "cuda/primitives/spmm_checks.hpp"
#include "halo/cuda/backend.hpp"
#include "halo/cuda_error.hpp"
#include "halo/error.hpp"
#include "halo/spmm_registry.hpp"

namespace halo::cuda {
namespace {

constexpr cusparseSpMMAlg_t kAlgorithm = CUSPARSE_SPMM_CSR_ALG2;

// Destroys a dense descriptor at scope exit (run() creates them per call: pointers change).
struct DnMatGuard {
    cusparseConstDnMatDescr_t descr = nullptr;
    DnMatGuard() = default;
    DnMatGuard(const DnMatGuard&) = delete;
    DnMatGuard& operator=(const DnMatGuard&) = delete;
    ~DnMatGuard()
    {
        if (descr != nullptr) {
            (void)cusparseDestroyDnMat(descr);
        }
    }
};

class CusparseSpmmPlan final : public SpmmPlan {
public:
    CusparseSpmmPlan(Context& ctx, const Csr& a, std::int64_t max_dim, IndexWidth indices)
        : ctx_(ctx),
          num_rows_(a.num_rows),
          num_cols_(a.num_cols),
          max_dim_(max_dim),
          indptr_(a.indptr)
    {
        HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
        validate(a, "the operator of a cuSPARSE SpMM plan");
        const std::int64_t nnz = a.nnz();
        wide_ = indices == IndexWidth::bits64 || nnz > INT_MAX || num_rows_ > INT_MAX ||
                num_cols_ > INT_MAX;
        const cudaStream_t stream = ctx_.compute_stream();

        // Row offsets: uploaded as int64 (the host type), kept as is or narrowed on the device.
        DeviceBuffer<std::int64_t> offsets(ctx_, indptr_.size());
        HALO_CUDA_TRY(cudaMemcpyAsync(offsets.data(), indptr_.data(), offsets.bytes(),
                                      cudaMemcpyHostToDevice, stream));
        if (wide_) {
            offsets64_ = std::move(offsets);
        } else {
            offsets32_ = DeviceBuffer<std::int32_t>(ctx_, indptr_.size());
            detail::shift_offsets(stream, offsets.data(), offsets32_.data(),
                                  static_cast<std::int64_t>(indptr_.size()), 0);
        }

        DeviceBuffer<std::int32_t> columns(ctx_, a.indices.size());
        if (nnz > 0) {
            HALO_CUDA_TRY(cudaMemcpyAsync(columns.data(), a.indices.data(), columns.bytes(),
                                          cudaMemcpyHostToDevice, stream));
        }
        if (wide_) {
            indices64_ = DeviceBuffer<std::int64_t>(ctx_, a.indices.size());
            detail::widen_indices(stream, columns.data(), indices64_.data(), nnz);
        } else {
            indices32_ = std::move(columns);
        }

        values_ = DeviceBuffer<float>(ctx_, static_cast<std::size_t>(nnz));
        if (a.has_values()) {
            HALO_CUDA_TRY(cudaMemcpyAsync(values_.data(), a.values.data(), values_.bytes(),
                                          cudaMemcpyHostToDevice, stream));
        } else {
            detail::fill(stream, values_.data(), nnz, 1.0f);
        }
        // Once, at setup: any failure of the uploads surfaces here rather than in a later run.
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
    }

    CusparseSpmmPlan(const CusparseSpmmPlan&) = delete;
    CusparseSpmmPlan& operator=(const CusparseSpmmPlan&) = delete;

    void run(DenseView<const float> x, DenseView<float> y, RowRange rows) override
    {
        detail::check_spmm_operands(x, y, rows, num_rows_, num_cols_, max_dim_);
        const std::int64_t width = x.cols;
        if (rows.empty() || width == 0) {
            return;
        }
        const cudaStream_t stream = ctx_.compute_stream();
        const std::int64_t range_nnz = indptr_[rows.end] - indptr_[rows.begin];
        if (range_nnz == 0) {
            // Every row of the range is empty: its result is zero, no cuSPARSE call needed.
            HALO_CUDA_TRY(cudaMemset2DAsync(y.row(rows.begin),
                                            static_cast<std::size_t>(y.ld) * sizeof(float), 0,
                                            static_cast<std::size_t>(width) * sizeof(float),
                                            static_cast<std::size_t>(rows.size()), stream));
            return;
        }
        const cusparseSpMatDescr_t a = range_descriptor(rows);

        DnMatGuard xd;
        HALO_CUSPARSE_TRY(cusparseCreateConstDnMat(&xd.descr, num_cols_, width, x.ld, x.data,
                                                   CUDA_R_32F, CUSPARSE_ORDER_ROW));
        cusparseDnMatDescr_t yd_mut = nullptr;
        HALO_CUSPARSE_TRY(cusparseCreateDnMat(&yd_mut, rows.size(), width, y.ld, y.row(rows.begin),
                                              CUDA_R_32F, CUSPARSE_ORDER_ROW));
        DnMatGuard yd;
        yd.descr = yd_mut;

        const float alpha = 1.0f;
        const float beta = 0.0f;
        const auto key = std::make_tuple(rows.begin, rows.end, width, x.ld, y.ld);
        auto size_it = workspace_sizes_.find(key);
        if (size_it == workspace_sizes_.end()) {
            std::size_t bytes = 0;
            HALO_CUSPARSE_TRY(cusparseSpMM_bufferSize(
                ctx_.cusparse(), CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                &alpha, a, xd.descr, &beta, yd_mut, CUDA_R_32F, kAlgorithm, &bytes));
            size_it = workspace_sizes_.emplace(key, bytes).first;
        }
        if (size_it->second > workspace_.bytes()) {
            // Stream-ordered: the old workspace is freed after the runs that used it.
            workspace_ = DeviceBuffer<char>(ctx_, size_it->second);
        }
        HALO_CUSPARSE_TRY(cusparseSpMM(ctx_.cusparse(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                                       CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a, xd.descr, &beta,
                                       yd_mut, CUDA_R_32F, kAlgorithm, workspace_.data()));
    }

    std::string algorithm() const override
    {
        return wide_ ? "cusparse-csr-alg2-i64" : "cusparse-csr-alg2";
    }

    // What the plan holds now (the int64 offsets and int32 columns of the upload are freed
    // once narrowed or widened: a transient of the setup, not counted). cuSPARSE reads values,
    // so a pattern operator still gets an array of ones here.
    MemoryReport memory() const override
    {
        MemoryReport r;
        r.row_pointers = static_cast<std::int64_t>(offsets32_.bytes() + offsets64_.bytes());
        for (const auto& [key, range] : ranges_) {
            r.row_pointers +=
                static_cast<std::int64_t>(range->offsets32.bytes() + range->offsets64.bytes());
        }
        r.indices = static_cast<std::int64_t>(indices32_.bytes() + indices64_.bytes());
        r.values = static_cast<std::int64_t>(values_.bytes());
        r.workspace = static_cast<std::int64_t>(workspace_.bytes());
        r.nonzeros = static_cast<std::int64_t>(values_.size());
        return r;
    }

private:
    // The CSR descriptor of rows [begin, end) and the rebased offsets it points at.
    struct Range {
        cusparseSpMatDescr_t descr = nullptr;
        DeviceBuffer<std::int32_t> offsets32;
        DeviceBuffer<std::int64_t> offsets64;

        Range() = default;
        Range(const Range&) = delete;
        Range& operator=(const Range&) = delete;
        ~Range()
        {
            if (descr != nullptr) {
                (void)cusparseDestroySpMat(descr);
            }
        }
    };

    cusparseSpMatDescr_t range_descriptor(RowRange rows)
    {
        const auto key = std::make_pair(rows.begin, rows.end);
        const auto found = ranges_.find(key);
        if (found != ranges_.end()) {
            return found->second->descr;
        }
        auto range = std::make_unique<Range>();
        const cudaStream_t stream = ctx_.compute_stream();
        const std::int64_t first = indptr_[rows.begin];
        const std::int64_t count = rows.size() + 1;
        void* offsets = nullptr;
        void* columns = nullptr;
        cusparseIndexType_t index_type = CUSPARSE_INDEX_32I;
        if (wide_) {
            index_type = CUSPARSE_INDEX_64I;
            columns = indices64_.data() + first;
            if (rows.begin == 0) {
                offsets = offsets64_.data();
            } else {
                range->offsets64 = DeviceBuffer<std::int64_t>(ctx_, count);
                detail::shift_offsets(stream, offsets64_.data() + rows.begin,
                                      range->offsets64.data(), count, first);
                offsets = range->offsets64.data();
            }
        } else {
            columns = indices32_.data() + first;
            if (rows.begin == 0) {
                offsets = offsets32_.data();
            } else {
                range->offsets32 = DeviceBuffer<std::int32_t>(ctx_, count);
                detail::shift_offsets(stream, offsets32_.data() + rows.begin,
                                      range->offsets32.data(), count, first);
                offsets = range->offsets32.data();
            }
        }
        HALO_CUSPARSE_TRY(cusparseCreateCsr(
            &range->descr, rows.size(), num_cols_, indptr_[rows.end] - first, offsets, columns,
            values_.data() + first, index_type, index_type, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
        const auto descr = range->descr;
        ranges_.emplace(key, std::move(range));
        return descr;
    }

    Context& ctx_;
    std::int64_t num_rows_ = 0;
    std::int64_t num_cols_ = 0;
    std::int64_t max_dim_ = 0;
    bool wide_ = false;
    std::vector<offset_t> indptr_;  // host copy: each range's nonzero count and first nonzero
    DeviceBuffer<std::int32_t> offsets32_;
    DeviceBuffer<std::int64_t> offsets64_;
    DeviceBuffer<std::int32_t> indices32_;
    DeviceBuffer<std::int64_t> indices64_;
    DeviceBuffer<float> values_;
    std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<Range>> ranges_;
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>,
             std::size_t>
        workspace_sizes_;
    DeviceBuffer<char> workspace_;
};

}  // namespace

std::unique_ptr<SpmmPlan> make_cusparse_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                                  IndexWidth indices)
{
    return std::make_unique<CusparseSpmmPlan>(ctx, a, max_dim, indices);
}

std::unique_ptr<SpmmPlan> cusparse_spmm_factory(Context& ctx, const Csr& a,
                                                const SpmmPlanRequest& request)
{
    return make_cusparse_spmm_plan(ctx, a, request.max_dim);
}

}  // namespace halo::cuda
