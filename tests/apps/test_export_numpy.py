#!/usr/bin/env python3
"""Torch-free checks of tools/export_pyg.py's model-file writer and reader and of its float64
forward (reference_forward) for every HaloGNN layer type, on a tiny random graph.

    python3 tests/apps/test_export_numpy.py [REPO_ROOT]

reference_forward is the oracle that PyG's logits must match before an export is written, so it
is checked here against a second, independent implementation: plain per-row loops over neighbour
sets written straight from the semantics in include/halo/core/model.hpp (no shared operators, no
vectorised scatter). The round trip writes every layer type (optional arrays present and
absent) with write_halo_model and requires read_halo_model to give the same layers; malformed
models must be rejected with ExportError. Exit status 0 on success, 1 on a failure ("FAIL - ..."
lines), 77 (skip) without numpy or h5py.
"""
import math
import sys
import tempfile
from pathlib import Path

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (apt-get install python3-numpy python3-h5py)")
    sys.exit(77)

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import export_pyg as ex  # noqa: E402

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print(f"FAIL - {message}", flush=True)


def tiny_graph(seed):
    """n = 13: random symmetric edges, stored self-loops on nodes 0 and 3, node 11 isolated,
    node 12 with only its self-loop; (rows, cols) sorted as symmetrized_adjacency gives them."""
    rng = np.random.default_rng(seed)
    n = 13
    src = rng.integers(0, 11, size=30)
    dst = rng.integers(0, 11, size=30)
    src = np.concatenate([src, [0, 3, 12]])
    dst = np.concatenate([dst, [0, 3, 12]])
    rows, cols = ex.symmetrized_adjacency(src.astype(np.int64), dst.astype(np.int64), n)
    return n, rows, cols


def neighbours(n, rows, cols):
    """Neighbour lists of the stored adjacency (a stored self-loop included)."""
    adj = [[] for _ in range(n)]
    for r, c in zip(rows.tolist(), cols.tolist()):
        adj[r].append(c)
    return adj


def softmax_sum(scores, values):
    """sum_j softmax(scores)_j values[j]; zeros for an empty list."""
    if not scores:
        return None
    m = max(scores)
    e = [math.exp(s - m) for s in scores]
    total = sum(e)
    out = np.zeros_like(values[0])
    for w, v in zip(e, values):
        out = out + (w / total) * v
    return out


