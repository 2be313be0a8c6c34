// The launchers of the row-split SpMM kernels (rowsplit.cu), called by their plan
// (rowsplit.cpp): plain host declarations, so that the plan is host code and the .cu file
// holds only kernels and their launch. Private to halo_kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/spmm/rowsplit_layout.hpp"
#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"

namespace halo::cuda::rowsplit_kernels {

// The chunked variant's long rows (rowsplit.cu's header comment): rows, ascending; units
// [first_unit[k], first_unit[k + 1]) of long row k, each of lengths[k] nonzeros but the last
// (rowsplit::unit_length); unit_row[u] = k; the run's units are [unit_begin, unit_end) (those of
// its row range).
struct Chunks {
    const std::int64_t* rows = nullptr;
    const std::int64_t* lengths = nullptr;
    const std::int32_t* first_unit = nullptr;
    const std::int32_t* unit_row = nullptr;
    std::int64_t unit_begin = 0;
    std::int64_t unit_end = 0;
    std::int64_t length = 0;   // nonzeros per unit; rows with more are long
    float* partial = nullptr;  // unit u's sums at partial + u * ldp (ldp a multiple of 4)
    std::int64_t ldp = 0;
    unsigned int* arrivals = nullptr;  // per long row: units done in this launch (0 between)
};

// One launch over a row range: the operator's device arrays (one of the offsets set), the
// operands and the lane layout (rowsplit::make_layout).
struct Launch {
    const std::int32_t* offsets32 = nullptr;
    const std::int64_t* offsets64 = nullptr;
    const std::int32_t* columns = nullptr;
    const float* values = nullptr;     // null: pattern matrix
    const float* row_scale = nullptr;  // null, or each row sum scaled by row_scale[row]
    const float* col_scale = nullptr;  // null, or x's row j scaled by col_scale[j]
    RowRange rows{};
    FeatureView x{};
    DenseView<float> y{};
    bool add = false;  // y += the sums instead of y = the sums
    rowsplit::Layout layout{};
};

/// The plain kernel, or the chunked one when `chunks` is not null, on `stream`, the launch
/// checked.
void launch_spmm(cudaStream_t stream, const Launch& launch, const Chunks* chunks);

}  // namespace halo::cuda::rowsplit_kernels
