// Counter-based random numbers for seeded model weights and input features: a value is a pure
// function of (seed, stream, index), so it does not depend on the rank count, the thread count,
// the order of evaluation or whether the host or a CUDA device computes it (integer arithmetic
// and exact float steps only: the device gives the same bits as the host).
#pragma once

#include <cstdint>

#include "halo/core/detail/host_device.hpp"

namespace halo::detail {

/// splitmix64's finalizer: a bijective 64-bit mix with good avalanche.
HALO_HOST_DEVICE inline std::uint64_t mix64(std::uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/// Uniform float in [-1, 1) for (seed, stream, index).
HALO_HOST_DEVICE inline float uniform_pm1(std::uint64_t seed, std::uint64_t stream,
                                          std::uint64_t index)
{
    const auto bits = mix64(mix64(mix64(seed) ^ stream) ^ index);
    // 24 high bits -> [0, 1) exactly representable in float, then to [-1, 1): both steps are
    // exact (k / 2^24 and (k - 2^23) / 2^23 are floats), so a fused multiply-add gives the same.
    const float unit = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
    return 2.0f * unit - 1.0f;
}

/// The stream of seeded input features (halo::random_node_features), apart from the model's
/// weight streams.
inline constexpr std::uint64_t feature_stream = std::uint64_t{1} << 40;

/// Element j of the seeded input feature row of node `global_id` in a matrix `dim` wide.
HALO_HOST_DEVICE inline float random_feature(std::uint64_t seed, std::int64_t global_id,
                                             std::int64_t dim, std::int64_t j)
{
    const auto base = static_cast<std::uint64_t>(global_id) * static_cast<std::uint64_t>(dim);
    return uniform_pm1(seed, feature_stream, base + static_cast<std::uint64_t>(j));
}

}  // namespace halo::detail