def naive_layer(layer, adj, h):
    """One HaloGNN layer, row by row, float64, from include/halo/core/model.hpp's definitions."""
    n = h.shape[0]
    kind = layer["type"]
    f = {k: (v.astype(np.float64) if isinstance(v, np.ndarray) else v) for k, v in layer.items()}
    with_self = [sorted(set(a) | {i}) for i, a in enumerate(adj)]
    deg = [len(s) for s in with_self]

    def affine(x, w, b):
        y = x @ w if w is not None else x.copy()
        return y + b if b is not None else y

    out = np.zeros((n, layer["out_dim"]))
    if kind == "gcn":
        xw = h @ f["weight"]
        for i in range(n):
            out[i] = sum(xw[j] / math.sqrt(deg[i] * deg[j]) for j in with_self[i]) + f["bias"]
    elif kind == "sage":
        xw = h @ f["weight"]
        for i in range(n):
            mean = sum(xw[j] for j in adj[i]) / len(adj[i]) if adj[i] else 0.0
            out[i] = h[i] @ f["root_weight"] + mean + f["bias"]
    elif kind == "gin":
        for i in range(n):
            z = (1.0 + float(np.float32(f["eps"]))) * h[i] + sum((h[j] for j in adj[i]),
                                                                  np.zeros(h.shape[1]))
            out[i] = np.maximum(z @ f["weight"] + f["bias"], 0.0) @ f["weight2"] + f["bias2"]
    elif kind == "linear":
        out = affine(h, f.get("weight"), f.get("bias"))
    elif kind == "maxk":
        z = affine(h, f["weight"], f.get("bias"))
        s = np.zeros_like(z)
        for i in range(n):
            # value descending, then column ascending: sort on (-value, column)
            keep = sorted(range(z.shape[1]), key=lambda c: (-z[i, c], c))[:layer["k"]]
            s[i, keep] = z[i, keep]
        for i in range(n):
            out[i] = sum(s[j] / math.sqrt(deg[i] * deg[j]) for j in with_self[i])
    elif kind == "agnn":
        z = affine(h, f.get("weight"), f.get("bias"))
        unit = [z[i] / max(np.linalg.norm(z[i]), 1e-12) for i in range(n)]
        beta = float(np.float32(f["beta"]))
        for i in range(n):
            out[i] = softmax_sum([beta * float(unit[i] @ unit[j]) for j in with_self[i]],
                                 [z[j] for j in with_self[i]])
    elif kind == "transformer":
        heads = layer["heads"]
        d = layer["out_dim"] // heads
        q = affine(h, f["query_weight"], f.get("query_bias"))
        k = affine(h, f["key_weight"], f.get("key_bias"))
        v = affine(h, f["value_weight"], f.get("value_bias"))
        for i in range(n):
            parts = []
            for t in range(heads):
                sl = slice(t * d, (t + 1) * d)
                agg = softmax_sum([float(q[i, sl] @ k[j, sl]) / math.sqrt(d) for j in adj[i]],
                                  [v[j, sl] for j in adj[i]])
                parts.append(np.zeros(d) if agg is None else agg)
            out[i] = np.concatenate(parts)
            if f.get("root_weight") is not None:
                out[i] += h[i] @ f["root_weight"]
            if f.get("bias") is not None:
                out[i] += f["bias"]
    elif kind == "gat":
        heads = layer["heads"]
        d = layer["out_dim"] // heads
        z = h @ f["weight"]
        slope = float(np.float32(f["negative_slope"]))
        for i in range(n):
            parts = []
            for t in range(heads):
                sl = slice(t * d, (t + 1) * d)
                scores = []
                for j in with_self[i]:
                    e = float(z[i, sl] @ f["att_dst"][sl] + z[j, sl] @ f["att_src"][sl])
                    scores.append(e if e > 0 else slope * e)
                parts.append(softmax_sum(scores, [z[j, sl] for j in with_self[i]]))
            out[i] = np.concatenate(parts) + (f["bias"] if f.get("bias") is not None else 0.0)
    else:
        raise AssertionError(kind)
    return np.maximum(out, 0.0) if layer["activation"] == "relu" else out


def naive_forward(layers, adj, x):
    h = np.asarray(x, dtype=np.float64)
    for layer in layers:
        h = naive_layer(layer, adj, h)
    return h


def models(in_dim, classes):
    """Every architecture the export trains, plus random stacks of every layer type (agnn with
    and without a weight, transformer without optional arrays, several heads)."""
    out = {}
    for m in ex.MODELS:
        hp = ex.DEFAULTS[m]
        specs = ex.layer_specs(m, in_dim, 8, classes, heads=2 if "heads" in hp else None,
                               k=3 if m == "maxk" else None)
        out[f"export-{m}"] = ex.random_layers(specs, 7)
    for kind in ex.LAYER_TYPES:
        out[f"random-{kind}"] = ex.random_layers(ex.random_specs(kind, [in_dim, 8, 6], heads=2,
                                                                 k=3), 11)
    bare = ex.random_layers(ex.random_specs("transformer", [in_dim, 8, 4], heads=4), 5)
    for layer in bare:
        for key in ("query_bias", "key_bias", "value_bias", "root_weight", "bias"):
            layer.pop(key)
    out["transformer-no-optional"] = bare
    return out


