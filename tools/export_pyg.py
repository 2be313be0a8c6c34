#!/usr/bin/env python3
"""Train GCN, GraphSAGE and GIN in PyTorch Geometric on Cora / Citeseer; export them for HaloGNN.

    tools/export_pyg.py DATA_DIR --out DIR [--models gcn,sage,gin] [--datasets cora,citeseer]

For each (dataset, model) it writes, in DIR (docs/PYG.md):
  <dataset>-<model>.h5          the HaloGNN model file (docs/FORMAT.md, "Model file") that
                                `halo-infer --model` reads
  <dataset>-<model>.logits.npy  PyG's own eval-mode logits of every node, float32 [N, classes],
                                row i = node i
  <dataset>-<model>.json        summary: model, dataset, split, epochs, accuracies, seed, versions,
                                the files halo-partition must read and the checks made here
  summary.json                  every run in DIR (runs of earlier invocations are kept)

Features and labels: halo-partition reads the shared files themselves (<name>.feat.coo.txt.gz,
<name>.labels.txt.gz), so nothing is converted; this script parses the same files by the same rules
(docs/INPUT.md: COO duplicates add up, label -1 = none), so node i here is node i there.

Split (../shared/data/README.md): train = the first 140 (cora) / 120 (citeseer) node ids, validation
= the next 500, test = the ids in <name>.test_index.txt.gz; nodes labelled -1 are left out of all
three. The exported weights are those of the epoch with the best validation accuracy.

Layer semantics. These must equal HaloGNN's layers exactly (include/halo/model.hpp,
src/engine/engine.cpp, docs/FORMAT.md); the table in docs/PYG.md is the same list:

  adjacency   what `halo-partition --symmetrize --self-loops keep --normalize none` builds:
              A | A^T with duplicates removed, the file's self-loops kept (Citeseer has 124), no
              values (every edge weighs 1). PyG gets these nonzeros as edge_index = [col, row]:
              row i aggregates its columns j, i.e. messages flow j -> i (source_to_target).
  gcn         GCNConv(normalize=True, add_self_loops=True, improved=False, bias=True):
              add_remaining_self_loops with weight 1 (a stored self-loop is kept, not doubled),
              d_i = row sum of A + I, a_ij = 1 / sqrt(d_i d_j); out = A_hat (x W) + b.
              HaloGNN gcn: weight = lin.weight^T, bias = bias.
  sage        SAGEConv(aggr="mean", root_weight=True, project=False, normalize=False, bias=True):
              out = lin_l(mean_{j in N(i)} x_j) + lin_r(x_i); the mean runs over the stored
              neighbours (a stored self-loop counts, none is added; no neighbour gives 0).
              HaloGNN sage: weight = lin_l.weight^T, bias = lin_l.bias, root_weight =
              lin_r.weight^T (lin_r has no bias).
  gin         GINConv(Sequential(Linear(in, h), ReLU(), Linear(h, out)), eps=0, train_eps=True):
              out = MLP((1 + eps) x_i + sum_{j in N(i)} x_j); eps is learnt and exported as the
              float32 attribute eps. HaloGNN gin: weight/bias = the first Linear, weight2/bias2 =
              the second, hidden_dim = h. No batch norm in the MLP (HaloGNN has none).
  activation  ReLU after every layer but the last (HaloGNN activation "relu"), none after the last
              ("none"): the logits, before any softmax (cross_entropy applies it in training).
  dropout     before every layer, in training only (F.dropout(training=self.training)); the
              exported logits come from model.eval() under torch.no_grad(). HaloGNN has no dropout.
  precision   float32, TF32 off, so PyG's logits are plain float32 results.

Checks made here, recorded in the JSON: the model file is read back and compared array by array;
and a float64 NumPy forward of the exported arrays with HaloGNN's semantics (reference_forward)
must reproduce PyG's logits within --check-rtol of their largest magnitude, so a wrong mapping
fails here, before HaloGNN runs.

Without torch (--random-weights): seeded random weights of the same architectures and the NumPy
forward's logits as the reference; tests the files and the agreement pipeline on machines without
PyTorch. Deterministic: --seed seeds initialization and dropout, and PyTorch runs with
deterministic algorithms (warn_only), so a rerun on the same device gives the same model (seen
bit-identical on the CPU and on an H200 with torch 2.11 / PyG 2.8; CUDA does not promise it for
every operator). CPU and GPU training give different models (other random streams).
"""
import argparse
import copy
import datetime
import gzip
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

