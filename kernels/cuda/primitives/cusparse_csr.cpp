// The device CSR of cuSPARSE's generic API and its SpMM over row ranges (cusparse_csr.hpp).
#include "cuda/primitives/cusparse_csr.hpp"

#include <algorithm>
#include <climits>
#include <utility>

#include "cuda/primitives/upload.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {

// The CSR descriptor of rows [begin, end) and the rebased offsets it points at.
struct CusparseCsr::Piece {
    RowRange rows;
    cusparseSpMatDescr_t descr = nullptr;
    DeviceBuffer<std::int32_t> offsets32;
    DeviceBuffer<std::int64_t> offsets64;

    Piece() = default;
    Piece(const Piece&) = delete;
    Piece& operator=(const Piece&) = delete;
    ~Piece()
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
    wide_ = width == IndexWidth::bits64 || num_rows_ > INT_MAX || num_cols_ > INT_MAX;
    max_piece_nnz_ = width == IndexWidth::small_pieces ? kSmallPieceNnz : kMaxPieceNnz;
    const cudaStream_t stream = ctx_.compute_stream();
    // Uploaded in the host types (int64 offsets, int32 columns), then narrowed or widened.
    auto offsets = upload(ctx_, indptr_);
    auto columns = upload(ctx_, a.indices);
    if (wide_) {
        columns64_ = DeviceBuffer<std::int64_t>(ctx_, a.indices.size());
        widen_indices(stream, columns.data(), columns64_.data(), nnz);
    } else if (nnz <= max_piece_nnz_) {
        offsets32_ = DeviceBuffer<std::int32_t>(ctx_, indptr_.size());
        shift_offsets(stream, offsets.data(), offsets32_.data(),
                      static_cast<std::int64_t>(indptr_.size()), 0);
    }
    // Past one piece the pieces' int32 offsets are rebased copies of the int64 ones.
    if (wide_ || keep_host_types || offsets32_.size() == 0) {
        offsets64_ = std::move(offsets);
    }
    if (!wide_ || keep_host_types) {
        columns32_ = std::move(columns);
    }
    values_ = DeviceBuffer<float>(ctx_, static_cast<std::size_t>(nnz));
}

CusparseCsr::~CusparseCsr() = default;

std::vector<RowRange> CusparseCsr::split(RowRange rows) const
{
    std::vector<RowRange> out;
    if (wide_) {
        out.push_back(rows);
        return out;
    }
    auto begin = rows.begin;
    while (begin < rows.end) {
        // The last row whose end stays within the piece's nonzeros, at least one row.
        const auto limit = indptr_[begin] + max_piece_nnz_;
        const auto after =
            std::upper_bound(indptr_.begin() + begin + 1, indptr_.begin() + rows.end + 1, limit);
        const auto end = std::max<std::int64_t>(begin + 1, (after - indptr_.begin()) - 1);
        out.push_back({begin, end});
        begin = end;
    }
    return out;
}

std::int64_t CusparseCsr::pieces() const
{
    return static_cast<std::int64_t>(split({0, num_rows_}).size());
}

