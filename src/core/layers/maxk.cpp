// maxk (MaxK-GNN, paper 000): a linear map, the top-k of each row, the gcn aggregation (its step
// is in src/engine/layers/maxk.cpp; halo/kernels_host/maxk.hpp has the tie rule).
#include <algorithm>

#include "halo/core/layer_type.hpp"

namespace halo {
namespace {

constexpr LayerScalar maxk_scalars[] = {{.name = "k", .is_int = true, .int_member = &Layer::k}};
constexpr LayerArray maxk_arrays[] = {{"weight", LayerDim::in, LayerDim::out, true, &Layer::weight},
                                      {"bias", LayerDim::one, LayerDim::out, false, &Layer::bias}};

void check_maxk(const Layer& layer, const LayerSite& site)
{
    if (layer.k < 1 || layer.k > layer.out_dim) {
        fail_layer(site, "maxk",
                   "keeps k = " + std::to_string(layer.k) + " of " + std::to_string(layer.out_dim) +
                       " entries (need 1 <= k <= width)");
    }
}

// No activation: the top-k is the nonlinearity, and the last layer is followed by nothing.
void random_maxk(Layer& layer, const RandomLayer& draw)
{
    layer.activation = Activation::none;
    draw.linear(layer.weight, layer.bias, layer.in_dim, layer.out_dim, 1);
    layer.k = std::min(draw.options.k, layer.out_dim);
}

// The exchange records where they are wider than the layer (k above two thirds of the width).
std::int64_t maxk_buffer_width(const Layer& layer)
{
    return maxk_record_words(layer.k);
}

}  // namespace

const LayerTypeInfo maxk_layer_type{
    .type = LayerType::maxk,
    .name = "maxk",
    .summary = "h_i = act( sum_j a_ij maxk_k(x_j W + b) ), a = the gcn operator (MaxK-GNN)",
    .scalars = maxk_scalars,
    .arrays = maxk_arrays,
    .leading = 2,
    .check = check_maxk,
    .random = random_maxk,
    .int8_exchange_refusal =
        "maxk layers exchange CBSR records (values and column indices), which "
        "int8 quantization would corrupt (the records are already ~6k instead "
        "of 4D bytes per row)",
    .buffer_width = maxk_buffer_width};

}  // namespace halo