MODEL_FORMAT = "halo-model"
MODEL_VERSION = 1
LAYER_TYPES = ("gcn", "sage", "gin")
ACTIVATIONS = ("none", "relu")

# The standard (Planetoid / Kipf & Welling) split: train = the first TRAIN_COUNT ids.
TRAIN_COUNT = {"cora": 140, "citeseer": 120, "pubmed": 60}
VALIDATION_COUNT = 500

# Hyperparameters per model (GCN: Kipf & Welling 2017); the command line overrides them.
DEFAULTS = {
    "gcn": dict(hidden=16, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=200),
    "sage": dict(hidden=64, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=200),
    "gin": dict(hidden=64, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=200),
}
NUM_LAYERS = 2

# What halo-partition must be told so that its adjacency is the one PyG trains on.
HALO_PARTITION_FLAGS = ["--symmetrize", "--self-loops", "keep", "--normalize", "none"]


class ExportError(Exception):
    """Bad input or a failed check; main() prints it as 'export_pyg: error: ...'."""


# ---- the shared data files (the same rules as src/io, docs/INPUT.md) -------------------------

def _text_lines(path):
    """Lines of a plain or gzip text file (gzip by its magic, as HaloGNN's readers decide)."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("ascii").splitlines()


def _data_lines(path):
    """(line number, fields) of every line that is not blank and not a #/% comment."""
    for number, line in enumerate(_text_lines(path), start=1):
        fields = line.split()
        if fields and fields[0][0] not in "#%":
            yield number, fields


def _parse_int(path, number, token):
    try:
        return int(token)
    except ValueError:
        raise ExportError(f"{path}:{number}: '{token}' is not an integer") from None


def read_edge_list(path):
    """(src, dst) int64 arrays of an unweighted edge list."""
    src, dst = [], []
    for number, fields in _data_lines(path):
        if len(fields) != 2:
            raise ExportError(f"{path}:{number}: {len(fields)} fields; this tool takes unweighted "
                              "'src dst' lines (PyG's SAGEConv and GINConv ignore edge weights)")
        src.append(_parse_int(path, number, fields[0]))
        dst.append(_parse_int(path, number, fields[1]))
    return np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)


def read_coo_features(path):
    """Dense float32 [N, F] from '# N F NNZ' + 'row col value' lines; duplicates add up."""
    lines = iter(_text_lines(path))
    header = None
    for number, line in enumerate(lines, start=1):
        if line.strip():
            header = (number, line.strip())
            break
    if header is None or not header[1].startswith("#"):
        raise ExportError(f"{path}: expected a first line '# N F NNZ'")
    parts = header[1][1:].split()
    if len(parts) != 3:
        raise ExportError(f"{path}:{header[0]}: header '{header[1]}' is not '# N F NNZ'")
    n, f, nnz = (_parse_int(path, header[0], p) for p in parts)
    rows, cols, vals = [], [], []
    for number, line in enumerate(lines, start=header[0] + 1):
        fields = line.split()
        if not fields or fields[0][0] in "#%":
            continue
        if len(fields) != 3:
            raise ExportError(f"{path}:{number}: expected 'row col value'")
        row, col = _parse_int(path, number, fields[0]), _parse_int(path, number, fields[1])
        if not (0 <= row < n and 0 <= col < f):
            raise ExportError(f"{path}:{number}: entry ({row}, {col}) lies outside the {n} x {f} "
                              f"of the header (line {header[0]})")
        rows.append(row)
        cols.append(col)
        try:
            vals.append(float(fields[2]))
        except ValueError:
            raise ExportError(f"{path}:{number}: '{fields[2]}' is not a number") from None
    if len(rows) != nnz:
        raise ExportError(f"{path}: {len(rows)} entries, the header declares {nnz}")
    x = np.zeros((n, f), dtype=np.float32)
    np.add.at(x, (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)),
              np.asarray(vals, dtype=np.float32))
    if not np.isfinite(x).all():
        raise ExportError(f"{path}: non-finite feature values")
    return x


def read_int_list(path):
    return np.asarray([_parse_int(path, number, fields[0])
                       for number, fields in _data_lines(path)], dtype=np.int64)


