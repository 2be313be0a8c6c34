#!/usr/bin/env python3
"""Accuracy of AES-SpMM and int8 / fp16 / bf16 features on real graphs and features (docs/AES.md).

    scripts/aes_accuracy.py BIN_DIR DATA_DIR OUT [--datasets cora,citeseer]
        [--model DATASET=MODEL.h5 ...] [--export-dir DIR] [--random-model 16,CLASSES]
        [--backends cpu,cuda] [--ws 16,32,...,1024] [--scalings sample_sum,rescaled]
        [--features fp32,int8,fp16,bf16] [--no-int8] [--ranks 1] [--keep]

BIN_DIR holds halo-partition and halo-infer (a build directory or its apps/). DATA_DIR holds
<name>.el.gz, <name>.feat.coo.txt.gz, <name>.labels.txt.gz and <name>.test_index.txt.gz (the
shared data). Each dataset is partitioned as scripts/pyg_agreement.sh does (--symmetrize
--self-loops keep --normalize none), once per feature type of --features (float32, then
--quantize int8 / fp16 / bf16). --ws "" measures the feature types alone (exact SpMM only).
Everything runs through halo-infer, so it measures our kernels (--spmm aes:W[:scaling] against the
exact SpMM, on the backend named):

1. SpMM error: a one-layer identity model (gcn, in = out = feature width, weight I, no bias,
   activation none; the engine aggregates first, so its output is A_gcn X) and a sage one (weight
   I, root_weight 0: the mean operator). Per W: ||AES(A) X - A X||_F / ||A X||_F, X the dataset's
   features; for int8 datasets X is their dequantization and the reference is still the exact
   fp32 result (so the error includes quantization; the "exact" int8 row isolates it).
2. Predictions: each model (--model, --export-dir from tools/export_pyg.py, or --random-model)
   per W and feature type: the share of nodes whose prediction differs from exact fp32 inference
   on the same backend, and test accuracy (--eval-nodes with the test ids).

Writes OUT/aes_accuracy.json and OUT/aes_accuracy.md (printed too); every row names dataset,
model, backend, features, scaling, W and operator. Needs python3 with numpy and h5py only.
Environment: MPIEXEC (default mpirun) and MPIEXEC_FLAGS for --ranks > 1. Exit status 0 ok, 1 a
run failed, 2 bad usage.
"""

import argparse
import datetime
import gzip
import importlib.util
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEFAULT_WS = [16, 32, 64, 128, 256, 512, 1024]


def fail_usage(message):
    print(f"aes_accuracy: {message}", file=sys.stderr)
    sys.exit(2)


