// Dense row-major matrix views and the activation functions that layers apply.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

// nvcc warns (#554) that DenseView<const T>'s conversion operator "will not be called": that
// instantiation's operator is constrained away, the warning is about a function that cannot exist.
#ifdef __CUDACC__
#pragma nv_diag_suppress 554
#endif

namespace halo {

/// Non-owning row-major matrix: element (i, j) is data[i * ld + j]. T may be const-qualified.
template <typename T>
struct DenseView {
    T* data = nullptr;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t ld = 0;  // distance between consecutive rows, >= cols

    T& operator()(std::int64_t i, std::int64_t j) const { return data[i * ld + j]; }
    T* row(std::int64_t i) const { return data + i * ld; }

    /// Implicit conversion to a view of const elements (for non-const views only).
    operator DenseView<const std::remove_const_t<T>>() const requires(!std::is_const_v<T>)
    {
        return {data, rows, cols, ld};
    }
};

/// A contiguous (ld == cols) view over rows x cols elements at `data`.
template <typename T>
DenseView<T> dense_view(T* data, std::int64_t rows, std::int64_t cols)
{
    return {data, rows, cols, cols};
}

/// Element-wise activation applied after a layer's combination step.
enum class Activation {
    none,
    relu,
};

/// Parses "none" | "relu"; throws halo::InputError otherwise.
Activation parse_activation(std::string_view text);
std::string to_string(Activation activation);

}  // namespace halo