class Dataset:
    """One dataset as HaloGNN sees it: nodes, the adjacency halo-partition builds, node data."""

    def __init__(self, data_dir, name):
        self.name = name
        self.data_dir = Path(data_dir)
        self.files = {
            "graph": f"{name}.el.gz",
            "features": f"{name}.feat.coo.txt.gz",
            "labels": f"{name}.labels.txt.gz",
            "test_index": f"{name}.test_index.txt.gz",
        }
        for kind, file in self.files.items():
            if not (self.data_dir / file).is_file():
                note = "; ../shared/data has features of cora and citeseer only" * (
                    kind == "features")
                raise ExportError(f"{self.data_dir / file}: missing ({kind} of {name}{note})")
        if name not in TRAIN_COUNT:
            raise ExportError(f"no standard split known for '{name}' "
                              f"(known: {', '.join(sorted(TRAIN_COUNT))})")
        self.x = read_coo_features(self.path("features"))
        self.num_nodes = self.x.shape[0]
        self.labels = read_int_list(self.path("labels"))
        if self.labels.size != self.num_nodes:
            raise ExportError(f"{self.path('labels')}: {self.labels.size} labels, the features "
                              f"have {self.num_nodes} rows")
        if (self.labels < -1).any():
            raise ExportError(f"{self.path('labels')}: labels below -1")
        self.num_classes = int(self.labels.max()) + 1
        self.test = read_int_list(self.path("test_index"))
        if self.test.size == 0 or self.test.min() < 0 or self.test.max() >= self.num_nodes:
            raise ExportError(f"{self.path('test_index')}: ids must lie in [0, {self.num_nodes})")
        src, dst = read_edge_list(self.path("graph"))
        if src.size and max(src.max(), dst.max()) >= self.num_nodes:
            raise ExportError(f"{self.path('graph')}: node id {max(src.max(), dst.max())} is not "
                              f"below the {self.num_nodes} feature rows")
        self.rows, self.cols = symmetrized_adjacency(src, dst, self.num_nodes)
        labelled = self.labels >= 0
        ids = np.arange(self.num_nodes)
        n_train = TRAIN_COUNT[name]
        self.train = ids[:n_train][labelled[:n_train]]
        self.val = ids[n_train:n_train + VALIDATION_COUNT][
            labelled[n_train:n_train + VALIDATION_COUNT]]
        # Each id once, as halo-infer --eval-nodes and halo-inspect count them.
        self.test_eval = np.unique(self.test[labelled[self.test]])

    def path(self, kind):
        return self.data_dir / self.files[kind]

    def accuracy(self, logits, ids):
        """(correct, evaluated) with halo-infer's rule: argmax, lowest index on ties."""
        prediction = np.argmax(logits, axis=1)
        return int((prediction[ids] == self.labels[ids]).sum()), int(ids.size)


def symmetrized_adjacency(src, dst, n):
    """Nonzeros (row, col) of A | A^T without duplicates, sorted by row then column, self-loops
    as the file has them: halo::build_csr with symmetrize and SelfLoops::keep."""
    keys = np.unique(np.concatenate([src * n + dst, dst * n + src]))
    return keys // n, keys % n


# ---- HaloGNN's layers: the model file and a float64 NumPy forward ---------------------------

def check_layers(layers, where):
    """Shapes, widths and finiteness, as halo::validate_model checks them on reading."""
    if not layers:
        raise ExportError(f"{where}: the model has no layers")
    for i, layer in enumerate(layers):
        kind = layer["type"]
        if kind not in LAYER_TYPES or layer["activation"] not in ACTIVATIONS:
            raise ExportError(f"{where}: layer {i}: type {kind!r}, activation "
                              f"{layer['activation']!r}")
        if i > 0 and layers[i - 1]["out_dim"] != layer["in_dim"]:
            raise ExportError(f"{where}: layer {i} takes width {layer['in_dim']} but layer "
                              f"{i - 1} produces {layers[i - 1]['out_dim']}")
        mid = layer["hidden_dim"] if kind == "gin" else layer["out_dim"]
        shapes = {"weight": (layer["in_dim"], mid), "bias": (mid,)}
        if kind == "sage":
            shapes["root_weight"] = (layer["in_dim"], layer["out_dim"])
        if kind == "gin":
            shapes["weight2"] = (mid, layer["out_dim"])
            shapes["bias2"] = (layer["out_dim"],)
            if not np.isfinite(layer["eps"]):
                raise ExportError(f"{where}: layer {i} eps {layer['eps']}")
        for key, shape in shapes.items():
            value = layer.get(key)
            if value is None and key.startswith("bias"):
                continue
            if value is None or value.shape != shape or value.dtype != np.float32:
                raise ExportError(f"{where}: layer {i} {key}: "
                                  f"{None if value is None else (value.shape, value.dtype)}, "
                                  f"expected float32 {shape}")
            if not np.isfinite(value).all():
                raise ExportError(f"{where}: layer {i} {key} has non-finite values")


