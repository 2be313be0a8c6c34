// The layer types that aggregate with an SpMM operator: gcn, sage and gin (their steps are in
// src/engine/layers/spmm_layers.cpp).
#include "halo/core/layer_type.hpp"

namespace halo {
namespace {

constexpr LayerArray weight{"weight", LayerDim::in, LayerDim::out, true, &Layer::weight};
constexpr LayerArray bias{"bias", LayerDim::one, LayerDim::out, false, &Layer::bias};

void random_linear(Layer& layer, const RandomLayer& draw)
{
    draw.linear(layer.weight, layer.bias, layer.in_dim, layer.out_dim, 1);
}

constexpr LayerArray gcn_arrays[] = {weight, bias};

constexpr LayerArray sage_arrays[] = {
    weight, bias, {"root_weight", LayerDim::in, LayerDim::out, true, &Layer::root_weight}};

void random_sage(Layer& layer, const RandomLayer& draw)
{
    random_linear(layer, draw);
    layer.root_weight = draw.glorot(layer.in_dim, layer.out_dim, 5);
}

constexpr LayerScalar gin_scalars[] = {
    {.name = "hidden_dim", .is_int = true, .int_member = &Layer::hidden_dim, .width = true},
    {.name = "eps", .float_member = &Layer::eps}};
constexpr LayerArray gin_arrays[] = {
    {"weight", LayerDim::in, LayerDim::hidden, true, &Layer::weight},
    {"bias", LayerDim::one, LayerDim::hidden, false, &Layer::bias},
    {"weight2", LayerDim::hidden, LayerDim::out, true, &Layer::weight2},
    {"bias2", LayerDim::one, LayerDim::out, false, &Layer::bias2}};

void random_gin(Layer& layer, const RandomLayer& draw)
{
    layer.hidden_dim = layer.out_dim;
    layer.eps = 0.1f;
    draw.linear(layer.weight, layer.bias, layer.in_dim, layer.hidden_dim, 1);
    draw.linear(layer.weight2, layer.bias2, layer.hidden_dim, layer.out_dim, 3);
}

}  // namespace

const LayerTypeInfo gcn_layer_type{
    .type = LayerType::gcn,
    .name = "gcn",
    .summary = "h_i = act( sum_j a_ij x_j W + b ), a = D^-1/2 (A + I) D^-1/2 (PyG GCNConv)",
    .pyg = "GCNConv",
    .arrays = gcn_arrays,
    .leading = 2,
    .random = random_linear};

const LayerTypeInfo sage_layer_type{
    .type = LayerType::sage,
    .name = "sage",
    .summary = "h_i = act( x_i W_root + mean_{j in N(i)} x_j W + b ) (PyG SAGEConv, mean)",
    .pyg = "SAGEConv",
    .arrays = sage_arrays,
    .leading = 3,
    .random = random_sage};

const LayerTypeInfo gin_layer_type{
    .type = LayerType::gin,
    .name = "gin",
    .summary =
        "h_i = act( MLP( (1 + eps) x_i + sum_{j in N(i)} x_j ) ), MLP(z) = relu(z W + b) "
        "W2 + b2 (PyG GINConv, 2-layer MLP)",
    .pyg = "GINConv",
    .scalars = gin_scalars,
    .arrays = gin_arrays,
    .leading = 2,
    .transformed = LayerDim::hidden,
    .random = random_gin};

}  // namespace halo
