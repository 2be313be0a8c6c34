#include "halo/model.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "halo/detail/counter_random.hpp"
#include "halo/enum_names.hpp"
#include "halo/error.hpp"

namespace halo {

namespace {

constexpr std::array<EnumName<LayerType>, 8> layer_type_names{
    {{LayerType::gcn, "gcn"},
     {LayerType::sage, "sage"},
     {LayerType::gin, "gin"},
     {LayerType::linear, "linear"},
     {LayerType::maxk, "maxk"},
     {LayerType::agnn, "agnn"},
     {LayerType::transformer, "transformer"},
     {LayerType::gat, "gat"}}};

}  // namespace

LayerType parse_layer_type(std::string_view text)
{
    return parse_enum(layer_type_names, text, "layer type");
}

std::string to_string(LayerType type)
{
    return std::string(enum_name(layer_type_names, type));
}

bool aggregates(LayerType type)
{
    return type != LayerType::linear;
}

bool Layer::aggregate_first() const
{
    const auto transformed = type == LayerType::gin ? hidden_dim : out_dim;
    return in_dim <= transformed;
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
        if (layer.type == LayerType::maxk) {
            best = std::max(best, maxk_record_words(layer.k));
        }
    }
    return best;
}

std::int64_t Model::exchange_width() const
{
    std::int64_t best = buffer_width();
    for (const auto& layer : layers) {
        if (layer.type == LayerType::transformer) {
            best = std::max(best, 2 * layer.out_dim);
        }
    }
    return best;
}

namespace {

void check_array(const std::vector<float>& values, std::int64_t expected, const std::string& where,
                 std::size_t layer, const char* name, bool optional)
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
        switch (layer.type) {
            case LayerType::gin:
                if (layer.hidden_dim <= 0) {
                    HALO_THROW(InputError, where, ": gin layer ", l, " has hidden width ",
                               layer.hidden_dim);
                }
                if (!std::isfinite(layer.eps)) {
                    HALO_THROW(InputError, where, ": gin layer ", l, " has eps ", layer.eps);
                }
                check_array(layer.weight, layer.in_dim * layer.hidden_dim, where, l, "weight",
                            false);
                check_array(layer.bias, layer.hidden_dim, where, l, "bias", true);
                check_array(layer.weight2, layer.hidden_dim * layer.out_dim, where, l, "weight2",
                            false);
                check_array(layer.bias2, layer.out_dim, where, l, "bias2", true);
                break;
            case LayerType::transformer:
            case LayerType::gat: {
                const char* name = layer.type == LayerType::gat ? "gat" : "transformer";
                if (layer.heads < 1 || layer.out_dim % layer.heads != 0) {
                    HALO_THROW(InputError, where, ": ", name, " layer ", l, " has ", layer.heads,
                               " heads for width ", layer.out_dim,
                               " (heads must divide the width)");
                }
                const auto io = layer.in_dim * layer.out_dim;
                if (layer.type == LayerType::gat) {
                    if (!std::isfinite(layer.negative_slope)) {
                        HALO_THROW(InputError, where, ": gat layer ", l, " has negative slope ",
                                   layer.negative_slope);
                    }
                    check_array(layer.weight, io, where, l, "weight", false);
                    check_array(layer.bias, layer.out_dim, where, l, "bias", true);
                    check_array(layer.att_src, layer.out_dim, where, l, "att_src", false);
                    check_array(layer.att_dst, layer.out_dim, where, l, "att_dst", false);
                } else {
                    check_array(layer.query_weight, io, where, l, "query_weight", false);
                    check_array(layer.key_weight, io, where, l, "key_weight", false);
                    check_array(layer.value_weight, io, where, l, "value_weight", false);
                    check_array(layer.query_bias, layer.out_dim, where, l, "query_bias", true);
                    check_array(layer.key_bias, layer.out_dim, where, l, "key_bias", true);
                    check_array(layer.value_bias, layer.out_dim, where, l, "value_bias", true);
                    check_array(layer.root_weight, io, where, l, "root_weight", true);
                    check_array(layer.bias, layer.out_dim, where, l, "bias", true);
                    if (!layer.weight.empty()) {
                        HALO_THROW(InputError, where, ": transformer layer ", l,
                                   " has a 'weight' (it uses query/key/value_weight and "
                                   "root_weight)");
                    }
                }
                break;
            }
            case LayerType::agnn:
                if (!std::isfinite(layer.beta)) {
                    HALO_THROW(InputError, where, ": agnn layer ", l, " has beta ", layer.beta);
                }
                if (layer.weight.empty() && layer.in_dim != layer.out_dim) {
                    HALO_THROW(InputError, where, ": agnn layer ", l, " has no weight but widths ",
                               layer.in_dim, " -> ", layer.out_dim);
                }
                check_array(layer.weight, layer.in_dim * layer.out_dim, where, l, "weight", true);
                check_array(layer.bias, layer.out_dim, where, l, "bias", true);
                break;
            case LayerType::maxk:
                if (layer.k < 1 || layer.k > layer.out_dim) {
                    HALO_THROW(InputError, where, ": maxk layer ", l, " keeps k = ", layer.k,
                               " of ", layer.out_dim, " entries (need 1 <= k <= width)");
                }
                [[fallthrough]];
            default:
                check_array(layer.weight, layer.in_dim * layer.out_dim, where, l, "weight", false);
                check_array(layer.bias, layer.out_dim, where, l, "bias", true);
                check_array(layer.root_weight, layer.in_dim * layer.out_dim, where, l,
                            "root_weight", layer.type != LayerType::sage);
                break;
        }
    }
}

