#!/usr/bin/env python3
"""Accuracy of 16-bit activations (issue 53; docs/ACTIVATIONS.md).

For the models tools/export_pyg.py trains (Cora and Citeseer; PubMed only where DATA_DIR has its
features) and for random models of every layer type on an R-MAT graph: run halo-infer with
--activations fp32, bf16 and fp16 on the CPU backend (which defines the 16-bit roundings,
docs/KERNELS.md "16-bit activations") on one rank, and compare each 16-bit run with the fp32 run
(halo-inspect --compare-logits): share of nodes whose predicted class is identical, max
|difference| of the logits, test accuracy of both (trained models); an fp16 run refused for its
range is recorded as such. Then, per layer type, which 16-bit type meets issue 53's bar: >= 99.9%
identical predictions and test accuracy within 0.1 points of fp32, on every model of that type.

Usage:
  scripts/activations_accuracy.py BUILD_DIR DATA_DIR OUT [options]
    --pyg-python PY     Python with torch and torch_geometric for tools/export_pyg.py
                        (default: $PYG_PYTHON, else python3; scripts/pyg-venv.sh makes one)
    --export DIR,...    use these export_pyg.py outputs (their summary.json runs, merged) instead
                        of training into OUT/export
    --datasets LIST     default cora,citeseer,pubmed (one without features is skipped, reported)
    --models LIST       default gcn,sage,gin,agnn,transformer,gat,maxk
    --rmat SPEC         random-model graph, halo-partition's generator spec (default rmat:20:16;
                        "none" skips the random models)
    --dims W0,W1,...    random model widths (default 64,64,64,16: 3 layers)
    --layers LIST       random model layer types (default: all of halo-inspect --layer-types)
    --heads H, --k K    random transformer/gat heads (default 1), maxk k (default 16)
    --from-tsv A,B,...  run nothing: write the tables (and verdicts) of earlier runs'
                        activations.tsv files together (e.g. the trained and random halves)
Writes OUT/activations.tsv, OUT/activations.md (both tables, the verdicts, device, date, commit,
command) and prints the latter. Exit status: 0 when every run finished (an fp16 range refusal is
a result), 1 when a run failed otherwise, 2 on bad usage. Standard library only (the export step
runs --pyg-python).
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ACTS = ("bf16", "fp16")
IDENTICAL_BAR = 0.999      # share of nodes with the fp32 run's predicted class
ACCURACY_BAR = 0.001       # test accuracy within 0.1 points of fp32's
RANGE_ERROR = "beyond fp16's range"


def die(msg, status=2):
    print(f"activations_accuracy: {msg}", file=sys.stderr)
    sys.exit(status)


def run(cmd, log):
    """Runs cmd with stdout and stderr into log; returns (exit status, seconds)."""
    start = time.monotonic()
    with open(log, "w") as f:
        status = subprocess.run([str(c) for c in cmd], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL).returncode
    return status, time.monotonic() - start


def first_error(log):
    lines = [l.strip() for l in Path(log).read_text(errors="replace").splitlines()
             if l.strip().strip("-")]
    for line in lines:
        if "error" in line.lower():
            return line
    return lines[0] if lines else "(no output)"


class Runner:
    def __init__(self, bin_dir, out):
        self.bin, self.out, self.rows, self.failures = bin_dir, out, [], 0

    def tool(self, name):
        return self.bin / name

    def compare_all(self, case, dataset_h5, infer_args, labels=None, test_index=None):
        """fp32, bf16, fp16 runs of one model; one row per 16-bit type."""
        tag = f"{case['dataset']}-{case['model']}"
        results, secs = {}, {}
        for act in ("fp32",) + ACTS:
            res = self.out / f"result-{tag}-{act}"
            log = self.out / f"infer-{tag}-{act}.log"
            status, secs[act] = run([self.tool("halo-infer"), dataset_h5, *infer_args,
                                     "--backend", "cpu", "--activations", act, "--out", res,
                                     "--overwrite", "-q"], log)
            results[act] = (status, res, log)
        status, ref_res, log = results["fp32"]
        ref = self.out / f"{tag}-fp32.npy"
        if status != 0 or run([self.tool("halo-inspect"), ref_res, "--export-logits", ref],
                              self.out / "inspect.log")[0] != 0:
            for act in ACTS:
                self.fail(case, act, f"fp32 run: {first_error(log)}")
            return
        for act in ACTS:
            status, res, log = results[act]
            row = dict(case, activations=act, seconds_fp32=secs["fp32"], seconds=secs[act])
            if status != 0:
                why = first_error(log)
                if act == "fp16" and RANGE_ERROR in why:
                    # "rank 0: halo-infer: error: --activations fp16: layer 2 (gin, 64 -> 16)
                    # holds -66772.2 at node 4, column 9, beyond fp16's range (+-65504); ..."
                    what = why.split("--activations fp16: ", 1)[-1].split(", beyond")[0]
                    self.rows.append(dict(row, status=f"refused (fp16 range): {what}"))
                else:
                    self.fail(case, act, f"halo-infer: {why}")
                continue
            cmp_json = self.out / f"compare-{tag}-{act}.json"
            extra = ["--labels", labels, "--test-index", test_index] if labels else []
            run([self.tool("halo-inspect"), res, "--compare-logits", ref, *extra,
                 "--json", cmp_json], self.out / "inspect.log")
            if not cmp_json.exists():
                self.fail(case, act, f"halo-inspect: {first_error(self.out / 'inspect.log')}")
                continue
            c = json.loads(cmp_json.read_text())
            row.update(status="ok", identical=c["identical_prediction_share"],
                       nodes=c["rows"], max_abs_diff=c["max_abs_diff"],
                       max_abs_logit=c["max_abs_reference"])
            if labels:
                a = c["accuracy"]
                row.update(acc_fp32=a["reference"], acc=a["halo"], evaluated=a["evaluated"])
            self.rows.append(row)
            print(f"{tag} {act}: identical {100 * row['identical']:.3f}%, max |diff| "
                  f"{row['max_abs_diff']:.3e}" + (f", test accuracy {row['acc']:.4f} "
                  f"(fp32 {row['acc_fp32']:.4f})" if labels else ""), flush=True)
        for act in ("fp32",) + ACTS:
            subprocess.run(["rm", "-rf", str(results[act][1])])

    def fail(self, case, act, why):
        print(f"FAIL {case['dataset']}-{case['model']} {act}: {why}", file=sys.stderr)
        self.rows.append(dict(case, activations=act, status="FAIL: " + why))
        self.failures += 1


def trained(args, runner, notes):
    wanted = []
    for ds in args.datasets:
        if (args.data / f"{ds}.feat.coo.txt.gz").exists():
            wanted.append(ds)
        else:
            notes.append(f"{ds}: not included: {args.data} has no {ds}.feat.coo.txt.gz (its "
                         "features), so no model could be trained on it")
    if not wanted:
        return
    exports = [Path(e) for e in args.export.split(",")] if args.export else [args.out / "export"]
    if not args.export:
        cmd = [args.pyg_python, REPO / "tools/export_pyg.py", args.data, "--out", exports[0],
               "--models", ",".join(args.models), "--datasets", ",".join(wanted),
               "--device", "cpu"]
        print("$ " + shlex.join(map(str, cmd)), flush=True)
        if subprocess.run([str(c) for c in cmd]).returncode != 0:
            die("tools/export_pyg.py failed (see above)", 1)
    summary = {}  # run key -> (export directory, run): summary.json, else <dataset>-<model>.json
    for export in exports:
        path = export / "summary.json"
        runs = json.loads(path.read_text())["runs"] if path.exists() else {}
        for ds in wanted:
            for m in args.models:
                one = export / f"{ds}-{m}.json"  # written as each run finishes
                if f"{ds}-{m}" not in runs and one.exists():
                    runs[f"{ds}-{m}"] = json.loads(one.read_text())
        for key, r in runs.items():
            summary.setdefault(key, (export, r))
    for ds in wanted:
        keys = [f"{ds}-{m}" for m in args.models if f"{ds}-{m}" in summary]
        missing = [f"{ds}-{m}" for m in args.models if f"{ds}-{m}" not in summary]
        if missing:
            notes.append(f"{', '.join(missing)}: not in {args.export or exports[0]} (not "
                         "exported), so not measured")
        if not keys:
            continue
        h = summary[keys[0]][1]["halo_inputs"]
        h5 = args.out / f"{ds}.h5"
        # docs/PYG.md step 2: the flags the export recorded, the shared files themselves.
        status, _ = run([runner.tool("halo-partition"), args.data / h["graph"], "--parts", "1",
                         "--symmetrize", "--self-loops", "keep", "--normalize", "none",
                         "--num-nodes", h["num_nodes"], "--features", args.data / h["features"],
                         "--labels", args.data / h["labels"], "-q", "-o", h5],
                        args.out / "partition.log")
        if status != 0:
            die(f"halo-partition {ds}: {first_error(args.out / 'partition.log')}", 1)
        for key in keys:
            export, r = summary[key]
            case = dict(kind="trained", dataset=ds, model=r["model"],
                        acc_pyg=r["accuracy"]["test"]["accuracy"]
                        if "accuracy" in r["accuracy"]["test"] else None)
            runner.compare_all(case, h5, ["--model", export / r["files"]["model"],
                                          "--eval-nodes", args.data / h["test_index"]],
                               labels=args.data / h["labels"],
                               test_index=args.data / h["test_index"])
        h5.unlink()


def random_models(args, runner):
    h5 = args.out / "rmat.h5"
    status, secs = run([runner.tool("halo-partition"), args.rmat, "--parts", "1", "--symmetrize",
                        "-q", "-o", h5], args.out / "partition.log")
    if status != 0:
        die(f"halo-partition {args.rmat}: {first_error(args.out / 'partition.log')}", 1)
    for layer in args.layers:
        extra = {"gat": ["--heads", args.heads], "transformer": ["--heads", args.heads],
                 "maxk": ["--k", args.k]}.get(layer, [])
        runner.compare_all(dict(kind="random", dataset=args.rmat, model=layer), h5,
                           ["--random-model", args.dims, "--random-features", "--layer", layer,
                            *extra])
    h5.unlink()


def read_tsv(path):
    """The rows of an earlier run's activations.tsv, numbers as numbers."""
    lines = path.read_text().splitlines()
    keys = lines[0].split("\t")
    rows = []
    for line in lines[1:]:
        row = {}
        for k, v in zip(keys, line.split("\t")):
            if v == "-":
                continue
            try:
                row[k] = float(v) if k not in ("dataset", "model", "kind", "status") else v
            except ValueError:
                row[k] = v
        rows.append(row)
    return rows


