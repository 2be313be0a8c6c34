#!/usr/bin/env bash
# On the GPU machine: the end-to-end 2-layer GCN (128 -> 128 -> 64) table of docs/NOTEBOOK.md.
# For each graph: halo-partition --parts 1, halo-infer --backend cuda (median of --repeat runs),
# then PyG's GCNConv and a torch CSR composition on the same dataset (bench/pyg_gcn.py), all in
# this one run. Usage: scripts/gpu_e2e.sh BUILD_DIR DATA_DIR OUT_DIR GRAPH...
# where GRAPH is a shared graph name (cora, BlogCatalog, ...) or a generator spec (rmat:22:16).
set -uo pipefail
build=$1 data=$2 out=$3
shift 3
mkdir -p "$out"
bin=$build/apps
mpi=(mpirun -np 1 --allow-run-as-root --bind-to none)
for g in "$@"; do
  case "$g" in
    *:*) input=$g; name=${g//:/-} ;;
    *) input=$data/$g.el.gz; name=$g ;;
  esac
  ds=$out/$name.h5
  echo "== $name"
  "$bin/halo-partition" "$input" --parts 1 --symmetrize -q -o "$ds" --report "$out/$name.partition.json" ||
    { echo "partition failed: $name"; continue; }
  "${mpi[@]}" "$bin/halo-infer" --report --overwrite "$ds" --random-model 128,128,64 --random-features --layer gcn --backend cuda \
    --repeat 20 --out "$out/result-$name" 2>&1 | tail -4
  cp "$out/result-$name/manifest.json" "$out/$name.halo.json" 2>/dev/null
  rm -rf "$out/result-$name"
  PYTHONUNBUFFERED=1 timeout 900 python3 bench/pyg_gcn.py "$ds" --runs 20 >"$out/$name.baselines.jsonl"
  cat "$out/$name.baselines.jsonl"
  rm -f "$ds"
done
python3 - "$out" "$@" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print("| graph | nodes | nonzeros | halo-infer ms | PyG GCNConv ms | torch CSR ms | vs PyG | vs torch |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for g in sys.argv[2:]:
    name = g.replace(":", "-")
    try:
        part = json.loads((out / f"{name}.partition.json").read_text())
        halo = json.loads((out / f"{name}.halo.json").read_text())["forward_seconds_median"] * 1e3
    except (OSError, KeyError, ValueError):
        print(f"| {name} | | | failed | | | | |")
        continue
    base = {}
    for line in (out / f"{name}.baselines.jsonl").read_text().splitlines():
        r = json.loads(line)
        base[r["baseline"]] = r.get("median_ms", r.get("error"))
    def cell(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)
    def ratio(v):
        return f"{v / halo:.2f}x" if isinstance(v, float) else "-"
    print(f"| {name} | {part['num_nodes']:,} | {part['num_nonzeros']:,} | {halo:.3f} | "
          f"{cell(base.get('pyg'))} | {cell(base.get('torch'))} | {ratio(base.get('pyg'))} | "
          f"{ratio(base.get('torch'))} |")
PY
