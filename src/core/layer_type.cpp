// The table of layer types (halo/core/layer_type.hpp): the registry from halo/core/layer_types.def
// and what every type shares.
#include "halo/core/layer_type.hpp"

#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

#include "halo/core/detail/counter_random.hpp"
#include "halo/core/error.hpp"

namespace halo {

namespace {

constexpr std::array<const LayerTypeInfo*, 0
#define HALO_LAYER_TYPE(name) +1
#include "halo/core/layer_types.def"
#undef HALO_LAYER_TYPE
                     >
    registry{
#define HALO_LAYER_TYPE(name) &name##_layer_type,
#include "halo/core/layer_types.def"
#undef HALO_LAYER_TYPE
    };

}  // namespace

std::int64_t layer_dim(const Layer& layer, LayerDim dim)
{
    switch (dim) {
        case LayerDim::one:
            return 1;
        case LayerDim::in:
            return layer.in_dim;
        case LayerDim::out:
            return layer.out_dim;
        case LayerDim::hidden:
            return layer.hidden_dim;
    }
    HALO_THROW(LogicError, "unknown layer dimension ", static_cast<int>(dim));
}

std::string_view to_string(LayerDim dim)
{
    switch (dim) {
        case LayerDim::one:
            return "1";
        case LayerDim::in:
            return "in_dim";
        case LayerDim::out:
            return "out_dim";
        case LayerDim::hidden:
            return "hidden_dim";
    }
    return "?";
}

std::vector<float>& LayerArray::of(Layer& layer) const
{
    return member != nullptr ? layer.*member : layer.extra_arrays[std::string(name)];
}

const std::vector<float>& LayerArray::of(const Layer& layer) const
{
    if (member != nullptr) {
        return layer.*member;
    }
    static const std::vector<float> none;
    const auto it = layer.extra_arrays.find(name);
    return it == layer.extra_arrays.end() ? none : it->second;
}

std::int64_t LayerArray::size(const Layer& layer) const
{
    return layer_dim(layer, rows) * layer_dim(layer, cols);
}

double LayerScalar::get(const Layer& layer) const
{
    if (int_member != nullptr) {
        return static_cast<double>(layer.*int_member);
    }
    if (float_member != nullptr) {
        return layer.*float_member;
    }
    const auto it = layer.extra_scalars.find(name);
    return it == layer.extra_scalars.end() ? 0.0 : it->second;
}

void LayerScalar::set(Layer& layer, double value) const
{
    if (int_member != nullptr) {
        layer.*int_member = static_cast<std::int64_t>(value);
    } else if (float_member != nullptr) {
        layer.*float_member = static_cast<float>(value);
    } else {
        // As the model file stores it (int64 or float32), so a written model reads back equal.
        layer.extra_scalars[std::string(name)] =
            is_int ? std::trunc(value) : static_cast<double>(static_cast<float>(value));
    }
}

std::vector<float> RandomLayer::glorot(std::int64_t rows, std::int64_t cols,
                                       std::uint64_t offset) const
{
    const float limit = std::sqrt(6.0f / static_cast<float>(rows + cols));
    std::vector<float> w(static_cast<std::size_t>(rows * cols));
    for (std::size_t k = 0; k < w.size(); ++k) {
        w[k] = limit * detail::uniform_pm1(seed, stream + offset, k);
    }
    return w;
}

std::vector<float> RandomLayer::small(std::int64_t n, std::uint64_t offset) const
{
    std::vector<float> b(static_cast<std::size_t>(n));
    for (std::int64_t k = 0; k < n; ++k) {
        b[k] = 0.1f * detail::uniform_pm1(seed, stream + offset, k);
    }
    return b;
}

float RandomLayer::uniform(std::uint64_t offset) const
{
    return detail::uniform_pm1(seed, stream + offset, 0);
}

void RandomLayer::linear(std::vector<float>& weight, std::vector<float>& bias, std::int64_t rows,
                         std::int64_t cols, std::uint64_t first) const
{
    weight = glorot(rows, cols, first);
    bias = small(cols, first + 1);
}

const LayerArray* LayerTypeInfo::array(std::string_view array_name) const
{
    for (const auto& a : arrays) {
        if (a.name == array_name) {
            return &a;
        }
    }
    return nullptr;
}

std::span<const LayerTypeInfo* const> layer_types()
{
    return registry;
}

const LayerTypeInfo& layer_type_info(LayerType type)
{
    for (const auto* info : registry) {
        if (info->type == type) {
            return *info;
        }
    }
    HALO_THROW(LogicError, "layer type ", static_cast<int>(type), " is not in the table");
}

std::vector<std::string> layer_type_names()
{
    std::vector<std::string> names;
    for (const auto* info : registry) {
        names.emplace_back(info->name);
    }
    return names;
}

std::string layer_type_list(std::string_view separator)
{
    std::string out;
    for (const auto* info : registry) {
        out += (out.empty() ? "" : std::string(separator)) + std::string(info->name);
    }
    return out;
}

LayerType parse_layer_type(std::string_view text)
{
    for (const auto* info : registry) {
        if (info->name == text) {
            return info->type;
        }
    }
    HALO_THROW(InputError, "unknown layer type '", text, "' (expected one of ",
               layer_type_list(", "), ")");
}

std::string to_string(LayerType type)
{
    return std::string(layer_type_info(type).name);
}

bool aggregates(LayerType type)
{
    return layer_type_info(type).aggregates;
}

std::string layer_types_json()
{
    auto types = nlohmann::ordered_json::array();
    for (const auto* info : registry) {
        nlohmann::ordered_json t;
        t["name"] = info->name;
        t["summary"] = info->summary;
        t["pyg"] = info->pyg;
        t["aggregates"] = info->aggregates;
        auto scalars = nlohmann::ordered_json::array();
        for (const auto& s : info->scalars) {
            scalars.push_back({{"name", s.name}, {"dtype", s.is_int ? "<i8" : "<f4"}});
        }
        auto arrays = nlohmann::ordered_json::array();
        for (const auto& a : info->arrays) {
            auto shape = nlohmann::ordered_json::array();
            if (a.is_matrix()) {
                shape.push_back(to_string(a.rows));
            }
            shape.push_back(to_string(a.cols));
            arrays.push_back({{"name", a.name}, {"shape", shape}, {"required", a.required}});
        }
        t["scalars"] = scalars;
        t["arrays"] = arrays;
        t["leading_arrays"] = info->leading;
        types.push_back(t);
    }
    nlohmann::ordered_json root;
    root["format"] = "halo-layer-types";
    root["layer_types"] = types;
    return root.dump(2) + "\n";
}

std::int64_t parameter_bytes(const Layer& layer)
{
    std::int64_t floats = 0;
    for (const auto& a : layer_type_info(layer.type).arrays) {
        floats += static_cast<std::int64_t>(a.of(layer).size());
    }
    return 4 * floats;
}

void fail_layer(const LayerSite& site, std::string_view type, const std::string& message)
{
    HALO_THROW(InputError, site.where, ": ", type, " layer ", site.index, " ", message);
}

}  // namespace halo