def write_halo_model(path, layers, name):
    """The model file exactly as src/store/model_file.cpp writes it: little-endian int32 version
    and num_layers, int64 widths, float32 eps and arrays, variable-length UTF-8 strings; written
    under a temporary name, `format` last, then renamed."""
    import h5py
    check_layers(layers, str(path))
    text = h5py.string_dtype("utf-8")
    tmp = Path(f"{path}.tmp-{os.getpid()}")
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs.create("version", MODEL_VERSION, dtype="<i4")
            f.attrs.create("num_layers", len(layers), dtype="<i4")
            f.attrs.create("name", name, dtype=text)
            group = f.create_group("layers")
            for i, layer in enumerate(layers):
                g = group.create_group(str(i))
                g.attrs.create("type", layer["type"], dtype=text)
                g.attrs.create("activation", layer["activation"], dtype=text)
                g.attrs.create("in_dim", layer["in_dim"], dtype="<i8")
                g.attrs.create("out_dim", layer["out_dim"], dtype="<i8")
                keys = ["weight", "bias"]
                if layer["type"] == "sage":
                    keys.append("root_weight")
                if layer["type"] == "gin":
                    g.attrs.create("hidden_dim", layer["hidden_dim"], dtype="<i8")
                    g.attrs.create("eps", layer["eps"], dtype="<f4")
                    keys += ["weight2", "bias2"]
                for key in keys:
                    if layer.get(key) is not None:
                        g.create_dataset(key, data=np.ascontiguousarray(layer[key], dtype="<f4"))
            f.attrs.create("format", MODEL_FORMAT, dtype=text)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def read_halo_model(path):
    """(name, layers) of a HaloGNN model file; the inverse of write_halo_model."""
    import h5py

    def text(value):
        return value.decode() if isinstance(value, bytes) else str(value)

    with h5py.File(path, "r") as f:
        if text(f.attrs.get("format", "")) != MODEL_FORMAT:
            raise ExportError(f"{path}: not a HaloGNN model file")
        if int(f.attrs["version"]) != MODEL_VERSION:
            raise ExportError(f"{path}: model format version {int(f.attrs['version'])}")
        layers = []
        for i in range(int(f.attrs["num_layers"])):
            g = f[f"layers/{i}"]
            layer = {"type": text(g.attrs["type"]), "activation": text(g.attrs["activation"]),
                     "in_dim": int(g.attrs["in_dim"]), "out_dim": int(g.attrs["out_dim"])}
            if layer["type"] == "gin":
                layer["hidden_dim"] = int(g.attrs["hidden_dim"])
                layer["eps"] = float(np.float32(g.attrs["eps"]))
            for key in ("weight", "bias", "root_weight", "weight2", "bias2"):
                if key in g:
                    layer[key] = np.asarray(g[key][...], dtype=np.float32)
            layers.append(layer)
        name = text(f.attrs.get("name", ""))
    check_layers(layers, str(path))
    return name, layers


def _spmm(rows, cols, values, h):
    """sum over nonzeros of values * h[col] into row: out = A h, in float64."""
    out = np.zeros((h.shape[0], h.shape[1]), dtype=np.float64)
    np.add.at(out, rows, values[:, None] * h[cols])
    return out


def aggregation_operators(rows, cols, n):
    """HaloGNN's three operators (src/engine/engine.cpp make_aggregation) over the adjacency."""
    count = np.bincount(rows, minlength=n).astype(np.float64)
    has_loop = np.zeros(n, dtype=bool)
    has_loop[rows[rows == cols]] = True
    loops = np.flatnonzero(~has_loop)
    gr = np.concatenate([rows, loops])
    gc = np.concatenate([cols, loops])
    degree = count + (~has_loop)
    return {
        "gcn": (gr, gc, 1.0 / np.sqrt(degree[gr] * degree[gc])),
        "sage": (rows, cols, 1.0 / count[rows]),  # a row without nonzeros has no entry here
        "gin": (rows, cols, np.ones(rows.size, dtype=np.float64)),
    }


