// The HDF5 model file (docs/FORMAT.md, "Model file").
#include "halo/store/model_file.hpp"

#include <span>

#include "halo/core/error.hpp"
#include "halo/core/layer_type.hpp"
#include "hdf5_util.hpp"

namespace halo {
namespace {

constexpr const char* model_format_name = "halo-model";
constexpr int model_format_version = 1;

// The writer and the reader of one layer's group, from its type's LayerTypeInfo: the type,
// activation and widths, then the arrays before the scalars (`leading`), the scalars, the rest.
void write_layer(hid_t gid, const store::Where& w, const Layer& layer)
{
    const auto& info = layer_type_info(layer.type);
    store::write_attribute_string(gid, w, "type", to_string(layer.type));
    store::write_attribute_string(gid, w, "activation", to_string(layer.activation));
    store::write_attribute<std::int64_t>(gid, w, "in_dim", layer.in_dim);
    store::write_attribute<std::int64_t>(gid, w, "out_dim", layer.out_dim);
    auto write_array = [&](const LayerArray& a) {
        const auto& v = a.of(layer);
        if (v.empty()) {
            return;  // optional (validate_model ran)
        }
        const std::string name(a.name);
        const std::span<const float> data{v.data(), v.size()};
        if (a.is_matrix()) {
            store::write_matrix<float>(gid, w, name.c_str(), data, layer_dim(layer, a.rows),
                                       layer_dim(layer, a.cols));
        } else {
            store::write_array<float>(gid, w, name.c_str(), data);
        }
    };
    for (std::size_t i = 0; i < info.leading; ++i) {
        write_array(info.arrays[i]);
    }
    for (const auto& s : info.scalars) {
        const std::string name(s.name);
        if (s.is_int) {
            store::write_attribute<std::int64_t>(gid, w, name.c_str(),
                                                 static_cast<std::int64_t>(s.get(layer)));
        } else {
            store::write_attribute<float>(gid, w, name.c_str(), static_cast<float>(s.get(layer)));
        }
    }
    for (std::size_t i = info.leading; i < info.arrays.size(); ++i) {
        write_array(info.arrays[i]);
    }
}

Layer read_layer(hid_t gid, const store::Where& w)
{
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
    constexpr std::int64_t max_width = std::int64_t{1} << 24;
    layer.in_dim = store::read_int_attribute(gid, w, "in_dim");
    layer.out_dim = store::read_int_attribute(gid, w, "out_dim");
    if (layer.in_dim <= 0 || layer.out_dim <= 0 || layer.in_dim > max_width ||
        layer.out_dim > max_width) {
        HALO_THROW(InputError, w.str(), ": widths ", layer.in_dim, " -> ", layer.out_dim);
    }
    const auto& info = layer_type_info(layer.type);
    for (const auto& s : info.scalars) {
        const std::string name(s.name);
        if (!s.is_int) {
            s.set(layer, store::read_float_attribute(gid, w, name.c_str()));
            continue;
        }
        const auto value = store::read_int_attribute(gid, w, name.c_str());
        // A width sizes the arrays read below: bounded before anything is allocated.
        if (s.width && (value <= 0 || value > max_width)) {
            HALO_THROW(InputError, w.str(), ": ", name, " ", value);
        }
        s.set(layer, static_cast<double>(value));
    }
    for (const auto& a : info.arrays) {
        const std::string name(a.name);
        if (!a.required && !store::has_link(gid, w, name.c_str())) {
            continue;
        }
        const auto rows = layer_dim(layer, a.rows);
        const auto cols = layer_dim(layer, a.cols);
        if (a.is_matrix()) {
            std::string shape("[");
            shape.append(to_string(a.rows)).append(", ").append(to_string(a.cols)).append("]");
            a.of(layer) = store::read_matrix<float>(gid, w, name.c_str(), rows, cols, shape.c_str());
        } else {
            std::string why("attribute ");
            why.append(to_string(a.cols));
            a.of(layer) = store::read_array<float>(gid, w, name.c_str(), {cols, why.c_str()});
        }
    }
    return layer;
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
            const auto name = std::to_string(l);
            const auto g = store::create_group(layers.get(), layers_where, name.c_str());
            write_layer(g.get(), layers_where.child(name), model.layers[l]);
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
        model.layers.push_back(read_layer(g.get(), layers_where.child(name)));
    }
    validate_model(model, path.string());
    return model;
}

}  // namespace halo
