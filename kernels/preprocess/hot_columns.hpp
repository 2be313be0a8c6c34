// The hot columns of an SpMM operator for MergePath's L2 hints (MergePathOptions::hint_hot_bytes,
// docs/KERNELS.md "L2 hints"): the `hot` most-read columns (ties to the lower id), and the column
// indices in which every nonzero of another column carries kColdMark (bit 31). Host only (no
// CUDA), so that the unit test runs in CI: the plan counts the reads and marks the indices on the
// device (mergepath.cu) and picks the hot set here from the counts (hot_set);
// mark_cold_columns is the whole of it on the host, the reference.
#pragma once

#include <cstdint>
#include <vector>

#include "halo/core/csr.hpp"

namespace halo::mergepath {

inline constexpr std::uint32_t kColdMark = 0x80000000u;

struct HotColumns {
    std::int64_t hot = 0;               ///< columns not marked
    std::int64_t hot_reads = 0;         ///< their nonzeros
    std::vector<std::int32_t> indices;  ///< a's indices, cold ones with kColdMark set
};

/// The `hot` most-read columns (hot clamped to [0, reads.size()]) of `reads` (reads per column),
/// ties to the lower id: is_hot[c] is 1 for those; hot_reads their reads.
struct HotSet {
    std::int64_t hot = 0;
    std::int64_t hot_reads = 0;
    std::vector<std::uint8_t> is_hot;
};
HotSet hot_set(const std::vector<std::uint32_t>& reads, std::int64_t hot);

/// Marks `a`'s nonzeros outside its `hot` most-read columns (hot clamped to [0, num_cols]).
/// Throws halo::InputError past 2^31 - 1 columns (the mark is the sign bit of an int32 index).
HotColumns mark_cold_columns(const CsrView& a, std::int64_t hot);

}  // namespace halo::mergepath
