#!/usr/bin/env python3
"""Baselines for the end-to-end 2-layer GCN table of docs/PERFORMANCE.md, on the GPU machine.

Reads a single-part HaloGNN dataset (halo-partition ... --parts 1) so that PyG sees exactly the
graph halo-infer sees, draws seeded random input features, and times two baselines of the same
model (GCN 128 -> 128 -> 64, ReLU between, PyG semantics: remaining self-loops added, symmetric
normalization):

  pyg    torch_geometric.nn.GCNConv x 2, model.eval(), torch.no_grad(), cached normalization
         (computed in the warm-up, as a deployed model with a fixed graph would)
  torch  a torch CSR composition: A_hat (torch.sparse_csr_tensor, built once) @ (X @ W) + b

Timing: CUDA events around each forward, after warm-up, median of --runs. Out-of-memory is
reported as such (PyG ran out of memory at R-MAT scale 22 on a 141 GB H200 in an earlier harness).
Prints one JSON object per baseline.
"""
import argparse
import json
import sys
import time

import h5py
import numpy as np
import torch


def load_dataset(path):
    with h5py.File(path, "r") as f:
        if int(f.attrs["num_parts"]) != 1:
            sys.exit(f"{path}: {int(f.attrs['num_parts'])} parts; partition with --parts 1")
        part = f["parts/0"]
        indptr = part["csr/indptr"][...]
        indices = part["csr/indices"][...]
        gids = part["global_ids"][...]
        n = int(f.attrs["num_nodes"])
    rows = np.repeat(gids, np.diff(indptr))
    cols = gids[indices]
    return n, rows.astype(np.int64), cols.astype(np.int64)


def median_ms(fn, warmup, runs):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times)), float(min(times)), float(max(times))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("--dims", default="128,128,64")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--baselines", default="pyg,torch")
    args = ap.parse_args()
    dims = [int(d) for d in args.dims.split(",")]
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    t0 = time.time()
    n, rows, cols = load_dataset(args.dataset)
    load_s = time.time() - t0
    g = torch.Generator().manual_seed(args.seed)
    info = {"dataset": args.dataset, "num_nodes": n, "nnz": int(rows.size),
            "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    for name in args.baselines.split(","):
        rec = dict(info, baseline=name, dims=dims, load_seconds=load_s)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        try:
            rec.update(measure(name, n, rows, cols, dims, g, dev, args))
        except torch.cuda.OutOfMemoryError as e:
            rec.update(error="out of memory", detail=str(e).splitlines()[0])
        except RuntimeError as e:
            rec.update(error="runtime error", detail=str(e).splitlines()[0])
        torch.cuda.empty_cache()
        print(json.dumps(rec), flush=True)


def measure(name, n, rows, cols, dims, g, dev, args):
    """Times one baseline; every tensor is local, so it is freed when this returns."""
    x = (torch.rand(n, dims[0], generator=g) * 2 - 1).to(dev)
    extra = {}
    if name == "pyg":
        import torch_geometric
        from torch_geometric.nn import GCNConv
        # Our row i aggregates column j: the message flows j -> i (source_to_target).
        edge_index = torch.from_numpy(np.stack([cols, rows])).to(dev)
        layers = torch.nn.ModuleList(
            [GCNConv(dims[i], dims[i + 1], cached=True) for i in range(len(dims) - 1)]
        ).to(dev).eval()

        def forward():
            h = x
            for i, conv in enumerate(layers):
                h = conv(h, edge_index)
                if i + 1 < len(layers):
                    h = torch.relu(h)
            return h
        extra["pyg"] = torch_geometric.__version__
    elif name == "torch":
        # A_hat = D^-1/2 (A + I) D^-1/2 with remaining self-loops, as CSR on the device.
        r = torch.from_numpy(rows).to(dev)
        c = torch.from_numpy(cols).to(dev)
        missing = torch.ones(n, dtype=torch.bool, device=dev)
        missing[r[r == c]] = False
        loops = torch.nonzero(missing).flatten()
        r = torch.cat([r, loops])
        c = torch.cat([c, loops])
        v = torch.ones(r.numel(), device=dev)
        deg = torch.zeros(n, device=dev).index_add_(0, r, v)
        v = v * deg[r].rsqrt() * deg[c].rsqrt()
        a = torch.sparse_coo_tensor(torch.stack([r, c]), v, (n, n)).coalesce().to_sparse_csr()
        del r, c, v, deg, missing, loops
        ws = [torch.randn(dims[i], dims[i + 1], generator=g).to(dev) * 0.1
              for i in range(len(dims) - 1)]
        bs = [torch.zeros(dims[i + 1], device=dev) for i in range(len(dims) - 1)]

        def forward():
            h = x
            for i in range(len(ws)):
                h = torch.sparse.mm(a, h @ ws[i]) + bs[i]
                if i + 1 < len(ws):
                    h = torch.relu(h)
            return h
    else:
        raise SystemExit(f"unknown baseline {name}")
    with torch.no_grad():
        med, lo, hi = median_ms(forward, args.warmup, args.runs)
    return dict(extra, median_ms=med, min_ms=lo, max_ms=hi,
                peak_gib=torch.cuda.max_memory_allocated() / 2**30)


if __name__ == "__main__":
    main()
