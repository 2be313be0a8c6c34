// GNN models: a stack of layers with their weights and their checks (halo_core), read from and
// written to an HDF5 model file by the store (halo/store/model_file.hpp; docs/FORMAT.md, "Model
// file"), or drawn at random for benchmarks.
//
// Layer semantics (x_i: input row of node i, N(i): the columns of row i in the adjacency):
//   gcn   h_i = act( sum_j  a_ij x_j W + b ),  a = D^-1/2 (A + I) D^-1/2 (PyG GCNConv)
//   sage  h_i = act( x_i W_root + mean_{j in N(i)} x_j W + b )   (PyG SAGEConv, mean aggregation)
//   gin   h_i = act( MLP( (1 + eps) x_i + sum_{j in N(i)} x_j ) ),
//         MLP(z) = relu(z W + b) W2 + b2                         (PyG GINConv with a 2-layer MLP)
//   linear  h_i = act( x_i W + b )                               (no aggregation; torch Linear)
//   maxk  h_i = act( sum_j  a_ij maxk_k(x_j W + b) ),  a = the gcn operator above
//         (MaxK-GNN, paper 000: linear, the top-k nonlinearity keeping the k largest entries of
//         each row, then the sparse-sparse-dense aggregation; halo/kernels_host/maxk.hpp has the
//         tie rule)
//   agnn  z = x W + b (no weight: z = x), h_i = act( sum_{j in N(i) + i} p_ij z_j ),
//         p_ij = softmax_j( beta cos(z_i, z_j) )                 (PyG AGNNConv after a Linear)
//   transformer  per head t of `heads` (head width d = out / heads, concatenated):
//         h_i = act( x_i W_root + b + concat_t sum_{j in N(i)} p^t_ij v^t_j ),
//         p^t_ij = softmax_j( q^t_i . k^t_j / sqrt(d) ), q = x Wq + bq, k = x Wk + bk,
//         v = x Wv + bv                                          (PyG TransformerConv, concat,
//                                                                 root_weight; no self-loops)
//   gat   per head t, z = x W:  h_i = act( concat_t sum_{j in N(i) + i} p^t_ij z^t_j + b ),
//         p^t_ij = softmax_j( LeakyReLU( z^t_i . a_dst^t + z^t_j . a_src^t ) )
//                                                                (PyG GATConv, concat, self-loops)
// Softmaxes run over the row's pattern; a row with nothing to attend to gives zeros.
// Weights are row-major [in, out] (x W), as PyG's Linear stores W^T.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "halo/core/dense.hpp"

namespace halo {

// One value per line of halo/core/layer_types.def; each type's parameters, checks and random
// weights are its LayerTypeInfo (halo/core/layer_type.hpp).
enum class LayerType {
#define HALO_LAYER_TYPE(name) name,
#include "halo/core/layer_types.def"
#undef HALO_LAYER_TYPE
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
    std::int64_t k = 0;              // maxk: entries kept per row, 1 .. out_dim
    float beta = 1.0f;               // agnn: the learned scale of the cosine scores
    std::int64_t heads = 1;          // transformer, gat: out_dim = heads * head width
    float negative_slope = 0.2f;     // gat: LeakyReLU slope of the scores
    std::vector<float> att_src;      // gat: [out_dim], head t's a_src in [t*d, (t+1)*d)
    std::vector<float> att_dst;      // gat: [out_dim]
    // transformer: [in_dim, out_dim] weights and [out_dim] biases (empty bias: none); its skip
    // connection is root_weight (empty: none) with `bias`; `weight` is unused (empty).
    std::vector<float> query_weight, query_bias;
    std::vector<float> key_weight, key_bias;
    std::vector<float> value_weight, value_bias;
    // The parameters of a type whose LayerTypeInfo names no field above (by parameter name).
    std::map<std::string, std::vector<float>, std::less<>> extra_arrays;
    std::map<std::string, double, std::less<>> extra_scalars;

    std::int64_t head_dim() const { return heads > 0 ? out_dim / heads : 0; }

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
    /// Widest row the engine keeps in its work buffers (in floats): max_dim, or a maxk layer's
    /// exchange records where they are wider (maxk_record_words(k) > out_dim: k above two
    /// thirds of the width, e.g. k = 7 of 7 classes takes 11 words).
    std::int64_t buffer_width() const;
    /// Widest matrix a halo exchange of this model moves (in floats per row): buffer_width, or a
    /// transformer's K and V rows side by side (2 * out_dim).
    std::int64_t exchange_width() const;
};

/// Words (4 bytes) of one maxk exchange record of k entries: k float values, then k int16 column
/// indices, then zero padding to a whole word (MaxkPlan::record_words).
constexpr std::int64_t maxk_record_words(std::int64_t k)
{
    return (6 * k + 3) / 4;
}

/// Whether a layer of this type reads its neighbours (LayerTypeInfo::aggregates).
bool aggregates(LayerType type);

/// Checks shapes and finiteness of every weight; throws halo::InputError naming `where`, the
/// layer and the array.
void validate_model(const Model& model, const std::string& where);

/// Options of random models for the layer types that have them.
struct RandomModelOptions {
    std::int64_t k = 16;     // maxk (capped at each layer's width)
    std::int64_t heads = 1;  // transformer, gat (each width must be divisible)
};

/// A model of `type` layers with widths dims[0] -> dims[1] -> ... (at least two entries), ReLU
/// between layers and none after the last, Glorot-uniform weights and small biases drawn from
/// `seed` only (the same on every rank and every run). maxk layers have no activation (the top-k
/// is the nonlinearity) and the last one is followed by nothing: their widths are the layers'.
Model random_model(LayerType type, const std::vector<std::int64_t>& dims, std::uint64_t seed,
                   const RandomModelOptions& options = {});

/// Parses "128,128,64" into widths; throws halo::InputError on malformed lists.
std::vector<std::int64_t> parse_dims(std::string_view text);

}  // namespace halo
