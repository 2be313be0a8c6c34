// A CSR operator on the device as cuSPARSE's generic API reads it, and cuSPARSE SpMM over row
// ranges of it: the vendor baseline (spmm/cusparse_spmm.cpp) and the unfused attention's
// aggregation (attention/attention_unfused.cpp), whose values are the scores it computes. Internal
// to halo_kernels.
//
// Choices:
// - Index types: cuSPARSE's generic API is given the same type for row offsets and columns, and
//   mixing 64-bit offsets with 32-bit columns is not a combination that cusparseSpMM documents,
//   so it is not relied upon. Columns stay 32-bit (a shard's columns fit in int32) and a run
//   goes to cuSPARSE in pieces of consecutive rows of at most 2^31 - 1 nonzeros each, with
//   32-bit offsets rebased to the piece: one piece below 2^31 nonzeros, two or more past it.
//   Widening the columns to int64 instead (64-bit descriptors) cost 4 more bytes per nonzero
//   and a conversion at setup: 8.7 GB more for R-MAT 26's 2.17B nonzeros. IndexWidth::bits64
//   still asks for the 64-bit descriptors.
// - Row ranges: cuSPARSE has no row-range argument, so each piece of a range [b, e) is its own
//   CSR descriptor: rows e - b, offsets indptr[b..e] - indptr[b] (the full offsets themselves
//   when b == 0 and they are 32-bit), columns and values starting at indptr[b], and C pointing at
//   row b of y. The descriptors are made on the range's first run and kept; rows outside the
//   range are never touched, and a range without nonzeros only zeroes its rows.
// - CUSPARSE_SPMM_CSR_ALG2 with row-major dense operands (CUSPARSE_ORDER_ROW): the CSR algorithm
//   meant for row-major B and C, deterministic from run to run (no atomics), so repeated runs and
//   the interior/boundary split give identical rows. The workspace of a (range, width, strides)
//   is sized on first use and only grows.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"
#include "halo/core/memory_report.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"

namespace halo::cuda::detail {

/// The SpMM algorithm of every CSR SpMM here (the header's choices).
constexpr cusparseSpMMAlg_t kCsrSpmmAlgorithm = CUSPARSE_SPMM_CSR_ALG2;

/// A dense descriptor destroyed at scope exit (made per call: the pointers change).
template <typename Descr = cusparseDnMatDescr_t>
struct DnMat {
    Descr descr = nullptr;
    DnMat() = default;
    DnMat(const DnMat&) = delete;
    DnMat& operator=(const DnMat&) = delete;
    ~DnMat()
    {
        if (descr != nullptr) {
            (void)cusparseDestroyDnMat(descr);
        }
    }
};

class CusparseCsr {
public:
    /// The most nonzeros of one 32-bit cuSPARSE descriptor (IndexWidth::small_pieces: 1000; a
    /// row longer than that is a piece of its own).
    static constexpr std::int64_t kMaxPieceNnz = 2147483647;
    static constexpr std::int64_t kSmallPieceNnz = 1000;

    /// Uploads the pattern of `a` (valid: the caller checked it) on the compute stream, without
    /// synchronizing, and allocates nnz values for the owner to fill before the first spmm().
    /// `keep_host_types`: also keep int64 offsets and int32 columns (the host types, which the
    /// owner's own kernels read) where cuSPARSE reads the other width.
    CusparseCsr(Context& ctx, const Csr& a, IndexWidth width, bool keep_host_types);
    ~CusparseCsr();
    CusparseCsr(const CusparseCsr&) = delete;
    CusparseCsr& operator=(const CusparseCsr&) = delete;

    bool wide() const noexcept { return wide_; }
    std::int64_t nnz() const noexcept { return static_cast<std::int64_t>(values_.size()); }
    /// The host copy of the row offsets.
    const std::vector<offset_t>& indptr() const noexcept { return indptr_; }
    /// The nnz values every spmm() reads.
    float* values() const noexcept { return values_.data(); }
    /// values[k] = row_scale[i] * col_scale[column k] for every nonzero k of row i (a null
    /// scaling counts as ones), on the compute stream: the values of a pattern made on the
    /// device (OperatorScaling).
    void scale_values(const float* row_scale, const float* col_scale);
    /// The number of cuSPARSE calls (pieces) of a run over all rows.
    std::int64_t pieces() const;
    /// The host-typed arrays: kept with keep_host_types, or where cuSPARSE reads them anyway
    /// (int64 offsets when wide or past kMaxPieceNnz nonzeros, int32 columns when not wide);
    /// null otherwise.
    const std::int64_t* offsets64() const noexcept { return offsets64_.data(); }
    const std::int32_t* columns32() const noexcept { return columns32_.data(); }

    /// y[rows] = A[rows] x (with `add`: y[rows] += A[rows] x, cuSPARSE's beta = 1) with the
    /// current values, asynchronous on the compute stream; x and y are device views with x.rows >=
    /// the operator's columns and y.cols == x.cols (the caller checks the operands). Width 0 or an
    /// empty range does nothing.
    void spmm(DenseView<const float> x, DenseView<float> y, RowRange rows, bool add = false);

    /// The offsets (with every range's rebased copy), columns, values and workspace held now.
    MemoryReport memory() const;

private:
    struct Piece;
    /// The pieces of `rows`, made on the range's first use and kept.
    const std::vector<std::unique_ptr<Piece>>& range_pieces(RowRange rows);
    /// The row ranges of at most max_piece_nnz_ nonzeros each that `rows` splits into.
    std::vector<RowRange> split(RowRange rows) const;
    void piece_spmm(const Piece& piece, DenseView<const float> x, DenseView<float> y, bool add);

