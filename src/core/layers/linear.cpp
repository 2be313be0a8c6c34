// linear: no aggregation (its step is in src/engine/layers/linear.cpp).
#include "halo/core/layer_type.hpp"

namespace halo {
namespace {

constexpr LayerArray linear_arrays[] = {
    {"weight", LayerDim::in, LayerDim::out, true, &Layer::weight},
    {"bias", LayerDim::one, LayerDim::out, false, &Layer::bias}};

void random_linear(Layer& layer, const RandomLayer& draw)
{
    draw.linear(layer.weight, layer.bias, layer.in_dim, layer.out_dim, 1);
}

}  // namespace

const LayerTypeInfo linear_layer_type{.type = LayerType::linear,
                                      .name = "linear",
                                      .summary =
                                          "h_i = act( x_i W + b ) (no aggregation; torch "
                                          "Linear)",
                                      .pyg = "torch.nn.Linear",
                                      .arrays = linear_arrays,
                                      .leading = 2,
                                      .aggregates = false,
                                      .random = random_linear};

}  // namespace halo
