// The device CSR of cuSPARSE's generic API and its SpMM over row ranges (cusparse_csr.hpp).
#include "cuda/primitives/cusparse_csr.hpp"

#include <climits>
#include <utility>

#include "cuda/primitives/upload.hpp"
#include "halo/cuda_error.hpp"
#include "halo/error.hpp"

namespace halo::cuda::detail {
namespace {

// The row offsets of `rows` in cuSPARSE's index type: all of them from row 0, else a copy rebased
// to start at zero, kept in `copy`.
template <typename Index>
void* range_offsets(Context& ctx, const DeviceBuffer<Index>& all, DeviceBuffer<Index>& copy,
                    RowRange rows, std::int64_t first)
{
    if (rows.begin == 0) {
        return all.data();
    }
    const std::int64_t count = rows.size() + 1;
    copy = DeviceBuffer<Index>(ctx, count);
    shift_offsets(ctx.compute_stream(), all.data() + rows.begin, copy.data(), count, first);
    return copy.data();
}

}  // namespace

// The CSR descriptor of rows [begin, end) and the rebased offsets it points at.
struct CusparseCsr::Range {
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

CusparseCsr::CusparseCsr(Context& ctx, const Csr& a, IndexWidth width, bool keep_host_types)
    : ctx_(ctx), num_rows_(a.num_rows), num_cols_(a.num_cols), indptr_(a.indptr)
{
    const std::int64_t nnz = a.nnz();
    wide_ =
        width == IndexWidth::bits64 || nnz > INT_MAX || num_rows_ > INT_MAX || num_cols_ > INT_MAX;
    const cudaStream_t stream = ctx_.compute_stream();
    // Uploaded in the host types (int64 offsets, int32 columns), then narrowed or widened.
    auto offsets = upload(ctx_, indptr_);
    auto columns = upload(ctx_, a.indices);
    if (wide_) {
        columns64_ = DeviceBuffer<std::int64_t>(ctx_, a.indices.size());
        widen_indices(stream, columns.data(), columns64_.data(), nnz);
    } else {
        offsets32_ = DeviceBuffer<std::int32_t>(ctx_, indptr_.size());
        shift_offsets(stream, offsets.data(), offsets32_.data(),
                      static_cast<std::int64_t>(indptr_.size()), 0);
    }
    if (wide_ || keep_host_types) {
        offsets64_ = std::move(offsets);
    }
    if (!wide_ || keep_host_types) {
        columns32_ = std::move(columns);
    }
    values_ = DeviceBuffer<float>(ctx_, static_cast<std::size_t>(nnz));
}

CusparseCsr::~CusparseCsr() = default;

cusparseSpMatDescr_t CusparseCsr::range_descriptor(RowRange rows)
{
    const auto key = std::make_pair(rows.begin, rows.end);
    const auto found = ranges_.find(key);
    if (found != ranges_.end()) {
        return found->second->descr;
    }
    auto range = std::make_unique<Range>();
    const std::int64_t first = indptr_[rows.begin];
    void* offsets = nullptr;
    void* columns = nullptr;
    cusparseIndexType_t index_type = CUSPARSE_INDEX_32I;
    if (wide_) {
        index_type = CUSPARSE_INDEX_64I;
        offsets = range_offsets(ctx_, offsets64_, range->offsets64, rows, first);
        columns = columns64_.data() + first;
    } else {
        offsets = range_offsets(ctx_, offsets32_, range->offsets32, rows, first);
        columns = columns32_.data() + first;
    }
    HALO_CUSPARSE_TRY(cusparseCreateCsr(
        &range->descr, rows.size(), num_cols_, indptr_[rows.end] - first, offsets, columns,
        values_.data() + first, index_type, index_type, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    const auto descr = range->descr;
    ranges_.emplace(key, std::move(range));
    return descr;
}

void CusparseCsr::spmm(DenseView<const float> x, DenseView<float> y, RowRange rows)
{
    const std::int64_t width = x.cols;
    if (rows.empty() || width == 0) {
        return;
    }
    const cudaStream_t stream = ctx_.compute_stream();
    if (indptr_[rows.end] == indptr_[rows.begin]) {
        // Every row of the range is empty: its result is zero, no cuSPARSE call needed.
        HALO_CUDA_TRY(cudaMemset2DAsync(y.row(rows.begin),
                                        static_cast<std::size_t>(y.ld) * sizeof(float), 0,
                                        static_cast<std::size_t>(width) * sizeof(float),
                                        static_cast<std::size_t>(rows.size()), stream));
        return;
    }
    const cusparseSpMatDescr_t a = range_descriptor(rows);
    DnMat<cusparseConstDnMatDescr_t> xd;
    HALO_CUSPARSE_TRY(cusparseCreateConstDnMat(&xd.descr, num_cols_, width, x.ld, x.data,
                                               CUDA_R_32F, CUSPARSE_ORDER_ROW));
    DnMat<> yd;
    HALO_CUSPARSE_TRY(cusparseCreateDnMat(&yd.descr, rows.size(), width, y.ld, y.row(rows.begin),
                                          CUDA_R_32F, CUSPARSE_ORDER_ROW));
    const float alpha = 1.0f;
    const float beta = 0.0f;
    const auto key = std::make_tuple(rows.begin, rows.end, width, x.ld, y.ld);
    auto size = workspace_sizes_.find(key);
    if (size == workspace_sizes_.end()) {
        std::size_t bytes = 0;
        HALO_CUSPARSE_TRY(cusparseSpMM_bufferSize(
            ctx_.cusparse(), CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
            &alpha, a, xd.descr, &beta, yd.descr, CUDA_R_32F, kCsrSpmmAlgorithm, &bytes));
        size = workspace_sizes_.emplace(key, bytes).first;
    }
    if (size->second > workspace_.bytes()) {
        // Stream-ordered: the old workspace is freed after the runs that used it.
        workspace_ = DeviceBuffer<char>(ctx_, size->second);
    }
    HALO_CUSPARSE_TRY(cusparseSpMM(ctx_.cusparse(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                                   CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a, xd.descr, &beta,
                                   yd.descr, CUDA_R_32F, kCsrSpmmAlgorithm, workspace_.data()));
}

// The int64 offsets and int32 columns of the upload that cuSPARSE does not read are freed once
// converted (unless kept): a transient of the setup, not counted.
MemoryReport CusparseCsr::memory() const
{
    MemoryReport r;
    r.row_pointers = static_cast<std::int64_t>(offsets32_.bytes() + offsets64_.bytes());
    for (const auto& [key, range] : ranges_) {
        r.row_pointers +=
            static_cast<std::int64_t>(range->offsets32.bytes() + range->offsets64.bytes());
    }
    r.indices = static_cast<std::int64_t>(columns32_.bytes() + columns64_.bytes());
    r.values = static_cast<std::int64_t>(values_.bytes());
    r.workspace = static_cast<std::int64_t>(workspace_.bytes());
    r.nonzeros = static_cast<std::int64_t>(values_.size());
    return r;
}

}  // namespace halo::cuda::detail