def test_forward_and_round_trip(tmp):
    n, rows, cols = tiny_graph(3)
    adj = neighbours(n, rows, cols)
    ops = ex.aggregation_operators(rows, cols, n)
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, size=(n, 5)).astype(np.float32)
    x[7] = 0.0  # a zero row: agnn's cosine of a zero vector is 0 (normalize's 1e-12 floor)
    for name, layers in models(5, 4).items():
        ex.check_layers(layers, name)
        got = ex.reference_forward(layers, ops, x)
        want = naive_forward(layers, adj, x)
        diff = float(np.abs(got - want).max())
        check(got.shape == want.shape and diff <= 1e-10 * max(1.0, float(np.abs(want).max())),
              f"{name}: reference_forward differs from the per-row loops by {diff:.3e}")
        check(np.isfinite(got).all(), f"{name}: non-finite logits")
        path = tmp / f"{name}.h5"
        ex.write_halo_model(path, layers, name)
        read_name, back = ex.read_halo_model(path)
        mismatch = ex.layers_equal(layers, back)
        check(read_name == name and mismatch is None, f"{name}: round trip: {mismatch}")
        again = ex.reference_forward(back, ops, x)
        check(np.array_equal(again, got), f"{name}: the read-back model computes other logits")
        check(not list(tmp.glob(f"{name}.h5.tmp-*")), f"{name}: temporary file left behind")
    # The transformer without self-loops: node 11 (isolated) gets only its root and bias terms,
    # node 12 attends to itself alone.
    layers = models(5, 4)["random-transformer"][:1]
    got = ex.reference_forward(layers, ops, x)
    want = np.maximum(x[11].astype(np.float64) @ layers[0]["root_weight"] + layers[0]["bias"], 0)
    check(np.allclose(got[11], want, rtol=0, atol=1e-12),
          "transformer: an isolated node is not root_weight x + bias")


def test_file_layout(tmp):
    """The attributes and datasets src/store/model_file.cpp reads, with its types."""
    layers = models(5, 4)
    path = tmp / "layout.h5"
    ex.write_halo_model(path, layers["export-gat"], "layout")
    with h5py.File(path, "r") as f:
        g = f["layers/0"]
        check(g.attrs["heads"].dtype == np.dtype("<i8"), "gat heads is not int64")
        check(g.attrs["negative_slope"].dtype == np.dtype("<f4"), "negative_slope is not float32")
        check(sorted(g) == ["att_dst", "att_src", "bias", "weight"],
              f"gat datasets {sorted(g)}")
        check(g["att_src"].shape == (8,) and g["weight"].shape == (5, 8),
              f"gat shapes {g['att_src'].shape} {g['weight'].shape}")
        check(ex.attribute_text(f.attrs["format"]) == "halo-model" and f.attrs["version"] == 1,
              "root attributes")
        # Fixed-length strings (h5py: bytes), as halo writes them: no global heap.
        check(isinstance(f.attrs["format"], bytes) and isinstance(g.attrs["type"], bytes),
              "string attributes are not fixed-length")
    ex.write_halo_model(path, layers["export-agnn"], "layout")
    with h5py.File(path, "r") as f:
        check(sorted(f["layers/1"]) == [] and f["layers/1"].attrs["beta"].dtype == "<f4",
              "agnn without weight: expected no datasets and a float32 beta")
        check(ex.attribute_text(f["layers/0"].attrs["type"]) == "linear",
              "agnn model: layer 0 is not linear")
    ex.write_halo_model(path, layers["export-maxk"], "layout")
    with h5py.File(path, "r") as f:
        check(int(f["layers/0"].attrs["k"]) == 3 and f["layers/0"].attrs["k"].dtype == "<i8",
              "maxk k is not int64 3")
    ex.write_halo_model(path, layers["random-transformer"], "layout")
    with h5py.File(path, "r") as f:
        check(sorted(f["layers/0"]) == sorted(
            ["query_weight", "key_weight", "value_weight", "query_bias", "key_bias",
             "value_bias", "root_weight", "bias"]), f"transformer datasets {sorted(f['layers/0'])}")


def expect_error(what, fn, fragment):
    try:
        fn()
    except ex.ExportError as e:
        check(fragment in str(e), f"{what}: error '{e}' does not mention '{fragment}'")
        return
    check(False, f"{what}: accepted")


