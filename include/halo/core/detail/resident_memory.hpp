// Fresh host memory made resident on every core before it is written: std::vector's zero-fill
// of a new array otherwise takes a page fault per 4 KiB page on one thread. Used by the dataset
// reader (src/store), the engine's host operators (src/core/operators.cpp), the graph generators
// and the CSR build (src/core/generators, src/core/graph/build_csr.cpp).
#pragma once

#include <cstddef>
#include <vector>

namespace halo::detail {

/// Makes the pages of [data, data + bytes), memory just allocated and not yet written, resident
/// on every core (madvise MADV_POPULATE_WRITE per thread, in 32 MiB pieces). Fresh memory
/// otherwise takes a page fault per 4 KiB page on its first write, and the zero-filling of a new
/// std::vector takes them all on one thread: 0.9 GB/s on the dev VM, 1.7 GB/s on the GPU
/// machine. Huge pages (MADV_HUGEPAGE) are not asked for: on the dev VM, which hands freed
/// memory back to its host, a fresh process read a 1.2 GB shard in 0.77-2.66 s of CPU with them,
/// 0.71-0.74 s without. Only a hint: ranges below 4 MiB and kernels before Linux 5.14 leave the
/// pages to be faulted as before.
void populate_pages(void* data, std::size_t bytes);

/// A vector of `count` zero elements whose pages were made resident by populate_pages first
/// (unless `populate` is false), so that its zero-filling and the writes into it run at memory
/// speed.
template <typename T>
std::vector<T> resident_vector(std::size_t count, bool populate = true)
{
    std::vector<T> out;
    out.reserve(count);
    if (populate) {
        populate_pages(out.data(), count * sizeof(T));
    }
    out.resize(count);
    return out;
}

}  // namespace halo::detail
