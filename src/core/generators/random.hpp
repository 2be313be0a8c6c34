// Counter-based random bits for the graph generators (private to src/generators).
//
// Draw `i` of stream `s` is a keyed bijective hash of the counter (s << kStreamBits) | i, so a
// draw depends only on (seed, stream, index): edge e reads stream e, and the output is the same
// for any thread count or loop schedule. For a fixed key the hash is a bijection of the 64-bit
// counter (xor, odd multiplies and xor-shifts are each invertible), so no two draws of one seed
// collide. Different seeds give different keys, and the mixer (splitmix64's finalizer, applied
// twice with a key between) decorrelates neighbouring counters and keys.
#pragma once

#include <cstdint>

namespace halo::detail {

/// splitmix64's output function (Stafford's Mix13): a bijection of 64-bit words with full
/// avalanche.
constexpr std::uint64_t mix64(std::uint64_t z) noexcept
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/// Draws per stream; stream ids must stay below 2^(64 - kStreamBits).
inline constexpr int kStreamBits = 6;
inline constexpr std::uint64_t kMaxStreams = std::uint64_t{1} << (64 - kStreamBits);

/// The key of one generator run. `domain` separates the uses of one user seed (edge draws,
/// relabeling) so that they are not the same numbers.
struct RngKey {
    std::uint64_t k0 = 0;
    std::uint64_t k1 = 0;

    constexpr RngKey(std::uint64_t seed, std::uint64_t domain) noexcept
        : k0(mix64(seed ^ mix64(domain + 0x9e3779b97f4a7c15ULL))),
          k1(mix64(k0 + 0x9e3779b97f4a7c15ULL))
    {
    }

    /// The random word for one counter value.
    constexpr std::uint64_t bits(std::uint64_t counter) const noexcept
    {
        return mix64(mix64(counter ^ k0) + k1);
    }
};

/// The draws of one stream, in order. Streams hold 2^kStreamBits draws; a stream that needs more
/// (only a run of improbable rejections can) continues into the next stream's counters, which
/// keeps the output deterministic.
class CounterStream {
public:
    constexpr CounterStream(const RngKey& key, std::uint64_t stream) noexcept
        : key_(key), counter_(stream << kStreamBits)
    {
    }

    constexpr std::uint64_t next() noexcept { return key_.bits(counter_++); }

private:
    RngKey key_;
    std::uint64_t counter_;
};

// __extension__ keeps -Wpedantic quiet about the GCC/Clang 128-bit integer.
__extension__ using uint128 = unsigned __int128;

/// Unbiased integer in [0, bound) for bound >= 1 (Lemire, "Fast random integer generation in an
/// interval", 2019): the high word of a 128-bit product, rejecting the few low words that would
/// favour some results.
inline std::uint64_t bounded(CounterStream& stream, std::uint64_t bound) noexcept
{
    uint128 product = static_cast<uint128>(stream.next()) * bound;
    auto low = static_cast<std::uint64_t>(product);
    if (low < bound) {
        const std::uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
        while (low < threshold) {
            product = static_cast<uint128>(stream.next()) * bound;
            low = static_cast<std::uint64_t>(product);
        }
    }
    return static_cast<std::uint64_t>(product >> 64);
}

}  // namespace halo::detail
