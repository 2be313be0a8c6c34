// 16-bit activations (EngineOptions::activations; docs/KERNELS.md "16-bit activations"): where
// the steps store a matrix, it is rounded to the activation type as a 16-bit buffer holds it,
// and an element fp16 cannot hold is the user's error, named.
#include <string>

#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/layer_type.hpp"
#include "layer_step.hpp"

namespace halo::detail {

void StepContext::begin_layer(std::size_t index, bool last)
{
    store_layer_ = index;
    store_input_ = false;
    last_layer_ = last;
}

void StepContext::begin_input(std::size_t index)
{
    store_layer_ = index;
    store_input_ = true;
    last_layer_ = false;
}

void StepContext::store(DenseView<float> y)
{
    const auto type = options.activations;
    if (type == FeatureType::fp32) {
        return;
    }
    const auto overflow = backend.round_activations(y, type);
    if (!overflow) {
        return;
    }
    const auto& layer = model.layers.at(store_layer_);
    const auto row = overflow->row;
    const auto id = row < static_cast<std::int64_t>(shard.global_ids.size())
                        ? std::to_string(shard.global_ids[row])
                        : std::string("?");
    const auto where = store_input_ ? "the input of layer " + std::to_string(store_layer_)
                                    : "layer " + std::to_string(store_layer_);
    HALO_THROW(InputError, "--activations ", to_string(type), ": ", where, " (",
               to_string(layer.type), ", ", layer.in_dim, " -> ", layer.out_dim, ") holds ",
               overflow->value, " at node ", id, ", column ", overflow->col, ", beyond ",
               to_string(type), "'s range (+-65504); run with --activations bf16 (the range of "
               "fp32) or fp32");
}

}  // namespace halo::detail