def reference_forward(layers, operators, x):
    """HaloGNN's forward in float64: the oracle both PyG's and halo-infer's logits must match.
    Transform first everywhere (A (x W) = (A x) W up to rounding)."""
    h = np.asarray(x, dtype=np.float64)
    for layer in layers:
        rows, cols, values = operators[layer["type"]]
        w = layer["weight"].astype(np.float64)
        b = layer["bias"].astype(np.float64) if layer.get("bias") is not None else 0.0
        xw = h @ w
        if layer["type"] == "gcn":
            out = _spmm(rows, cols, values, xw) + b
        elif layer["type"] == "sage":
            out = _spmm(rows, cols, values, xw) + h @ layer["root_weight"].astype(np.float64) + b
        else:
            z = (1.0 + np.float64(np.float32(layer["eps"]))) * xw + _spmm(rows, cols, values, xw)
            z = np.maximum(z + b, 0.0)
            b2 = layer["bias2"].astype(np.float64) if layer.get("bias2") is not None else 0.0
            out = z @ layer["weight2"].astype(np.float64) + b2
        h = np.maximum(out, 0.0) if layer["activation"] == "relu" else out
    return h


def layer_specs(model, in_dim, hidden, out_dim, num_layers=NUM_LAYERS):
    """Widths and activations of a num_layers-deep model of one layer type."""
    dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
    specs = []
    for i in range(num_layers):
        spec = {"type": model, "in_dim": dims[i], "out_dim": dims[i + 1],
                "activation": "relu" if i + 1 < num_layers else "none"}
        if model == "gin":
            spec["hidden_dim"] = hidden
        specs.append(spec)
    return specs


def random_layers(specs, seed):
    """Glorot-uniform weights and small biases (NumPy, seeded); gin eps 0.1."""
    rng = np.random.default_rng(seed)

    def glorot(rows, cols):
        limit = np.sqrt(6.0 / (rows + cols))
        return rng.uniform(-limit, limit, size=(rows, cols)).astype(np.float32)

    def small(n):
        return rng.uniform(-0.1, 0.1, size=n).astype(np.float32)

    layers = []
    for spec in specs:
        layer = dict(spec)
        mid = spec["hidden_dim"] if spec["type"] == "gin" else spec["out_dim"]
        layer["weight"] = glorot(spec["in_dim"], mid)
        layer["bias"] = small(mid)
        if spec["type"] == "sage":
            layer["root_weight"] = glorot(spec["in_dim"], spec["out_dim"])
        if spec["type"] == "gin":
            layer["eps"] = 0.1
            layer["weight2"] = glorot(mid, spec["out_dim"])
            layer["bias2"] = small(spec["out_dim"])
        layers.append(layer)
    return layers


# ---- PyG: the models and the mapping of their parameters to HaloGNN's arrays ----------------