def load_model_writer():
    """tools/export_pyg.py's write_halo_model (its module imports only numpy at load time)."""
    spec = importlib.util.spec_from_file_location("export_pyg", REPO / "tools" / "export_pyg.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_halo_model


def count_lines(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return sum(1 for line in f if line.strip())


def run(cmd, log):
    """Runs cmd; on failure raises RuntimeError with the first error line of its output."""
    with open(log, "w") as f:
        f.write("$ " + shlex.join(str(c) for c in cmd) + "\n")
        f.flush()
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if rc.returncode != 0:
        lines = [l.strip() for l in open(log) if l.strip() and not set(l.strip()) <= {"-"}]
        errors = [l for l in lines if "error" in l.lower()] or lines[1:2] or ["(no output)"]
        raise RuntimeError(f"{Path(cmd[0]).name} exit {rc.returncode}: {errors[0]} (log {log})")


def read_result(directory):
    """(global ids sorted, output rows in that order, predictions, manifest) of a halo-infer run."""
    manifest = json.load(open(Path(directory) / "manifest.json"))
    ids, outs, preds = [], [], []
    for piece in manifest["pieces"]:
        name = piece["file"] if isinstance(piece, dict) else piece
        with h5py.File(Path(directory) / name, "r") as f:
            ids.append(f["global_ids"][:])
            outs.append(f["output"][:])
            preds.append(f["prediction"][:])
    ids = np.concatenate(ids)
    order = np.argsort(ids, kind="stable")
    return ids[order], np.concatenate(outs)[order], np.concatenate(preds)[order], manifest


def rel_frobenius(approx, exact):
    a = approx.astype(np.float64)
    e = exact.astype(np.float64)
    den = math.sqrt(float(np.sum(e * e)))
    num = math.sqrt(float(np.sum((a - e) ** 2)))
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


def identity_layers(kind, width):
    eye = np.eye(width, dtype=np.float32)
    layer = {"type": kind, "activation": "none", "in_dim": width, "out_dim": width,
             "weight": eye, "bias": None}
    if kind == "sage":
        layer["root_weight"] = np.zeros((width, width), dtype=np.float32)
    return [layer]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("bin_dir")
    p.add_argument("data_dir")
    p.add_argument("out")
    p.add_argument("--datasets", default="cora,citeseer")
    p.add_argument("--model", action="append", default=[], metavar="DATASET=FILE",
                   help="a trained model file for DATASET (repeatable)")
    p.add_argument("--export-dir", help="tools/export_pyg.py output: every model of the datasets")
    p.add_argument("--random-model", metavar="WIDTHS",
                   help="also a seeded random model (halo-infer --random-model) with these widths "
                        "after the input width, e.g. 16,7")
    p.add_argument("--layer", default="gcn", help="layer type of --random-model")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--backends", default="cpu")
    p.add_argument("--ws", default=",".join(map(str, DEFAULT_WS)))
    p.add_argument("--scalings", default="sample_sum")
    p.add_argument("--operators", default="gcn,mean")
    p.add_argument("--features", default="fp32,int8",
                   help="stored feature types to compare, comma-separated, fp32 first: fp32, "
                        "int8, fp16, bf16 (halo-partition --quantize)")
    p.add_argument("--no-int8", action="store_true", help="float32 features only")
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--graph-suffix", default=".el.gz",
                   help="graph file is DATA_DIR/<dataset><suffix>")
    p.add_argument("--keep", action="store_true", help="keep datasets and results under OUT")
    a = p.parse_args()

    bin_dir = Path(a.bin_dir)
    if (bin_dir / "apps" / "halo-infer").exists():
        bin_dir = bin_dir / "apps"
    for tool in ("halo-partition", "halo-infer"):
        if not (bin_dir / tool).exists():
            fail_usage(f"{a.bin_dir}: no {tool} (build it first)")
    data = Path(a.data_dir)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    datasets = [d for d in a.datasets.split(",") if d]
    backends = [b for b in a.backends.split(",") if b]
    for b in backends:
        if b not in ("cpu", "cuda"):
            fail_usage(f"unknown backend '{b}'")
    ws = [int(w) for w in a.ws.split(",") if w]
    scalings = [s for s in a.scalings.split(",") if s]
    operators = [o for o in a.operators.split(",") if o]
    for o in operators:
        if o not in ("gcn", "mean"):
            fail_usage(f"unknown operator '{o}' (gcn, mean)")
    feature_types = ["fp32"] if a.no_int8 else [t for t in a.features.split(",") if t]
    if not feature_types or feature_types[0] != "fp32":
        fail_usage(f"--features {a.features}: fp32 must come first (the reference)")
    for t in feature_types:
        if t not in ("fp32", "int8", "fp16", "bf16"):
            fail_usage(f"--features: unknown feature type '{t}' (fp32, int8, fp16, bf16)")
    mpi = []
    if a.ranks > 1:
        mpi = [os.environ.get("MPIEXEC", "mpirun"), "-n", str(a.ranks)]
        mpi += shlex.split(os.environ.get("MPIEXEC_FLAGS",
                                          "--allow-run-as-root --oversubscribe --bind-to none"))

    models = {d: [] for d in datasets}  # dataset -> [(name, path or None)]
    for spec in a.model:
        if "=" not in spec:
            fail_usage(f"--model {spec}: expected DATASET=FILE")
        d, f = spec.split("=", 1)
        if d not in models:
            fail_usage(f"--model {spec}: dataset {d} is not in --datasets")
        models[d].append((Path(f).stem, Path(f)))
    if a.export_dir:
        summary = json.load(open(Path(a.export_dir) / "summary.json"))
        for key, r in sorted(summary["runs"].items()):
            if r["dataset"] in models:
                models[r["dataset"]].append((r["model"], Path(a.export_dir) / r["files"]["model"]))
    write_halo_model = load_model_writer()

    rows, failures = [], []
    specs = ["exact"] + [f"aes:{w}:{s}" for s in scalings for w in ws]

    def infer(h5, model_args, backend, spmm, eval_nodes, tag):
        res = work / f"res-{tag}"
        if res.exists():
            shutil.rmtree(res)
        cmd = mpi + [str(bin_dir / "halo-infer"), str(h5), *model_args, "--backend", backend,
                     "--out", str(res), "-q"]
        if spmm != "exact":
            cmd += ["--spmm", spmm]
        if eval_nodes:
            cmd += ["--eval-nodes", str(eval_nodes)]
        run(cmd, work / f"log-{tag}.txt")
        result = read_result(res)
        if not a.keep:
            shutil.rmtree(res)
        return result

    def fail(what, error):
        failures.append(f"{what}: {error}")
        print(f"FAIL {what}: {error}")

    def infer_or_fail(what, *args):
        """infer(*args), or None once its failure is recorded as `what`."""
        try:
            return infer(*args)
        except RuntimeError as e:
            fail(what, e)
            return None

    for ds in datasets:
        graph = data / f"{ds}{a.graph_suffix}"
        feats, labels, test = (data / f"{ds}.feat.coo.txt.gz", data / f"{ds}.labels.txt.gz",
                               data / f"{ds}.test_index.txt.gz")
        for f in (graph, feats, labels):
            if not f.exists():
                fail_usage(f"{f}: missing")
        eval_nodes = test if test.exists() else None
        num_nodes = count_lines(labels)
        h5 = {}
        try:
            for ft in feature_types:
                h5[ft] = work / f"{ds}-{ft}-p{a.ranks}.h5"
                run([str(bin_dir / "halo-partition"), str(graph), "--parts", str(a.ranks),
                     "--symmetrize", "--self-loops", "keep", "--normalize", "none",
                     "--num-nodes", str(num_nodes), "--features", str(feats),
                     "--labels", str(labels), "--seed", str(a.seed),
                     "--quantize", "none" if ft == "fp32" else ft, "-q", "-o", str(h5[ft])],
                    work / f"log-partition-{ds}-{ft}.txt")
        except RuntimeError as e:
            fail(ds, e)
            continue
        with h5py.File(h5["fp32"], "r") as f:
            width = int(f.attrs["feature_dim"])
            max_degree = max(int(np.max(np.diff(f[f"parts/{q}/csr/indptr"][:])))
                             for q in range(int(f.attrs["num_parts"])))
        print(f"{ds}: {num_nodes} nodes, {width} features, longest row {max_degree}")

        ds_models = [(n, ["--model", str(path)]) for n, path in models[ds]]
        if a.random_model:
            ds_models.append((f"random-{a.layer}-{a.random_model.replace(',', 'x')}",
                              ["--random-model", f"{width},{a.random_model}", "--layer", a.layer,
                               "--seed", str(a.seed)]))
        for op in operators:
            path = work / f"identity-{ds}-{op}.h5"
            write_halo_model(path, identity_layers("gcn" if op == "gcn" else "sage", width),
                             f"identity {op} {width}")

        for backend in backends:
            # 1. The SpMM alone through the identity models.
            for op in operators:
                model_args = ["--model", str(work / f"identity-{ds}-{op}.h5")]
                exact_run = infer_or_fail(f"{ds} {op} {backend} exact", h5["fp32"], model_args,
                                          backend, "exact", None, f"{ds}-{op}-{backend}-fp32-exact")
                if exact_run is None:
                    continue
                exact = exact_run[1]
                for ft in feature_types:
                    for spec in specs:
                        if ft == "fp32" and spec == "exact":
                            err = 0.0
                        else:
                            tag = f"{ds}-{op}-{backend}-{ft}-{spec.replace(':', '-')}"
                            got = infer_or_fail(tag, h5[ft], model_args, backend, spec, None, tag)
                            if got is None:
                                continue
                            err = rel_frobenius(got[1], exact)
                        w = None if spec == "exact" else int(spec.split(":")[1])
                        scaling = None if spec == "exact" else spec.split(":")[2]
                        rows.append({"kind": "spmm", "dataset": ds, "model": f"identity-{op}",
                                     "backend": backend, "features": ft, "w": w,
                                     "scaling": scaling, "operator": op,
                                     "rel_frobenius_error": err})
                        print(f"  spmm {ds} {op:<4} {backend:<4} {ft} {spec:<16} "
                              f"rel. Frobenius error {err:.3e}")
            # 2. Predictions of each model.
            for name, model_args in ds_models:
                op = "model"
                ref = infer_or_fail(f"{ds} {name} {backend} exact", h5["fp32"], model_args,
                                    backend, "exact", eval_nodes,
                                    f"{ds}-{name}-{backend}-fp32-exact")
                if ref is None:
                    continue
                ids, _, ref_pred, ref_manifest = ref
                for ft in feature_types:
                    for spec in specs:
                        tag = f"{ds}-{name}-{backend}-{ft}-{spec.replace(':', '-')}"
                        if ft == "fp32" and spec == "exact":
                            pred, manifest = ref_pred, ref_manifest
                        else:
                            got = infer_or_fail(tag, h5[ft], model_args, backend, spec,
                                                eval_nodes, tag)
                            if got is None:
                                continue
                            _, _, pred, manifest = got
                        changed = int(np.count_nonzero(pred != ref_pred))
                        acc = manifest.get("accuracy", {}).get("accuracy")
                        w = None if spec == "exact" else int(spec.split(":")[1])
                        scaling = None if spec == "exact" else spec.split(":")[2]
                        rows.append({"kind": "model", "dataset": ds, "model": name,
                                     "backend": backend, "features": ft, "w": w,
                                     "scaling": scaling, "operator": "model layers",
                                     "changed_predictions": changed, "nodes": int(len(ids)),
                                     "changed_fraction": changed / max(1, len(ids)),
                                     "test_accuracy": acc})
                        acc_text = "-" if acc is None else f"{acc:.4f}"
                        print(f"  model {ds} {name} {backend} {ft} {spec:<16} changed "
                              f"{changed}/{len(ids)} test accuracy {acc_text}")
        if not a.keep:
            for f in h5.values():
                f.unlink(missing_ok=True)
        rows_meta = {"dataset": ds, "nodes": num_nodes, "feature_dim": width,
                     "max_degree": max_degree}
        rows.append({"kind": "dataset", **rows_meta})

    doc = {"tool": "scripts/aes_accuracy.py",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "command": shlex.join(sys.argv), "ranks": a.ranks, "seed": a.seed, "ws": ws,
           "scalings": scalings, "backends": backends, "features": feature_types,
           "rows": rows, "failures": failures}
    (out / "aes_accuracy.json").write_text(json.dumps(doc, indent=2) + "\n")

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    md = ["| dataset | model | backend | features | scaling | W | operator | rel. Frobenius "
          "error | changed predictions | test accuracy |",
          "| --- | --- | --- | --- | --- | ---: | --- | ---: | ---: | ---: |"]
    for r in rows:
        if r["kind"] == "dataset":
            continue
        changed = (f"{r['changed_predictions']}/{r['nodes']} ({100 * r['changed_fraction']:.2f}%)"
                   if r["kind"] == "model" else "-")
        md.append(f"| {r['dataset']} | {r['model']} | {r['backend']} | {r['features']} | "
                  f"{r['scaling'] or '-'} | {r['w'] or 'exact'} | {r['operator']} | "
                  f"{fmt(r.get('rel_frobenius_error'), '.3e')} | {changed} | "
                  f"{fmt(r.get('test_accuracy'), '.4f')} |")
    (out / "aes_accuracy.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failure(s); wrote {out / 'aes_accuracy.json'} and "
          f"{out / 'aes_accuracy.md'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
