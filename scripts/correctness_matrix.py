#!/usr/bin/env python3
"""The correctness matrix through the tools a user runs (issue 48; docs/RELIABILITY.md "The
correctness matrix").

Every combination of: graph (shared graphs of different shapes, and one partition whose last part
is all interior), layer type, model width {1, 8, 32, 100, 128, 256}, --spmm choice (every exact
kernel halo-infer offers, auto and autotune included, as `halo-inspect --kernels` lists them),
overlap (split, interior, none),
exchange (mpi, mpi-int8; with several GPUs also nccl and nccl-int8 for ranks up to the GPUs),
stored features (fp32, fp16, int8) and rank count (1, 2, 3) is too many
to run; this script runs a pairwise cover of them: a seeded greedy choice of configurations in
which every pair of values of two factors appears at least once. Each configuration is
halo-partition (once per graph, rank count and feature type) and `mpirun -np P halo-infer ...`,
compared with halo-infer on one rank of the CPU backend on the same graph, features and model:

- exact settings: max |difference| <= 1e-5 x max |reference| (GEMMs and sums in another order),
  and every prediction (row argmax) identical except rows whose two largest reference logits are
  closer than that bound (a rounding tie, counted and reported);
- approximate settings, within their documented bounds: fused attention (agnn, transformer with
  --attention fused, docs/FUSED3S.md) 2e-3 x max |reference|; the int8 halo exchange
  (docs/AES.md "Packed rows for the halo exchange": each row quantized with its own scale) 5e-2 x
  max |reference| and at least 95% identical predictions;
- combinations the tools refuse (maxk layers with an int8 exchange; the resident kernel on a part
  past its column limit): the run must fail with exit status 1 and the refusal's message, and no
  result manifest.

Usage: correctness_matrix.py --build BUILD_DIR --out OUT_DIR [--backend cuda|cpu] [--data DIR]
       [--quick] [--seed S] [--mpiexec 'mpirun --oversubscribe --allow-run-as-root']
Writes OUT_DIR/matrix.md (the table of what ran) and OUT_DIR/matrix.json; exits 1 if any
configuration failed, 77 (skipped) where --backend cuda finds no GPU.
"""
import argparse
import gzip
import itertools
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import time
import zlib

import numpy as np

try:
    import h5py
except ImportError:  # pragma: no cover - reported below
    h5py = None

FEATURE_WIDTH = 256
CLASSES = 8
WIDTHS = [1, 8, 32, 100, 128, 256]
LAYERS = ["gcn", "sage", "gin", "linear", "maxk", "agnn", "transformer", "gat"]
OVERLAP = ["split", "interior", "none"]
EXCHANGE = ["mpi", "mpi-int8"]
FEATURES = ["fp32", "fp16", "int8"]
RANKS = [1, 2, 3]
# (file, what its shape covers); PROTEINS gets an owner file whose last part is whole proteins.
GRAPHS = [
    ("cora.el.gz", "tiny citation graph (2.7K nodes)"),
    ("BlogCatalog.el.gz", "power-law, dense rows (10K nodes, 668K nonzeros)"),
    ("4elt.el.gz", "regular 2D mesh (15.6K nodes)"),
    ("PROTEINS.el.gz", "1113 components; the last part all interior"),
]
EXACT_BOUND = 1e-5
FUSED_BOUND = 2e-3
INT8_BOUND = 5e-2
INT8_MIN_IDENTICAL = 0.95


def run(cmd, log, env=None, timeout=600):
    """Runs cmd (a list), appends its output to log; returns (exit status, output)."""
    start = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=env, timeout=timeout)
        status, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        status, out = 124, (e.stdout or "") if isinstance(e.stdout, str) else "timeout"
    with open(log, "a") as f:
        f.write("$ " + shlex.join(cmd) + "\n" + out + "[exit %d, %.1f s]\n" % (status,
                                                                           time.time() - start))
    return status, out


