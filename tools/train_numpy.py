#!/usr/bin/env python3
"""Train 2-layer GCN and GraphSAGE models on Cora / Citeseer with NumPy and SciPy only.

    tools/train_numpy.py DATA_DIR --out DIR [--models gcn,sage] [--datasets cora,citeseer]
                         [--epochs 200] [--hidden 16] [--seed 1] [--row-normalize]

For machines without PyTorch: the same data, split and layer semantics as tools/export_pyg.py
(whose loader, operators, model writer and float64 reference forward it imports), trained full
batch with hand-written gradients (softmax cross-entropy on the training nodes, Adam, weight decay
on the weights, dropout on each layer's input), keeping the epoch with the best validation
accuracy. Writes DIR/<dataset>-<model>.h5 (halo-infer --model) and DIR/<dataset>-<model>.json
(hyperparameters, accuracies of the float64 reference forward on the saved weights). Its models
are for measurements that need trained weights (scripts/aes_accuracy.py: what int8, fp16 or bf16
features change); tools/export_pyg.py remains the agreement check against PyG.
"""

import argparse
import datetime
import gzip
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

REPO = Path(__file__).resolve().parent.parent


def load_export_pyg():
    spec = importlib.util.spec_from_file_location("export_pyg", REPO / "tools" / "export_pyg.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sparse_operator(op, n):
    rows, cols, values = op
    return sp.csr_matrix((values, (rows, cols)), shape=(n, n))


class Adam:
    def __init__(self, params, lr, weight_decay, decayed):
        self.params, self.lr, self.wd, self.decayed = params, lr, weight_decay, decayed
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def step(self, grads):
        self.t += 1
        b1, b2 = 0.9, 0.999
        for k, g in grads.items():
            if k in self.decayed:
                g = g + self.wd * self.params[k]
            self.m[k] = b1 * self.m[k] + (1 - b1) * g
            self.v[k] = b2 * self.v[k] + (1 - b2) * g * g
            mhat = self.m[k] / (1 - b1 ** self.t)
            vhat = self.v[k] / (1 - b2 ** self.t)
            self.params[k] -= self.lr * mhat / (np.sqrt(vhat) + 1e-8)


def forward(model, p, A, x, rng, dropout):
    """Logits and the cache for backward; dropout (inverted) on each layer's input if rng."""
    cache = []
    h = x
    for i in (1, 2):
        mask = None
        if rng is not None and dropout > 0:
            mask = (rng.random(h.shape) >= dropout) / (1.0 - dropout)
            h = h * mask
        if model == "gcn":
            z = A @ (h @ p[f"w{i}"]) + p[f"b{i}"]
        else:
            z = (A @ h) @ p[f"w{i}"] + h @ p[f"r{i}"] + p[f"b{i}"]
        cache.append((h, mask, z))
        h = np.maximum(z, 0.0) if i == 1 else z
    return h, cache


def backward(model, p, A, cache, dlogits):
    grads = {}
    dz = dlogits
    for i in (2, 1):
        h, mask, z = cache[i - 1]
        if i == 1:
            dz = dz * (z > 0)
        grads[f"b{i}"] = dz.sum(axis=0)
        if model == "gcn":
            at_dz = A.T @ dz
            grads[f"w{i}"] = h.T @ at_dz
        else:
            grads[f"w{i}"] = (A @ h).T @ dz
            grads[f"r{i}"] = h.T @ dz
        if i == 1:
            break  # no gradient for the input features
        if model == "gcn":
            dh = at_dz @ p[f"w{i}"].T
        else:
            dh = A.T @ (dz @ p[f"w{i}"].T) + dz @ p[f"r{i}"].T
        if mask is not None:
            dh = dh * mask
        dz = dh
    return grads


def train(ex, ds, model, hidden, epochs, lr, weight_decay, dropout, seed):
    n = ds.num_nodes
    ops = ex.aggregation_operators(ds.rows, ds.cols, n)
    A = sparse_operator(ops["gcn" if model == "gcn" else "sage"], n)
    specs = ex.random_specs(model, [ds.x.shape[1], hidden, ds.num_classes])
    init = ex.random_layers(specs, seed)
    p = {}
    for i, layer in enumerate(init, start=1):
        p[f"w{i}"] = layer["weight"].astype(np.float64)
        p[f"b{i}"] = np.zeros(layer["out_dim"])
        if model == "sage":
            p[f"r{i}"] = layer["root_weight"].astype(np.float64)
    decayed = {k for k in p if not k.startswith("b")}
    opt = Adam(p, lr, weight_decay, decayed)
    rng = np.random.default_rng(seed)
    x = ds.x.astype(np.float64)
    onehot = np.zeros((ds.train.size, ds.num_classes))
    onehot[np.arange(ds.train.size), ds.labels[ds.train]] = 1.0
    best = (-1.0, 0, None)
    for epoch in range(1, epochs + 1):
        logits, cache = forward(model, p, A, x, rng, dropout)
        z = logits[ds.train] - logits[ds.train].max(axis=1, keepdims=True)
        prob = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        dlogits = np.zeros_like(logits)
        dlogits[ds.train] = (prob - onehot) / ds.train.size
        opt.step(backward(model, p, A, cache, dlogits))
        eval_logits, _ = forward(model, p, A, x, None, 0.0)
        correct, total = ds.accuracy(eval_logits, ds.val)
        if correct / total > best[0]:
            best = (correct / total, epoch, {k: v.copy() for k, v in p.items()})
    layers = []
    for i, spec in enumerate(specs, start=1):
        layer = dict(spec)
        w = best[2]
        layer["weight"] = w[f"w{i}"].astype(np.float32)
        layer["bias"] = w[f"b{i}"].astype(np.float32)
        if model == "sage":
            layer["root_weight"] = w[f"r{i}"].astype(np.float32)
        layers.append(layer)
    return layers, best[1], ops


def row_normalized_copy(ds, data_out):
    """ds.x with each row divided by its sum (float32, as halo-partition will hold it), written as
    data_out/<name>.feat.coo.txt.gz beside links to the dataset's other files."""
    x = ds.x.astype(np.float64)
    sums = x.sum(axis=1, keepdims=True)
    x = (x / np.where(sums == 0, 1.0, sums)).astype(np.float32)
    data_out.mkdir(parents=True, exist_ok=True)
    for kind, file in ds.files.items():
        target = data_out / file
        if kind != "features" and not target.exists():
            target.symlink_to(ds.path(kind).resolve())
    rows, cols = np.nonzero(x)
    with gzip.open(data_out / ds.files["features"], "wt") as f:
        f.write(f"# {x.shape[0]} {x.shape[1]} {rows.size}\n")
        # %.9g: every float32 value exactly (9 significant digits round-trip a float32).
        f.writelines(f"{r} {c} {v:.9g}\n" for r, c, v in zip(rows, cols, x[rows, cols]))
    return x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dir")
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="gcn,sage")
    ap.add_argument("--datasets", default="cora,citeseer")
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--row-normalize", action="store_true",
                    help="divide each feature row by its sum (PyG's NormalizeFeatures), train on "
                         "that and write it, with links to the other files, as DIR/data (a data "
                         "directory for halo-partition and scripts/aes_accuracy.py)")
    a = ap.parse_args(argv)
    ex = load_export_pyg()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in [d for d in a.datasets.split(",") if d]:
        try:
            ds = ex.Dataset(a.data_dir, name)
        except ex.ExportError as e:
            print(f"train_numpy: {e}", file=sys.stderr)
            return 1
        if a.row_normalize:
            ds.x = row_normalized_copy(ds, out / "data")
        for model in [m for m in a.models.split(",") if m]:
            if model not in ("gcn", "sage"):
                print(f"train_numpy: model '{model}' is not gcn or sage", file=sys.stderr)
                return 2
            layers, epoch, ops = train(ex, ds, model, a.hidden, a.epochs, a.lr,
                                       a.weight_decay, a.dropout, a.seed)
            ex.check_layers(layers, f"{name}-{model}")
            path = out / f"{name}-{model}.h5"
            ex.write_halo_model(path, layers, f"{name}-{model} (tools/train_numpy.py)")
            # Accuracies of the saved float32 weights through the float64 reference forward.
            logits = ex.reference_forward(layers, ops, ds.x.astype(np.float64))
            acc = {split: ds.accuracy(logits, ids)
                   for split, ids in (("train", ds.train), ("val", ds.val),
                                      ("test", ds.test_eval))}
            summary = {
                "dataset": name, "model": model, "trained": True, "best_epoch": epoch,
                "hyperparameters": {"hidden": a.hidden, "lr": a.lr,
                                    "weight_decay": a.weight_decay, "dropout": a.dropout,
                                    "epochs": a.epochs, "seed": a.seed},
                "accuracy": {k: {"correct": c, "evaluated": t, "accuracy": c / t}
                             for k, (c, t) in acc.items()},
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
                    timespec="seconds"),
                "command": " ".join(sys.argv),
                "model_file": path.name,
            }
            (out / f"{name}-{model}.json").write_text(json.dumps(summary, indent=2) + "\n")
            print(f"{name}-{model}: best epoch {epoch}, accuracy train "
                  f"{acc['train'][0] / acc['train'][1]:.4f} val {acc['val'][0] / acc['val'][1]:.4f}"
                  f" test {acc['test'][0] / acc['test'][1]:.4f}; {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
