#include "halo/core/model.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "halo/core/error.hpp"
#include "halo/core/layer_type.hpp"

namespace halo {

bool Layer::aggregate_first() const
{
    return in_dim <= layer_dim(*this, layer_type_info(type).transformed);
}

std::int64_t Model::max_dim() const
{
    std::int64_t best = 0;
    for (const auto& layer : layers) {
        best = std::max({best, layer.in_dim, layer.out_dim, layer.hidden_dim});
    }
    return best;
}

std::int64_t Model::buffer_width() const
{
    std::int64_t best = max_dim();
    for (const auto& layer : layers) {
        if (const auto extra = layer_type_info(layer.type).buffer_width) {
            best = std::max(best, extra(layer));
        }
    }
    return best;
}

std::int64_t Model::exchange_width() const
{
    std::int64_t best = buffer_width();
    for (const auto& layer : layers) {
        if (const auto extra = layer_type_info(layer.type).exchange_width) {
            best = std::max(best, extra(layer));
        }
    }
    return best;
}

namespace {

void check_array(const std::vector<float>& values, std::int64_t expected, const std::string& where,
                 std::size_t layer, std::string_view name, bool optional)
{
    if (values.empty() && optional) {
        return;
    }
    if (static_cast<std::int64_t>(values.size()) != expected) {
        HALO_THROW(InputError, where, ": layer ", layer, " ", name, " has ", values.size(),
                   " values, expected ", expected);
    }
    for (std::size_t k = 0; k < values.size(); ++k) {
        if (!std::isfinite(values[k])) {
            HALO_THROW(InputError, where, ": layer ", layer, " ", name, "[", k, "] is ", values[k],
                       " (weights must be finite)");
        }
    }
}

// Every array field of Layer, to refuse one that the layer's type does not hold.
struct NamedField {
    std::string_view name;
    std::vector<float> Layer::*member;
};
constexpr NamedField layer_fields[] = {
    {"weight", &Layer::weight},           {"bias", &Layer::bias},
    {"root_weight", &Layer::root_weight}, {"weight2", &Layer::weight2},
    {"bias2", &Layer::bias2},             {"att_src", &Layer::att_src},
    {"att_dst", &Layer::att_dst},         {"query_weight", &Layer::query_weight},
    {"query_bias", &Layer::query_bias},   {"key_weight", &Layer::key_weight},
    {"key_bias", &Layer::key_bias},       {"value_weight", &Layer::value_weight},
    {"value_bias", &Layer::value_bias}};

void validate_layer(const Layer& layer, const LayerSite& site)
{
    const auto& info = layer_type_info(layer.type);
    for (const auto& s : info.scalars) {
        const double value = s.get(layer);
        if (!std::isfinite(value) || (s.width && value <= 0)) {
            const auto text = s.is_int ? std::to_string(static_cast<std::int64_t>(value))
                                       : std::to_string(value);
            fail_layer(site, info.name, "has " + std::string(s.name) + " " + text);
        }
    }
    if (info.check != nullptr) {
        info.check(layer, site);
    }
    for (const auto& a : info.arrays) {
        check_array(a.of(layer), a.size(layer), site.where, site.index, a.name, !a.required);
    }
    for (const auto& field : layer_fields) {
        if (!(layer.*field.member).empty() && info.array(field.name) == nullptr) {
            fail_layer(site, info.name,
                       "has a '" + std::string(field.name) + "', which a " +
                           std::string(info.name) + " layer does not hold");
        }
    }
    for (const auto& [name, values] : layer.extra_arrays) {
        if (!values.empty() && info.array(name) == nullptr) {
            fail_layer(site, info.name,
                       "has a '" + name + "', which a " + std::string(info.name) +
                           " layer does not hold");
        }
    }
}

}  // namespace

void validate_model(const Model& model, const std::string& where)
{
    if (model.layers.empty()) {
        HALO_THROW(InputError, where, ": the model has no layers");
    }
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
        const auto& layer = model.layers[l];
        if (layer.in_dim <= 0 || layer.out_dim <= 0) {
            HALO_THROW(InputError, where, ": layer ", l, " has widths ", layer.in_dim, " -> ",
                       layer.out_dim);
        }
        if (l > 0 && model.layers[l - 1].out_dim != layer.in_dim) {
            HALO_THROW(InputError, where, ": layer ", l, " takes width ", layer.in_dim,
                       " but layer ", l - 1, " produces ", model.layers[l - 1].out_dim);
        }
        validate_layer(layer, LayerSite{where, l});
    }
}

Model random_model(LayerType type, const std::vector<std::int64_t>& dims, std::uint64_t seed,
                   const RandomModelOptions& options)
{
    if (dims.size() < 2) {
        HALO_THROW(InputError, "a random model needs at least two widths (input, output), got ",
                   dims.size());
    }
    const auto& info = layer_type_info(type);
    Model model;
    model.name = "random-" + to_string(type);
    for (std::size_t l = 0; l + 1 < dims.size(); ++l) {
        Layer layer;
        layer.type = type;
        layer.in_dim = dims[l];
        layer.out_dim = dims[l + 1];
        layer.activation = l + 2 < dims.size() ? Activation::relu : Activation::none;
        if (info.random != nullptr) {
            info.random(layer, RandomLayer{seed, 16 * l, options});
        }
        model.layers.push_back(std::move(layer));
    }
    validate_model(model, "random model");
    return model;
}

std::vector<std::int64_t> parse_dims(std::string_view text)
{
    std::vector<std::int64_t> dims;
    std::size_t pos = 0;
    while (pos <= text.size()) {
        const auto comma = text.find(',', pos);
        const auto token =
            text.substr(pos, comma == std::string_view::npos ? text.npos : comma - pos);
        std::int64_t value = 0;
        const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
        if (token.empty() || ec != std::errc{} || end != token.data() + token.size() ||
            value <= 0) {
            HALO_THROW(InputError, "bad width '", token, "' in '", text,
                       "' (expected positive integers separated by commas, e.g. 128,128,64)");
        }
        dims.push_back(value);
        if (comma == std::string_view::npos) {
            break;
        }
        pos = comma + 1;
    }
    return dims;
}

}  // namespace halo