def pairwise_cover(factors, seed, skip):
    """A greedy pairwise cover: configurations (dicts) until every pair of values of two factors
    (but pairs `skip` rejects) appears in one. Deterministic for a seed."""
    names = list(factors)
    rng = random.Random(seed)
    uncovered = set()
    for a, b in itertools.combinations(range(len(names)), 2):
        for va in factors[names[a]]:
            for vb in factors[names[b]]:
                if not skip({names[a]: va, names[b]: vb}):
                    uncovered.add((a, va, b, vb))

    def pairs(cfg):
        return {(a, cfg[names[a]], b, cfg[names[b]])
                for a, b in itertools.combinations(range(len(names)), 2)}

    out = []
    while uncovered:
        # Seed each candidate with an uncovered pair, fill the rest at random, keep the best.
        best, best_gain = None, -1
        targets = sorted(uncovered, key=repr)
        for _ in range(60):
            a, va, b, vb = targets[rng.randrange(len(targets))]
            cfg = {n: rng.choice(factors[n]) for n in names}
            cfg[names[a]], cfg[names[b]] = va, vb
            if skip(cfg):
                continue
            gain = len(pairs(cfg) & uncovered)
            if gain > best_gain:
                best, best_gain = cfg, gain
        if best is None:
            raise SystemExit("correctness_matrix: no valid configuration covers the rest")
        uncovered -= pairs(best)
        out.append(best)
    return out


def invalid(cfg):
    """Combinations that are refused by design, run apart as refusal checks."""
    return cfg.get("layer") == "maxk" and str(cfg.get("exchange", "")).endswith("int8")


def read_result(directory):
    """(output rows in global id order, manifest) of a halo-infer --out directory."""
    with open(os.path.join(directory, "manifest.json")) as f:
        manifest = json.load(f)
    pieces = []
    for piece in manifest["pieces"]:
        with h5py.File(os.path.join(directory, piece["file"]), "r") as h:
            pieces.append((h["global_ids"][...], h["output"][...]))
    n = manifest["num_nodes"]
    out = np.full((n, manifest["output_dim"]), np.nan, dtype=np.float32)
    for ids, rows in pieces:
        out[ids] = rows
    return out, manifest


def compare(ref, got, bound_factor, min_identical=1.0):
    """(ok, detail) of got against ref under the bound."""
    if got.shape != ref.shape:
        return False, "shape %s, expected %s" % (got.shape, ref.shape)
    if not np.all(np.isfinite(got)):
        return False, "%d non-finite values" % int(np.sum(~np.isfinite(got)))
    scale = max(float(np.max(np.abs(ref))), 1.0)
    worst = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
    bound = bound_factor * scale
    pr, pg = np.argmax(ref, axis=1), np.argmax(got, axis=1)
    differ = pr != pg
    rows = np.nonzero(differ)[0]
    gap = np.abs(ref[rows, pr[rows]].astype(np.float64) - ref[rows, pg[rows]])
    ties = int(np.sum(gap <= bound))
    flips = int(rows.size) - ties
    # Identical predictions, rounding ties counted as identical (a tie may fall either way).
    identical = 1.0 - flips / max(ref.shape[0], 1)
    detail = "max diff %.3g (bound %.3g), %d prediction(s) differ (%d within a rounding tie)" % (
        worst, bound, int(rows.size), ties)
    if worst > bound:
        return False, detail
    if min_identical >= 1.0 and flips > 0:
        return False, detail
    if identical < min_identical:
        return False, detail + ", %.2f%% identical < %.0f%%" % (100 * identical,
                                                                 100 * min_identical)
    return True, detail


