#!/usr/bin/env python3
"""Tables and plots of scripts/scaling.sh's runs (docs/NOTEBOOK.md, "Scaling on one node").

Reads OUT/*.json (halo-infer manifests named EXPERIMENT-rmatSCALE-LAYER-gGPUS-KIND.json and
halo-partition reports named partition-rmatSCALE-pPARTS.json) and writes
  OUT/scaling.csv   one row per run and layer (plus a row "all" per run with the forward median),
                    with the exchange's settings (nccl_registered, exchange_pieces; empty for
                    manifests from before they were recorded)
  OUT/scaling.md    the strong, weak, int8 and partition tables
  OUT/strong-speedup.png, OUT/exchange-hidden.png, OUT/weak.png   where matplotlib imports.

Definitions (per run, summed over layers, maxima over ranks):
  speed-up       forward median on 1 GPU / forward median on P GPUs (defaults: overlap on)
  exchange alone the exchange's time with nothing to overlap (--step-timing --no-overlap)
  waiting        what is left of it after the interior rows ran (--step-timing, overlap on)
  hidden         1 - waiting / exchange alone (split overlap, the CUDA default; "interior":
                 the same with --overlap interior, where only rows without halo columns overlap)
  saved          (layers' time without overlap - with overlap) / exchange alone, both with
                 --step-timing: the same fraction measured from the layer totals instead
  interior share the nonzeros of interior rows (no halo column) over all nonzeros, summed over
                 parts, from the partition report: the work that can run while halo rows travel
  imbalance      compute max / compute mean over ranks (--step-timing, overlap on)
  skew           time in the barrier --step-timing puts before each exchange, waiting for the
                 slowest peer (the no-overlap run; manifests since 2026-11-27, else "nan"); the
                 exchange times leave it out from then on
"""
import csv
import json
import re
import sys
from pathlib import Path

NAME = re.compile(r"^(strong|weak|int8)-rmat(\d+)-(\w+)-g(\d+)-(run|waiting|alone|irun|iwaiting)$")


def layer_sum(manifest, key, stat="max"):
    """Sum over layers; nan where a manifest predates `key`."""
    if any(key not in layer for layer in manifest["layers"]):
        return float("nan")
    return sum(layer[key][stat] for layer in manifest["layers"])


def phase(manifest, name):
    for row in manifest.get("phases", []):
        if row["name"].startswith(name):
            return row["seconds"]["max"]
    return float("nan")


def load(out):
    runs, parts = {}, {}
    for path in sorted(out.glob("*.json")):
        stem = path.stem
        if stem.startswith("partition-"):
            parts[stem] = json.loads(path.read_text())
            continue
        m = NAME.match(stem)
        if m:
            exp, scale, layer, gpus, kind = m.groups()
            runs[(exp, int(scale), layer, int(gpus), kind)] = json.loads(path.read_text())
    return runs, parts


