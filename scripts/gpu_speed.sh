#!/usr/bin/env bash
# On the GPU machine: halo-infer against PyG inference (model.eval(), no_grad) on the same
# dataset and weights, one GPU (docs/NOTEBOOK.md "Every layer type against PyG").
#   trained   every model tools/export_pyg.py wrote to EXPORT (Cora, Citeseer, real features)
#   random    random-weight models on generated or shared graphs: SPEC=type:dims[:heads]
# Each line of OUT/speed.jsonl: graph, model, halo forward median (ms), PyG median (ms) or its
# error (out of memory), and the torch CSR baseline where it has one.
# Usage: scripts/gpu_speed.sh BUILD DATA EXPORT OUT [GRAPH=SPEC,SPEC ...]
set -uo pipefail
build=$1 data=$2 export_dir=$3 out=$4
shift 4
mkdir -p "$out"
bin=$build/apps
mpi=(mpirun -np 1 --allow-run-as-root --bind-to none)
jsonl=$out/speed.jsonl
one() {  # graph dataset label halo-args -- pyg-args
  local graph=$1 ds=$2 label=$3; shift 3
  local halo=() pyg=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do halo+=("$1"); shift; done
  shift
  pyg=("$@")
  local res=$out/r-$graph-$label
  # HALO_INFER_FLAGS: extra halo-infer options for every run (e.g. --layer-timing-only).
  # shellcheck disable=SC2086
  "${mpi[@]}" "$bin/halo-infer" --report --overwrite "$ds" "${halo[@]}" ${HALO_INFER_FLAGS:-} --backend cuda \
    --repeat 20 --out "$res" -q \
    >"$out/log-$graph-$label.txt" 2>&1 || { echo "halo-infer failed: $graph $label"; tail -3 "$out/log-$graph-$label.txt"; }
  # PYG_FLAGS: extra bench/pyg_gcn.py options (e.g. --warmup 20 --runs 60; the last one wins).
  # shellcheck disable=SC2086
  PYTHONUNBUFFERED=1 timeout 600 python3 bench/pyg_gcn.py "$ds" "${pyg[@]}" --runs 20 ${PYG_FLAGS:-} \
    >"$out/pyg-$graph-$label.jsonl" 2>"$out/pyg-$graph-$label.err"
  python3 - "$graph" "$label" "$res/manifest.json" "$out/pyg-$graph-$label.jsonl" >>"$jsonl" <<'PY'
import json, sys
graph, label, manifest, pyg = sys.argv[1:5]
row = {"graph": graph, "model": label}
try:
    row["halo_ms"] = json.load(open(manifest))["forward_seconds_median"] * 1e3
except (OSError, KeyError, ValueError):
    row["halo_ms"] = None
for line in open(pyg):
    r = json.loads(line)
    row[r["baseline"] + "_ms"] = r.get("median_ms", r.get("error", r.get("status")))
print(json.dumps(row))
PY
  tail -1 "$jsonl"
  rm -rf "$res"
}
if [ -f "$export_dir/summary.json" ]; then
  for d in cora citeseer; do
    ds=$out/$d.h5
    "$bin/halo-partition" "$data/$d.el.gz" --parts 1 --symmetrize --self-loops keep --normalize none \
      --features "$data/$d.feat.coo.txt.gz" --labels "$data/$d.labels.txt.gz" -q -o "$ds"
    for f in "$export_dir"/$d-*.h5; do
      m=$(basename "$f" .h5); m=${m#$d-}
      one "$d" "$ds" "trained-$m" --model "$f" -- --halo-model "$f"
    done
    rm -f "$ds"
  done
fi
for arg in "$@"; do
  g=${arg%%=*} specs=${arg#*=}
  case "$g" in *:*) input=$g ;; *) input=$data/$g.el.gz ;; esac
  name=${g//:/-}
  ds=$out/$name.h5
  "$bin/halo-partition" "$input" --parts 1 --symmetrize -q -o "$ds" || { echo "partition failed: $g"; continue; }
  IFS=, read -r -a list <<<"$specs"
  for spec in "${list[@]}"; do
    IFS=: read -r type dims heads <<<"$spec"
    heads=${heads:-1}
    dims=${dims//x/,}
    one "$name" "$ds" "$type-$dims-h$heads" --random-model "$dims" --random-features --layer "$type" --heads "$heads" \
      -- --model "$type" --dims "$dims" --heads "$heads"
  done
  rm -f "$ds"
done
