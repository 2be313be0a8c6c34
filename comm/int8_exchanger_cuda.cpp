// The CUDA int8 codec: the row packing kernels of comm/quantized_pack.cu on the Context's compute
// stream, records in the Context's pool. The stream ordering with the inner device exchanger is
// the exchanger's own (halo/comm/nccl_exchanger.hpp): its start() orders the transfers after the
// compute stream's earlier work (the pack), its finish() makes the compute stream wait for them
// (so the unpack reads received records).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "device_exchange.hpp"
#include "halo/comm/int8_exchanger.hpp"
#include "halo/comm/quantized_pack.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo::cuda {
namespace {

class CudaInt8Codec final : public Int8Codec {
public:
    explicit CudaInt8Codec(Context& ctx) : ctx_(ctx)
    {
        const detail::DeviceGuard guard(ctx_.device());
        HALO_CUDA_TRY(cudaEventCreateWithFlags(&scales_ready_, cudaEventDisableTiming));
    }

    ~CudaInt8Codec() override
    {
        if (scales_ready_ != nullptr) {
            try {
                const detail::DeviceGuard guard(ctx_.device());
                // The pinned scales may still be the target of a copy.
                static_cast<void>(cudaEventSynchronize(scales_ready_));
                static_cast<void>(cudaEventDestroy(scales_ready_));
            } catch (...) {  // a destructor must not throw; the device could not be selected
            }
        }
    }

    CudaInt8Codec(const CudaInt8Codec&) = delete;
    CudaInt8Codec& operator=(const CudaInt8Codec&) = delete;

    void prepare(const std::vector<std::int32_t>& rows, std::int64_t record_rows,
                 std::int64_t max_record_words, std::shared_ptr<float> memory) override
    {
        HALO_EXPECTS(record_rows >= static_cast<std::int64_t>(rows.size()) && max_record_words >= 2,
                     "records of ", record_rows, " x ", max_record_words, " words for ",
                     rows.size(), " packed rows");
        const detail::DeviceGuard guard(ctx_.device());
        count_ = static_cast<std::int64_t>(rows.size());
        rows_ = DeviceBuffer<std::int32_t>(ctx_, rows.size());
        records_ = memory ? std::move(memory)
                          : detail::shared_floats(ctx_, record_rows * max_record_words);
        scales_ = PinnedBuffer<float>(rows.size());
        if (count_ > 0) {
            HALO_CUDA_TRY(cudaMemcpyAsync(rows_.data(), rows.data(), rows_.bytes(),
                                          cudaMemcpyHostToDevice, ctx_.compute_stream()));
            // `rows` may go away on return.
            HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream()));
        }
    }

    float* records() const noexcept override { return records_.get(); }

    void pack(DenseView<const float> x) override
    {
        packed_ = false;
        if (count_ == 0) {
            return;
        }
        // A host matrix would fault inside the kernel; name it here instead.
        detail::check_device_matrix(
            DenseView<float>{const_cast<float*>(x.data), x.rows, x.cols, x.ld}, x.rows, 0, x.cols,
            ctx_.device());
        const detail::DeviceGuard guard(ctx_.device());
        const cudaStream_t stream = ctx_.compute_stream();
        auto* bytes = reinterpret_cast<std::uint8_t*>(records_.get());
        pack_rows_int8(stream, x, rows_.data(), count_, bytes);
        // Each record's scale (NaN for a row that is not finite) to the host, one strided copy.
        const auto record = static_cast<std::size_t>(int8_record_bytes(x.cols));
        HALO_CUDA_TRY(cudaMemcpy2DAsync(scales_.data(), sizeof(float), bytes + record - 8, record,
                                        sizeof(float), static_cast<std::size_t>(count_),
                                        cudaMemcpyDeviceToHost, stream));
        HALO_CUDA_TRY(cudaEventRecord(scales_ready_, stream));
        packed_ = true;
    }

    void unpack(std::int64_t first, DenseView<float> y) override
    {
        if (y.rows == 0) {
            return;
        }
        const detail::DeviceGuard guard(ctx_.device());
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(records_.get());
        unpack_rows_int8(ctx_.compute_stream(), bytes + first * int8_record_bytes(y.cols), y);
    }

    std::int64_t first_non_finite() override
    {
        if (!packed_) {
            return -1;
        }
        {
            const detail::DeviceGuard guard(ctx_.device());
            HALO_CUDA_TRY(cudaEventSynchronize(scales_ready_));
        }
        for (std::int64_t k = 0; k < count_; ++k) {
            if (!std::isfinite(scales_.data()[k])) {
                return k;
            }
        }
        return -1;
    }

private:
    Context& ctx_;
    std::int64_t count_ = 0;
    DeviceBuffer<std::int32_t> rows_;
    std::shared_ptr<float> records_;  // the inner exchanger's memory, or a DeviceBuffer's
    PinnedBuffer<float> scales_;
    cudaEvent_t scales_ready_ = nullptr;
    bool packed_ = false;
};

}  // namespace

std::unique_ptr<Int8Codec> make_int8_codec(Context& ctx)
{
    return std::make_unique<CudaInt8Codec>(ctx);
}

}  // namespace halo::cuda
