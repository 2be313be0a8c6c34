// The layer types that attend: agnn, transformer and gat (their steps are in
// src/engine/layers/attention_layers.cpp).
#include "halo/core/layer_type.hpp"

namespace halo {
namespace {

void check_heads(const Layer& layer, const LayerSite& site)
{
    if (layer.heads < 1 || layer.out_dim % layer.heads != 0) {
        fail_layer(site, to_string(layer.type),
                   "has " + std::to_string(layer.heads) + " heads for width " +
                       std::to_string(layer.out_dim) + " (heads must divide the width)");
    }
}

constexpr LayerScalar agnn_scalars[] = {{.name = "beta", .float_member = &Layer::beta}};
constexpr LayerArray agnn_arrays[] = {
    {"weight", LayerDim::in, LayerDim::out, false, &Layer::weight},
    {"bias", LayerDim::one, LayerDim::out, false, &Layer::bias}};

void check_agnn(const Layer& layer, const LayerSite& site)
{
    if (layer.weight.empty() && layer.in_dim != layer.out_dim) {
        fail_layer(site, "agnn",
                   "has no weight but widths " + std::to_string(layer.in_dim) + " -> " +
                       std::to_string(layer.out_dim));
    }
}

void random_agnn(Layer& layer, const RandomLayer& draw)
{
    draw.linear(layer.weight, layer.bias, layer.in_dim, layer.out_dim, 1);
    layer.beta = 1.0f + 0.5f * draw.uniform(6);
}

constexpr LayerScalar heads{
    .name = "heads", .is_int = true, .int_member = &Layer::heads, .width = true};
constexpr LayerScalar transformer_scalars[] = {heads};
// The projections and the skip weight are uploaded side by side by the step, not as they are.
constexpr LayerArray transformer_arrays[] = {
    {"bias", LayerDim::one, LayerDim::out, false, &Layer::bias},
    {"root_weight", LayerDim::in, LayerDim::out, false, &Layer::root_weight, false},
    {"query_weight", LayerDim::in, LayerDim::out, true, &Layer::query_weight, false},
    {"key_weight", LayerDim::in, LayerDim::out, true, &Layer::key_weight, false},
    {"value_weight", LayerDim::in, LayerDim::out, true, &Layer::value_weight, false},
    {"query_bias", LayerDim::one, LayerDim::out, false, &Layer::query_bias, false},
    {"key_bias", LayerDim::one, LayerDim::out, false, &Layer::key_bias, false},
    {"value_bias", LayerDim::one, LayerDim::out, false, &Layer::value_bias, false}};

void random_transformer(Layer& layer, const RandomLayer& draw)
{
    const auto in = layer.in_dim;
    const auto out = layer.out_dim;
    layer.heads = draw.options.heads;
    draw.linear(layer.query_weight, layer.query_bias, in, out, 1);
    draw.linear(layer.key_weight, layer.key_bias, in, out, 3);
    draw.linear(layer.value_weight, layer.value_bias, in, out, 5);
    draw.linear(layer.root_weight, layer.bias, in, out, 7);
}

// K and V side by side.
std::int64_t transformer_exchange_width(const Layer& layer)
{
    return 2 * layer.out_dim;
}

constexpr LayerScalar gat_scalars[] = {
    heads, {.name = "negative_slope", .float_member = &Layer::negative_slope}};
// The attention vectors go up as one block-diagonal matrix each (the step's).
constexpr LayerArray gat_arrays[] = {
    {"weight", LayerDim::in, LayerDim::out, true, &Layer::weight},
    {"bias", LayerDim::one, LayerDim::out, false, &Layer::bias},
    {"att_src", LayerDim::one, LayerDim::out, true, &Layer::att_src, false},
    {"att_dst", LayerDim::one, LayerDim::out, true, &Layer::att_dst, false}};

void random_gat(Layer& layer, const RandomLayer& draw)
{
    layer.heads = draw.options.heads;
    draw.linear(layer.weight, layer.bias, layer.in_dim, layer.out_dim, 1);
    layer.att_src = draw.glorot(1, layer.out_dim, 3);
    layer.att_dst = draw.glorot(1, layer.out_dim, 4);
}

}  // namespace

const LayerTypeInfo agnn_layer_type{
    .type = LayerType::agnn,
    .name = "agnn",
    .summary =
        "z = x W + b (no weight: z = x), h_i = act( sum_{j in N(i) + i} softmax_j( beta "
        "cos(z_i, z_j) ) z_j ) (PyG AGNNConv after a Linear)",
    .pyg = "AGNNConv",
    .scalars = agnn_scalars,
    .arrays = agnn_arrays,
    .leading = 2,
    .check = check_agnn,
    .random = random_agnn};

const LayerTypeInfo transformer_layer_type{
    .type = LayerType::transformer,
    .name = "transformer",
    .summary =
        "per head: h_i = act( x_i W_root + b + sum_{j in N(i)} softmax_j( q_i . k_j / "
        "sqrt(d) ) v_j ) (PyG TransformerConv, concat, root_weight)",
    .pyg = "TransformerConv",
    .scalars = transformer_scalars,
    .arrays = transformer_arrays,
    .leading = 2,
    .check = check_heads,
    .random = random_transformer,
    .exchange_width = transformer_exchange_width};

const LayerTypeInfo gat_layer_type{
    .type = LayerType::gat,
    .name = "gat",
    .summary =
        "per head, z = x W: h_i = act( sum_{j in N(i) + i} softmax_j( LeakyReLU( z_i . "
        "a_dst + z_j . a_src ) ) z_j + b ) (PyG GATConv, concat, self-loops)",
    .pyg = "GATConv",
    .scalars = gat_scalars,
    .arrays = gat_arrays,
    .leading = 2,
    .check = check_heads,
    .random = random_gat};

}  // namespace halo
