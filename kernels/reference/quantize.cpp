// INT8 feature quantization on the host (include/halo/quantize/quantize.hpp): the offline
// per-column quantizer, the checks of stored parameters, and the CPU reference of the per-row
// packing.
#include "halo/quantize/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "halo/core/error.hpp"

namespace halo {
namespace {

void check_finite(float v, std::int64_t i, std::int64_t j, const char* what)
{
    if (!std::isfinite(v)) {
        HALO_THROW(InputError, what, ": feature (row ", i, ", column ", j, ") is ", v,
                   "; int8 quantization needs finite values");
    }
}

}  // namespace

QuantizedMatrix quantize_columns(DenseView<const float> x, const char* what)
{
    HALO_EXPECTS(x.rows >= 0 && x.cols >= 0 && x.ld >= x.cols, "matrix of ", x.rows, " x ", x.cols,
                 " with leading dimension ", x.ld);
    QuantizedMatrix q;
    q.rows = x.rows;
    q.cols = x.cols;
    std::vector<float> lo(static_cast<std::size_t>(x.cols), std::numeric_limits<float>::max());
    std::vector<float> hi(static_cast<std::size_t>(x.cols), std::numeric_limits<float>::lowest());
    for (std::int64_t i = 0; i < x.rows; ++i) {
        for (std::int64_t j = 0; j < x.cols; ++j) {
            const float v = x(i, j);
            check_finite(v, i, j, what);
            lo[j] = std::min(lo[j], v);
            hi[j] = std::max(hi[j], v);
        }
    }
    q.scale.resize(static_cast<std::size_t>(x.cols));
    q.zero_point.resize(static_cast<std::size_t>(x.cols));
    std::vector<QuantParams> params(static_cast<std::size_t>(x.cols));
    for (std::int64_t j = 0; j < x.cols; ++j) {
        // A matrix without rows has no range: the all-zero parameters.
        params[j] = x.rows > 0 ? int8_params(lo[j], hi[j]) : int8_params(0.0f, 0.0f);
        q.scale[j] = params[j].scale;
        q.zero_point[j] = params[j].zero_point;
    }
    q.data.resize(static_cast<std::size_t>(x.rows * x.cols));
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < x.rows; ++i) {
        for (std::int64_t j = 0; j < x.cols; ++j) {
            q.data[i * x.cols + j] = quantize_int8(x(i, j), params[j]);
        }
    }
    return q;
}

void dequantize(const QuantizedView& q, DenseView<float> out)
{
    HALO_EXPECTS(out.rows == q.rows && out.cols == q.cols, "output ", out.rows, " x ", out.cols,
                 " for a quantized matrix of ", q.rows, " x ", q.cols);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < q.rows; ++i) {
        for (std::int64_t j = 0; j < q.cols; ++j) {
            out(i, j) = dequantize_int8(q.data[i * q.ld + j], q.params(j));
        }
    }
}

void validate(const QuantizedView& q, const char* what)
{
    if (q.rows < 0 || q.cols < 0 || q.ld < q.cols) {
        HALO_THROW(InputError, what, ": quantized matrix of ", q.rows, " x ", q.cols,
                   " with leading dimension ", q.ld);
    }
    if (q.cols == 0) {
        return;
    }
    if (q.scale == nullptr) {
        HALO_THROW(InputError, what, ": quantized matrix of ", q.cols, " columns has no scales");
    }
    if (q.zero_point == nullptr) {
        HALO_THROW(InputError, what, ": quantized matrix of ", q.cols,
                   " columns has no zero points");
    }
    if (q.rows > 0 && q.data == nullptr) {
        HALO_THROW(InputError, what, ": quantized matrix of ", q.rows, " x ", q.cols,
                   " has no data");
    }
    for (std::int64_t j = 0; j < q.cols; ++j) {
        const float s = q.scale[j];
        if (!std::isfinite(s) || !(s > 0.0f)) {
            HALO_THROW(InputError, what, ": scale of column ", j, " is ", s,
                       "; scales must be finite and positive");
        }
        const std::int32_t z = q.zero_point[j];
        if (z < kInt8Min || z > kInt8Max) {
            HALO_THROW(InputError, what, ": zero point of column ", j, " is ", z,
                       ", outside the int8 range [", kInt8Min, ", ", kInt8Max, "]");
        }
    }
}

void validate(const QuantizedMatrix& q, const char* what)
{
    if (q.rows < 0 || q.cols < 0) {
        HALO_THROW(InputError, what, ": quantized matrix of ", q.rows, " x ", q.cols);
    }
    const auto expect = static_cast<std::size_t>(q.rows * q.cols);
    if (q.data.size() != expect) {
        HALO_THROW(InputError, what, ": quantized data has ", q.data.size(), " values, expected ",
                   q.rows, " x ", q.cols, " = ", expect);
    }
    if (q.scale.size() != static_cast<std::size_t>(q.cols)) {
        HALO_THROW(InputError, what, ": ", q.scale.size(), " scales for ", q.cols, " columns");
    }
    if (q.zero_point.size() != static_cast<std::size_t>(q.cols)) {
        HALO_THROW(InputError, what, ": ", q.zero_point.size(), " zero points for ", q.cols,
                   " columns");
    }
    validate(q.view(), what);
}

void pack_rows_int8_reference(DenseView<const float> x, const std::int32_t* rows,
                              std::int64_t count, std::uint8_t* out)
{
    HALO_EXPECTS(count >= 0 && x.cols >= 0, "pack of ", count, " rows of ", x.cols, " columns");
    const std::int64_t record = int8_record_bytes(x.cols);
    const std::int64_t params_at = record - 8;
    for (std::int64_t r = 0; r < count; ++r) {
        const std::int64_t i = rows != nullptr ? rows[r] : r;
        HALO_EXPECTS(i >= 0 && i < x.rows, "packed row ", i, " outside [0, ", x.rows, ")");
        // The row's min and max over finite values; any other value poisons the row's scale.
        float lo = std::numeric_limits<float>::max();
        float hi = std::numeric_limits<float>::lowest();
        bool finite = true;
        for (std::int64_t j = 0; j < x.cols; ++j) {
            const float v = x(i, j);
            finite = finite && std::isfinite(v);
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        const QuantParams p = x.cols == 0 ? int8_params(0.0f, 0.0f)
                              : finite    ? int8_params(lo, hi)
                                          : int8_params(NAN, NAN);
        std::uint8_t* rec = out + r * record;
        std::memset(rec, 0, static_cast<std::size_t>(record));
        for (std::int64_t j = 0; j < x.cols; ++j) {
            const std::int8_t q = quantize_int8(x(i, j), p);
            std::memcpy(rec + j, &q, 1);
        }
        std::memcpy(rec + params_at, &p.scale, sizeof(float));
        std::memcpy(rec + params_at + 4, &p.zero_point, sizeof(std::int32_t));
    }
}

void unpack_rows_int8_reference(const std::uint8_t* in, DenseView<float> y)
{
    const std::int64_t record = int8_record_bytes(y.cols);
    const std::int64_t params_at = record - 8;
    for (std::int64_t r = 0; r < y.rows; ++r) {
        const std::uint8_t* rec = in + r * record;
        QuantParams p;
        std::memcpy(&p.scale, rec + params_at, sizeof(float));
        std::memcpy(&p.zero_point, rec + params_at + 4, sizeof(std::int32_t));
        for (std::int64_t j = 0; j < y.cols; ++j) {
            std::int8_t q = 0;
            std::memcpy(&q, rec + j, 1);
            y(r, j) = dequantize_int8(q, p);
        }
    }
}

}  // namespace halo
