#!/usr/bin/env python3
"""The gather model against Nsight Compute: DRAM bytes read by each SpMM launch and the model's.

Each argument is CSV=JSON: the `ncu --csv --metrics dram__bytes_read.sum,...` output of one
`halo-bench --runs 1 --warmup 0 --json JSON` run. The launches are matched to the JSON's records
in the order halo-bench makes them (widths outer, kernels inner; per record the check launch, the
timed launch and, with several buffer sets, the second check; a kernel named ..._tN launches once
per slice of N columns in each). For each record: the median DRAM bytes read over its calls, and the bytes the model says the kernel reads (A, and the X rows
Belady's MIN or an LRU cache misses; Y is written, not read) for each modelled cache. Standard
library only.

    bench/gather_check.py ncu/rmat22.csv=ncu/rmat22.json ... [--output FILE]
"""

import argparse
import csv
import json
import os
import re
import statistics
import sys


def launches(path):
    """[(kernel name, {metric: value})] in launch order."""
    rows = {}
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    for r in csv.DictReader(lines):
        launch = rows.setdefault(int(r["ID"]), {"name": r["Kernel Name"], "metrics": {}})
        launch["metrics"][r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    return [rows[k] for k in sorted(rows)]


def kernel_matches(record, name):
    k = record["kernel"]
    if k == "cusparse":
        return "cusparse" in name
    family = re.match(r"[a-z]+", k).group(0)  # mergepath_c400_t128, mergepath(cost=400): mergepath
    return family in name.replace("_", "")


def launches_per_call(record):
    """A column-tiled kernel (name ending in _tN) launches once per slice of N columns."""
    m = re.search(r"_t(\d+)$", record["kernel"])
    return -(-record["dim"] // int(m.group(1))) if m else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="CSV=JSON")
    ap.add_argument("--output")
    args = ap.parse_args()
    out = []
    caches = None
    for run in args.runs:
        if "=" not in run:
            sys.exit("gather_check.py: '{}' is not CSV=JSON".format(run))
        csv_path, json_path = run.split("=", 1)
        with open(json_path) as f:
            doc = json.load(f)
        ls = launches(csv_path)
        g = doc["graph"]
        name = os.path.basename(json_path)[: -len(".json")]
        i = 0
        for r in doc["records"]:
            if r["status"] in ("ERROR", "SKIPPED"):
                continue
            calls = 2 + (1 if r["buffer_sets"] > 1 else 0)
            per_call = launches_per_call(r)
            n = calls * per_call
            mine = ls[i:i + n]
            i += n
            if len(mine) != n or not all(kernel_matches(r, l["name"]) for l in mine):
                sys.exit("gather_check.py: {}: launches {}..{} are not {}'s".format(
                    csv_path, i - n, i - 1, r["kernel"]))
            # Per call: the sum over its launches (the slices of a tiled kernel); then the median.
            dram = statistics.median(
                sum(l["metrics"]["dram__bytes_read.sum"] for l in mine[c * per_call:(c + 1) * per_call])
                for c in range(calls))
            hit = statistics.median(l["metrics"].get("lts__t_sector_hit_rate.pct", float("nan"))
                                    for l in mine)
            y = g["rows"] * r["dim"] * 4
            model = r.get("gather_model", [])
            if caches is None:
                caches = [m["cache_bytes"] for m in model]
            cells = [name, str(r["dim"]), r["kernel"], "{:.3f}".format(dram / 1e9),
                     "{:.1f}%".format(hit)]
            for m in model:
                mn, lru = m["min_bytes"] - y, m["lru_bytes"] - y
                cells += ["{:.3f}".format(mn / 1e9), "{:.3f}".format(lru / 1e9),
                          "{:.2f}".format(dram / lru)]
            out.append("| " + " | ".join(cells) + " |")
        if i != len(ls):
            sys.exit("gather_check.py: {}: {} launches, {} matched".format(csv_path, len(ls), i))
    head = ["graph", "d", "kernel", "DRAM read GB (ncu)", "L2 hit"]
    for c in caches or []:
        mib = c / 2**20
        head += ["MIN GB, {:g} MiB".format(mib), "LRU GB, {:g} MiB".format(mib),
                 "ncu / LRU, {:g} MiB".format(mib)]
    text = "\n".join(["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)] + out) + "\n"
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
