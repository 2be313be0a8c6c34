#!/usr/bin/env bash
# Reproduces the partitioning figures of docs/NOTEBOOK.md:
#   A. time, peak memory and file size of halo-partition (METIS, 8 parts) for the largest shared
#      graph and an R-MAT graph with >= 30M nonzeros (rmat:20:16);
#   B. edge cut and halo volume of metis vs block vs random at P = 2, 4, 8 on three shared graphs.
# Usage: scripts/partition_figures.sh [BUILD_DIR] [DATA_DIR] [OUT_DIR]; prints markdown tables.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
data=${2:-../shared/data}
out=${3:-out/partition-figures}
bin=$build/apps
mkdir -p "$out"

run() {  # name input parts partitioner
  "$bin/halo-partition" "$2" --parts "$3" --partitioner "$4" --symmetrize -q \
    -o "$out/$1-$4-$3.h5" --report "$out/$1-$4-$3.json" >/dev/null
}

for spec in "uk-2007-05-100k:$data/uk-2007-05-100k.el.gz" "rmat-20-16:rmat:20:16"; do
  run "${spec%%:*}" "${spec#*:}" 8 metis
done
for g in 4elt email-Enron BlogCatalog; do
  for p in 2 4 8; do
    for m in metis block random; do
      run "$g" "$data/$g.el.gz" "$p" "$m"
    done
  done
done
rm -f "$out"/*.h5

python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
def load(name):
    return json.loads((out / f"{name}.json").read_text())
print("| graph | nodes | nonzeros | read + build s | METIS s | total s | peak memory | file |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for g in ["uk-2007-05-100k", "rmat-20-16"]:
    r = load(f"{g}-metis-8")
    print(f"| {g} | {r['num_nodes']:,} | {r['num_nonzeros']:,} | {r['seconds']['read_and_build']:.2f} "
          f"| {r['seconds']['partition']:.2f} | {r['seconds']['total']:.2f} "
          f"| {r['peak_rss_bytes'] / 2**30:.2f} GiB | {r['file_bytes'] / 2**20:.1f} MiB |")
print()
print("| graph | P | metis cut | block cut | random cut | metis halo | block halo | random halo | metis nnz imbalance |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for g in ["4elt", "email-Enron", "BlogCatalog"]:
    for p in [2, 4, 8]:
        r = {m: load(f"{g}-{m}-{p}") for m in ["metis", "block", "random"]}
        print(f"| {g} | {p} | {r['metis']['edge_cut']:,} | {r['block']['edge_cut']:,} | "
              f"{r['random']['edge_cut']:,} | {r['metis']['halo_volume']:,} | "
              f"{r['block']['halo_volume']:,} | {r['random']['halo_volume']:,} | "
              f"{r['metis']['nnz_imbalance']:.3f} |")
PY