def make_pyg_net(specs, dropout=0.0, cached=False):
    """A torch.nn.Module running `specs` with PyG's convolutions, semantics as in the module
    docstring: forward(x, edge_index) -> logits (dropout only while training)."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv, GINConv, SAGEConv

    def conv(spec):
        if spec["type"] == "gcn":
            return GCNConv(spec["in_dim"], spec["out_dim"], improved=False, cached=cached,
                           add_self_loops=True, normalize=True, bias=True)
        if spec["type"] == "sage":
            return SAGEConv(spec["in_dim"], spec["out_dim"], aggr="mean", normalize=False,
                            root_weight=True, project=False, bias=True)
        mlp = torch.nn.Sequential(torch.nn.Linear(spec["in_dim"], spec["hidden_dim"]),
                                  torch.nn.ReLU(),
                                  torch.nn.Linear(spec["hidden_dim"], spec["out_dim"]))
        return GINConv(mlp, eps=0.0, train_eps=True)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.specs = [dict(s) for s in specs]
            self.convs = torch.nn.ModuleList(conv(s) for s in specs)
            self.dropout = dropout

        def forward(self, x, edge_index):
            for spec, layer in zip(self.specs, self.convs):
                x = F.dropout(x, p=self.dropout, training=self.training)
                x = layer(x, edge_index)
                if spec["activation"] == "relu":
                    x = torch.relu(x)
            return x

    return Net()


def export_layers(net):
    """HaloGNN layer arrays from a make_pyg_net model (Linear weights transposed to [in, out])."""
    def t(param):
        return param.detach().cpu().numpy().astype(np.float32).T.copy()

    def v(param):
        return None if param is None else param.detach().cpu().numpy().astype(np.float32).copy()

    layers = []
    for spec, conv in zip(net.specs, net.convs):
        layer = dict(spec)
        if spec["type"] == "gcn":
            layer["weight"], layer["bias"] = t(conv.lin.weight), v(conv.bias)
        elif spec["type"] == "sage":
            if conv.lin_r.bias is not None:
                raise ExportError("SAGEConv lin_r has a bias; HaloGNN's sage has none")
            layer["weight"], layer["bias"] = t(conv.lin_l.weight), v(conv.lin_l.bias)
            layer["root_weight"] = t(conv.lin_r.weight)
        else:
            first, relu, second = conv.nn
            if type(relu).__name__ != "ReLU":
                raise ExportError(f"GINConv MLP has {type(relu).__name__} between its Linears")
            layer["weight"], layer["bias"] = t(first.weight), v(first.bias)
            layer["weight2"], layer["bias2"] = t(second.weight), v(second.bias)
            layer["eps"] = float(conv.eps.detach().cpu().float())
        layers.append(layer)
    return layers


def load_layers(net, layers):
    """The inverse of export_layers: copies HaloGNN arrays into a make_pyg_net model."""
    import torch

    def put(param, array, transpose=True):
        value = torch.from_numpy(np.ascontiguousarray(array.T if transpose else array))
        with torch.no_grad():
            param.copy_(value.to(param.device, param.dtype))

    for layer, conv in zip(layers, net.convs):
        if layer["type"] == "gcn":
            put(conv.lin.weight, layer["weight"])
            put(conv.bias, layer["bias"], transpose=False)
        elif layer["type"] == "sage":
            put(conv.lin_l.weight, layer["weight"])
            put(conv.lin_l.bias, layer["bias"], transpose=False)
            put(conv.lin_r.weight, layer["root_weight"])
        else:
            put(conv.nn[0].weight, layer["weight"])
            put(conv.nn[0].bias, layer["bias"], transpose=False)
            put(conv.nn[2].weight, layer["weight2"])
            put(conv.nn[2].bias, layer["bias2"], transpose=False)
            with torch.no_grad():
                conv.eps.fill_(layer["eps"])


def set_deterministic(seed):
    """Seeds and the flags that make PyTorch's float32 results plain and repeatable."""
    import random

    import torch
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.set_float32_matmul_precision("highest")
    # Ops without a deterministic CUDA kernel (scatter additions) warn instead of failing.
    torch.use_deterministic_algorithms(True, warn_only=True)


def train_pyg(ds, model, hp, seed, device):
    """Trains one model; returns (net at its best validation epoch, training record)."""
    import torch
    import torch.nn.functional as F
    set_deterministic(seed)
    specs = layer_specs(model, ds.x.shape[1], hp["hidden"], ds.num_classes)
    net = make_pyg_net(specs, dropout=hp["dropout"]).to(device)
    x = torch.from_numpy(ds.x).to(device)
    edge_index = torch.from_numpy(np.stack([ds.cols, ds.rows])).to(device)
    y = torch.from_numpy(ds.labels).to(device)
    train = torch.from_numpy(ds.train).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"])
    best = (-1.0, -1, None)
    t0 = time.perf_counter()
    for epoch in range(1, hp["epochs"] + 1):
        net.train()
        opt.zero_grad()
        loss = F.cross_entropy(net(x, edge_index)[train], y[train])
        loss.backward()
        opt.step()
        net.eval()
        with torch.no_grad():
            logits = net(x, edge_index).cpu().numpy()
        correct, total = ds.accuracy(logits, ds.val)
        # Strictly better only: the earliest of equally good epochs is kept.
        if correct / max(total, 1) > best[0]:
            best = (correct / max(total, 1), epoch, copy.deepcopy(net.state_dict()))
    net.load_state_dict(best[2])
    net.eval()
    return net, {"best_epoch": best[1], "train_seconds": time.perf_counter() - t0,
                 "final_loss": loss.item()}


