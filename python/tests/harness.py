"""Shared pieces of the halognn tests: the checks, the tools, a seeded graph."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
# The source tree's package first, so a test never runs an older installed copy.
sys.path.insert(0, str(REPO / "python"))

failures = []


def check(condition, message):
    if condition:
        print(f"ok - {message}", flush=True)
    else:
        failures.append(message)
        print(f"FAIL - {message}", flush=True)


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed", flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


class Tools:
    """halo-partition / halo-infer / halo-inspect of BIN_DIR, run on the CPU backend."""

    def __init__(self, bin_dir, mpiexec):
        self.bin = Path(bin_dir)
        self.mpiexec = mpiexec
        for tool in ("halo-partition", "halo-infer", "halo-inspect"):
            if not (self.bin / tool).is_file():
                raise SystemExit(f"FAIL - {self.bin / tool} not found (build it first)")
        self.env = dict(os.environ, OMP_NUM_THREADS="1")

    def run(self, argv, expect_ok=True):
        p = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                           env=self.env, stdin=subprocess.DEVNULL)
        if expect_ok and p.returncode != 0:
            print(p.stdout[-3000:], p.stderr[-3000:], sep="\n", flush=True)
            raise SystemExit(f"FAIL - exit {p.returncode}: {' '.join(map(str, argv))}")
        return p

    def partition(self, saved, parts, out):
        return self.run([self.bin / "halo-partition", *saved.partition_args, "--parts", parts,
                         "-o", out])

    def infer(self, dataset, parts, model, out, extra=()):
        return self.run([self.mpiexec, "-n", parts, "--oversubscribe", "--allow-run-as-root",
                         self.bin / "halo-infer", dataset, "--model", model, "--backend", "cpu",
                         "--out", out, *extra])


def random_graph(seed, n=57, edges=260, features=12, classes=5):
    """A directed graph with stored self-loops (nodes 0, 3), an isolated node (n - 1) and a
    node with in-edges only (n - 2), no duplicate edges; features, labels, a test mask."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n - 2, size=edges)
    dst = rng.integers(0, n - 2, size=edges)
    src = np.concatenate([src, [0, 3, 5, 7]])
    dst = np.concatenate([dst, [0, 3, n - 2, n - 2]])
    keys = np.unique(src * n + dst)
    edge_index = np.stack([keys // n, keys % n]).astype(np.int64)
    x = rng.normal(size=(n, features)).astype(np.float32)
    y = rng.integers(0, classes, size=n).astype(np.int64)
    y[4] = -1
    test_mask = np.zeros(n, dtype=bool)
    test_mask[rng.choice(n, size=20, replace=False)] = True
    return {"edge_index": edge_index, "x": x, "y": y, "test_mask": test_mask, "num_nodes": n}
