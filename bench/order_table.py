#!/usr/bin/env python3
"""One markdown table from SpMM suites run under several row orders (halo-bench --row-order).

Each argument is ORDER=DIR, DIR a results directory of bench/spmm_suite.sh run with
`--row-order ORDER`; the first is the reference order. Per graph and width: cuSPARSE's and the
other kernel's median time in every order, each order's time against the reference order's (above
1: faster), the kernel against cuSPARSE in each order, and the kernel's compulsory bytes over its
time as a fraction of the copy bandwidth and of its gather-bound limit (where the records carry
the gather model). A last block gives geometric means. Standard library
only.

    bench/order_table.py --kernel autotune global=r/global rcm=r/rcm rabbit=r/rabbit
"""

import argparse
import glob
import json
import math
import os
import sys


def load(directory):
    """{(graph name, dim): {kernel: record}} plus one document for the provenance line."""
    cells = {}
    doc = None
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        name = os.path.basename(path)[: -len(".json")]
        for r in doc["records"]:
            if r["status"] in ("ERROR", "SKIPPED"):
                continue
            if r.get("check", {}).get("bad_elements", 0):
                sys.exit("order_table.py: {} {} d={} FAILED its check".format(path, r["kernel"],
                                                                            r["dim"]))
            cells.setdefault((name, r["dim"]), {})[r["kernel"]] = (r, doc["graph"]["nnz"])
    if doc is None:
        sys.exit("order_table.py: no *.json in {}".format(directory))
    return cells, doc


def geomean(values):
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="ORDER=DIR, the reference order first")
    ap.add_argument("--kernel", default="autotune", help="the kernel set against cuSPARSE")
    ap.add_argument("--baseline", default="cusparse")
    ap.add_argument("--output", help="write here instead of stdout")
    args = ap.parse_args()
    orders = []
    for run in args.runs:
        if "=" not in run:
            sys.exit("order_table.py: '{}' is not ORDER=DIR".format(run))
        order, directory = run.split("=", 1)
        orders.append((order, *load(directory)))
    ref = orders[0][0]
    keys = sorted(set.intersection(*(set(c) for _, c, _ in orders)),
                  key=lambda k: (orders[0][1][k][args.baseline][1], k[0], k[1]))
    head = ["graph", "d", "nnz"]
    for order, _, _ in orders:
        head += ["{} {} ms".format(args.baseline, order), "{} {} ms".format(args.kernel, order)]
    for order, _, _ in orders[1:]:
        head += ["{} {}/{}".format(args.baseline, order, ref),
                 "{} {}/{}".format(args.kernel, order, ref)]
    for order, _, _ in orders:
        head += ["{} vs {} ({})".format(args.kernel, args.baseline, order)]
    for order, _, _ in orders:
        head += ["{} % copy ({})".format(args.kernel, order)]
    for order, _, _ in orders:
        head += ["{} % gather limit ({})".format(args.kernel, order)]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    gains = {o: ([], []) for o, _, _ in orders[1:]}
    versus = {o: [] for o, _, _ in orders}
    by_dim = {}
    for key in keys:
        name, dim = key
        base_ref = orders[0][1][key][args.baseline][0]["time_ms"]["median"]
        kern_ref = orders[0][1][key].get(args.kernel, (None,))[0]
        row = [name, str(dim), str(orders[0][1][key][args.baseline][1])]
        times = {}
        for order, cells, _ in orders:
            b = cells[key][args.baseline][0]["time_ms"]["median"]
            k = cells[key].get(args.kernel, (None,))[0]
            kt = k["time_ms"]["median"] if k else float("nan")
            times[order] = (b, kt, k)
            row += ["{:.4f}".format(b), "{:.4f}".format(kt)]
        for order, _, _ in orders[1:]:
            b, kt, _ = times[order]
            row += ["{:.2f}x".format(base_ref / b),
                    "{:.2f}x".format(kern_ref["time_ms"]["median"] / kt) if kern_ref else "-"]
            gains[order][0].append(base_ref / b)
            if kern_ref:
                gains[order][1].append(kern_ref["time_ms"]["median"] / kt)
        for order, _, _ in orders:
            b, kt, _ = times[order]
            row.append("{:.2f}x".format(b / kt))
            versus[order].append(b / kt)
            by_dim.setdefault((order, dim), []).append(b / kt)
        for order, _, _ in orders:
            k = times[order][2]
            row.append("{:.1f}%".format(100.0 * k["roofline_fraction"]) if k else "-")
        for order, _, _ in orders:
            k = times[order][2]
            row.append("{:.1f}%".format(100.0 * k["gather_fraction"])
                       if k and "gather_fraction" in k else "-")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append("Geometric means over the {} (graph, d) pairs:".format(len(keys)))
    lines.append("")
    for order, _, _ in orders[1:]:
        lines.append("- {} against {}: {} {:.3f}x, {} {:.3f}x".format(
            order, ref, args.baseline, geomean(gains[order][0]), args.kernel,
            geomean(gains[order][1])))
    for order, _, _ in orders:
        dims = sorted({d for (o, d) in by_dim if o == order})
        per_dim = ", ".join("d = {}: {:.3f}x (lowest {:.2f}x)".format(
            d, geomean(by_dim[(order, d)]), min(by_dim[(order, d)])) for d in dims)
        lines.append("- {} against {}, {} order: {:.3f}x; {}".format(
            args.kernel, args.baseline, order, geomean(versus[order]), per_dim))
    lines.append("")
    for order, _, doc in orders:
        lines.append("{}: device {}, {}, commit {}, copy {:.0f} GB/s".format(
            order, doc["device"]["name"], doc["date"], doc["git_commit"],
            doc["copy_bandwidth"]["gb_per_s"]))
    text = "\n".join(lines) + "\n"
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
