#!/usr/bin/env python3
"""Train GNNs in PyTorch Geometric on Cora / Citeseer; export them for HaloGNN.

    tools/export_pyg.py DATA_DIR --out DIR [--models gcn,sage,gin,agnn,transformer,gat,maxk]
                        [--datasets cora,citeseer]

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

Layer semantics. These must equal HaloGNN's layers exactly (include/halo/core/model.hpp,
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
  linear      torch.nn.Linear(in, out, bias=True): x W + b. HaloGNN linear: weight = weight^T.
  maxk        (MaxK-GNN, paper 000; PyG has no module, make_pyg_net builds it) Linear(in, out),
              then torch.topk(k) per row with the other entries set to 0, then GCN propagation
              without weight (gcn_norm: add_remaining_self_loops, D^-1/2 (A + I) D^-1/2), no
              bias after it. HaloGNN maxk: weight/bias = the Linear's, attribute k. Ties:
              HaloGNN keeps the lower column (include/halo/kernels_host/maxk.hpp), torch.topk's order of
              equal values is unspecified; exact ties have probability zero with trained float
              weights, but near-ties (k-th and (k+1)-th within rounding) may fall either way in
              float32: the export's oracle takes PyG's own choice (checked to be a top-k of its
              float64 values up to 1e-5 of the row's largest) and records the rows where it
              differs from the float64 choice (numpy_check.maxk_near_ties).
  agnn        AGNNConv(requires_grad, add_self_loops=True) after an optional Linear: z = x W + b
              (no Linear: z = x), p_ij = softmax_j(beta cos(z_i, z_j)) over the row's neighbours
              and itself (a stored self-loop replaced by one), out = sum_j p_ij z_j.
              HaloGNN agnn: weight/bias = the Linear's (absent without one), attribute beta.
  transformer TransformerConv(in, out / heads, heads, concat=True, beta=False, edge_dim=None,
              bias=True, root_weight=True): per head, softmax_j(q_i . k_j / sqrt(d)) over the
              stored neighbours only (no self-loops added; stored ones count), concat, +
              lin_skip(x). HaloGNN transformer: query/key/value_weight/_bias = lin_query/
              lin_key/lin_value, root_weight = lin_skip.weight^T, bias = lin_skip.bias.
  gat         GATConv(in, out / heads, heads, concat=True, negative_slope=0.2,
              add_self_loops=True, bias=True): z = x W (no bias), per head t
              softmax_j(LeakyReLU(z_i^t . a_dst^t + z_j^t . a_src^t)) over the neighbours and
              the node itself, concat, + bias. HaloGNN gat: weight = lin.weight^T, att_src /
              att_dst = att_src / att_dst flattened ([1, heads, d] -> head t at [t d, (t+1) d)),
              bias, attributes heads, negative_slope. Attention dropout in training only.
  models      gcn, sage, gin: two layers of that type. agnn (PyG's examples/agnn.py): linear
              (relu), agnn without weight (beta fixed 1), agnn without weight (beta learnt),
              linear. transformer, gat: two layers, --heads heads in the first, one in the last.
              maxk: maxk, maxk (k = --k each, no activation: the top-k is the nonlinearity),
              linear.
  activation  ReLU after every layer but the last (HaloGNN activation "relu"), none after the last
              ("none"): the logits, before any softmax (cross_entropy applies it in training).
  dropout     before every layer (agnn: before its two linears only), in training only (F.dropout(training=self.training)); the
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

# The model file writer and reader and the PyG module converters are the halognn package's
# (python/, `pip install ./python`); from a checkout it is imported from the tree.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from halognn import pyg as halognn_pyg  # noqa: E402  (imports torch only when called)
from halognn.model_file import (ACTIVATIONS, ARRAY_KEYS, LAYER_TYPES,  # noqa: E402,F401
                                MODEL_FORMAT, MODEL_VERSION, SCALAR_ATTRIBUTES, HaloError,
                                attribute_text, check_layers, layer_array_shapes, layers_equal,
                                read_model, write_model, write_text_attribute)

# The architectures exported (layer_specs).
MODELS = ("gcn", "sage", "gin", "agnn", "transformer", "gat", "maxk")
# Models whose HaloGNN layers compute PyG's function exactly on every backend (up to float32
# summation order); attention layers are approximate on the CUDA backend's fused fp16 kernel.
EXACT_MODELS = ("gcn", "sage", "gin", "maxk")
# The standard (Planetoid / Kipf & Welling) split: train = the first TRAIN_COUNT ids.
TRAIN_COUNT = {"cora": 140, "citeseer": 120, "pubmed": 60}
VALIDATION_COUNT = 500

# Hyperparameters per model (GCN: Kipf & Welling 2017; AGNN and GAT: PyG's examples/agnn.py and
# examples/gat.py, but hidden width 64 for AGNN); the command line overrides them. heads: of
# the first layer (the last has one); k: entries kept by maxk.
DEFAULTS = {
    "gcn": dict(hidden=16, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=200),
    "sage": dict(hidden=64, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=200),
    "gin": dict(hidden=64, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=200),
    "agnn": dict(hidden=64, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=200),
    # head width 32: a width the fused Fused3S kernel has an instance of
    "transformer": dict(hidden=64, heads=2, lr=0.005, weight_decay=5e-4, dropout=0.5,
                        epochs=200),
    "gat": dict(hidden=64, heads=8, lr=0.005, weight_decay=5e-4, dropout=0.6, epochs=200),
    "maxk": dict(hidden=64, k=16, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=200),
}
NUM_LAYERS = 2

# What halo-partition must be told so that its adjacency is the one PyG trains on.
HALO_PARTITION_FLAGS = ["--symmetrize", "--self-loops", "keep", "--normalize", "none"]


# Bad input or a failed check; main() prints it as 'export_pyg: error: ...'. The package's
# error, so that the writer's and reader's refusals are caught alike.
ExportError = HaloError


# ---- the shared data files (the same rules as src/core/io, docs/INPUT.md) --------------------

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

def write_halo_model(path, layers, name):
    """halognn.write_model: the model file exactly as src/store/model_file.cpp writes it."""
    write_model(path, layers, name)


def read_halo_model(path):
    """halognn.read_model: (name, layers) of a HaloGNN model file."""
    return read_model(path)


def _spmm(rows, cols, values, h):
    """sum over nonzeros of values * h[col] into row: out = A h, in float64."""
    out = np.zeros((h.shape[0], h.shape[1]), dtype=np.float64)
    np.add.at(out, rows, values[:, None] * h[cols])
    return out


def aggregation_operators(rows, cols, n):
    """HaloGNN's operators (src/engine/engine.cpp make_aggregation) over the adjacency, by layer
    type: (rows, cols, values) in row order; values None for attention patterns (binary masks)."""
    count = np.bincount(rows, minlength=n).astype(np.float64)
    has_loop = np.zeros(n, dtype=bool)
    has_loop[rows[rows == cols]] = True
    loops = np.flatnonzero(~has_loop)
    gr = np.concatenate([rows, loops])
    gc = np.concatenate([cols, loops])
    degree = count + (~has_loop)
    gcn = (gr, gc, 1.0 / np.sqrt(degree[gr] * degree[gc]))
    return {
        "gcn": gcn,
        "sage": (rows, cols, 1.0 / count[rows]),  # a row without nonzeros has no entry here
        "gin": (rows, cols, np.ones(rows.size, dtype=np.float64)),
        "maxk": gcn,
        # agnn and gat attend over A + I with one self-loop per node (a stored one is kept, none
        # doubled), as PyG's remove_self_loops + add_self_loops and HaloGNN's gcn pattern give.
        "agnn": (gr, gc, None),
        "gat": (gr, gc, None),
        # The transformer attends over the stored adjacency (no loops added; stored ones count).
        "transformer": (rows, cols, None),
        "linear": None,
        "num_nodes": n,
    }


def _sparse_softmax_aggregate(rows, cols, n, scores, v):
    """out[i] = concat_t sum_{j in row i} softmax_j(scores[:, t]) v^t[j], float64, per head t;
    scores is [nnz, heads], v [n, heads * d]; rows without a nonzero give zeros."""
    heads = scores.shape[1]
    d = v.shape[1] // heads
    peak = np.full((n, heads), -np.inf)
    np.maximum.at(peak, rows, scores)
    e = np.exp(scores - peak[rows])
    total = np.zeros((n, heads))
    np.add.at(total, rows, e)
    p = e / total[rows]
    out = np.zeros((n, heads, d))
    np.add.at(out, rows, p[:, :, None] * v.reshape(n, heads, d)[cols])
    return out.reshape(n, heads * d)


def _f64(layer, key):
    value = layer.get(key)
    return None if value is None else value.astype(np.float64)


def _affine(h, weight, bias):
    out = h @ weight if weight is not None else h.copy()
    return out + bias if bias is not None else out


def maxk_select(z, k):
    """Columns of the k largest entries of each row (HaloGNN's tie rule: value descending, then
    column ascending), [n, k]."""
    order = np.argsort(-z, axis=1, kind="stable")
    return order[:, :k]


def reference_forward(layers, operators, x, maxk_selection=None, stats=None):
    """HaloGNN's forward in float64: the oracle both PyG's and halo-infer's logits must match.
    Transform first everywhere (A (x W) = (A x) W up to rounding).

    maxk_selection {layer index: [n, k] columns}: use these top-k columns (PyG's own choice)
    instead of the float64 ones, after checking that they are a top-k of the float64 values up
    to rounding (1e-5 of the row's largest |value|): a near-tie between the k-th and the
    (k+1)-th value may fall either way in float32, and would otherwise move whole entries.
    stats (a dict) receives per maxk layer the rows where the given selection differs from the
    float64 one ("maxk_near_ties")."""
    n = operators["num_nodes"]
    h = np.asarray(x, dtype=np.float64)
    for index, layer in enumerate(layers):
        kind = layer["type"]
        op = operators[kind]
        w, b = _f64(layer, "weight"), _f64(layer, "bias")
        if kind in ("gcn", "sage", "gin"):
            rows, cols, values = op
            xw = h @ w
            if kind == "gcn":
                out = _spmm(rows, cols, values, xw) + (b if b is not None else 0.0)
            elif kind == "sage":
                out = (_spmm(rows, cols, values, xw) + h @ _f64(layer, "root_weight") +
                       (b if b is not None else 0.0))
            else:
                z = (1.0 + np.float64(np.float32(layer["eps"]))) * xw + _spmm(rows, cols, values,
                                                                               xw)
                z = np.maximum(z + (b if b is not None else 0.0), 0.0)
                out = _affine(z, _f64(layer, "weight2"), _f64(layer, "bias2"))
        elif kind == "linear":
            out = _affine(h, w, b)
        elif kind == "maxk":
            rows, cols, values = op
            z = _affine(h, w, b)
            own = maxk_select(z, layer["k"])
            chosen = own
            if maxk_selection is not None and index in maxk_selection:
                chosen = np.sort(np.asarray(maxk_selection[index], dtype=np.int64), axis=1)
                if chosen.shape != own.shape or chosen.min() < 0 or chosen.max() >= z.shape[1]:
                    raise ExportError(f"maxk layer {index}: given selection of shape "
                                      f"{chosen.shape} / columns outside [0, {z.shape[1]})")
                if (np.diff(chosen, axis=1) == 0).any():
                    raise ExportError(f"maxk layer {index}: a given selection repeats a column")
                kth = np.take_along_axis(z, own, axis=1)[:, -1]
                slack = 1e-5 * np.maximum(np.abs(z).max(axis=1), 1e-30)
                low = np.take_along_axis(z, chosen, axis=1).min(axis=1) < kth - slack
                if low.any():
                    r = int(np.flatnonzero(low)[0])
                    raise ExportError(
                        f"maxk layer {index}: the given top-{layer['k']} of row {r} keeps a value "
                        f"below the float64 k-th largest beyond rounding (the weights do not "
                        f"give the model's top-k: a wrong mapping)")
                differs = (chosen != np.sort(own, axis=1)).any(axis=1)
                if stats is not None:
                    stats.setdefault("maxk_near_ties", {})[str(index)] = [
                        int(r) for r in np.flatnonzero(differs)]
            s = np.zeros_like(z)
            picked = np.arange(z.shape[0])[:, None]
            s[picked, chosen] = z[picked, chosen]
            out = _spmm(rows, cols, values, s)
        elif kind == "agnn":
            rows, cols, _ = op
            z = _affine(h, w, b)
            zn = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
            scores = np.float64(np.float32(layer["beta"])) * np.einsum(
                "ed,ed->e", zn[rows], zn[cols])
            out = _sparse_softmax_aggregate(rows, cols, n, scores[:, None], z)
        elif kind == "transformer":
            rows, cols, _ = op
            heads = layer["heads"]
            d = layer["out_dim"] // heads
            q = _affine(h, _f64(layer, "query_weight"), _f64(layer, "query_bias"))
            k = _affine(h, _f64(layer, "key_weight"), _f64(layer, "key_bias"))
            v = _affine(h, _f64(layer, "value_weight"), _f64(layer, "value_bias"))
            scores = np.einsum("ehd,ehd->eh", q.reshape(n, heads, d)[rows],
                               k.reshape(n, heads, d)[cols]) / np.sqrt(d)
            out = _sparse_softmax_aggregate(rows, cols, n, scores, v)
            if layer.get("root_weight") is not None:
                out = out + h @ _f64(layer, "root_weight")
            if b is not None:
                out = out + b
        elif kind == "gat":
            rows, cols, _ = op
            heads = layer["heads"]
            d = layer["out_dim"] // heads
            z = h @ w
            zh = z.reshape(n, heads, d)
            el = np.einsum("nhd,hd->nh", zh, _f64(layer, "att_dst").reshape(heads, d))
            er = np.einsum("nhd,hd->nh", zh, _f64(layer, "att_src").reshape(heads, d))
            e = el[rows] + er[cols]
            scores = np.where(e > 0, e, np.float64(np.float32(layer["negative_slope"])) * e)
            out = _sparse_softmax_aggregate(rows, cols, n, scores, z)
            if b is not None:
                out = out + b
        else:
            raise ExportError(f"reference_forward: layer {index} has type {kind!r}")
        h = np.maximum(out, 0.0) if layer["activation"] == "relu" else out
    return h


def layer_specs(model, in_dim, hidden, out_dim, num_layers=NUM_LAYERS, heads=None, k=None):
    """The layers (widths, activations, attributes) of one exported architecture (docs/PYG.md):
    gcn, sage, gin: num_layers of that type; agnn: PyG's examples/agnn.py, linear -> relu ->
    agnn -> agnn -> linear; transformer, gat: two layers, `heads` heads in the first, one in the
    last; maxk: MaxK-GNN's maxk -> maxk -> linear (the top-k is the nonlinearity)."""
    def spec(kind, i, o, act, **extra):
        return dict({"type": kind, "in_dim": i, "out_dim": o, "activation": act}, **extra)

    if model in ("gcn", "sage", "gin"):
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        specs = []
        for i in range(num_layers):
            s = spec(model, dims[i], dims[i + 1], "relu" if i + 1 < num_layers else "none")
            if model == "gin":
                s["hidden_dim"] = hidden
            specs.append(s)
        return specs
    if model == "agnn":
        # prop1 with a fixed beta = 1, prop2 learns it, as in PyG's example; no dropout before
        # the propagations (the example drops out before lin1 and lin2 only).
        return [spec("linear", in_dim, hidden, "relu"),
                spec("agnn", hidden, hidden, "none", beta=1.0, has_weight=False,
                     train_beta=False, dropout=False),
                spec("agnn", hidden, hidden, "none", beta=1.0, has_weight=False,
                     train_beta=True, dropout=False),
                spec("linear", hidden, out_dim, "none")]
    if model in ("transformer", "gat"):
        if hidden % heads != 0:
            raise ExportError(f"{model}: hidden width {hidden} is not a multiple of {heads} heads")
        extra = {"negative_slope": 0.2} if model == "gat" else {}
        return [spec(model, in_dim, hidden, "relu", heads=heads, **extra),
                spec(model, hidden, out_dim, "none", heads=1, **extra)]
    if model == "maxk":
        if not 1 <= k <= hidden:
            raise ExportError(f"maxk: k = {k} for hidden width {hidden}")
        return [spec("maxk", in_dim, hidden, "none", k=k),
                spec("maxk", hidden, hidden, "none", k=k),
                spec("linear", hidden, out_dim, "none")]
    raise ExportError(f"unknown model {model!r} (expected {', '.join(MODELS)})")


def random_specs(kind, dims, heads=1, k=16):
    """A stack of `kind` layers over widths dims, as halo::random_model builds it (ReLU between
    layers, none after the last; maxk: no activation, k capped at the width; agnn with a
    weight; every transformer / gat layer with `heads` heads)."""
    specs = []
    for i in range(len(dims) - 1):
        last = i + 2 == len(dims)
        s = {"type": kind, "in_dim": dims[i], "out_dim": dims[i + 1],
             "activation": "none" if last or kind == "maxk" else "relu"}
        if kind == "gin":
            s["hidden_dim"] = dims[i + 1]
        elif kind == "maxk":
            s["k"] = min(k, dims[i + 1])
        elif kind == "agnn":
            s.update(beta=1.0, has_weight=True)
        elif kind in ("gat", "transformer"):
            s["heads"] = heads
            if kind == "gat":
                s["negative_slope"] = 0.2
        specs.append(s)
    return specs


def random_layers(specs, seed):
    """Glorot-uniform weights and small biases (NumPy, seeded); gin eps 0.1, agnn beta drawn in
    [0.5, 1.5)."""
    rng = np.random.default_rng(seed)

    def glorot(rows, cols):
        limit = np.sqrt(6.0 / (rows + cols))
        return rng.uniform(-limit, limit, size=(rows, cols)).astype(np.float32)

    def small(n):
        return rng.uniform(-0.1, 0.1, size=n).astype(np.float32)

    layers = []
    for spec in specs:
        layer = dict(spec)
        kind, i, o = spec["type"], spec["in_dim"], spec["out_dim"]
        if kind == "transformer":
            for p in ("query", "key", "value"):
                layer[f"{p}_weight"], layer[f"{p}_bias"] = glorot(i, o), small(o)
            layer["root_weight"], layer["bias"] = glorot(i, o), small(o)
        elif kind == "agnn":
            if spec.get("has_weight", True):
                layer["weight"], layer["bias"] = glorot(i, o), small(o)
            layer["beta"] = float(np.float32(rng.uniform(0.5, 1.5)))
        else:
            mid = spec["hidden_dim"] if kind == "gin" else o
            layer["weight"] = glorot(i, mid)
            layer["bias"] = small(mid)
            if kind == "sage":
                layer["root_weight"] = glorot(i, o)
            if kind == "gin":
                layer["eps"] = 0.1
                layer["weight2"] = glorot(mid, o)
                layer["bias2"] = small(o)
            if kind == "gat":
                layer["att_src"] = glorot(1, o).reshape(o)
                layer["att_dst"] = glorot(1, o).reshape(o)
        layers.append(layer)
    return layers


# ---- PyG: the models and the mapping of their parameters to HaloGNN's arrays ----------------

def make_pyg_net(specs, dropout=0.0, cached=False):
    """A torch.nn.Module running `specs` with PyG's convolutions, semantics as in the module
    docstring: forward(x, edge_index) -> logits (dropout only while training; GATConv also drops
    attention coefficients with the same rate, in training only).

    maxk layers are a small module here (PyG has none): Linear, the top-k of each row
    (torch.topk; the others set to 0), then GCN propagation without weight (gcn_norm: add
    remaining self-loops, D^-1/2 (A + I) D^-1/2). net.record_topk(True) keeps each maxk
    layer's chosen columns of the last forward in layer.last_topk (the export's oracle uses
    them)."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import (AGNNConv, GATConv, GCNConv, GINConv, SAGEConv,
                                    TransformerConv)
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    class LinearLayer(torch.nn.Module):
        def __init__(self, spec):
            super().__init__()
            self.lin = torch.nn.Linear(spec["in_dim"], spec["out_dim"], bias=True)

        def forward(self, x, edge_index):
            return self.lin(x)

    class AgnnLayer(torch.nn.Module):
        """HaloGNN agnn: an optional Linear, then AGNNConv (cosine attention over A + I)."""
        def __init__(self, spec):
            super().__init__()
            self.lin = (torch.nn.Linear(spec["in_dim"], spec["out_dim"], bias=True)
                        if spec.get("has_weight", spec.get("weight") is not None) else None)
            if self.lin is None and spec.get("bias") is not None:
                raise ExportError("an agnn layer with a bias but no weight has no PyG module here")
            self.prop = AGNNConv(requires_grad=spec.get("train_beta", True), add_self_loops=True)

        def forward(self, x, edge_index):
            return self.prop(self.lin(x) if self.lin is not None else x, edge_index)

    class MaxkLayer(torch.nn.Module):
        """HaloGNN maxk: A_gcn maxk_k(x W + b) (MaxK-GNN, paper 000)."""
        def __init__(self, spec):
            super().__init__()
            self.lin = torch.nn.Linear(spec["in_dim"], spec["out_dim"], bias=True)
            self.k = spec["k"]
            self.cached = cached
            self.norm = None
            self.record = False
            self.last_topk = None

        def forward(self, x, edge_index):
            z = self.lin(x)
            values, index = torch.topk(z, self.k, dim=1)
            if self.record:
                self.last_topk = index.detach().cpu().numpy()
            s = torch.zeros_like(z).scatter(1, index, values)
            if self.norm is None or not self.cached:
                ei, w = gcn_norm(edge_index, None, z.size(0), improved=False,
                                 add_self_loops=True, flow="source_to_target", dtype=z.dtype)
                norm = (ei, w)
                if self.cached:
                    self.norm = norm
            else:
                norm = self.norm
            ei, w = norm
            # Messages flow edge_index[0] -> edge_index[1], weighted: row i sums w_ij s_j.
            return torch.zeros_like(s).index_add_(0, ei[1], s[ei[0]] * w[:, None])

    def conv(spec):
        kind = spec["type"]
        if kind == "gcn":
            return GCNConv(spec["in_dim"], spec["out_dim"], improved=False, cached=cached,
                           add_self_loops=True, normalize=True, bias=True)
        if kind == "sage":
            return SAGEConv(spec["in_dim"], spec["out_dim"], aggr="mean", normalize=False,
                            root_weight=True, project=False, bias=True)
        if kind == "gin":
            mlp = torch.nn.Sequential(torch.nn.Linear(spec["in_dim"], spec["hidden_dim"]),
                                      torch.nn.ReLU(),
                                      torch.nn.Linear(spec["hidden_dim"], spec["out_dim"]))
            return GINConv(mlp, eps=0.0, train_eps=True)
        if kind == "linear":
            return LinearLayer(spec)
        if kind == "agnn":
            return AgnnLayer(spec)
        if kind == "maxk":
            return MaxkLayer(spec)
        heads = spec["heads"]
        if kind == "transformer":
            return TransformerConv(spec["in_dim"], spec["out_dim"] // heads, heads=heads,
                                   concat=True, beta=False, dropout=0.0, edge_dim=None,
                                   bias=True, root_weight=True)
        if kind == "gat":
            return GATConv(spec["in_dim"], spec["out_dim"] // heads, heads=heads, concat=True,
                           negative_slope=spec.get("negative_slope", 0.2), dropout=dropout,
                           add_self_loops=True, bias=True)
        raise ExportError(f"no PyG module for layer type {kind!r}")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.specs = [{k: v for k, v in s.items() if not isinstance(v, np.ndarray)}
                          for s in specs]
            self.convs = torch.nn.ModuleList(conv(s) for s in specs)
            self.dropout = dropout

        def record_topk(self, value):
            """Whether maxk layers keep their chosen columns (layer.last_topk)."""
            for c in self.convs:
                if isinstance(c, MaxkLayer):
                    c.record = bool(value)

        def forward(self, x, edge_index):
            for spec, layer in zip(self.specs, self.convs):
                if spec.get("dropout", True):
                    x = F.dropout(x, p=self.dropout, training=self.training)
                x = layer(x, edge_index)
                if spec["activation"] == "relu":
                    x = torch.relu(x)
            return x

    return Net()


def _gat_lin(conv):
    """GATConv's shared source/target Linear (PyG >= 2.5: lin; before: lin_src == lin_dst)."""
    lin = getattr(conv, "lin", None)
    return lin if lin is not None else conv.lin_src


def export_layers(net):
    """HaloGNN layer arrays from a make_pyg_net model: the PyG convolutions and Linears through
    halognn's converters (python/halognn/pyg.py: the engine-semantics checks, the transposes to
    [in, out]); the agnn and maxk modules of make_pyg_net here."""
    converters = {"gcn": halognn_pyg.gcn_layers, "sage": halognn_pyg.sage_layers,
                  "gin": halognn_pyg.gin_layers, "transformer": halognn_pyg.transformer_layers,
                  "gat": halognn_pyg.gat_layers}
    layers = []
    for index, (spec, conv) in enumerate(zip(net.specs, net.convs)):
        layer = {k: val for k, val in spec.items() if k not in ARRAY_KEYS}
        kind = spec["type"]
        where = f"layer {index} ({kind})"
        if kind in converters:
            (converted,) = converters[kind](conv, where)
        elif kind in ("linear", "maxk"):
            (converted,) = halognn_pyg.linear_layers(conv.lin, where)
        elif kind == "agnn":
            width = spec["in_dim"]
            if conv.lin is not None:
                (converted,) = halognn_pyg.linear_layers(conv.lin, where)
                width = converted["out_dim"]
            (prop,) = halognn_pyg.agnn_layers(conv.prop, width, where)
            converted = dict(converted, beta=prop["beta"]) if conv.lin is not None else prop
        else:
            raise ExportError(f"export_layers: layer type {kind!r}")
        if converted["type"] != kind and kind not in ("maxk", "agnn"):
            raise ExportError(f"{where}: converted to a {converted['type']} layer")
        for key in ARRAY_KEYS:
            if converted.get(key) is not None:
                layer[key] = converted[key]
        for attr, _, _ in SCALAR_ATTRIBUTES.get(kind, ()):
            if attr in converted:
                layer[attr] = converted[attr]
        layers.append(layer)
    return layers


def load_layers(net, layers):
    """The inverse of export_layers: copies HaloGNN arrays into a make_pyg_net model."""
    import torch

    def put(param, array, transpose=True):
        if param is None or array is None:
            if (param is None) != (array is None):
                raise ExportError(f"load_layers: PyG has {'no' if param is None else 'a'} "
                                  f"parameter where the model file has "
                                  f"{'an array' if array is not None else 'none'}")
            return
        value = torch.from_numpy(np.ascontiguousarray(array.T if transpose else array))
        with torch.no_grad():
            param.copy_(value.reshape(param.shape).to(param.device, param.dtype))

    for layer, conv in zip(layers, net.convs):
        kind = layer["type"]
        if kind == "gcn":
            put(conv.lin.weight, layer["weight"])
            put(conv.bias, layer.get("bias"), transpose=False)
        elif kind == "sage":
            put(conv.lin_l.weight, layer["weight"])
            put(conv.lin_l.bias, layer.get("bias"), transpose=False)
            put(conv.lin_r.weight, layer["root_weight"])
        elif kind == "gin":
            put(conv.nn[0].weight, layer["weight"])
            put(conv.nn[0].bias, layer.get("bias"), transpose=False)
            put(conv.nn[2].weight, layer["weight2"])
            put(conv.nn[2].bias, layer.get("bias2"), transpose=False)
            with torch.no_grad():
                conv.eps.fill_(layer["eps"])
        elif kind in ("linear", "maxk"):
            put(conv.lin.weight, layer["weight"])
            put(conv.lin.bias, layer.get("bias"), transpose=False)
        elif kind == "agnn":
            if conv.lin is not None:
                put(conv.lin.weight, layer["weight"])
                put(conv.lin.bias, layer.get("bias"), transpose=False)
            with torch.no_grad():
                conv.prop.beta.fill_(layer["beta"])
        elif kind == "transformer":
            for p, lin in (("query", conv.lin_query), ("key", conv.lin_key),
                           ("value", conv.lin_value)):
                put(lin.weight, layer[f"{p}_weight"])
                put(lin.bias, layer.get(f"{p}_bias"), transpose=False)
            put(conv.lin_skip.weight, layer["root_weight"])
            put(conv.lin_skip.bias, layer.get("bias"), transpose=False)
        elif kind == "gat":
            put(_gat_lin(conv).weight, layer["weight"])
            put(conv.att_src, layer["att_src"], transpose=False)
            put(conv.att_dst, layer["att_dst"], transpose=False)
            put(conv.bias, layer.get("bias"), transpose=False)
        else:
            raise ExportError(f"load_layers: layer type {kind!r}")


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
    specs = layer_specs(model, ds.x.shape[1], hp["hidden"], ds.num_classes,
                        heads=hp.get("heads"), k=hp.get("k"))
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


def pyg_logits(net, ds, device, topk=None):
    """PyG's eval-mode logits; topk (a dict) receives each maxk layer's chosen columns."""
    import torch
    net = net.to(device).eval()
    net.record_topk(topk is not None)
    with torch.no_grad():
        out = net(torch.from_numpy(ds.x).to(device),
                  torch.from_numpy(np.stack([ds.cols, ds.rows])).to(device))
    net.record_topk(False)
    if topk is not None:
        for i, conv in enumerate(net.convs):
            if getattr(conv, "last_topk", None) is not None:
                topk[i] = conv.last_topk
    return out.cpu().numpy().astype(np.float32)


# ---- one export -------------------------------------------------------------------------------

def export_one(args, ds, operators, model, versions):
    hp = dict(DEFAULTS[model])
    for key in hp:
        if getattr(args, key) is not None:
            hp[key] = getattr(args, key)
    stem = f"{ds.name}-{model}"
    out = Path(args.out)
    record = {"dataset": ds.name, "model": model, "seed": args.seed,
              "hyperparameters": hp, "exact": model in EXACT_MODELS, "created": _now(),
              "command": " ".join(sys.argv), "versions": versions}
    if args.random_weights:
        specs = layer_specs(model, ds.x.shape[1], hp["hidden"], ds.num_classes,
                            heads=hp.get("heads"), k=hp.get("k"))
        layers = random_layers(specs, args.seed)
        logits = reference_forward(layers, operators, ds.x).astype(np.float32)
        record.update(reference="numpy-float64", trained=False, epochs=0, device="cpu")
    else:
        import torch
        device = torch.device(args.device if args.device != "auto" else
                              ("cuda" if torch.cuda.is_available() else "cpu"))
        net, training = train_pyg(ds, model, hp, args.seed, device)
        layers = export_layers(net)
        topk = {}
        logits = pyg_logits(net, ds, device, topk=topk)
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
        # maxk: the oracle takes PyG's top-k columns (after checking them against its own float64
        # values), so that a float32 near-tie does not move an entry; the rows where they differ
        # are recorded (halo-infer may break those near-ties either way too).
        near = {}
        oracle = reference_forward(layers, operators, ds.x, maxk_selection=topk, stats=near)
        diff = float(np.abs(oracle - logits).max())
        scale = float(np.abs(oracle).max())
        record["numpy_check"] = {
            "max_abs_diff": diff, "max_abs_value": scale, "rtol": args.check_rtol,
            "identical_predictions": float((oracle.argmax(1) == logits.argmax(1)).mean()),
            "passed": diff <= args.check_rtol * max(scale, 1e-30)}
        if near:
            record["numpy_check"]["maxk_near_ties"] = near["maxk_near_ties"]
    model_path = out / f"{stem}.h5"
    logits_path = out / f"{stem}.logits.npy"
    write_halo_model(model_path, layers, f"{stem} ({record['reference']})")
    _, back = read_halo_model(model_path)
    mismatch = layers_equal(layers, back)
    if mismatch is not None:
        raise ExportError(f"{model_path}: does not read back as written ({mismatch})")
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
        layers=len(layers),
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
    ap.add_argument("--models", default="gcn,sage,gin",
                    help=f"comma list of {', '.join(MODELS)} (docs/PYG.md has the architectures)")
    ap.add_argument("--datasets", default="cora,citeseer", help="comma list of dataset names")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="auto", help="auto (cuda if available) | cpu | cuda[:N]")
    ap.add_argument("--epochs", type=int, help="training epochs (default: per model, 200)")
    ap.add_argument("--hidden", type=int, help="hidden width (default: gcn 16, others 64)")
    ap.add_argument("--heads", type=int,
                    help="attention heads of the first transformer / gat layer (default 2 / 8)")
    ap.add_argument("--k", type=int, help="entries kept per row by maxk (default 16)")
    ap.add_argument("--lr", type=float,
                    help="Adam learning rate (default 0.01; transformer, gat 0.005)")
    ap.add_argument("--weight-decay", type=float, help="Adam weight decay (default 5e-4)")
    ap.add_argument("--dropout", type=float, help="dropout in training (default 0.5; gat 0.6)")
    ap.add_argument("--check-rtol", type=float, default=1e-4,
                    help="tolerance of the float64 oracle check, relative to the largest |logit|")
    ap.add_argument("--random-weights", action="store_true",
                    help="no torch: seeded random weights, the NumPy oracle's logits as reference")
    args = ap.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.datasets = [d for d in args.datasets.split(",") if d]
    for m in args.models:
        if m not in MODELS:
            ap.error(f"unknown model '{m}' (expected {', '.join(MODELS)})")
    if not args.models or not args.datasets:
        ap.error("--models and --datasets need at least one entry")
    for key in ("epochs", "hidden", "heads", "k"):
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