    Context& ctx_;
    std::int64_t num_rows_ = 0;
    std::int64_t num_cols_ = 0;
    bool wide_ = false;
    std::int64_t max_piece_nnz_ = kMaxPieceNnz;
    std::vector<offset_t> indptr_;  // each range's first nonzero and nonzero count
    DeviceBuffer<std::int64_t> offsets64_;
    DeviceBuffer<std::int32_t> offsets32_;
    DeviceBuffer<std::int32_t> columns32_;
    DeviceBuffer<std::int64_t> columns64_;
    DeviceBuffer<float> values_;
    std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::unique_ptr<Piece>>> ranges_;
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>,
             std::size_t>
        workspace_sizes_;
    DeviceBuffer<char> workspace_;
};

/// `a` streamed by row blocks into cuSPARSE SpMM (Backend::make_streamed_spmm on the CUDA
/// backend; streamed_csr.cpp): a's arrays are page-locked in place (cudaHostRegister) for the
/// object's lifetime, each prefetched block's offsets, columns and (unless `scaling` factors them)
/// values are copied on a copy stream of its own into buffers allocated for the block, and the
/// block's SpMM (offsets rebased to int32 on the device, the values made there from the scalings
/// or as ones where not copied) waits for its copy on the compute stream. A block holds 12 bytes
/// per row and 8 per nonzero, freed stream-ordered after its SpMM; the scalings stay on the device
/// (4 bytes per entry).
/// With `scaled_input` and a column scaling, run() reads x with row j already multiplied by c_j
/// (StreamedSpmm::scale_input) and makes the values r_i alone: no gather of c_j per nonzero.
std::unique_ptr<StreamedSpmm> make_streamed_csr(Context& ctx, const Csr& a,
                                                const OperatorScaling* scaling,
                                                bool scaled_input = false);

/// Throws halo::LogicError unless each non-empty side of `scaling` has a's row or column count.
void check_scaling(const Csr& a, const OperatorScaling& scaling);

/// A pattern operator's scalings on the device, what the pattern-only kernels (MergePath,
/// row-split, Accel-GCN; cuda::ScaledForm) read instead of a values array; a side is empty (null
/// data) where it is ones.
struct DeviceScaling {
    DeviceBuffer<float> row;
    DeviceBuffer<float> col;
    std::size_t bytes() const { return row.bytes() + col.bytes(); }
};
/// Checks `scaling` against `pattern` (check_scaling) and uploads its non-empty sides.
DeviceScaling upload_scaling(Context& ctx, const Csr& pattern, const OperatorScaling& scaling);

/// The values scaling.row[i] * scaling.col[j] of the nonzeros (i, j) of `pattern`, made on the
/// device from its offsets and columns already there (the device copies of pattern.indptr and
/// pattern.indices): checks the scalings against `pattern`, uploads them, makes the values on the
/// compute stream and waits, so that only the values stay (the exact kernels' scaled plans: the
/// host never builds the values array, Backend::make_scaled_spmm_plan).
DeviceBuffer<float> device_scaled_values(Context& ctx, const Csr& pattern,
                                         const std::int64_t* offsets, const std::int32_t* columns,
                                         const OperatorScaling& scaling);
DeviceBuffer<float> device_scaled_values(Context& ctx, const Csr& pattern,
                                         const std::int32_t* offsets, const std::int32_t* columns,
                                         const OperatorScaling& scaling);

/// out[i] = in[i] - base for i in [0, count): CSR row offsets of a row range rebased to start at
/// zero, also narrowing int64 offsets to int32 (the caller guarantees that they fit). Launchers
/// (cusparse_csr.cu): asynchronous on `stream`, the launch checked, nothing for count 0.
void shift_offsets(cudaStream_t stream, const std::int64_t* in, std::int64_t* out,
                   std::int64_t count, std::int64_t base);
void shift_offsets(cudaStream_t stream, const std::int64_t* in, std::int32_t* out,
                   std::int64_t count, std::int64_t base);
void shift_offsets(cudaStream_t stream, const std::int32_t* in, std::int32_t* out,
                   std::int64_t count, std::int64_t base);
/// out[i] = in[i], widening int32 column indices to int64.
void widen_indices(cudaStream_t stream, const std::int32_t* in, std::int64_t* out,
                   std::int64_t count);
/// values[k] = row_scale[i] * col_scale[columns[k]] for the nonzeros k of rows i < rows (offsets
/// from zero, `rows` + 1 of them); a null scaling counts as ones.
void scaled_values(cudaStream_t stream, std::int64_t rows, const std::int32_t* offsets,
                   const std::int32_t* columns, const float* row_scale, const float* col_scale,
                   float* values);
void scaled_values(cudaStream_t stream, std::int64_t rows, const std::int64_t* offsets,
                   const std::int32_t* columns, const float* row_scale, const float* col_scale,
                   float* values);
void scaled_values(cudaStream_t stream, std::int64_t rows, const std::int64_t* offsets,
                   const std::int64_t* columns, const float* row_scale, const float* col_scale,
                   float* values);
/// data[i] = value for i in [0, count).
void fill(cudaStream_t stream, float* data, std::int64_t count, float value);
/// Row i of the rows x cols matrix at `data` (leading dimension ld) times scale[i], in place.
void scale_rows(cudaStream_t stream, float* data, std::int64_t rows, std::int64_t cols,
                std::int64_t ld, const float* scale);

}  // namespace halo::cuda::detail
