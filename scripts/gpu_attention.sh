#!/usr/bin/env bash
# On the GPU machine: the attention layers (transformer, agnn) against PyG on Cora, Citeseer
# (trained models, real bag-of-words features) and PubMed (random 64-64-64 models), as in
# docs/NOTEBOOK.md "The graph transformer and AGNN against PyG". halo-infer's forward median
# (--cuda-graph --repeat 50) with the default input transform and with --input-transform dense,
# and, with BASE_BUILD set, a second build's (the previous main) in the same run; PyG's median
# (bench/pyg_gcn.py --warmup 20 --runs 60) measured PYG_REPEATS times (default 2), since PyG's
# own time varies between processes. One line per measurement in OUT/attention.txt.
# Usage: [BASE_BUILD=DIR] scripts/gpu_attention.sh BUILD DATA EXPORT OUT
#   EXPORT: tools/export_pyg.py DATA --out EXPORT --models transformer,agnn
set -uo pipefail
build=$1 data=$2 export_dir=$3 out=$4
mkdir -p "$out"
for d in cora citeseer; do
  "$build/apps/halo-partition" "$data/$d.el.gz" --parts 1 --symmetrize --self-loops keep \
    --normalize none --features "$data/$d.feat.coo.txt.gz" --labels "$data/$d.labels.txt.gz" -q \
    -o "$out/$d.h5" >/dev/null || { echo "partition failed: $d"; exit 1; }
done
"$build/apps/halo-partition" "$data/pubmed.el.gz" --parts 1 --symmetrize -q -o "$out/pubmed.h5" \
  >/dev/null || { echo "partition failed: pubmed"; exit 1; }
source "$(dirname "${BASH_SOURCE[0]}")/lib/infer_flags.sh"
halo() {  # BUILD DATASET LABEL ARGS...
  local b=$1 ds=$2 label=$3; shift 3
  local flags
  mapfile -t flags < <(halo_infer_flags "$b/apps/halo-infer")
  if "$b/apps/halo-infer" "$ds" "${flags[@]}" "$@" --backend cuda --cuda-graph --repeat 50 --out "$out/res" -q \
       >"$out/infer.log" 2>&1; then
    echo "$label $(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['forward_seconds_median'] * 1e3, 4))" "$out/res/manifest.json")"
  else
    echo "$label failed: $(tail -2 "$out/infer.log")"
  fi
}
pyg() {  # DATASET LABEL ARGS...
  local ds=$1 label=$2; shift 2
  for rep in $(seq "${PYG_REPEATS:-2}"); do
    python3 bench/pyg_gcn.py "$ds" "$@" --warmup 20 --runs 60 --baselines pyg 2>"$out/pyg.err" |
      python3 -c "import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(sys.argv[1], 'pyg$rep', round(r['median_ms'], 4) if 'median_ms' in r else r)" "$label"
  done
}
{
  for d in cora citeseer; do
    for m in transformer agnn; do
      model=$export_dir/$d-$m.h5
      [ -f "$model" ] || { echo "$d $m: no $model"; continue; }
      halo "$build" "$out/$d.h5" "$d $m new" --model "$model"
      [ -n "${BASE_BUILD:-}" ] && halo "$BASE_BUILD" "$out/$d.h5" "$d $m base" --model "$model"
      halo "$build" "$out/$d.h5" "$d $m dense-input" --model "$model" --input-transform dense
      pyg "$out/$d.h5" "$d $m" --halo-model "$model"
    done
  done
  for m in transformer agnn; do
    halo "$build" "$out/pubmed.h5" "pubmed $m new" --random-model 64,64,64 --layer "$m"
    [ -n "${BASE_BUILD:-}" ] && halo "$BASE_BUILD" "$out/pubmed.h5" "pubmed $m base" \
      --random-model 64,64,64 --layer "$m"
    pyg "$out/pubmed.h5" "pubmed $m" --model "$m" --dims 64,64,64 --heads 1
  done
} | tee "$out/attention.txt"
rm -rf "$out/res" "$out"/*.h5
