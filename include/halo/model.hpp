// GNN models: a stack of layers with their weights, read from and written to an HDF5 model file
// (docs/FORMAT.md, "Model file"), or drawn at random for benchmarks.
//
// Layer semantics (x_i: input row of node i, N(i): the columns of row i in the adjacency):
//   gcn   h_i = act( sum_j  a_ij x_j W + b ),  a = D^-1/2 (A + I) D^-1/2 (PyG GCNConv)
//   sage  h_i = act( x_i W_root + mean_{j in N(i)} x_j W + b )   (PyG SAGEConv, mean aggregation)
//   gin   h_i = act( MLP( (1 + eps) x_i + sum_{j in N(i)} x_j ) ),
//         MLP(z) = relu(z W + b) W2 + b2                         (PyG GINConv with a 2-layer MLP)
// Weights are row-major [in, out] (x W), as PyG's Linear stores W^T.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "halo/dense.hpp"

namespace halo {

enum class LayerType {
    gcn,
    sage,
    gin,
};

LayerType parse_layer_type(std::string_view text);
std::string to_string(LayerType type);

struct Layer {
    LayerType type = LayerType::gcn;
    std::int64_t in_dim = 0;
    std::int64_t out_dim = 0;
    Activation activation = Activation::relu;
    std::vector<float> weight;       // [in_dim, out_dim] (gin: [in_dim, hidden_dim])
    std::vector<float> bias;         // [out_dim] (gin: [hidden_dim]); empty: no bias
    std::vector<float> root_weight;  // sage: [in_dim, out_dim]
    float eps = 0.0f;                // gin
    std::int64_t hidden_dim = 0;     // gin
    std::vector<float> weight2;      // gin: [hidden_dim, out_dim]
    std::vector<float> bias2;        // gin: [out_dim]; empty: no bias

    /// Width of the matrix the aggregation multiplies: aggregation comes first when the input is
    /// no wider than the transformed width, so the exchange and the SpMM move the narrower one.
    bool aggregate_first() const;
};

struct Model {
    std::vector<Layer> layers;
    std::string name;

    std::int64_t input_dim() const { return layers.empty() ? 0 : layers.front().in_dim; }
    std::int64_t output_dim() const { return layers.empty() ? 0 : layers.back().out_dim; }
    std::int64_t max_dim() const;  // widest input, hidden or output width
};

/// Checks shapes and finiteness of every weight; throws halo::InputError naming `where`, the
/// layer and the array.
void validate_model(const Model& model, const std::string& where);

/// A model of `type` layers with widths dims[0] -> dims[1] -> ... (at least two entries), ReLU
/// between layers and none after the last, Glorot-uniform weights and small biases drawn from
/// `seed` only (the same on every rank and every run).
Model random_model(LayerType type, const std::vector<std::int64_t>& dims, std::uint64_t seed);

/// Parses "128,128,64" into widths; throws halo::InputError on malformed lists.
std::vector<std::int64_t> parse_dims(std::string_view text);

/// HDF5 model file I/O (write to a temporary name, then rename).
void write_model(const std::filesystem::path& path, const Model& model);
Model read_model(const std::filesystem::path& path);

}  // namespace halo
