// 16-bit activations (EngineOptions::activations; docs/KERNELS.md "16-bit activations"): where
// the steps store a matrix, it is rounded to the activation type as a 16-bit buffer holds it,
// and an element fp16 cannot hold is the user's error, named.
#include <cstdint>
#include <string>

#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/layer_type.hpp"
#include "halo/kernels_host/backend.hpp"
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
    // The tag says which store met an overflow where the backend reports it later.
    raise_if(backend.round_activations(y, type, store_tag()));
}

void StepContext::check_stores()
{
    if (options.activations == FeatureType::fp32) {
        return;
    }
    if (const auto overflow = backend.take_activation_overflow()) {
        raise_overflow(*overflow);
    }
}

void StepContext::raise_overflow(const ActivationOverflow& overflow) const
{
    const auto type = options.activations;
    const auto index = static_cast<std::size_t>(overflow.store / 2);
    const bool input = overflow.store % 2 == 1;
    const auto& layer = model.layers.at(index);
    const auto row = overflow.row;
    const auto id = row >= 0 && row < static_cast<std::int64_t>(shard.global_ids.size())
                        ? std::to_string(shard.global_ids[static_cast<std::size_t>(row)])
                        : std::string("?");
    const auto where = input ? "the input of layer " + std::to_string(index)
                             : "layer " + std::to_string(index);
    const char* range = type == FeatureType::fp16 ? "+-65504" : "+-3.3895e38";
    HALO_THROW(InputError, "--activations ", to_string(type), ": ", where, " (",
               to_string(layer.type), ", ", layer.in_dim, " -> ", layer.out_dim, ") holds ",
               overflow.value, " at node ", id, ", column ", overflow.col, ", beyond ",
               to_string(type), "'s range (", range, "); run with --activations bf16 (the range "
               "of fp32) or fp32");
}

}  // namespace halo::detail
