// Dense matrices whose elements are fp32, fp16 or bf16 (FeatureType), as a backend stores 16-bit
// activations (docs/KERNELS.md "16-bit activations", "Storage in 16 bits"): two 16-bit elements
// per 4-byte word of a Matrix, so that whatever moves rows as words (the halo exchangers, host
// copies) moves half the bytes without knowing the type.
#pragma once

#include <cstdint>
#include <type_traits>

#include "halo/core/dense.hpp"
#include "halo/core/feature_type.hpp"

namespace halo {

/// A row-major matrix of `type` elements: element (i, j) at byte (i * ld + j) *
/// feature_bytes(type) from data. Void is void or const void.
template <typename Void>
struct BasicFeatureView {
    Void* data = nullptr;
    FeatureType type = FeatureType::fp32;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t ld = 0;  // in elements, >= cols

    /// Implicit conversion to a read-only view (for mutable views only).
    operator BasicFeatureView<const void>() const requires(!std::is_const_v<Void>)
    {
        return {data, type, rows, cols, ld};
    }
};

/// Read-only and writable feature matrices.
using FeatureView = BasicFeatureView<const void>;
using MutableFeatureView = BasicFeatureView<void>;

/// An fp32 view as a feature view.
inline FeatureView feature_view(DenseView<const float> x)
{
    return {x.data, FeatureType::fp32, x.rows, x.cols, x.ld};
}
inline MutableFeatureView feature_view(DenseView<float> x)
{
    return {x.data, FeatureType::fp32, x.rows, x.cols, x.ld};
}

/// The leading dimension (in elements) a matrix of `cols` elements of `type` gets in words:
/// cols rounded up to whole 4-byte words (16-bit: even).
inline std::int64_t feature_ld(FeatureType type, std::int64_t cols)
{
    return type == FeatureType::fp32 ? cols : cols + (cols & 1);
}

/// 4-byte words per row of a matrix of `cols` elements of `type` stored with feature_ld().
inline std::int64_t feature_words(FeatureType type, std::int64_t cols)
{
    return type == FeatureType::fp32 ? cols : feature_ld(type, cols) / 2;
}

/// `rows` x `cols` elements of `type` over words at `words` (ld = feature_ld(type, cols)).
inline MutableFeatureView packed_view(float* words, FeatureType type, std::int64_t rows,
                                      std::int64_t cols)
{
    return {words, type, rows, cols, feature_ld(type, cols)};
}

/// The words that hold a feature matrix whose rows start on words (fp32: the view itself; 16-bit:
/// ld even), each row's words up to its last element: what an exchanger or a copy moves.
inline DenseView<float> words_of(MutableFeatureView x)
{
    if (x.type == FeatureType::fp32) {
        return {static_cast<float*>(x.data), x.rows, x.cols, x.ld};
    }
    return {static_cast<float*>(x.data), x.rows, (x.cols + 1) / 2, x.ld / 2};
}

/// Rows [begin, end) of a feature view.
template <typename Void>
BasicFeatureView<Void> feature_rows(BasicFeatureView<Void> x, std::int64_t begin, std::int64_t end)
{
    using Byte = std::conditional_t<std::is_const_v<Void>, const char, char>;
    auto* base = static_cast<Byte*>(x.data) +
                 begin * x.ld * static_cast<std::int64_t>(feature_bytes(x.type));
    return {base, x.type, end - begin, x.cols, x.ld};
}

}  // namespace halo