def meets(row):
    if row.get("status") != "ok" or row["identical"] < IDENTICAL_BAR:
        return False
    return "acc" not in row or abs(row["acc"] - row["acc_fp32"]) <= ACCURACY_BAR + 1e-12


def verdicts(rows, layers):
    """Per layer type: the 16-bit types that meet the bar on every model of that type."""
    out = []
    for layer in layers:
        mine = [r for r in rows if r["model"] == layer]
        cells = [layer]
        for kind in ("trained", "random", None):
            sel = [r for r in mine if kind is None or r["kind"] == kind]
            if not sel:
                cells.append("-")
                continue
            ok = [a for a in ACTS if all(meets(r) for r in sel if r["activations"] == a)]
            cells.append(" and ".join(ok) if ok else "neither")
        out.append(cells)
    return out


def pct(x):
    return f"{100 * x:.2f}%" if x >= 0.9999 or x < 0.99 else f"{100 * x:.3f}%"


def write_tables(args, rows, notes, argv):
    tsv_keys = ["kind", "dataset", "model", "activations", "status", "nodes", "identical",
                "max_abs_diff", "max_abs_logit", "acc_pyg", "acc_fp32", "acc", "evaluated", "seconds_fp32",
                "seconds"]
    with open(args.out / "activations.tsv", "w") as f:
        f.write("\t".join(tsv_keys) + "\n")
        for r in rows:
            f.write("\t".join(str(r.get(k, "-")) for k in tsv_keys) + "\n")
    commit = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor()) \
        if os.path.exists("/proc/cpuinfo") else platform.processor()
    lines = [f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, commit "
             f"{commit}, CPU backend, 1 rank, on {os.cpu_count()} cores of {cpu}:",
             "", "    " + shlex.join(["scripts/activations_accuracy.py", *argv]), ""]
    if args.from_tsv:  # each file's own .md names when, where and how it was measured
        lines = [f"The rows of {args.from_tsv.replace(',', ', ')}, put together by:", "",
                 "    " + shlex.join(["scripts/activations_accuracy.py", *argv]), ""]
    for kind, title in (("trained", "Trained models (test accuracy: the dataset's test split)"),
                        ("random", f"Random models on {args.rmat}, widths {args.dims}")):
        sel = [r for r in rows if r["kind"] == kind]
        if not sel:
            continue
        lines += [f"{title}:", ""]
        acc = kind == "trained"
        lines.append("| dataset | model | fp32 test acc | activations | test acc | identical "
                     "predictions | max abs diff | max abs logit | status |" if acc else
                     "| graph | layer | activations | identical predictions | max abs diff | "
                     "max abs logit | status |")
        lines.append("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- |" if acc else
                     "| --- | --- | --- | ---: | ---: | ---: | --- |")
        for r in sel:
            ok = r["status"] == "ok"
            cells = [r["dataset"], r["model"]]
            if acc:
                cells.append(f"{r['acc_fp32']:.4f}" if ok else "-")
            cells.append(r["activations"])
            if acc:
                cells.append(f"{r['acc']:.4f}" if ok else "-")
            cells += [pct(r["identical"]), f"{r['max_abs_diff']:.2e}",
                      f"{r['max_abs_logit']:.2e}"] if ok else ["-", "-", "-"]
            cells.append("ok" if ok and meets(r) else "below the bar" if ok else r["status"])
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    layers = list(dict.fromkeys([r["model"] for r in rows]))
    lines += ["Per layer type, the 16-bit types that meet the bar (>= 99.9% identical "
              "predictions, test accuracy within 0.1 points) on every model of that type:", "",
              "| layer type | trained models | random models | all |",
              "| --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(v) + " |" for v in verdicts(rows, layers)]
    lines += [""] + [f"- {n}" for n in notes]
    (args.out / "activations.md").write_text("\n".join(lines).rstrip() + "\n")
    print("\n".join(lines))


def main():
    argv = sys.argv[1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("data", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--pyg-python", default=os.environ.get("PYG_PYTHON", "python3"))
    ap.add_argument("--export")
    ap.add_argument("--datasets", default="cora,citeseer,pubmed")
    ap.add_argument("--models", default="gcn,sage,gin,agnn,transformer,gat,maxk")
    ap.add_argument("--rmat", default="rmat:20:16")
    ap.add_argument("--dims", default="64,64,64,16")
    ap.add_argument("--layers")
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--from-tsv")
    args = ap.parse_args()
    if args.from_tsv:
        args.out.mkdir(parents=True, exist_ok=True)
        rows, notes = [], []
        for path in args.from_tsv.split(","):
            rows += read_tsv(Path(path))
            md = Path(path).with_suffix(".md")
            if md.exists():
                notes += [l[2:] for l in md.read_text().splitlines() if l.startswith("- ")]
        random_graphs = {r["dataset"] for r in rows if r["kind"] == "random"}
        args.rmat = ",".join(sorted(random_graphs)) or args.rmat
        write_tables(args, rows, notes, argv)
        return 0
    args.datasets = [d for d in args.datasets.split(",") if d and d != "none"]
    args.models = [m for m in args.models.split(",") if m]
    bin_dir = args.build / "apps" if (args.build / "apps").is_dir() else args.build
    for t in ("halo-partition", "halo-infer", "halo-inspect"):
        if not os.access(bin_dir / t, os.X_OK):
            die(f"{args.build}: no {t} (build it first)")
    if not args.data.is_dir():
        die(f"{args.data}: not a directory")
    for e in args.export.split(",") if args.export else []:
        if not Path(e).is_dir():
            die(f"{e}: no such directory (tools/export_pyg.py DATA_DIR --out {e})")
    table = json.loads(subprocess.run([str(bin_dir / "halo-inspect"), "--layer-types"],
                                      capture_output=True, text=True, check=True).stdout)
    known = [t["name"] for t in table["layer_types"]]
    args.layers = args.layers.split(",") if args.layers else known
    unknown = [l for l in args.layers + args.models if l not in known]
    if unknown:
        die(f"unknown layer type {', '.join(unknown)} (halo-inspect --layer-types: "
            f"{', '.join(known)})")
    args.out.mkdir(parents=True, exist_ok=True)
    runner, notes = Runner(bin_dir, args.out), []
    if args.datasets and args.models:
        trained(args, runner, notes)
    if args.rmat != "none":
        random_models(args, runner)
    write_tables(args, runner.rows, notes, argv)
    if runner.failures:
        print(f"{runner.failures} run(s) failed", file=sys.stderr)
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
