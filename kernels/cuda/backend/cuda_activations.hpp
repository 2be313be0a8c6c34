// 16-bit activations in fp32 device memory (docs/KERNELS.md "16-bit activations"): the CUDA
// backend's Backend::round_activations and take_activation_overflow. Each store is one kernel on
// the compute stream that rounds every element as halo::round_feature does and records the first
// element the type stores as infinity in a small device record, so no store synchronizes and the
// stores can be recorded in a CUDA graph; the engine reads the record once per layer (or after a
// replay). Internal to halo_kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>

#include "halo/core/dense.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/feature_view.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo::cuda::detail {

struct OverflowRecord;  // cuda_overflow.cuh

class ActivationStores {
public:
    explicit ActivationStores(Context& ctx) : ctx_(ctx) {}

    /// Rounds y (a device view) in place to `type` (fp32: nothing) on the compute stream, and
    /// records its first out-of-range element tagged `store` unless an earlier call since the
    /// last take() recorded one. The record is allocated on the first 16-bit call, which must
    /// not be in a capture (the engine's first store, the input's, never is): LogicError there.
    void round(DenseView<float> y, FeatureType type, std::int32_t store);
    /// The record's overflow, if any, after the work issued so far on the compute stream (a
    /// synchronization); clears it. nullopt without a synchronization where nothing was rounded.
    std::optional<ActivationOverflow> take();
    /// The device record, allocated (and zeroed on the compute stream) on the first call, which
    /// must not be in a capture: for the other kernels that store 16-bit activations
    /// (cuda_features.hpp), which record into it with its conventions (cuda_overflow.cuh).
    OverflowRecord* record();
    Context& context() const noexcept { return ctx_; }

private:
    Context& ctx_;
    DeviceBuffer<std::uint64_t> record_;  // detail's OverflowRecord, zero when empty
};

/// The part of the CUDA backend that stores 16-bit activations (CudaBackend derives from it):
/// Backend's round_activations with the range check on the device, reported by
/// take_activation_overflow(); and matrices stored in 16 bits (stores_16bit: gemm_features,
/// store_features, widen_features; cuda_features.cpp), range checked into the same record.
class ActivationStoringBackend : public Backend {
public:
    explicit ActivationStoringBackend(Context& ctx) : stores_(ctx) {}

    bool stores_activations(FeatureType) const override { return true; }
    std::optional<ActivationOverflow> round_activations(DenseView<float> y, FeatureType type,
                                                        std::int32_t store) override
    {
        stores_.round(y, type, store);
        return std::nullopt;  // recorded on the device
    }
    std::optional<ActivationOverflow> take_activation_overflow() override { return stores_.take(); }

    bool stores_16bit() const override { return true; }
    /// Returns nullopt: a 16-bit c's range check is recorded on the device.
    std::optional<ActivationOverflow> gemm_features(FeatureView a, FeatureView b,
                                                    MutableFeatureView c, std::int32_t store,
                                                    float beta) override;
    /// Returns nullopt: the range check is recorded on the device.
    std::optional<ActivationOverflow> store_features(DenseView<const float> src,
                                                     const float* bias, Activation act,
                                                     MutableFeatureView dst,
                                                     std::int32_t store) override;
    void widen_features(FeatureView src, DenseView<float> dst) override;

private:
    ActivationStores stores_;
};

}  // namespace halo::cuda::detail