def write_csv(out, runs):
    fields = ["experiment", "scale", "layer_type", "gpus", "kind", "exchange", "nccl_registered",
              "exchange_pieces", "layer", "width",
              "forward_ms", "total_ms_max", "compute_ms_max", "compute_ms_mean",
              "compute_ms_max_rank",
              "exchange_ms_max", "waiting_ms_max", "skew_ms_max", "exchanged_bytes_per_rank_max",
              "fp32_bytes_per_rank_max", "read_s_max", "total_s_max", "device_bytes_max"]
    with open(out / "scaling.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for (exp, scale, ltype, gpus, kind), m in sorted(runs.items()):
            base = {"experiment": exp, "scale": scale, "layer_type": ltype, "gpus": gpus,
                    "kind": kind, "exchange": m["exchange"],
                    # what the exchange ran with (manifests from before they were recorded: none)
                    "nccl_registered": m.get("nccl_registered"),
                    "exchange_pieces": m.get("exchange_pieces"),
                    "forward_ms": m["forward_seconds_median"] * 1e3,
                    "read_s_max": phase(m, "dataset read"), "total_s_max": phase(m, "total"),
                    "device_bytes_max": m.get("device_memory", {}).get("max_total_over_ranks")}
            w.writerow({**base, "layer": "all"})
            for layer in m["layers"]:
                w.writerow({**base, "layer": layer["layer"],
                            "width": f"{layer['in_dim']}->{layer['out_dim']}",
                            "total_ms_max": layer["total_ms"]["max"],
                            "compute_ms_max": layer["compute_ms"]["max"],
                            "compute_ms_mean": layer["compute_ms"]["mean"],
                            # the slowest rank (manifests from before it was recorded: none)
                            "compute_ms_max_rank": layer["compute_ms"].get("max_rank"),
                            "exchange_ms_max": layer["exchange_ms"]["max"],
                            "waiting_ms_max": layer["waiting_ms"]["max"],
                            "skew_ms_max": layer.get("skew_ms", {}).get("max"),
                            "exchanged_bytes_per_rank_max":
                                layer["exchanged_bytes_per_rank"]["max"],
                            "fp32_bytes_per_rank_max":
                                layer["fp32_exchange_bytes_per_rank"]["max"]})


def strong_rows(runs):
    rows = []
    keys = sorted({(s, l) for (e, s, l, g, k) in runs if e == "strong"})
    for scale, ltype in keys:
        one = runs.get(("strong", scale, ltype, 1, "run"))
        for gpus in sorted({g for (e, s, l, g, k) in runs if (e, s, l) == ("strong", scale, ltype)}):
            run = runs.get(("strong", scale, ltype, gpus, "run"))
            if run is None:
                continue
            fwd = run["forward_seconds_median"] * 1e3
            row = {"scale": scale, "layer": ltype, "gpus": gpus, "forward_ms": fwd,
                   "speedup": one["forward_seconds_median"] * 1e3 / fwd if one else float("nan"),
                   "layers_ms": layer_sum(run, "total_ms"),
                   "read_s": phase(run, "dataset read"),
                   "device_gib": run.get("device_memory", {}).get("max_total_over_ranks", 0) / 2**30,
                   "alone_ms": float("nan"), "waiting_ms": float("nan"), "hidden": float("nan"),
                   "saved": float("nan"), "skew_ms": float("nan"),
                   "imbalance": float("nan"), "mb_per_rank": 0.0}
            waiting = runs.get(("strong", scale, ltype, gpus, "waiting"))
            alone = runs.get(("strong", scale, ltype, gpus, "alone"))
            if waiting and alone:
                row["alone_ms"] = layer_sum(alone, "exchange_ms")
                row["waiting_ms"] = layer_sum(waiting, "waiting_ms")
                row["skew_ms"] = layer_sum(alone, "skew_ms")
                if row["alone_ms"] > 0:
                    row["hidden"] = 1.0 - row["waiting_ms"] / row["alone_ms"]
                    row["saved"] = (layer_sum(alone, "total_ms") - layer_sum(waiting, "total_ms")) \
                        / row["alone_ms"]
                mean = layer_sum(waiting, "compute_ms", "mean")
                row["imbalance"] = layer_sum(waiting, "compute_ms") / mean if mean > 0 else 1.0
                row["mb_per_rank"] = layer_sum(alone, "exchanged_bytes_per_rank") / 1e6
                irun = runs.get(("strong", scale, ltype, gpus, "irun"))
                iwaiting = runs.get(("strong", scale, ltype, gpus, "iwaiting"))
                if irun and iwaiting and row["alone_ms"] > 0:
                    row["interior_ms"] = irun["forward_seconds_median"] * 1e3
                    row["interior_hidden"] = 1.0 - layer_sum(iwaiting, "waiting_ms") / row["alone_ms"]
            rows.append(row)
    return rows


def weak_rows(runs):
    rows = []
    for (exp, scale, ltype, gpus, kind), m in sorted(runs.items(), key=lambda kv: (kv[0][2], kv[0][3])):
        if exp != "weak":
            continue
        nlayers = len(m["layers"])
        rows.append({"layer": ltype, "scale": scale, "gpus": gpus,
                     "forward_ms": m["forward_seconds_median"] * 1e3,
                     "per_layer_ms": m["forward_seconds_median"] * 1e3 / nlayers})
    for row in rows:
        first = next(r for r in rows if r["layer"] == row["layer"])
        row["ratio"] = row["per_layer_ms"] / first["per_layer_ms"]
    return rows


def int8_rows(runs):
    rows = []
    for (exp, scale, ltype, gpus, kind), m in sorted(runs.items()):
        if exp != "int8":
            continue
        fp32 = runs.get(("strong", scale, ltype, gpus, "alone"))
        rows.append({"scale": scale, "layer": ltype, "gpus": gpus,
                     "int8_mb": layer_sum(m, "exchanged_bytes_per_rank") / 1e6,
                     "fp32_mb": layer_sum(fp32, "exchanged_bytes_per_rank") / 1e6 if fp32 else float("nan"),
                     "int8_ms": layer_sum(m, "exchange_ms"),
                     "int8_skew": layer_sum(m, "skew_ms"),
                     "fp32_skew": layer_sum(fp32, "skew_ms") if fp32 else float("nan"),
                     "fp32_ms": layer_sum(fp32, "exchange_ms") if fp32 else float("nan"),
                     "int8_fwd": m["forward_seconds_median"] * 1e3,
                     "fp32_fwd": fp32["forward_seconds_median"] * 1e3 if fp32 else float("nan")})
    return rows


def interior_share(report):
    parts = report.get("per_part", [])
    if not parts or "interior_nnz" not in parts[0]:
        return "-"
    return f"{100 * sum(p['interior_nnz'] for p in parts) / max(1, report['num_nonzeros']):.1f}%"


def table(title, columns, rows):
    """A Markdown table: columns are (header, format(row) -> str); the first is left-aligned."""
    lines = ["", f"### {title}", "", "| " + " | ".join(h for h, _ in columns) + " |",
             "| --- |" + " ---: |" * (len(columns) - 1)]
    lines += ["| " + " | ".join(f(r) for _, f in columns) + " |" for r in rows]
    return lines


def graph(r):
    return f"R-MAT {r['scale']}"


def pct(key):
    return lambda r: f"{100 * r[key]:.0f}%"


def num(key, digits=2, suffix=""):
    return lambda r: f"{r[key]:.{digits}f}{suffix}"


def markdown(strong, weak, int8, parts):
    lines = table("Strong scaling", [
        ("graph", graph), ("layer", lambda r: r["layer"]), ("GPUs", lambda r: str(r["gpus"])),
        ("forward ms", num("forward_ms")), ("speed-up", num("speedup", 2, "x")),
        ("layers ms (sum of max)", num("layers_ms")), ("exchange alone ms", num("alone_ms")),
        ("arrival skew ms", num("skew_ms")),
        ("waiting ms", num("waiting_ms")), ("hidden", pct("hidden")), ("saved", pct("saved")),
        ("compute imbalance", num("imbalance", 3)), ("exchanged MB/rank", num("mb_per_rank", 1)),
        ("device GiB/rank", num("device_gib")), ("read s", num("read_s"))], strong)
    inter = [r for r in strong if "interior_ms" in r]
    if inter:
        lines += table("Split overlap against interior rows only", [
            ("graph", graph), ("layer", lambda r: r["layer"]), ("GPUs", lambda r: str(r["gpus"])),
            ("forward ms split", num("forward_ms")), ("hidden split", pct("hidden")),
            ("forward ms interior", num("interior_ms")),
            ("hidden interior", pct("interior_hidden"))], inter)
    lines += table("Weak scaling", [
        ("layer", lambda r: r["layer"]), ("graph", graph), ("GPUs", lambda r: str(r["gpus"])),
        ("forward ms", num("forward_ms")), ("per layer ms", num("per_layer_ms")),
        ("vs 1 GPU", num("ratio", 3))], weak)
    lines += table("int8 rows against fp32 rows (exchange alone, --step-timing --no-overlap)", [
        ("graph", graph), ("layer", lambda r: r["layer"]), ("GPUs", lambda r: str(r["gpus"])),
        ("fp32 MB/rank", num("fp32_mb", 1)), ("int8 MB/rank", num("int8_mb", 1)),
        ("fp32 exchange ms", num("fp32_ms")), ("int8 exchange ms", num("int8_ms")),
        ("fp32 skew ms", num("fp32_skew")), ("int8 skew ms", num("int8_skew")),
        ("fp32 forward ms", num("fp32_fwd")), ("int8 forward ms", num("int8_fwd"))], int8)
    lines += table("Partitions (METIS, all built at once: times share the cores)", [
        ("dataset", lambda p: p["name"]), ("nonzeros", lambda p: f"{p['num_nonzeros']:,}"),
        ("parts", lambda p: str(p["parts"])), ("edge cut", lambda p: f"{p['edge_cut']:,}"),
        ("halo volume", lambda p: f"{p['halo_volume']:,}"),
        ("nnz imbalance", num("nnz_imbalance", 3)), ("interior share", interior_share),
        ("total s", lambda p: f"{p['seconds'].get('total', float('nan')):.1f}"),
        ("peak GiB", lambda p: f"{p['peak_rss_bytes'] / 2**30:.1f}")],
        [{**p, "name": name[len("partition-"):]} for name, p in sorted(parts.items())])
    return "\n".join(lines[1:]) + "\n"


def plots(out, strong, weak):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("scaling_report.py: matplotlib not importable, no plots (run again where it is)")
        return
    fig, ax = plt.subplots(figsize=(5, 4))
    for key in sorted({(r["scale"], r["layer"]) for r in strong}):
        rs = [r for r in strong if (r["scale"], r["layer"]) == key]
        ax.plot([r["gpus"] for r in rs], [r["speedup"] for r in rs], "o-", label=f"R-MAT {key[0]} {key[1]}")
    top = max((r["gpus"] for r in strong), default=1)
    ax.plot([1, top], [1, top], "k--", lw=0.8, label="ideal")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("speed-up of the forward pass")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "strong-speedup.png", dpi=120)
    fig, ax = plt.subplots(figsize=(5, 4))
    multi = [r for r in strong if r["gpus"] > 1]
    labels = [f"{r['layer']} {r['gpus']} GPUs" for r in multi]
    both = any("interior_hidden" in r for r in multi)
    ax.bar([k - 0.2 * both for k in range(len(multi))], [100 * r["hidden"] for r in multi],
           width=0.4 if both else 0.8, label="default overlap")
    if both:
        ax.bar([k + 0.2 for k in range(len(multi))],
               [100 * r.get("interior_hidden", float("nan")) for r in multi], width=0.4,
               label="--overlap interior")
        ax.legend()
    ax.set_xticks(range(len(multi)), labels)
    ax.axhline(80, color="k", ls="--", lw=0.8)
    ax.set_ylabel("exchange hidden behind aggregation (%)")
    ax.set_ylim(0, 100)
    fig.tight_layout()
    fig.savefig(out / "exchange-hidden.png", dpi=120)
    if not weak:
        return
    fig, ax = plt.subplots(figsize=(5, 4))
    for layer in sorted({r["layer"] for r in weak}):
        rs = [r for r in weak if r["layer"] == layer]
        ax.plot([r["gpus"] for r in rs], [r["per_layer_ms"] for r in rs], "o-", label=layer)
    ax.set_xlabel("GPUs (R-MAT scale grows with them)")
    ax.set_ylabel("time per layer (ms)")
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "weak.png", dpi=120)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = Path(sys.argv[1])
    runs, parts = load(out)
    if not runs:
        print(f"scaling_report.py: no run manifests in {out}", file=sys.stderr)
        return 1
    write_csv(out, runs)
    strong, weak, int8 = strong_rows(runs), weak_rows(runs), int8_rows(runs)
    text = markdown(strong, weak, int8, parts)
    (out / "scaling.md").write_text(text)
    print(text)
    plots(out, strong, weak)
    return 0


if __name__ == "__main__":
    sys.exit(main())
