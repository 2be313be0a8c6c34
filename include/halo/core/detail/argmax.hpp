// The argmax of one output row, shared by halo::argmax_rows (result.hpp) and the backends'
// Backend::argmax_rows.
#pragma once

#include <algorithm>
#include <cstdint>

namespace halo::detail {

/// The index of the largest of row[0 .. n) (n >= 1): the first among equal maxima; an element is
/// taken only where the best so far compares less than it (std::max_element), which the CUDA
/// kernel repeats.
inline std::int32_t argmax_row(const float* row, std::int64_t n)
{
    return static_cast<std::int32_t>(std::max_element(row, row + n) - row);
}

}  // namespace halo::detail
