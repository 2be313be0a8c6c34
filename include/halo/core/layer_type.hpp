// The table of layer types (halo_core): what each type of layer holds and how it is checked and
// drawn at random, one LayerTypeInfo per type in src/core/layers/<type>.cpp, listed once in
// halo/core/layer_types.def. The model file (src/store/model_file.cpp), validate_model,
// random_model, the engine's weight estimate, the CLI's lists of names and `halo-inspect
// --layer-types` (the JSON that python/halognn reads) all come from it; docs/CONTRIBUTING.md,
// "Adding a layer type".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "halo/core/model.hpp"

namespace halo {

/// A factor of a parameter's shape: one, or one of the layer's widths.
enum class LayerDim {
    one,
    in,      // Layer::in_dim
    out,     // Layer::out_dim
    hidden,  // Layer::hidden_dim
};

std::int64_t layer_dim(const Layer& layer, LayerDim dim);
std::string_view to_string(LayerDim dim);  // "1", "in_dim", "out_dim", "hidden_dim"

/// A float32 parameter of a layer: a vector ([cols], rows == one) or a row-major [rows, cols]
/// matrix, stored in the model file as a dataset of the same name. `member` is the Layer field
/// holding it; null: Layer::extra_arrays[name] (a type added without a field of its own).
struct LayerArray {
    std::string_view name;
    LayerDim rows = LayerDim::one;
    LayerDim cols = LayerDim::out;
    bool required = true;
    std::vector<float> Layer::*member = nullptr;
    /// Whether the engine uploads it as it is (LayerWeights); false where the step builds its
    /// own device form (the transformer's projections, gat's attention vectors).
    bool upload = true;

    bool is_matrix() const { return rows != LayerDim::one; }
    std::vector<float>& of(Layer& layer) const;
    const std::vector<float>& of(const Layer& layer) const;
    std::int64_t size(const Layer& layer) const;  // rows * cols
};

/// A scalar attribute of a layer (int64 or float32 in the model file). `int_member` or
/// `float_member` is the Layer field holding it; both null: Layer::extra_scalars[name].
/// An int64 `width` is a width (read checks 1 .. 2^24 before any array of that shape is read).
struct LayerScalar {
    std::string_view name;
    bool is_int = false;
    std::int64_t Layer::*int_member = nullptr;
    float Layer::*float_member = nullptr;
    bool width = false;

    double get(const Layer& layer) const;
    void set(Layer& layer, double value) const;
};

/// What random_model gives a layer's hook: the seed's streams of this layer and the options.
struct RandomLayer {
    std::uint64_t seed = 0;
    std::uint64_t stream = 0;  // the layer's first stream (16 per layer)
    const RandomModelOptions& options;

    /// Glorot-uniform [rows, cols] from stream `stream + offset`.
    std::vector<float> glorot(std::int64_t rows, std::int64_t cols, std::uint64_t offset) const;
    /// Small biases 0.1 * U(-1, 1) of n entries from stream `stream + offset`.
    std::vector<float> small(std::int64_t n, std::uint64_t offset) const;
    /// One uniform value in (-1, 1) from stream `stream + offset`.
    float uniform(std::uint64_t offset) const;
    /// A linear map: weight glorot(rows, cols, first), bias small(cols, first + 1).
    void linear(std::vector<float>& weight, std::vector<float>& bias, std::int64_t rows,
                std::int64_t cols, std::uint64_t first) const;
};

/// Where a check runs, for its messages: "<where>: <type> layer <index> ...".
struct LayerSite {
    const std::string& where;
    std::size_t index;
};

/// One layer type: its name, what it holds, its checks beyond the shapes, its random weights.
struct LayerTypeInfo {
    LayerType type{};
    std::string_view name{};
    /// One line for --help and docs: the formula, the PyG layer it matches.
    std::string_view summary{};
    /// The PyTorch Geometric (or torch) module python/halognn/pyg.py converts into this type
    /// with its function `<name>_layers`; empty where none does.
    std::string_view pyg{};
    /// Scalar attributes, in the order the model file writes them (after the `leading` arrays).
    std::span<const LayerScalar> scalars{};
    /// Arrays in the order the model file writes them; the first `leading` come before the
    /// scalars (the layout model files have had since version 1).
    std::span<const LayerArray> arrays{};
    std::size_t leading = 0;
    /// Whether a layer of this type reads its neighbours.
    bool aggregates = true;
    /// The width of the matrix its aggregation multiplies when it transforms first.
    LayerDim transformed = LayerDim::out;
    /// Checks beyond the shapes and finiteness (run after the scalars' and before the arrays');
    /// throws halo::InputError through fail_layer(). Null: none.
    void (*check)(const Layer& layer, const LayerSite& site) = nullptr;
    /// Fills the layer's scalars and arrays (type, widths and activation are set). Null: none.
    void (*random)(Layer& layer, const RandomLayer& draw) = nullptr;
    /// Why an int8-quantized exchange cannot carry this type's halo rows (halo-infer refuses
    /// `--exchange ...int8` for a model with such a layer); empty: it can.
    std::string_view int8_exchange_refusal{};
    /// Widest row (floats) the engine's buffers hold for it beyond its widths; null: none.
    std::int64_t (*buffer_width)(const Layer& layer) = nullptr;
    /// Widest row (floats) its halo exchange moves beyond buffer_width; null: none.
    std::int64_t (*exchange_width)(const Layer& layer) = nullptr;

    const LayerArray* array(std::string_view array_name) const;
};

/// Every layer type, in halo/core/layer_types.def's order.
std::span<const LayerTypeInfo* const> layer_types();
const LayerTypeInfo& layer_type_info(LayerType type);
/// The names, in table order.
std::vector<std::string> layer_type_names();
/// The names joined: "gcn | sage | ..." with separator " | " (help texts).
std::string layer_type_list(std::string_view separator = " | ");
/// The table as JSON (halo-inspect --layer-types; python/halognn/layer_types.json).
std::string layer_types_json();

/// Bytes of a layer's parameters as the model holds them (every array of its type).
std::int64_t parameter_bytes(const Layer& layer);

/// Throws halo::InputError "<where>: <type> layer <index> <message...>".
[[noreturn]] void fail_layer(const LayerSite& site, std::string_view type,
                             const std::string& message);

#define HALO_LAYER_TYPE(name) extern const LayerTypeInfo name##_layer_type;
#include "halo/core/layer_types.def"
#undef HALO_LAYER_TYPE

}  // namespace halo
