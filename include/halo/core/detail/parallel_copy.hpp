// dst[0, count) = src[0, count) in pieces across the OpenMP threads: one thread does not reach
// host memory bandwidth. Used where the engine and core copy large host arrays.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace halo::detail {

template <typename T>
void parallel_copy(const T* src, std::int64_t count, T* dst)
{
    constexpr std::int64_t piece = std::int64_t{1} << 18;
#pragma omp parallel for schedule(static)
    for (std::int64_t off = 0; off < count; off += piece) {
        std::memcpy(dst + off, src + off,
                    static_cast<std::size_t>(std::min(piece, count - off)) * sizeof(T));
    }
}

}  // namespace halo::detail
