// Counter-based random numbers for seeded model weights and input features: a value is a pure
// function of (seed, stream, index), so it does not depend on the rank count, the thread count or
// the order of evaluation.
#pragma once

#include <cstdint>

namespace halo::detail {

/// splitmix64's finalizer: a bijective 64-bit mix with good avalanche.
inline std::uint64_t mix64(std::uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/// Uniform float in [-1, 1) for (seed, stream, index).
inline float uniform_pm1(std::uint64_t seed, std::uint64_t stream, std::uint64_t index)
{
    const auto bits = mix64(mix64(mix64(seed) ^ stream) ^ index);
    // 24 high bits -> [0, 1) exactly representable in float, then to [-1, 1).
    const float unit = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
    return 2.0f * unit - 1.0f;
}

}  // namespace halo::detail