class Matrix:
    def __init__(self, args):
        self.args = args
        self.apps = os.path.join(args.build, "apps")
        self.out = os.path.abspath(args.out)
        self.work = os.path.join(self.out, "work")
        self.log = os.path.join(self.out, "matrix.log")
        self.mpiexec = shlex.split(args.mpiexec)
        self.datasets = {}
        self.references = {}
        os.makedirs(self.work, exist_ok=True)
        open(self.log, "w").close()

    def tool(self, name):
        return os.path.join(self.apps, name)

    def graph_nodes(self, graph):
        key = ("nodes", graph)
        if key not in self.datasets:
            top = -1
            with gzip.open(os.path.join(self.args.data, graph), "rt") as f:
                for line in f:
                    if line.startswith(("#", "%")) or not line.strip():
                        continue
                    a, b = line.split()[:2]
                    top = max(top, int(a), int(b))
            self.datasets[key] = top + 1
        return self.datasets[key]

    def features(self, graph):
        path = os.path.join(self.work, graph.split(".")[0] + ".feat.npy")
        if not os.path.exists(path):
            rng = np.random.default_rng(zlib.crc32(graph.encode()))
            n = self.graph_nodes(graph)
            np.save(path, rng.uniform(-1, 1, size=(n, FEATURE_WIDTH)).astype(np.float32))
        return path

    def owner_file(self, graph, parts):
        """PROTEINS: whole proteins of the second half in the last part (all interior), the
        first half's nodes dealt round-robin over the other parts (cut edges: halo rows)."""
        path = os.path.join(self.work, "proteins.owner.%d" % parts)
        indicator = os.path.join(self.args.data, "PROTEINS.graph_indicator.txt.gz")
        with gzip.open(indicator, "rt") as f:
            graph_of = np.array([int(x) for x in f.read().split()], dtype=np.int64)
        n = self.graph_nodes(graph)
        owner = np.zeros(n, dtype=np.int64)
        if parts > 1:
            half = graph_of.max() // 2
            nodes = np.arange(n)
            first = graph_of[:n] <= half
            owner[first] = nodes[first] % (parts - 1)
            owner[~first] = parts - 1
        np.savetxt(path, owner, fmt="%d")
        return path

    def dataset(self, graph, parts, features):
        key = (graph, parts, features)
        if key in self.datasets:
            return self.datasets[key]
        path = os.path.join(self.work, "%s-%d-%s.h5" % (graph.split(".")[0], parts, features))
        cmd = [self.tool("halo-partition"), os.path.join(self.args.data, graph), "--parts",
               str(parts), "--symmetrize", "--features", self.features(graph), "--quantize",
               "none" if features == "fp32" else features, "-o", path]
        if graph.startswith("PROTEINS") and parts > 1:
            cmd += ["--owner", self.owner_file(graph, parts)]
        status, out = run(cmd, self.log)
        if status != 0:
            raise SystemExit("correctness_matrix: halo-partition failed (see %s):\n%s" %
                             (self.log, out[-2000:]))
        self.datasets[key] = path
        return path

    def infer(self, cfg, ranks, backend, directory, extra=()):
        shutil.rmtree(directory, ignore_errors=True)
        cmd = self.mpiexec + ["-np", str(ranks), self.tool("halo-infer"),
                              self.dataset(cfg["graph"], ranks, cfg["features"]),
                              "--random-model", "%d,%d,%d" % (FEATURE_WIDTH, cfg["width"],
                                                              CLASSES),
                              "--layer", cfg["layer"], "--seed", "5", "--backend", backend,
                              "--out", directory] + list(extra)
        return run(cmd, self.log)

    def reference(self, cfg):
        key = (cfg["graph"], cfg["features"], cfg["layer"], cfg["width"])
        if key not in self.references:
            directory = os.path.join(self.work, "ref-" + "-".join(str(k).split(".")[0]
                                                                   for k in key))
            status, out = self.infer(cfg, 1, "cpu", directory, ["--attention", "exact"])
            if status != 0:
                raise SystemExit("correctness_matrix: the CPU reference failed for %s:\n%s" %
                                 (key, out[-2000:]))
            self.references[key] = read_result(directory)[0]
        return self.references[key]

    def options(self, cfg):
        extra = ["--exchange", cfg["exchange"]]
        if self.args.backend == "cuda":
            extra += ["--spmm", cfg["spmm"]]
        extra += ["--no-overlap"] if cfg["overlap"] == "none" else ["--overlap", cfg["overlap"]]
        return extra

    def check(self, cfg):
        """One configuration: (verdict, detail)."""
        directory = os.path.join(self.work, "c%03d" % cfg["index"])
        status, out = self.infer(cfg, cfg["ranks"], self.args.backend, directory,
                                 self.options(cfg))
        # What a failed run said: its first error line, else its last line.
        lines = out.strip().splitlines()
        last = next((l for l in lines if "error" in l), lines[-1] if lines else "")
        no_result = not os.path.exists(os.path.join(directory, "manifest.json"))
        # Refusals by design: maxk with the int8 exchange (before the job starts); the resident
        # kernel forced on a part past its column limit (when its plan is made).
        refusal = None
        if invalid(cfg):
            refusal = "--exchange %s with maxk" % cfg["exchange"]
        elif status != 0 and cfg["spmm"] == "resident" and "column" in out:
            refusal = "resident"
        if refusal is not None:
            # Refused before the job starts (options that exclude each other: exit 2) or when
            # the plan is made (exit 1), with the refusal's words, and no result.
            ok = status in (1, 2) and refusal in out and no_result
            return ("refused" if ok else "FAIL"), ("exit %d: %s" % (status, last))[:300]
        if status != 0:
            return "FAIL", ("exit %d: %s" % (status, last))[:300]
        got, _ = read_result(directory)
        ref = self.reference(cfg)
        fused = cfg["layer"] in ("agnn", "transformer") and self.args.backend == "cuda"
        if cfg["exchange"].endswith("int8") and cfg["ranks"] > 1:
            ok, detail = compare(ref, got, INT8_BOUND, INT8_MIN_IDENTICAL)
        else:
            ok, detail = compare(ref, got, FUSED_BOUND if fused else EXACT_BOUND)
        shutil.rmtree(directory, ignore_errors=True)
        return ("ok" if ok else "FAIL"), detail