def test_rejections(tmp):
    base = models(5, 4)

    def broken(name, change):
        layers = [dict(layer) for layer in base[name]]
        change(layers)
        return layers

    cases = [
        ("heads not dividing", broken("random-gat", lambda L: L[0].update(heads=3)), "heads"),
        ("k above the width", broken("random-maxk", lambda L: L[0].update(k=9)), "k = 9"),
        ("k zero", broken("random-maxk", lambda L: L[0].update(k=0)), "k = 0"),
        ("agnn without weight changing width",
         broken("random-agnn", lambda L: [L[0].pop("weight"), L[0].pop("bias")]), "no weight"),
        ("transformer with weight",
         broken("random-transformer",
                lambda L: L[0].update(weight=np.zeros((5, 8), np.float32))), "'weight'"),
        ("gat without att_src", broken("random-gat", lambda L: L[0].pop("att_src")), "att_src"),
        ("att_dst of the wrong length",
         broken("random-gat", lambda L: L[0].update(att_dst=np.zeros(7, np.float32))),
         "att_dst"),
        ("non-finite beta", broken("random-agnn", lambda L: L[0].update(beta=float("nan"))),
         "beta"),
        ("float64 query_weight",
         broken("random-transformer",
                lambda L: L[0].update(query_weight=L[0]["query_weight"].astype(np.float64))),
         "query_weight"),
    ]
    for what, layers, fragment in cases:
        expect_error(what, lambda: ex.write_halo_model(tmp / "bad.h5", layers, "bad"), fragment)
    path = tmp / "extra.h5"
    ex.write_halo_model(path, base["random-gat"], "extra")
    with h5py.File(path, "r+") as f:
        f["layers/0"].create_dataset("weights2", data=np.zeros(3, np.float32))
    expect_error("unknown dataset", lambda: ex.read_halo_model(path), "weights2")
    ex.write_halo_model(path, base["random-maxk"], "extra")
    with h5py.File(path, "r+") as f:
        del f["layers/1"].attrs["k"]
    expect_error("maxk without k", lambda: ex.read_halo_model(path), "'k'")


def test_maxk_selection():
    """Ties keep the lower column; a given (PyG) selection is used when it is a top-k up to
    rounding, recorded when it differs, and rejected when it is not a top-k."""
    z = np.array([[1.0, 3.0, 3.0, 2.0, 3.0]])
    check(ex.maxk_select(z, 2).tolist() == [[1, 2]], f"tie rule: {ex.maxk_select(z, 2)}")
    n, rows, cols = tiny_graph(4)
    ops = ex.aggregation_operators(rows, cols, n)
    layer = {"type": "maxk", "in_dim": 4, "out_dim": 4, "activation": "none", "k": 2,
             "weight": np.eye(4, dtype=np.float32), "bias": None}
    x = np.zeros((n, 4), np.float32)
    x[:, 0], x[:, 1], x[:, 2] = 1.0, np.float32(1.0 - 1e-7), 0.5  # a near-tie in every row
    own = ex.reference_forward([layer], ops, x)
    swapped = {0: np.tile([0, 2], (n, 1))}
    expect_error("a selection that is no top-k",
                 lambda: ex.reference_forward([layer], ops, x, maxk_selection=swapped), "row 0")
    near = {0: np.tile([2 - 2, 1], (n, 1))}  # the same set as the oracle's
    stats = {}
    same = ex.reference_forward([layer], ops, x, maxk_selection=near, stats=stats)
    check(np.array_equal(same, own) and stats["maxk_near_ties"]["0"] == [],
          "the oracle's own selection, given, changes the result")
    x[:, 1] = 1.0 + 1e-7  # now column 1 leads, 0 second, 2 far below: swap 0 <-> 1 order only
    x[:, 3] = 1.0 - 1e-7
    stats = {}
    pick = {0: np.tile([0, 3], (n, 1))}  # drops column 1 for 3: within 1e-5 of the row max
    ex.reference_forward([layer], ops, x, maxk_selection=pick, stats=stats)
    check(stats["maxk_near_ties"]["0"] == list(range(n)),
          f"near-tie rows not recorded: {stats}")


def main():
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        test_forward_and_round_trip(tmp)
        test_file_layout(tmp)
        test_rejections(tmp)
    test_maxk_selection()
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
