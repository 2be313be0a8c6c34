#!/usr/bin/env python3
"""Turns halo-bench JSON results (halo-bench --json) into one markdown table for docs/.

Every figure keeps what docs/ARCHITECTURE.md asks of a published number: the device, the date, the commit
and the command that made it (listed under the table, one line per run). Standard library only.

    bench/make_table.py results/*.json > PERFORMANCE-spmm.md
"""

import argparse
import json
import os
import sys


def graph_name(source):
    """cora.el.gz -> cora; generator specs stay as they are."""
    base = os.path.basename(source)
    for suffix in (".gz", ".el", ".txt", ".mtx", ".hcsr"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base if base else source


def operator_text(graph):
    """What matrix was multiplied: symmetrized or not, and its values."""
    parts = ["A|A^T" if graph["symmetrized"] else "A"]
    if graph["normalize"] != "none":
        parts.append(graph["normalize"])
    else:
        parts.append("pattern" if graph["values"] == "pattern" else "weights")
    if graph["self_loops"] != "keep":
        parts.append("self-loops " + graph["self_loops"])
    return ", ".join(parts)


def check_text(record, settings):
    status = record["status"]
    if status in ("ERROR", "SKIPPED"):
        return "{}: {}".format(status, record.get("message", ""))
    check = record["check"]
    rows = "all rows" if not settings.get("check_sampled") else "{} rows".format(check["rows"])
    if status == "FAILED":
        return "**FAILED**: {} bad of {} ({})".format(check["bad_elements"], check["elements"],
                                                      rows)
    return "ok, {:.1e} ({})".format(check["max_rel_error"], rows)


def load(paths):
    runs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            sys.exit("make_table.py: {}: {}".format(path, e))
        if doc.get("tool") != "halo-bench":
            sys.exit("make_table.py: {}: not a halo-bench result (tool = {!r})".format(
                path, doc.get("tool")))
        runs.append((path, doc))
    runs.sort(key=lambda run: (run[1]["graph"]["nnz"], graph_name(run[1]["graph"]["source"])))
    return runs


def table(runs):
    baselines = sorted({doc["settings"]["baseline"] for _, doc in runs})
    lines = [
        "| graph | operator | rows | nonzeros | avg deg | kernel | d | median ms | GFLOP/s "
        "| GB/s | % of copy | % of gather limit | speed-up vs {} | check |".format(
            "/".join(baselines)),
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| --- |",
    ]
    for _, doc in runs:
        graph = doc["graph"]
        for r in doc["records"]:
            cells = [graph_name(graph["source"]), operator_text(graph), str(graph["rows"]),
                     str(graph["nnz"]),
                     "{:.1f}".format(graph["avg_degree"]), r["kernel"], str(r["dim"])]
            if r["status"] in ("ERROR", "SKIPPED"):
                cells += ["-"] * 6
            else:
                speedup = r.get("speedup_vs_baseline")
                cells += ["{:.4f}".format(r["time_ms"]["median"]),
                          "{:.1f}".format(r["gflop_per_s"]),
                          "{:.0f}".format(r["gb_per_s"]),
                          "{:.1f}%".format(100.0 * r["roofline_fraction"]),
                          "{:.1f}%".format(100.0 * r["gather_fraction"])
                          if "gather_fraction" in r else "-",
                          "{:.2f}x".format(speedup) if speedup is not None else "-"]
            cells.append(check_text(r, doc["settings"]))
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+", help="halo-bench --json files")
    parser.add_argument("-o", "--output", help="write the markdown here instead of stdout")
    parser.add_argument("--title", default="SpMM on one GPU (halo-bench)")
    args = parser.parse_args()

    runs = load(args.json)
    devices = sorted({doc["device"]["name"] for _, doc in runs})
    commits = sorted({doc["git_commit"] for _, doc in runs})
    dates = sorted(doc["date"] for _, doc in runs)
    copy = [doc["copy_bandwidth"]["gb_per_s"] for _, doc in runs]
    settings = sorted({(doc["settings"]["runs"], doc["settings"]["warmup"]) for _, doc in runs})

    out = ["## " + args.title, ""]
    out.append("Device {}; commit {}; {} to {}. Device-to-device copy bandwidth (read + written) "
               "measured by each run: {:.0f} to {:.0f} GB/s; \"% of copy\" divides the achieved "
               "bandwidth over the compulsory bytes by the same run's copy bandwidth; \"% of gather "
               "limit\" divides the time the gather-bound bytes (A, Y and the X rows that "
               "Belady's MIN misses in a cache of the L2's size, CSR order) take at that "
               "bandwidth by the median. Median of "
               "{} timed launches (after {} warm-up launches), input/output buffers rotated "
               "beyond twice the L2 cache. Definitions: bench/README.md.".format(
                   ", ".join(devices), ", ".join(commits), dates[0], dates[-1], min(copy),
                   max(copy), " or ".join(str(r) for r, _ in settings),
                   " or ".join(sorted({str(w) for _, w in settings}))))
    out.append("")
    out += table(runs)
    out.append("")
    out.append("Runs (graph: device, date, commit, copy GB/s, command):")
    out.append("")
    for path, doc in runs:
        out.append("- {}: {}, {}, {}, {:.0f} GB/s: `{}`".format(
            graph_name(doc["graph"]["source"]), doc["device"]["name"], doc["date"],
            doc["git_commit"], doc["copy_bandwidth"]["gb_per_s"], doc["command"]))
    text = "\n".join(out) + "\n"
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, args.output)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