def registry_spmm(build):
    """halo-infer's exact SpMM kernels (--spmm), in registry order: the rows of `halo-inspect
    --kernels` (the registry's table, docs/KERNELS.md) whose halo-infer and exact columns say yes;
    auto and autotune among them. No list by hand: a new kernel joins the matrix."""
    inspect = os.path.join(build, "apps", "halo-inspect")
    try:
        run = subprocess.run([inspect, "--kernels"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    except OSError as e:
        sys.exit("correctness_matrix: cannot run %s --kernels: %s" % (inspect, e))
    names = []
    for line in run.stdout.splitlines():
        # | `name` | halo-infer | halo-bench | autotune | exact | forms | X types | ...
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) >= 5 and cells[0].startswith("`") and cells[1] == "yes" \
                and cells[4] == "yes":
            names.append(cells[0].strip("`"))
    if run.returncode != 0 or not names:
        sys.exit("correctness_matrix: %s --kernels gave no exact halo-infer kernel (exit %d): %s"
                 % (inspect, run.returncode, run.stderr.strip()))
    return names


def gpu_count():
    try:
        p = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, timeout=30)
        return sum(1 for line in p.stdout.splitlines() if line.startswith("GPU ")) \
            if p.returncode == 0 else 0
    except (OSError, subprocess.TimeoutExpired):
        return 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data"))
    ap.add_argument("--quick", action="store_true",
                    help="two graphs, widths 8 and 100, no 16-bit features (a smoke run)")
    ap.add_argument("--seed", type=int, default=48)
    ap.add_argument("--mpiexec", default="mpirun --oversubscribe --allow-run-as-root")
    args = ap.parse_args()
    if h5py is None:
        print("correctness_matrix: skipped: python3 h5py is not installed")
        return 77
    gpus = gpu_count() if args.backend == "cuda" else 0
    if args.backend == "cuda" and gpus == 0:
        print("correctness_matrix: skipped: no GPU (nvidia-smi lists none)")
        return 77
    missing = [g for g, _ in GRAPHS if not os.path.exists(os.path.join(args.data, g))]
    if missing:
        print("correctness_matrix: skipped: %s not under %s" % (", ".join(missing), args.data))
        return 77
    factors = {"graph": [g for g, _ in GRAPHS], "layer": LAYERS, "width": WIDTHS,
               "spmm": registry_spmm(args.build) if args.backend == "cuda" else ["cpu"],
               "overlap": OVERLAP,
               "exchange": EXCHANGE, "features": FEATURES, "ranks": RANKS}
    if args.quick:
        factors.update(graph=["cora.el.gz", "PROTEINS.el.gz"], width=[8, 100],
                       features=["fp32", "int8"])
    if gpus >= 2:
        # NCCL needs one GPU per rank: with several GPUs it joins the exchanges, for rank counts
        # up to the GPUs (the MPI transport keeps covering 3 ranks on one device otherwise).
        factors["exchange"] = EXCHANGE + ["nccl", "nccl-int8"]

    def skip(cfg):
        nccl = str(cfg.get("exchange", "")).startswith("nccl")
        return invalid(cfg) or (nccl and cfg.get("ranks", 1) > gpus)

    configs = pairwise_cover(factors, args.seed, skip)
    # The refusals by design, once each.
    configs.append(dict(configs[0], layer="maxk", exchange="mpi-int8", ranks=2))
    # Issue 48's reproduction on every graph: gcn and sage, 32 -> 32 -> 8, the default kernel
    # choice and the default (split) overlap on 3 ranks.
    if args.backend == "cuda":
        for graph in factors["graph"]:
            for layer in ("gcn", "sage"):
                configs.append(dict(configs[0], graph=graph, layer=layer, width=32, spmm="auto",
                                    overlap="split", exchange="mpi", features="fp32", ranks=3))
    for i, cfg in enumerate(configs):
        cfg["index"] = i
    m = Matrix(args)
    rows = []
    start = time.time()
    for cfg in configs:
        t0 = time.time()
        verdict, detail = m.check(cfg)
        cfg.update(verdict=verdict, detail=detail, seconds=round(time.time() - t0, 2))
        rows.append(cfg)
        print("%-8s %s" % (verdict, " ".join("%s=%s" % (k, cfg[k]) for k in factors)) +
              ("  " + detail if verdict != "ok" else ""), flush=True)
    failed = [r for r in rows if r["verdict"] == "FAIL"]
    with open(os.path.join(m.out, "matrix.json"), "w") as f:
        json.dump({"backend": args.backend, "seed": args.seed, "factors": factors,
                   "configurations": rows, "seconds": round(time.time() - start, 1)}, f,
                  indent=1)
    with open(os.path.join(m.out, "matrix.md"), "w") as f:
        f.write("| # | graph | layer | width | spmm | overlap | exchange | features | ranks | "
                "verdict | detail |\n" + "| --- " * 11 + "|\n")
        for r in rows:
            f.write("| %d | %s | %s | %d | %s | %s | %s | %s | %d | %s | %s |\n" % (
                r["index"], r["graph"].split(".")[0], r["layer"], r["width"], r["spmm"],
                r["overlap"], r["exchange"], r["features"], r["ranks"], r["verdict"],
                r["detail"].replace("|", "/")))
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in ("ok", "refused", "FAIL")}
    print("correctness matrix (%s): %d configurations, %d ok, %d refused as designed, %d failed "
          "in %.0f s; table in %s" % (args.backend, len(rows), counts["ok"], counts["refused"],
                                       counts["FAIL"], time.time() - start,
                                       os.path.join(m.out, "matrix.md")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