def pyg_logits(net, ds, device):
    import torch
    net = net.to(device).eval()
    with torch.no_grad():
        out = net(torch.from_numpy(ds.x).to(device),
                  torch.from_numpy(np.stack([ds.cols, ds.rows])).to(device))
    return out.cpu().numpy().astype(np.float32)


# ---- one export -------------------------------------------------------------------------------

def export_one(args, ds, operators, model, versions):
    hp = dict(DEFAULTS[model])
    for key in hp:
        if getattr(args, key) is not None:
            hp[key] = getattr(args, key)
    stem = f"{ds.name}-{model}"
    out = Path(args.out)
    record = {"dataset": ds.name, "model": model, "layers": NUM_LAYERS, "seed": args.seed,
              "hyperparameters": hp, "exact": True, "created": _now(),
              "command": " ".join(sys.argv), "versions": versions}
    if args.random_weights:
        specs = layer_specs(model, ds.x.shape[1], hp["hidden"], ds.num_classes)
        layers = random_layers(specs, args.seed)
        logits = reference_forward(layers, operators, ds.x).astype(np.float32)
        record.update(reference="numpy-float64", trained=False, epochs=0, device="cpu")
    else:
        import torch
        device = torch.device(args.device if args.device != "auto" else
                              ("cuda" if torch.cuda.is_available() else "cpu"))
        net, training = train_pyg(ds, model, hp, args.seed, device)
        layers = export_layers(net)
        logits = pyg_logits(net, ds, device)
        record.update(reference="pyg", trained=True, epochs=hp["epochs"], **training,
                      device=(torch.cuda.get_device_name(device) if device.type == "cuda"
                              else "cpu"))
        if device.type != "cpu":
            cpu = pyg_logits(copy.deepcopy(net), ds, torch.device("cpu"))
            record["pyg_cpu_vs_device"] = {
                "max_abs_diff": float(np.abs(cpu - logits).max()),
                "identical_predictions": float(
                    (cpu.argmax(1) == logits.argmax(1)).mean())}
        # The float64 oracle on the exported arrays must give PyG's logits: a wrong mapping of a
        # parameter (a missing transpose, lin_l/lin_r swapped, eps lost) fails here.
        oracle = reference_forward(layers, operators, ds.x)
        diff = float(np.abs(oracle - logits).max())
        scale = float(np.abs(oracle).max())
        record["numpy_check"] = {
            "max_abs_diff": diff, "max_abs_value": scale, "rtol": args.check_rtol,
            "identical_predictions": float((oracle.argmax(1) == logits.argmax(1)).mean()),
            "passed": diff <= args.check_rtol * max(scale, 1e-30)}
    model_path = out / f"{stem}.h5"
    logits_path = out / f"{stem}.logits.npy"
    write_halo_model(model_path, layers, f"{stem} ({record['reference']})")
    _, back = read_halo_model(model_path)
    for a, b in zip(layers, back):
        for key in ("weight", "bias", "root_weight", "weight2", "bias2"):
            if (a.get(key) is None) != (b.get(key) is None) or (
                    a.get(key) is not None and not np.array_equal(a[key], b[key])):
                raise ExportError(f"{model_path}: {key} does not read back as written")
        if a["type"] == "gin" and np.float32(a["eps"]) != np.float32(b["eps"]):
            raise ExportError(f"{model_path}: eps does not read back as written")
    np.save(logits_path, np.ascontiguousarray(logits, dtype="<f4"))
    accuracy = {}
    for split, ids in (("train", ds.train), ("val", ds.val), ("test", ds.test_eval)):
        correct, total = ds.accuracy(logits, ids)
        accuracy[split] = {"correct": correct, "evaluated": total,
                           "accuracy": correct / max(total, 1)}
    record.update(
        accuracy=accuracy, num_nodes=ds.num_nodes, num_features=int(ds.x.shape[1]),
        num_classes=ds.num_classes, num_nonzeros=int(ds.rows.size),
        self_loops_in_adjacency=int((ds.rows == ds.cols).sum()),
        split={"train": f"first {TRAIN_COUNT[ds.name]} ids", "val": f"next {VALIDATION_COUNT}",
               "test": ds.files["test_index"], "unlabelled_left_out": int((ds.labels < 0).sum())},
        files={"model": model_path.name, "logits": logits_path.name},
        halo_inputs=dict(ds.files, num_nodes=ds.num_nodes, partition_flags=HALO_PARTITION_FLAGS),
        halo_layers=[{k: v for k, v in layer.items() if not isinstance(v, np.ndarray)}
                     for layer in layers])
    (out / f"{stem}.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _versions(random_weights):
    import h5py
    v = {"python": platform.python_version(), "numpy": np.__version__, "h5py": h5py.__version__}
    if not random_weights:
        import torch
        import torch_geometric
        v.update(torch=torch.__version__, torch_geometric=torch_geometric.__version__,
                 cuda=torch.version.cuda)
    return v


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="docs/PYG.md describes the workflow and the layer semantics.")
    ap.add_argument("data_dir", help="directory with <name>.el.gz, .feat.coo.txt.gz, "
                                     ".labels.txt.gz, .test_index.txt.gz (../shared/data)")
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--models", default="gcn,sage,gin", help="comma list of gcn, sage, gin")
    ap.add_argument("--datasets", default="cora,citeseer", help="comma list of dataset names")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="auto", help="auto (cuda if available) | cpu | cuda[:N]")
    ap.add_argument("--epochs", type=int, help="training epochs (default: per model, 200)")
    ap.add_argument("--hidden", type=int, help="hidden width (default: gcn 16, sage/gin 64)")
    ap.add_argument("--lr", type=float, help="Adam learning rate (default 0.01)")
    ap.add_argument("--weight-decay", type=float, help="Adam weight decay (default 5e-4)")
    ap.add_argument("--dropout", type=float, help="dropout in training (default 0.5)")
    ap.add_argument("--check-rtol", type=float, default=1e-4,
                    help="tolerance of the float64 oracle check, relative to the largest |logit|")
    ap.add_argument("--random-weights", action="store_true",
                    help="no torch: seeded random weights, the NumPy oracle's logits as reference")
    args = ap.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.datasets = [d for d in args.datasets.split(",") if d]
    for m in args.models:
        if m not in LAYER_TYPES:
            ap.error(f"unknown model '{m}' (expected {', '.join(LAYER_TYPES)})")
    if not args.models or not args.datasets:
        ap.error("--models and --datasets need at least one entry")
    for key in ("epochs", "hidden"):
        if getattr(args, key) is not None and getattr(args, key) < 1:
            ap.error(f"--{key} must be positive")
    if args.dropout is not None and not 0.0 <= args.dropout < 1.0:
        ap.error("--dropout must lie in [0, 1)")
    return args


