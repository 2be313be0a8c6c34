"""HaloGNN's model file (docs/FORMAT.md, "Model file"): writer, reader and checks, with h5py.

A model is a list of layers, each a dict: "type" (one of LAYER_TYPES), "activation" ("none" or
"relu"), "in_dim", "out_dim" (ints), the scalar attributes of its type (SCALAR_ATTRIBUTES) and
its float32 arrays by HaloGNN name (ARRAY_KEYS), matrices [in, out] as the engine multiplies
x W. The layout and the checks are those of src/store/model_file.cpp and halo::validate_model.
"""
import json
import os
from pathlib import Path

import numpy as np

MODEL_FORMAT = "halo-model"
MODEL_VERSION = 1
# HaloGNN's layer types, their scalar attributes and arrays: the engine's table
# (include/halo/core/layer_type.hpp) as `halo-inspect --layer-types` prints it, kept beside this file;
# test_layer_table fails when the two differ.
_TABLE = json.loads((Path(__file__).with_name("layer_types.json")).read_text())["layer_types"]
LAYER_TYPES = tuple(t["name"] for t in _TABLE)
ACTIVATIONS = ("none", "relu")

# Float32 arrays a layer may carry, by HaloGNN name (every type's, first seen first).
ARRAY_KEYS = tuple(dict.fromkeys(a["name"] for t in _TABLE for a in t["arrays"]))
# Scalar attributes by layer type: (name, HDF5 dtype, python type).
SCALAR_ATTRIBUTES = {
    t["name"]: tuple((s["name"], s["dtype"], int if s["dtype"] == "<i8" else float)
                     for s in t["scalars"])
    for t in _TABLE if t["scalars"]}
_ARRAYS = {t["name"]: t["arrays"] for t in _TABLE}


class HaloError(ValueError):
    """A model, graph or result that HaloGNN cannot take, or a file that is not what it should
    be; the message names the file, layer or value."""


def layer_array_shapes(layer):
    """{array name: (shape, required)} of a layer, as halo::validate_model checks them (from
    the table: a shape's factors are the layer's widths)."""
    return {a["name"]: (tuple(layer[d] for d in a["shape"]), a["required"])
            for a in _ARRAYS[layer["type"]]}


def _check_layer(layer, i, where):
    kind = layer["type"]
    if kind not in LAYER_TYPES or layer["activation"] not in ACTIVATIONS:
        raise HaloError(f"{where}: layer {i}: type {kind!r}, activation "
                        f"{layer['activation']!r} (HaloGNN has {', '.join(LAYER_TYPES)}; "
                        f"activations {', '.join(ACTIVATIONS)})")
    if layer["in_dim"] < 1 or layer["out_dim"] < 1:
        raise HaloError(f"{where}: layer {i} has widths {layer['in_dim']} -> {layer['out_dim']}")
    for name, _, _ in SCALAR_ATTRIBUTES.get(kind, ()):
        value = layer.get(name)
        if value is None or not np.isfinite(value):
            raise HaloError(f"{where}: {kind} layer {i} {name} is {value!r}")
    if kind == "gin" and layer["hidden_dim"] < 1:
        raise HaloError(f"{where}: gin layer {i} has hidden width {layer['hidden_dim']}")
    if kind == "maxk" and not 1 <= layer["k"] <= layer["out_dim"]:
        raise HaloError(f"{where}: maxk layer {i} keeps k = {layer['k']} of "
                        f"{layer['out_dim']} entries (need 1 <= k <= width)")
    if kind in ("gat", "transformer") and (
            layer["heads"] < 1 or layer["out_dim"] % layer["heads"] != 0):
        raise HaloError(f"{where}: {kind} layer {i} has {layer['heads']} heads for width "
                        f"{layer['out_dim']} (heads must divide the width)")
    if kind == "agnn" and layer.get("weight") is None and layer["in_dim"] != layer["out_dim"]:
        raise HaloError(f"{where}: agnn layer {i} has no weight but widths "
                        f"{layer['in_dim']} -> {layer['out_dim']}")
    shapes = layer_array_shapes(layer)
    for key in ARRAY_KEYS:
        value = layer.get(key)
        if key not in shapes:
            if value is not None:
                raise HaloError(f"{where}: {kind} layer {i} has an array {key!r}, which "
                                f"HaloGNN's {kind} does not read")
            continue
        shape, required = shapes[key]
        if value is None and not required:
            continue
        if value is None or value.shape != shape or value.dtype != np.float32:
            raise HaloError(f"{where}: layer {i} {key}: "
                            f"{None if value is None else (value.shape, value.dtype)}, "
                            f"expected float32 {shape}")
        if not np.isfinite(value).all():
            raise HaloError(f"{where}: layer {i} {key} has non-finite values")


def check_layers(layers, where):
    """Shapes, widths, attributes and finiteness, as halo::validate_model checks them."""
    if not layers:
        raise HaloError(f"{where}: the model has no layers")
    for i, layer in enumerate(layers):
        if i > 0 and layers[i - 1]["out_dim"] != layer["in_dim"]:
            raise HaloError(f"{where}: layer {i} takes width {layer['in_dim']} but layer "
                            f"{i - 1} produces {layers[i - 1]['out_dim']}")
        _check_layer(layer, i, where)


