#!/usr/bin/env python3
"""PyG and torch baselines of halo-infer's inference, on the GPU machine (docs/PERFORMANCE.md).

Reads a single-part HaloGNN dataset (halo-partition ... --parts 1) so that PyG sees exactly the
graph halo-infer sees, and times the same model in two baselines:

  pyg    torch_geometric convolutions (GCNConv / SAGEConv / GINConv / AGNNConv /
         TransformerConv / GATConv, torch Linear, and MaxK-GCN as Linear + torch.topk + GCN
         propagation; built by tools/export_pyg.py make_pyg_net with HaloGNN's semantics; GCNConv
         and MaxK with cached normalization, computed once before timing, as a deployed model
         with a fixed graph would; AGNNConv and GATConv add their self-loops in every forward, as
         PyG does), model.eval(), torch.no_grad()
  torch  a torch CSR composition per layer: gcn A_hat (X W) + b, sage A_mean (X W) + X W_root + b,
         gin MLP((1 + eps) X W1 + A (X W1)), linear X W + b, maxk A_hat topk(X W + b)
         (operators as torch.sparse_csr_tensor, built once); none for the attention layers
         (agnn, transformer, gat: its record says "skipped")

The model is either
  random   --model gcn|sage|gin|linear|maxk|agnn|transformer|gat --dims 128,128,64 (widths,
           input first; ReLU between layers, none after the last; maxk: no activation, --k
           entries kept; transformer, gat: --heads heads in every layer; agnn: with a weight in
           every layer), the stack halo-infer --random-model DIMS --layer TYPE builds: seeded
           Glorot weights, seeded random input features in [-1, 1); or
  trained  --halo-model FILE: a HaloGNN model file (tools/export_pyg.py writes them from trained
           PyG models) with the dataset's own features (halo-partition --features), so the
           timed model is the one halo-infer runs; --check-logits FILE.npy compares its outputs
           with reference logits (e.g. the export's) before timing.

Before timing, every baseline's output is compared with the first baseline's (and with
--check-logits): max |difference| and share of identical argmax, in the JSON. Timing: CUDA events
around each forward, after --warmup untimed ones, median of --runs. TF32 off. Out-of-memory is
reported as such (PyG's GCNConv ran out of memory at R-MAT scale 22 on a 141 GB H200: its message
passing materializes an edge-wise [nnz, width] tensor). Prints one JSON object per baseline.
"""
import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import h5py
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import export_pyg  # noqa: E402  (the PyG <-> HaloGNN layer mapping lives there, once)


def load_dataset(path, want_features):
    """(n, rows, cols, features or None) in global ids from part 0 of a one-part dataset."""
    with h5py.File(path, "r") as f:
        if int(f.attrs["num_parts"]) != 1:
            sys.exit(f"{path}: {int(f.attrs['num_parts'])} parts; partition with --parts 1")
        part = f["parts/0"]
        indptr = part["csr/indptr"][...]
        indices = part["csr/indices"][...]
        gids = part["global_ids"][...]
        n = int(f.attrs["num_nodes"])
        x = None
        if want_features:
            if "features/values" not in part:
                sys.exit(f"{path}: no features; partition with --features (a trained model "
                         "needs the real features)")
            values = part["features/values"]
            if values.dtype != np.float32:
                sys.exit(f"{path}: features are {values.dtype}; partition without quantization")
            x = np.empty((n, values.shape[1]), dtype=np.float32)
            x[gids] = values[...]
    rows = np.repeat(gids, np.diff(indptr))
    cols = gids[indices]
    return n, rows.astype(np.int64), cols.astype(np.int64), x


def median_ms(fn, warmup, runs, device):
    for _ in range(warmup):
        fn()
    times = []
    if device.type == "cuda":
        torch.cuda.synchronize()
        for _ in range(runs):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times)), float(min(times)), float(max(times))


