// The HDF5 model file (docs/FORMAT.md, "Model file").
#include "halo/model_file.hpp"

#include <span>

#include "halo/error.hpp"
#include "hdf5_util.hpp"

namespace halo {
namespace {

constexpr const char* model_format_name = "halo-model";
constexpr int model_format_version = 1;

std::span<const float> span_of(const std::vector<float>& v)
{
    return {v.data(), v.size()};
}

}  // namespace

void write_model(const std::filesystem::path& path, const Model& model)
{
    validate_model(model, path.string());
    const store::QuietErrors quiet;
    store::AtomicH5File out(path);
    const store::Where root{out.name(), "/"};
    const auto h = out.get();
    store::write_attribute<std::int32_t>(h, root, "version", model_format_version);
    store::write_attribute<std::int32_t>(h, root, "num_layers",
                                         static_cast<std::int32_t>(model.layers.size()));
    store::write_attribute_string(h, root, "name", model.name);
    {
        const auto layers = store::create_group(h, root, "layers");
        const auto layers_where = root.child("layers");
        for (std::size_t l = 0; l < model.layers.size(); ++l) {
            const auto& layer = model.layers[l];
            const auto name = std::to_string(l);
            const auto g = store::create_group(layers.get(), layers_where, name.c_str());
            const auto w = layers_where.child(name);
            const auto gid = g.get();
            const auto mid = layer.type == LayerType::gin ? layer.hidden_dim : layer.out_dim;
            store::write_attribute_string(gid, w, "type", to_string(layer.type));
            store::write_attribute_string(gid, w, "activation", to_string(layer.activation));
            store::write_attribute<std::int64_t>(gid, w, "in_dim", layer.in_dim);
            store::write_attribute<std::int64_t>(gid, w, "out_dim", layer.out_dim);
            if (!layer.weight.empty()) {
                store::write_matrix<float>(gid, w, "weight", span_of(layer.weight), layer.in_dim,
                                           mid);
            }
            auto optional_array = [&](const char* name, const std::vector<float>& v) {
                if (!v.empty()) {
                    store::write_array<float>(gid, w, name, span_of(v));
                }
            };
            auto optional_matrix = [&](const char* name, const std::vector<float>& v) {
                if (!v.empty()) {
                    store::write_matrix<float>(gid, w, name, span_of(v), layer.in_dim,
                                               layer.out_dim);
                }
            };
            optional_array("bias", layer.bias);
            optional_matrix("root_weight", layer.root_weight);
            switch (layer.type) {
                case LayerType::gin:
                    store::write_attribute<std::int64_t>(gid, w, "hidden_dim", layer.hidden_dim);
                    store::write_attribute<float>(gid, w, "eps", layer.eps);
                    store::write_matrix<float>(gid, w, "weight2", span_of(layer.weight2),
                                               layer.hidden_dim, layer.out_dim);
                    optional_array("bias2", layer.bias2);
                    break;
                case LayerType::maxk:
                    store::write_attribute<std::int64_t>(gid, w, "k", layer.k);
                    break;
                case LayerType::agnn:
                    store::write_attribute<float>(gid, w, "beta", layer.beta);
                    break;
                case LayerType::gat:
                    store::write_attribute<std::int64_t>(gid, w, "heads", layer.heads);
                    store::write_attribute<float>(gid, w, "negative_slope", layer.negative_slope);
                    store::write_array<float>(gid, w, "att_src", span_of(layer.att_src));
                    store::write_array<float>(gid, w, "att_dst", span_of(layer.att_dst));
                    break;
                case LayerType::transformer:
                    store::write_attribute<std::int64_t>(gid, w, "heads", layer.heads);
                    optional_matrix("query_weight", layer.query_weight);
                    optional_matrix("key_weight", layer.key_weight);
                    optional_matrix("value_weight", layer.value_weight);
                    optional_array("query_bias", layer.query_bias);
                    optional_array("key_bias", layer.key_bias);
                    optional_array("value_bias", layer.value_bias);
                    break;
                default:
                    break;
            }
        }
    }
    // The format, written last: a file without it is not a model to any reader.
    out.commit_as(model_format_name);
}

Model read_model(const std::filesystem::path& path)
{
    const store::QuietErrors quiet;
    const auto in = store::open_format_file(path.string());
    if (in.format != model_format_name) {
        HALO_THROW(InputError, path.string(), ": not a HaloGNN model file (attribute format is '",
                   in.format, "', expected '", model_format_name, "')");
    }
    store::expect_format_version(in, "model", model_format_version);
    const auto& root = in.root;
    const auto h = in.file.get();
    const auto num_layers = store::read_int_attribute(h, root, "num_layers");
    if (num_layers < 1 || num_layers > 1000) {
        HALO_THROW(InputError, path.string(), ": num_layers is ", num_layers);
    }
    Model model;
    model.name = store::has_attribute(h, root, "name")
                     ? store::read_string_attribute(h, root, "name")
                     : std::string();
    const auto layers = store::open_group(h, root, "layers");
    const auto layers_where = root.child("layers");
    for (std::int64_t l = 0; l < num_layers; ++l) {
        const auto name = std::to_string(l);
        const auto g = store::open_group(layers.get(), layers_where, name.c_str());
        const auto w = layers_where.child(name);
        const auto gid = g.get();
        Layer layer;
        // Read outside the try: read_string_attribute's errors name the attribute already.
        const auto type = store::read_string_attribute(gid, w, "type");
        const auto activation = store::read_string_attribute(gid, w, "activation");
        try {
            layer.type = parse_layer_type(type);
            layer.activation = parse_activation(activation);
        } catch (const InputError& e) {
            HALO_THROW(InputError, w.str(), ": ", e.message());
        }
        layer.in_dim = store::read_int_attribute(gid, w, "in_dim");
        layer.out_dim = store::read_int_attribute(gid, w, "out_dim");
        if (layer.in_dim <= 0 || layer.out_dim <= 0 || layer.in_dim > (1 << 24) ||
            layer.out_dim > (1 << 24)) {
            HALO_THROW(InputError, w.str(), ": widths ", layer.in_dim, " -> ", layer.out_dim);
        }
        std::int64_t mid = layer.out_dim;
        if (layer.type == LayerType::gin) {
            layer.hidden_dim = store::read_int_attribute(gid, w, "hidden_dim");
            if (layer.hidden_dim <= 0 || layer.hidden_dim > (1 << 24)) {
                HALO_THROW(InputError, w.str(), ": hidden_dim ", layer.hidden_dim);
            }
            layer.eps = static_cast<float>(store::read_float_attribute(gid, w, "eps"));
            mid = layer.hidden_dim;
            layer.weight2 = store::read_matrix<float>(gid, w, "weight2", layer.hidden_dim,
                                                      layer.out_dim, "[hidden_dim, out_dim]");
            if (store::has_link(gid, w, "bias2")) {
                layer.bias2 =
                    store::read_array<float>(gid, w, "bias2", {layer.out_dim, "attribute out_dim"});
            }
        }
        const bool weight_optional =
            layer.type == LayerType::agnn || layer.type == LayerType::transformer;
        if (!weight_optional || store::has_link(gid, w, "weight")) {
            layer.weight =
                store::read_matrix<float>(gid, w, "weight", layer.in_dim, mid, "[in_dim, width]");
        }
        auto optional_array = [&](const char* name) {
            return store::has_link(gid, w, name)
                       ? store::read_array<float>(gid, w, name, {layer.out_dim, "out_dim"})
                       : std::vector<float>();
        };
        auto matrix = [&](const char* name) {
            return store::read_matrix<float>(gid, w, name, layer.in_dim, layer.out_dim,
                                             "[in_dim, out_dim]");
        };
        if (store::has_link(gid, w, "bias")) {
            layer.bias = store::read_array<float>(gid, w, "bias", {mid, "the layer's width"});
        }
        if (layer.type == LayerType::sage ||
            (layer.type == LayerType::transformer && store::has_link(gid, w, "root_weight"))) {
            layer.root_weight = matrix("root_weight");
        }
        auto read_heads = [&] {
            layer.heads = store::read_int_attribute(gid, w, "heads");
            if (layer.heads < 1 || layer.heads > layer.out_dim) {
                HALO_THROW(InputError, w.str(), ": heads ", layer.heads, " for width ",
                           layer.out_dim);
            }
        };
        switch (layer.type) {
            case LayerType::maxk:
                layer.k = store::read_int_attribute(gid, w, "k");
                break;
            case LayerType::agnn:
                layer.beta = static_cast<float>(store::read_float_attribute(gid, w, "beta"));
                break;
            case LayerType::gat:
                read_heads();
                layer.negative_slope =
                    static_cast<float>(store::read_float_attribute(gid, w, "negative_slope"));
                layer.att_src = store::read_array<float>(gid, w, "att_src",
                                                         {layer.out_dim, "attribute out_dim"});
                layer.att_dst = store::read_array<float>(gid, w, "att_dst",
                                                         {layer.out_dim, "attribute out_dim"});
                break;
            case LayerType::transformer:
                read_heads();
                layer.query_weight = matrix("query_weight");
                layer.key_weight = matrix("key_weight");
                layer.value_weight = matrix("value_weight");
                layer.query_bias = optional_array("query_bias");
                layer.key_bias = optional_array("key_bias");
                layer.value_bias = optional_array("value_bias");
                break;
            default:
                break;
        }
        model.layers.push_back(std::move(layer));
    }
    validate_model(model, path.string());
    return model;
}

}  // namespace halo