namespace {

// Glorot-uniform [rows, cols] from (seed, stream).
std::vector<float> glorot(std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                          std::uint64_t stream)
{
    const float limit = std::sqrt(6.0f / static_cast<float>(rows + cols));
    std::vector<float> w(static_cast<std::size_t>(rows * cols));
    for (std::size_t k = 0; k < w.size(); ++k) {
        w[k] = limit * detail::uniform_pm1(seed, stream, k);
    }
    return w;
}

std::vector<float> small_bias(std::int64_t n, std::uint64_t seed, std::uint64_t stream)
{
    std::vector<float> b(n);
    for (std::int64_t k = 0; k < n; ++k) {
        b[k] = 0.1f * detail::uniform_pm1(seed, stream, k);
    }
    return b;
}

}  // namespace

Model random_model(LayerType type, const std::vector<std::int64_t>& dims, std::uint64_t seed,
                   const RandomModelOptions& options)
{
    if (dims.size() < 2) {
        HALO_THROW(InputError, "a random model needs at least two widths (input, output), got ",
                   dims.size());
    }
    Model model;
    model.name = "random-" + to_string(type);
    for (std::size_t l = 0; l + 1 < dims.size(); ++l) {
        Layer layer;
        layer.type = type;
        layer.in_dim = dims[l];
        layer.out_dim = dims[l + 1];
        layer.activation =
            l + 2 < dims.size() && type != LayerType::maxk ? Activation::relu : Activation::none;
        const std::uint64_t stream = 16 * l;
        const auto in = layer.in_dim;
        const auto out = layer.out_dim;
        // A linear map's weight [rows, cols] and bias [cols], from streams `first` and `first + 1`.
        auto linear = [&](std::vector<float>& weight, std::vector<float>& bias, std::int64_t rows,
                          std::int64_t cols, std::uint64_t first) {
            weight = glorot(rows, cols, seed, stream + first);
            bias = small_bias(cols, seed, stream + first + 1);
        };
        switch (type) {
            case LayerType::gin:
                layer.hidden_dim = out;
                layer.eps = 0.1f;
                linear(layer.weight, layer.bias, in, layer.hidden_dim, 1);
                linear(layer.weight2, layer.bias2, layer.hidden_dim, out, 3);
                break;
            case LayerType::transformer:
                layer.heads = options.heads;
                linear(layer.query_weight, layer.query_bias, in, out, 1);
                linear(layer.key_weight, layer.key_bias, in, out, 3);
                linear(layer.value_weight, layer.value_bias, in, out, 5);
                linear(layer.root_weight, layer.bias, in, out, 7);
                break;
            case LayerType::gat:
                layer.heads = options.heads;
                linear(layer.weight, layer.bias, in, out, 1);
                layer.att_src = glorot(1, out, seed, stream + 3);
                layer.att_dst = glorot(1, out, seed, stream + 4);
                break;
            default:
                linear(layer.weight, layer.bias, in, out, 1);
                if (type == LayerType::sage) {
                    layer.root_weight = glorot(in, out, seed, stream + 5);
                }
                if (type == LayerType::maxk) {
                    layer.k = std::min(options.k, out);
                }
                if (type == LayerType::agnn) {
                    layer.beta = 1.0f + 0.5f * detail::uniform_pm1(seed, stream + 6, 0);
                }
                break;
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