def agreement(a, b):
    return {"max_abs_diff": float(np.abs(a - b).max()), "max_abs_value": float(np.abs(b).max()),
            "identical_argmax": float((a.argmax(1) == b.argmax(1)).mean())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", help="one-part dataset written by halo-partition")
    ap.add_argument("--model", default="gcn", choices=export_pyg.LAYER_TYPES,
                    help="layer type of the random model")
    ap.add_argument("--heads", type=int, default=1,
                    help="heads of every transformer / gat layer of the random model")
    ap.add_argument("--k", type=int, default=16,
                    help="entries kept per row by the random model's maxk layers (capped at the "
                         "width)")
    ap.add_argument("--dims", default="128,128,64", help="widths of the random model")
    ap.add_argument("--halo-model", help="HaloGNN model file to time instead of a random model")
    ap.add_argument("--check-logits", help="reference logits (.npy) the outputs must match")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--baselines", default="pyg,torch")
    ap.add_argument("--device", default="cuda", help="cuda (CUDA-event timing) or cpu")
    args = ap.parse_args()
    dev = torch.device(args.device)
    # torch's notes that sparse CSR is beta and its invariant checks are off, once per operator.
    warnings.filterwarnings("ignore", message="Sparse (CSR tensor support|invariant checks)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    t0 = time.time()
    n, rows, cols, x_file = load_dataset(args.dataset, want_features=bool(args.halo_model))
    load_s = time.time() - t0
    if args.halo_model:
        model_name, layers = export_pyg.read_halo_model(args.halo_model)
        if x_file.shape[1] != layers[0]["in_dim"]:
            sys.exit(f"{args.dataset}: features of width {x_file.shape[1]}, the model takes "
                     f"{layers[0]['in_dim']}")
        weights = f"file:{args.halo_model}"
    else:
        dims = [int(d) for d in args.dims.split(",")]
        if len(dims) < 2:
            sys.exit("--dims needs at least two widths")
        if args.heads < 1 or args.k < 1:
            sys.exit("--heads and --k must be positive")
        specs = export_pyg.random_specs(args.model, dims, heads=args.heads, k=args.k)
        try:
            export_pyg.check_layers(export_pyg.random_layers(specs, args.seed), "--dims")
        except export_pyg.ExportError as e:
            sys.exit(f"pyg_gcn.py: {e}")
        layers = export_pyg.random_layers(specs, args.seed)
        model_name, weights = f"random-{args.model}", "random"
    reference = np.load(args.check_logits) if args.check_logits else None
    # One input for every baseline, so that their outputs can be compared.
    if x_file is not None:
        x_host = torch.from_numpy(x_file)
    else:
        g = torch.Generator().manual_seed(args.seed)
        x_host = torch.rand(n, layers[0]["in_dim"], generator=g) * 2 - 1
    info = {"dataset": args.dataset, "num_nodes": n, "nnz": int(rows.size),
            "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
            "torch": torch.__version__, "model": model_name, "weights": weights,
            "layers": [[l["type"], l["in_dim"], l["out_dim"]] +
                       ([f"heads={l['heads']}"] if "heads" in l else []) +
                       ([f"k={l['k']}"] if "k" in l else []) for l in layers]}
    first_output = None
    for name in args.baselines.split(","):
        rec = dict(info, baseline=name, load_seconds=load_s)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        try:
            result, output = measure(name, n, rows, cols, layers, x_host, dev, args)
            if output is None:
                rec.update(result)
                print(json.dumps(rec), flush=True)
                continue
            rec.update(result)
            if first_output is None:
                first_output = (name, output)
            else:
                rec["check_vs_" + first_output[0]] = agreement(output, first_output[1])
            if reference is not None:
                rec["check_vs_reference"] = agreement(output, reference)
        except torch.cuda.OutOfMemoryError as e:
            rec.update(error="out of memory", detail=str(e).splitlines()[0])
        except RuntimeError as e:
            rec.update(error="runtime error", detail=str(e).splitlines()[0])
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        print(json.dumps(rec), flush=True)


TORCH_OPERATOR = {"gcn": "gcn", "maxk": "gcn", "sage": "sage", "gin": "gin"}


def torch_operator(kind, n, rows, cols, dev):
    """HaloGNN's operator of a layer type (src/engine/engine.cpp) as a CSR tensor on `dev`."""
    r = torch.from_numpy(rows).to(dev)
    c = torch.from_numpy(cols).to(dev)
    if kind == "gcn":
        missing = torch.ones(n, dtype=torch.bool, device=dev)
        missing[r[r == c]] = False
        loops = torch.nonzero(missing).flatten()
        r = torch.cat([r, loops])
        c = torch.cat([c, loops])
    v = torch.ones(r.numel(), device=dev)
    if kind in ("gcn", "sage"):
        deg = torch.zeros(n, device=dev).index_add_(0, r, v)
        v = v * deg[r].rsqrt() * deg[c].rsqrt() if kind == "gcn" else v / deg[r]
    return torch.sparse_coo_tensor(torch.stack([r, c]), v, (n, n)).coalesce().to_sparse_csr()


def measure(name, n, rows, cols, layers, x_host, dev, args):
    """Times one baseline; every device tensor is local, so it is freed when this returns.
    Returns (record, output on the host)."""
    x = x_host.to(dev)
    extra = {}
    if name == "pyg":
        import torch_geometric
        net = export_pyg.make_pyg_net(layers, dropout=0.0, cached=True).to(dev)
        export_pyg.load_layers(net, layers)
        net.eval()
        # Our row i aggregates column j: the message flows j -> i (source_to_target).
        edge_index = torch.from_numpy(np.stack([cols, rows])).to(dev)

        def forward():
            return net(x, edge_index)
        extra["pyg"] = torch_geometric.__version__
    elif name == "torch":
        attention = sorted({layer["type"] for layer in layers} - set(TORCH_OPERATOR) - {"linear"})
        if attention:
            return {"skipped": f"no torch CSR composition of {', '.join(attention)} layers"}, None
        ops = {op: torch_operator(op, n, rows, cols, dev)
               for op in {TORCH_OPERATOR[layer["type"]] for layer in layers
                          if layer["type"] != "linear"}}

        def tensor(a):
            return None if a is None else torch.from_numpy(np.ascontiguousarray(a)).to(dev)

        ws = [{k: tensor(layer.get(k)) for k in ("weight", "bias", "root_weight", "weight2",
                                                  "bias2")} for layer in layers]

        def forward():
            h = x
            for layer, w in zip(layers, ws):
                hw = h @ w["weight"]
                if layer["type"] in ("linear", "maxk"):
                    out = hw + w["bias"] if w["bias"] is not None else hw
                    if layer["type"] == "maxk":
                        values, index = torch.topk(out, layer["k"], dim=1)
                        out = torch.sparse.mm(ops["gcn"],
                                              torch.zeros_like(out).scatter(1, index, values))
                    h = torch.relu(out) if layer["activation"] == "relu" else out
                    continue
                a = ops[TORCH_OPERATOR[layer["type"]]]
                if layer["type"] == "gcn":
                    out = torch.sparse.mm(a, hw)
                elif layer["type"] == "sage":
                    out = torch.sparse.mm(a, hw) + h @ w["root_weight"]
                else:
                    out = torch.sparse.mm(a, hw) + (1.0 + layer["eps"]) * hw
                if w["bias"] is not None:
                    out = out + w["bias"]
                if layer["type"] == "gin":
                    out = torch.relu(out) @ w["weight2"]
                    if w["bias2"] is not None:
                        out = out + w["bias2"]
                h = torch.relu(out) if layer["activation"] == "relu" else out
            return h
    else:
        raise SystemExit(f"unknown baseline {name}")
    with torch.no_grad():
        output = forward().float().cpu().numpy()
        med, lo, hi = median_ms(forward, args.warmup, args.runs, dev)
    peak = torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else None
    return dict(extra, median_ms=med, min_ms=lo, max_ms=hi, peak_gib=peak), output


if __name__ == "__main__":
    main()