def write_text_attribute(attrs, key, value):
    """A string attribute as src/store/hdf5_util.cpp writes one: fixed-length UTF-8 of
    max(1, bytes) bytes, NUL-padded. Not h5py's default variable-length string, which lives in
    the file's global heap (docs/FORMAT.md, "Conventions")."""
    import h5py
    data = value.encode("utf-8")
    attrs.create(key, np.bytes_(data), dtype=h5py.string_dtype("utf-8", max(1, len(data))))


def attribute_text(value):
    """A string attribute as str: h5py gives bytes for fixed-length strings (what HaloGNN writes)
    and str for variable-length ones (older files)."""
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def write_model(path, layers, name=""):
    """The model file exactly as src/store/model_file.cpp writes it: little-endian int32 version
    and num_layers, int64 widths, heads, k and hidden_dim, float32 eps, beta, negative_slope and
    arrays, fixed-length UTF-8 strings; written under a temporary name, `format` last, flushed,
    then renamed, so a failure never leaves a file that looks valid. Arrays that are None are left
    out (optional ones only; check_layers enforces it)."""
    import h5py
    path = Path(path)
    check_layers(layers, str(path))
    tmp = Path(f"{path}.tmp-{os.getpid()}")
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs.create("version", MODEL_VERSION, dtype="<i4")
            f.attrs.create("num_layers", len(layers), dtype="<i4")
            write_text_attribute(f.attrs, "name", name)
            group = f.create_group("layers")
            for i, layer in enumerate(layers):
                g = group.create_group(str(i))
                write_text_attribute(g.attrs, "type", layer["type"])
                write_text_attribute(g.attrs, "activation", layer["activation"])
                g.attrs.create("in_dim", layer["in_dim"], dtype="<i8")
                g.attrs.create("out_dim", layer["out_dim"], dtype="<i8")
                for attr, dtype, _ in SCALAR_ATTRIBUTES.get(layer["type"], ()):
                    g.attrs.create(attr, layer[attr], dtype=dtype)
                for key in layer_array_shapes(layer):
                    if layer.get(key) is not None:
                        g.create_dataset(key, data=np.ascontiguousarray(layer[key], dtype="<f4"))
            write_text_attribute(f.attrs, "format", MODEL_FORMAT)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def read_model(path):
    """(name, layers) of a HaloGNN model file; the inverse of write_model. Arrays the layer type
    does not read are rejected, as are missing required ones (check_layers)."""
    import h5py
    text = attribute_text
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise HaloError(f"{path}: cannot open as HDF5 ({e})") from None
    with f:
        if text(f.attrs.get("format", "")) != MODEL_FORMAT:
            raise HaloError(f"{path}: not a HaloGNN model file (no format 'halo-model')")
        if int(f.attrs["version"]) != MODEL_VERSION:
            raise HaloError(f"{path}: model format version {int(f.attrs['version'])}, this "
                            f"reader knows {MODEL_VERSION}")
        layers = []
        for i in range(int(f.attrs["num_layers"])):
            g = f[f"layers/{i}"]
            layer = {"type": text(g.attrs["type"]), "activation": text(g.attrs["activation"]),
                     "in_dim": int(g.attrs["in_dim"]), "out_dim": int(g.attrs["out_dim"])}
            for attr, _, kind_of in SCALAR_ATTRIBUTES.get(layer["type"], ()):
                if attr not in g.attrs:
                    raise HaloError(f"{path}: layers/{i} ({layer['type']}) has no attribute "
                                    f"{attr!r}")
                value = g.attrs[attr]
                layer[attr] = int(value) if kind_of is int else float(np.float32(value))
            for key in g:
                if key not in ARRAY_KEYS:
                    raise HaloError(f"{path}: layers/{i} has an unknown dataset {key!r}")
                layer[key] = np.asarray(g[key][...], dtype=np.float32)
            if layer["type"] == "agnn":
                layer["has_weight"] = "weight" in layer
            layers.append(layer)
        name = text(f.attrs.get("name", ""))
    check_layers(layers, str(path))
    return name, layers


def layers_equal(a, b):
    """None when two layer lists hold the same file content, else what differs first."""
    if len(a) != len(b):
        return f"{len(a)} layers vs {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        for key in ("type", "activation", "in_dim", "out_dim"):
            if x[key] != y[key]:
                return f"layer {i} {key}: {x[key]!r} vs {y[key]!r}"
        for attr, _, kind_of in SCALAR_ATTRIBUTES.get(x["type"], ()):
            same = (x[attr] == y[attr] if kind_of is int
                    else np.float32(x[attr]) == np.float32(y[attr]))
            if not same:
                return f"layer {i} {attr}: {x[attr]!r} vs {y[attr]!r}"
        for key in ARRAY_KEYS:
            u, v = x.get(key), y.get(key)
            if (u is None) != (v is None) or (u is not None and not np.array_equal(u, v)):
                return f"layer {i} {key} differs"
    return None
