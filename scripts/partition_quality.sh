#!/usr/bin/env bash
# PT-Scotch against METIS (docs/PARTITION.md): edge cut, halo volume, imbalance, time and peak
# memory per rank at P = 2, 4, 8, on the shared graphs and R-MAT graphs, all symmetrized.
#
# Usage: scripts/partition_quality.sh [BUILD_DIR] [DATA_DIR] [OUT_DIR]
# Environment: RANKS (mpirun -np for ptscotch; default 2), GRAPHS (shared graph names without
# .el.gz; default all of DATA_DIR/*.el.gz), RMAT (generator specs; default "rmat:20:16 rmat:22:16"),
# PARTS (default "2 4 8"), SEED (default 1), TRIES (--scotch-tries, default 1), NICE (default
# "nice"). RMAT= (empty) runs no R-MAT graph.
# Prints a markdown table; the JSON reports stay in OUT_DIR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
data=${2:-../shared/data}
out=${3:-out/partition-quality}
bin=$build/apps
ranks=${RANKS:-2}
parts=${PARTS:-2 4 8}
seed=${SEED:-1}
tries=${TRIES:-1}
nice=${NICE:-nice}
rmat=${RMAT-rmat:20:16 rmat:22:16}
if [ -z "${GRAPHS:-}" ]; then
  GRAPHS=$(cd "$data" && ls *.el.gz | sed 's/\.el\.gz$//' | tr '\n' ' ')
fi
mkdir -p "$out"
mpi_flags=()
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  mpi_flags=(--oversubscribe --allow-run-as-root)
fi

inputs=()
for g in $GRAPHS; do inputs+=("$g=$data/$g.el.gz"); done
for s in $rmat; do inputs+=("${s//:/-}=$s"); done

for entry in "${inputs[@]}"; do
  name=${entry%%=*}
  input=${entry#*=}
  for p in $parts; do
    $nice "$bin/halo-partition" "$input" --parts "$p" --partitioner metis --symmetrize -q \
      --seed "$seed" -o "$out/$name-metis-$p.h5" --report "$out/$name-metis-$p.json" >/dev/null
    OMP_NUM_THREADS=1 $nice mpirun -np "$ranks" "${mpi_flags[@]}" "$bin/halo-partition" "$input" \
      --parts "$p" --partitioner ptscotch --symmetrize -q --seed "$seed" --scotch-tries "$tries" \
      -o "$out/$name-ptscotch-$p.h5" --report "$out/$name-ptscotch-$p.json" >/dev/null
    rm -f "$out/$name"-*-"$p".h5*
  done
done

python3 - "$out" "$ranks" "$parts" "${inputs[@]}" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1]); ranks = sys.argv[2]; parts = sys.argv[3].split()
names = [e.split("=", 1)[0] for e in sys.argv[4:]]
gib = 1 << 30
print(f"| graph | nnz | P | cut METIS | cut PT-Scotch | ratio | halo METIS | halo PT-Scotch "
      f"| imbalance (nnz) METIS / PT-Scotch | time s METIS / PT-Scotch ({ranks} ranks) "
      f"| peak MiB METIS / PT-Scotch per rank |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
ratios = []
for g in names:
    for p in parts:
        m = json.loads((out / f"{g}-metis-{p}.json").read_text())
        s = json.loads((out / f"{g}-ptscotch-{p}.json").read_text())
        ratio = s["edge_cut"] / m["edge_cut"] if m["edge_cut"] else float("nan")
        ratios.append(ratio)
        print(f"| {g} | {m['num_nonzeros']} | {p} | {m['edge_cut']} | {s['edge_cut']} | {ratio:.3f} "
              f"| {m['halo_volume']} | {s['halo_volume']} "
              f"| {m['nnz_imbalance']:.3f} / {s['nnz_imbalance']:.3f} "
              f"| {m['seconds']['total']:.2f} / {s['seconds']['total']:.2f} "
              f"| {m['peak_rss_bytes'] / 2**20:.0f} / {s['peak_rss_bytes'] / 2**20:.0f} |")
ok = [r for r in ratios if r == r]
if ok:
    import math
    geo = math.exp(sum(math.log(r) for r in ok) / len(ok))
    print(f"\ncut ratio PT-Scotch / METIS: geometric mean {geo:.3f}, max {max(ok):.3f}, "
          f"{sum(r <= 1.15 for r in ok)} of {len(ok)} within 1.15x")
PY
