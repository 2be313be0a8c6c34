#include "halo/core/detail/resident_memory.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>

namespace halo::detail {

namespace {

// Below this, faulting the pages on one thread costs less than starting the threads.
constexpr std::size_t min_bytes = std::size_t{4} << 20;

}  // namespace

void populate_pages(void* data, std::size_t bytes)
{
    // Whole pages inside the range (the allocation's first and last page may be shared).
    constexpr std::uintptr_t page = 4096;
    const auto begin = (reinterpret_cast<std::uintptr_t>(data) + page - 1) & ~(page - 1);
    const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) & ~(page - 1);
    if (bytes < min_bytes || end <= begin) {
        return;
    }
    // The value of MADV_POPULATE_WRITE in Linux's uapi; older C libraries do not define it.
    constexpr int populate_write = 23;
    static std::atomic<bool> unsupported{false};
    // Pieces of 32 MiB, several per thread so that a slow one evens out.
    constexpr std::uintptr_t piece = std::uintptr_t{32} << 20;
    const auto pieces = static_cast<std::int64_t>((end - begin + piece - 1) / piece);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t k = 0; k < pieces; ++k) {
        if (unsupported.load(std::memory_order_relaxed)) {
            continue;
        }
        const auto first = begin + static_cast<std::uintptr_t>(k) * piece;
        const auto length = std::min(piece, end - first);
        if (::madvise(reinterpret_cast<void*>(first), length, populate_write) != 0 &&
            errno == EINVAL) {
            unsupported.store(true, std::memory_order_relaxed);
        }
    }
}

}  // namespace halo::detail
