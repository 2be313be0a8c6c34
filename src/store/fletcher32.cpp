// HDF5's Fletcher32 checksum (chunk_io.hpp): exact sums in SIMD lanes, AVX2 where the CPU has it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "chunk_io.hpp"

namespace halo::store {

namespace {

// HDF5's Fletcher32 folds both sums to 16 bits every 360 words, which keeps them below 2^32, and
// folding keeps a sum's value mod 65535 and whether it is zero. So HDF5's result is a function
// of the exact sums alone: each folded sum is 0 when the exact sum is 0 (all words zero) and
// otherwise the exact sum mod 65535 in [1, 65535]. With
//     A = sum of w_k,   B = sum of the prefix sums of the words = sum of (n - k) w_k,
// these are computed here mod 65535 with any block structure: L lanes of 32-bit sums (lane j
// takes words k = j mod L), a[j] += w and b[j] += a[j] per step of L words, reduced every
// block_steps steps, before b can exceed 2^32 (block_steps (block_steps + 1) / 2 * 65535 < 2^32).
// Over a block of m steps (n = L m words), sum of (n - k) w_k = L * sum b[j] - sum j a[j].
constexpr std::uint64_t fletcher_modulus = 65535;
constexpr std::size_t block_steps = 256;

std::uint32_t canonical_sum(std::uint64_t residue, bool nonzero)
{
    return !nonzero ? 0 : residue == 0 ? 0xffff : static_cast<std::uint32_t>(residue);
}

// Vectors of L words and of their L 32-bit sums (GCC/Clang vector extensions: SIMD on any target).
typedef std::uint16_t Words8 __attribute__((vector_size(16)));
typedef std::uint32_t Sums8 __attribute__((vector_size(32)));
typedef std::uint16_t Words16 __attribute__((vector_size(32)));
typedef std::uint32_t Sums16 __attribute__((vector_size(64)));

template <typename Words, typename Sums>
[[gnu::always_inline]] inline FletcherSums fletcher_lanes(const unsigned char* data,
                                                          std::size_t size)
{
    constexpr int L = sizeof(Words) / sizeof(std::uint16_t);
    const std::size_t words = size / 2;
    FletcherSums out;
    std::size_t k = 0;
    while (words - k >= static_cast<std::size_t>(L)) {
        const std::size_t steps = std::min(block_steps, (words - k) / L);
        Sums a = {};
        Sums b = {};
        Words any = {};
        const unsigned char* p = data + 2 * k;
        for (std::size_t q = 0; q < steps; ++q) {
            Words w;
            std::memcpy(&w, p + 2 * L * q, sizeof w);
            w = static_cast<Words>((w << 8) | (w >> 8));  // big-endian words
            any |= w;
            a += __builtin_convertvector(w, Sums);
            b += a;
        }
        FletcherSums block;
        std::uint64_t sum_lane_b = 0;
        std::uint64_t weighted_a = 0;
        for (int j = 0; j < L; ++j) {
            block.a += a[j];
            sum_lane_b += b[j];
            weighted_a += static_cast<std::uint64_t>(j) * a[j];
            block.nonzero = block.nonzero || any[j] != 0;
        }
        // Exact (the true value is non-negative and below 2^64): sum of (n - k) w_k.
        block.b = (std::uint64_t{L} * sum_lane_b - weighted_a) % fletcher_modulus;
        block.a %= fletcher_modulus;
        block.words = steps * L;
        out = combine(out, block);
        k += block.words;
    }
    auto add = [&out](std::uint32_t w) {
        out.nonzero = out.nonzero || w != 0;
        out.a = (out.a + w) % fletcher_modulus;
        out.b = (out.b + out.a) % fletcher_modulus;
        ++out.words;
    };
    for (; k < words; ++k) {
        add((std::uint32_t{data[2 * k]} << 8) | data[2 * k + 1]);
    }
    if (size % 2 != 0) {
        add(std::uint32_t{data[size - 1]} << 8);  // an odd last byte is a word's high byte
    }
    return out;
}

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx2")]] FletcherSums fletcher_sums_avx2(const unsigned char* data, std::size_t size)
{
    return fletcher_lanes<Words8, Sums8>(data, size);
}
#endif

}  // namespace

namespace detail {

// 16 lanes suit SSE2 (and other targets' 128-bit vectors); with AVX2, 8 lanes of 256-bit sums
// run about 3x faster than 16 lanes, which GCC splits badly.
FletcherSums fletcher_sums_portable(const unsigned char* data, std::size_t size)
{
    return fletcher_lanes<Words16, Sums16>(data, size);
}

}  // namespace detail

FletcherSums fletcher_sums(const unsigned char* data, std::size_t size)
{
#if defined(__x86_64__) && defined(__GNUC__)
    static const bool avx2 = __builtin_cpu_supports("avx2");
    if (avx2) {
        return fletcher_sums_avx2(data, size);
    }
#endif
    return detail::fletcher_sums_portable(data, size);
}

FletcherSums combine(const FletcherSums& first, const FletcherSums& then)
{
    // Each word of `first` is followed by then.words more: its weight grows by that much.
    return {(first.a + then.a) % fletcher_modulus,
            (first.b + then.words % fletcher_modulus * first.a + then.b) % fletcher_modulus,
            first.words + then.words, first.nonzero || then.nonzero};
}

std::uint32_t fletcher32_of(const FletcherSums& sums)
{
    return (canonical_sum(sums.b, sums.nonzero) << 16) | canonical_sum(sums.a, sums.nonzero);
}

std::uint32_t fletcher32(const unsigned char* data, std::size_t size)
{
    return fletcher32_of(fletcher_sums(data, size));
}

}  // namespace halo::store