def main(argv=None):
    args = parse_args(argv)
    # cuBLAS needs this before CUDA starts for deterministic GEMMs.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    versions = _versions(args.random_weights)
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {"runs": {}}
    failed = []
    for name in args.datasets:
        ds = Dataset(args.data_dir, name)
        operators = aggregation_operators(ds.rows, ds.cols, ds.num_nodes)
        print(f"{name}: {ds.num_nodes} nodes, {ds.rows.size} nonzeros, {ds.x.shape[1]} features, "
              f"{ds.num_classes} classes; train {ds.train.size}, val {ds.val.size}, "
              f"test {ds.test_eval.size}", flush=True)
        for model in args.models:
            r = export_one(args, ds, operators, model, versions)
            summary["runs"][f"{name}-{model}"] = r
            acc = r["accuracy"]
            check = r.get("numpy_check")
            note = ""
            if check is not None:
                note = (f", oracle check max |diff| {check['max_abs_diff']:.2e} "
                        f"({'ok' if check['passed'] else 'FAILED'})")
                if not check["passed"]:
                    failed.append(f"{name}-{model}")
            print(f"  {model}: {r['reference']} test accuracy {acc['test']['accuracy']:.4f} "
                  f"(val {acc['val']['accuracy']:.4f}, epoch {r.get('best_epoch', '-')}){note}; "
                  f"{r['files']['model']}, {r['files']['logits']}", flush=True)
    summary.update(updated=_now(), data_dir=str(Path(args.data_dir).resolve()))
    tmp = summary_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    os.replace(tmp, summary_path)
    if failed:
        raise ExportError(f"the float64 oracle does not reproduce PyG's logits for "
                          f"{', '.join(failed)} (beyond --check-rtol {args.check_rtol}): the "
                          "exported weights would not give PyG's model")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ExportError as e:
        print(f"export_pyg: error: {e}", file=sys.stderr)
        sys.exit(1)
