#!/usr/bin/env python3
"""tools/train_numpy.py on Cora: gradients that train, a model file halo-infer agrees with.

    test_train_numpy.py REPO BIN_DIR DATA_DIR

Trains a 2-layer GCN and a GraphSAGE model for 60 epochs (and the GCN again on row-normalized
features, --row-normalize). Checks: each test accuracy is at least 0.70 (a random model gives
about 0.14, and a wrong gradient does not train); halo-infer (CPU backend) on a dataset
partitioned as scripts/pyg_agreement.sh does, with the written model file, gives the accuracy
the trainer's float64 forward reported on the same test nodes (within one node: ties of float32
and float64 argmax); the row-normalized features file has rows summing to 1. Exit 0 pass,
1 fail ("FAIL - ..."), 77 skip (no shared data).
"""
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

repo, bin_dir, data = (Path(a) for a in sys.argv[1:4])
if not (data / "cora.feat.coo.txt.gz").exists():
    print(f"SKIP: {data}/cora.feat.coo.txt.gz missing (the shared data)")
    sys.exit(77)
problems = []


def run(cmd):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))}: exit {done.returncode}\n"
                           f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def halo_accuracy(data_dir, model_file, work, tag):
    num_nodes = sum(1 for _ in gzip.open(data_dir / "cora.labels.txt.gz", "rt"))
    h5 = work / f"{tag}.h5"
    run([bin_dir / "halo-partition", data_dir / "cora.el.gz", "--parts", "1", "--symmetrize",
         "--self-loops", "keep", "--normalize", "none", "--num-nodes", num_nodes,
         "--features", data_dir / "cora.feat.coo.txt.gz", "--labels",
         data_dir / "cora.labels.txt.gz", "-q", "-o", h5])
    out = work / f"res-{tag}"
    run([bin_dir / "halo-infer", h5, "--model", model_file, "--backend", "cpu",
         "--eval-nodes", data_dir / "cora.test_index.txt.gz", "--out", out, "-q"])
    manifest = json.load(open(out / "manifest.json"))
    return manifest["accuracy"]["correct"], manifest["accuracy"]["evaluated"]


with tempfile.TemporaryDirectory(prefix="halo-train-numpy-") as tmp:
    work = Path(tmp)
    trainer = [sys.executable, repo / "tools" / "train_numpy.py", data, "--datasets", "cora",
               "--epochs", "60"]
    try:
        print(run(trainer + ["--models", "gcn,sage", "--out", work / "plain"]), end="")
        print(run(trainer + ["--models", "gcn", "--row-normalize", "--out", work / "rn"]), end="")
    except RuntimeError as e:
        print(f"FAIL - {e}")
        sys.exit(1)
    cases = [("gcn", work / "plain", data), ("sage", work / "plain", data),
             ("gcn", work / "rn", work / "rn" / "data")]
    for model, out, data_dir in cases:
        tag = f"{out.name}-{model}"
        summary = json.load(open(out / f"cora-{model}.json"))
        test = summary["accuracy"]["test"]
        if test["accuracy"] < 0.70:
            problems.append(f"{tag}: test accuracy {test['accuracy']:.4f} below 0.70")
        try:
            correct, evaluated = halo_accuracy(data_dir, out / f"cora-{model}.h5", work, tag)
        except (RuntimeError, KeyError) as e:
            problems.append(f"{tag}: halo-infer: {e}")
            continue
        print(f"{tag}: trainer {test['correct']}/{test['evaluated']}, "
              f"halo-infer {correct}/{evaluated}")
        if evaluated != test["evaluated"] or abs(correct - test["correct"]) > 1:
            problems.append(f"{tag}: halo-infer {correct}/{evaluated} correct, the trainer's "
                            f"forward {test['correct']}/{test['evaluated']}")
    with gzip.open(work / "rn" / "data" / "cora.feat.coo.txt.gz", "rt") as f:
        n, width, nnz = (int(v) for v in f.readline()[1:].split())
        rows, vals = np.loadtxt(f, usecols=(0, 2), unpack=True, ndmin=2)
    sums = np.bincount(rows.astype(np.int64), weights=vals, minlength=n)
    nonempty = np.bincount(rows.astype(np.int64), minlength=n) > 0
    if rows.size != nnz or not np.allclose(sums[nonempty], 1.0, atol=1e-5):
        problems.append(f"row-normalized features: {rows.size} entries (header {nnz}), row sums "
                        f"in [{sums[nonempty].min()}, {sums[nonempty].max()}]")

for p in problems:
    print(f"FAIL - {p}")
print(f"test_train_numpy: {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
