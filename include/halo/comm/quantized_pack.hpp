// Int8 packing of feature rows on the GPU, for sending halo rows as int8 (a future
// `--exchange int8`): each row gets its own scale and zero point (halo::int8_params of the row's
// min and max) and is stored as one record of halo::int8_record_bytes(cols) bytes (the quantized
// values, zero padding to a multiple of 4, the float scale, the int32 zero point), so a run of
// rows is one contiguous message of about a quarter of the fp32 bytes. The rounding is that of
// halo/quantize/quantize.hpp: the records are byte-identical to halo::pack_rows_int8_reference's,
// and unpacking matches halo::unpack_rows_int8_reference bit for bit. Each unpacked value is within
// half its row's scale of the packed one. Host-only code may include this header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "halo/core/dense.hpp"

namespace halo::cuda {

/// Packs rows rows[0, count) of the device matrix x (row r when rows is null) into `out`
/// (device, count * int8_record_bytes(x.cols) bytes, 4-byte aligned) on `stream`. A row holding a
/// NaN or an infinity gets a NaN scale (it unpacks to NaN). Checks the launch; asynchronous.
void pack_rows_int8(cudaStream_t stream, DenseView<const float> x, const std::int32_t* rows,
                    std::int64_t count, std::uint8_t* out);

/// Unpacks y.rows records from `in` (device, 4-byte aligned) into rows [0, y.rows) of the device
/// matrix y (its other columns and padding untouched). Checks the launch; asynchronous.
void unpack_rows_int8(cudaStream_t stream, const std::uint8_t* in, DenseView<float> y);

}  // namespace halo::cuda