const std::vector<std::unique_ptr<CusparseCsr::Piece>>& CusparseCsr::range_pieces(RowRange rows)
{
    const auto key = std::make_pair(rows.begin, rows.end);
    const auto found = ranges_.find(key);
    if (found != ranges_.end()) {
        return found->second;
    }
    std::vector<std::unique_ptr<Piece>> pieces;
    const cudaStream_t stream = ctx_.compute_stream();
    for (const auto piece_rows : split(rows)) {
        auto piece = std::make_unique<Piece>();
        piece->rows = piece_rows;
        const std::int64_t first = indptr_[piece_rows.begin];
        const std::int64_t count = piece_rows.size() + 1;
        void* offsets = nullptr;
        void* columns = nullptr;
        cusparseIndexType_t index_type = CUSPARSE_INDEX_32I;
        if (wide_) {
            // 64-bit: the full offsets from row 0, else a rebased copy.
            index_type = CUSPARSE_INDEX_64I;
            offsets = offsets64_.data();
            if (piece_rows.begin != 0) {
                piece->offsets64 = DeviceBuffer<std::int64_t>(ctx_, count);
                shift_offsets(stream, offsets64_.data() + piece_rows.begin, piece->offsets64.data(),
                              count, first);
                offsets = piece->offsets64.data();
            }
            columns = columns64_.data() + first;
        } else {
            // 32-bit: the full 32-bit offsets from row 0, else a copy rebased from the 32- or
            // 64-bit ones.
            offsets = offsets32_.data();
            if (piece_rows.begin != 0 || offsets32_.size() == 0) {
                piece->offsets32 = DeviceBuffer<std::int32_t>(ctx_, count);
                if (offsets32_.size() != 0) {
                    shift_offsets(stream, offsets32_.data() + piece_rows.begin,
                                  piece->offsets32.data(), count, first);
                } else {
                    shift_offsets(stream, offsets64_.data() + piece_rows.begin,
                                  piece->offsets32.data(), count, first);
                }
                offsets = piece->offsets32.data();
            }
            columns = columns32_.data() + first;
        }
        HALO_CUSPARSE_TRY(cusparseCreateCsr(&piece->descr, piece_rows.size(), num_cols_,
                                            indptr_[piece_rows.end] - first, offsets, columns,
                                            values_.data() + first, index_type, index_type,
                                            CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
        pieces.push_back(std::move(piece));
    }
    return ranges_.emplace(key, std::move(pieces)).first->second;
}

void CusparseCsr::spmm(DenseView<const float> x, DenseView<float> y, RowRange rows, bool add)
{
    const std::int64_t width = x.cols;
    if (rows.empty() || width == 0) {
        return;
    }
    if (indptr_[rows.end] == indptr_[rows.begin]) {
        // Every row of the range is empty: its result is zero, no cuSPARSE call needed.
        if (add) {
            return;
        }
        HALO_CUDA_TRY(
            cudaMemset2DAsync(y.row(rows.begin), static_cast<std::size_t>(y.ld) * sizeof(float), 0,
                              static_cast<std::size_t>(width) * sizeof(float),
                              static_cast<std::size_t>(rows.size()), ctx_.compute_stream()));
        return;
    }
    for (const auto& piece : range_pieces(rows)) {
        piece_spmm(*piece, x, y, add);
    }
}

void CusparseCsr::piece_spmm(const Piece& piece, DenseView<const float> x, DenseView<float> y,
                             bool add)
{
    const std::int64_t width = x.cols;
    const auto rows = piece.rows;
    DnMat<cusparseConstDnMatDescr_t> xd;
    HALO_CUSPARSE_TRY(cusparseCreateConstDnMat(&xd.descr, num_cols_, width, x.ld, x.data,
                                               CUDA_R_32F, CUSPARSE_ORDER_ROW));
    DnMat<> yd;
    HALO_CUSPARSE_TRY(cusparseCreateDnMat(&yd.descr, rows.size(), width, y.ld, y.row(rows.begin),
                                          CUDA_R_32F, CUSPARSE_ORDER_ROW));
    const float alpha = 1.0f;
    const float beta = add ? 1.0f : 0.0f;
    const auto key = std::make_tuple(rows.begin, rows.end, width, x.ld, y.ld);
    auto size = workspace_sizes_.find(key);
    if (size == workspace_sizes_.end()) {
        std::size_t bytes = 0;
        HALO_CUSPARSE_TRY(cusparseSpMM_bufferSize(
            ctx_.cusparse(), CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
            &alpha, piece.descr, xd.descr, &beta, yd.descr, CUDA_R_32F, kCsrSpmmAlgorithm, &bytes));
        size = workspace_sizes_.emplace(key, bytes).first;
    }
    if (size->second > workspace_.bytes()) {
        // Stream-ordered: the old workspace is freed after the runs that used it.
        workspace_ = DeviceBuffer<char>(ctx_, size->second);
    }
    HALO_CUSPARSE_TRY(cusparseSpMM(
        ctx_.cusparse(), CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
        piece.descr, xd.descr, &beta, yd.descr, CUDA_R_32F, kCsrSpmmAlgorithm, workspace_.data()));
}

void CusparseCsr::scale_values(const float* row_scale, const float* col_scale)
{
    const cudaStream_t stream = ctx_.compute_stream();
    if (wide_) {
        scaled_values(stream, num_rows_, offsets64_.data(), columns64_.data(), row_scale, col_scale,
                      values_.data());
    } else if (offsets32_.size() != 0) {
        scaled_values(stream, num_rows_, offsets32_.data(), columns32_.data(), row_scale, col_scale,
                      values_.data());
    } else {
        scaled_values(stream, num_rows_, offsets64_.data(), columns32_.data(), row_scale, col_scale,
                      values_.data());
    }
}

void check_scaling(const Csr& a, const OperatorScaling& scaling)
{
    HALO_EXPECTS(scaling.row.empty() || static_cast<std::int64_t>(scaling.row.size()) == a.num_rows,
                 "a row scaling of ", scaling.row.size(), " entries for ", a.num_rows, " rows");
    HALO_EXPECTS(scaling.col.empty() || static_cast<std::int64_t>(scaling.col.size()) == a.num_cols,
                 "a column scaling of ", scaling.col.size(), " entries for ", a.num_cols,
                 " columns");
}

DeviceScaling upload_scaling(Context& ctx, const Csr& pattern, const OperatorScaling& scaling)
{
    check_scaling(pattern, scaling);
    DeviceScaling out;
    if (!scaling.row.empty()) {
        out.row = detail::upload(ctx, scaling.row);
    }
    if (!scaling.col.empty()) {
        out.col = detail::upload(ctx, scaling.col);
    }
    return out;
}

namespace {

template <typename Offset>
DeviceBuffer<float> make_scaled_values(Context& ctx, const Csr& pattern, const Offset* offsets,
                                       const std::int32_t* columns, const OperatorScaling& scaling)
{
    check_scaling(pattern, scaling);
    DeviceBuffer<float> values(ctx, static_cast<std::size_t>(pattern.nnz()));
    const auto row = detail::upload(ctx, scaling.row);
    const auto col = detail::upload(ctx, scaling.col);
    scaled_values(ctx.compute_stream(), pattern.num_rows, offsets, columns,
                  scaling.row.empty() ? nullptr : row.data(),
                  scaling.col.empty() ? nullptr : col.data(), values.data());
    // The scalings' device copies go with this scope: the values must be made by then.
    HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
    return values;
}

}  // namespace

DeviceBuffer<float> device_scaled_values(Context& ctx, const Csr& pattern,
                                         const std::int64_t* offsets, const std::int32_t* columns,
                                         const OperatorScaling& scaling)
{
    return make_scaled_values(ctx, pattern, offsets, columns, scaling);
}

DeviceBuffer<float> device_scaled_values(Context& ctx, const Csr& pattern,
                                         const std::int32_t* offsets, const std::int32_t* columns,
                                         const OperatorScaling& scaling)
{
    return make_scaled_values(ctx, pattern, offsets, columns, scaling);
}

// The int64 offsets and int32 columns of the upload that cuSPARSE does not read are freed once
// converted (unless kept): a transient of the setup, not counted.
MemoryReport CusparseCsr::memory() const
{
    MemoryReport r;
    r.row_pointers = static_cast<std::int64_t>(offsets32_.bytes() + offsets64_.bytes());
    for (const auto& [key, pieces] : ranges_) {
        for (const auto& piece : pieces) {
            r.row_pointers +=
                static_cast<std::int64_t>(piece->offsets32.bytes() + piece->offsets64.bytes());
        }
    }
    r.indices = static_cast<std::int64_t>(columns32_.bytes() + columns64_.bytes());
    r.values = static_cast<std::int64_t>(values_.bytes());
    r.workspace = static_cast<std::int64_t>(workspace_.bytes());
    r.nonzeros = static_cast<std::int64_t>(values_.size());
    return r;
}

}  // namespace halo::cuda::detail
