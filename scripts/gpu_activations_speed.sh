#!/usr/bin/env bash
# Issue 53's speed figures for 16-bit activations, on the GPU machine (after
# `source .gpu/setup.sh` and a build): for each R-MAT scale given, the graph is partitioned once
# into one part, then halo-infer runs issue 53's 3-layer GCN 128-128-128-64 on random features
# with --activations fp32, bf16 and fp16 (20 runs each, replayed as a CUDA graph; the manifests'
# medians), and halo-bench times the SpMM alone at d = 128 with fp32 and bf16 X (the exact
# kernels of --kernels, cuSPARSE fp32 as the baseline). Writes OUT/activations_speed.md (one row
# per scale and type: forward ms, the ratio to fp32, the storage the engine chose) and keeps every
# log and manifest in OUT.
# Usage: scripts/gpu_activations_speed.sh BUILD_DIR OUT_DIR [GRAPH ...]   (default: 22)
# A GRAPH is an R-MAT scale (22: rmat:22:16) or an edge-list file (a shared graph, symmetrized;
# no SpMM-alone timing). The table ends with the geometric mean of the bf16 ratios over the
# edge-list graphs, issue 53's shared-graph target.
# Environment: DIMS (default 128,128,128,64), REPEAT (20), KERNELS (mergepath,rowsplit,rowchunk),
# WORK (default /tmp/halo-activations: the datasets and results, several GB at scale 24),
# BACKEND (cuda; cpu checks the script on a machine without a GPU, with no SpMM timing), SPMM (1;
# 0 skips the SpMM-alone timing).
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR OUT_DIR [GRAPH ...]}
out=${2:?usage: $0 BUILD_DIR OUT_DIR [GRAPH ...]}
shift 2
scales=("$@")
[ ${#scales[@]} -eq 0 ] && scales=(22)
dims=${DIMS:-128,128,128,64}
repeat=${REPEAT:-20}
kernels=${KERNELS:-mergepath,rowsplit,rowchunk}
work=${WORK:-/tmp/halo-activations}
backend=${BACKEND:-cuda}
spmm=${SPMM:-1}
mkdir -p "$out" "$work"
table=$out/activations_speed.md
{
  echo "| graph | activations | forward ms | vs fp32 | storage |"
  echo "| --- | --- | ---: | ---: | --- |"
} >"$table"
status=0
ratios=()
for scale in "${scales[@]}"; do
  if [[ $scale =~ ^[0-9]+$ ]]; then
    input=(rmat:$scale:16) name="R-MAT $scale" rmat=1
  else
    input=("$scale" --symmetrize) name=$(basename "$scale" .el.gz) rmat=0
    scale=$name
  fi
  ds=$work/r$scale.h5
  if ! "$build/apps/halo-partition" "${input[@]}" -p 1 -q -o "$ds" >"$out/partition-$scale.log" 2>&1; then
    echo "partition ${input[*]} failed (see $out/partition-$scale.log)"
    status=1
    continue
  fi
  base=""
  for act in fp32 bf16 fp16; do
    res=$work/res-$scale-$act
    "$build/apps/halo-infer" "$ds" --backend "$backend" --random-model "$dims" --random-features \
      --repeat "$repeat" --activations "$act" --overwrite --out "$res" >"$out/infer-$scale-$act.log" 2>&1
    rc=$?
    cp "$res/manifest.json" "$out/manifest-$scale-$act.json" 2>/dev/null
    if [ $rc -ne 0 ]; then
      echo "halo-infer rmat:$scale $act failed (exit $rc, see $out/infer-$scale-$act.log)"
      status=1
      continue
    fi
    row=$(python3 - "$res/manifest.json" "$act" "$name" "$base" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
ms = 1e3 * m["forward_seconds_median"]
base = float(sys.argv[4]) if sys.argv[4] else ms
print(f"{ms:.3f}@@{base / ms:.4f}@@| {sys.argv[3]} | {sys.argv[2]} | {ms:.3f} | {base / ms:.2f}x | "
      f"{m.get('activation_storage') or '-'} (CUDA graph: {m.get('cuda_graph')}) |")
PY
)
    [ -z "$base" ] && base=${row%%@@*}
    row=${row#*@@}
    [ "$act" = bf16 ] && [ $rmat = 0 ] && ratios+=("${row%%@@*}")
    echo "${row#*@@}" >>"$table"
    rm -rf "$res"
  done
  [ "$backend" = cuda ] && [ "$spmm" = 1 ] && [ $rmat = 1 ] && for x in fp32 bf16; do
    "$build/apps/halo-bench" --graph "rmat:$scale:16" --dims 128 --kernels "$kernels" \
      --feature-type "$x" --json "$out/spmm-$scale-$x.json" >"$out/spmm-$scale-$x.log" 2>&1 ||
      { echo "halo-bench rmat:$scale $x failed (see $out/spmm-$scale-$x.log)"; status=1; }
  done
  rm -f "$ds"
done
if [ ${#ratios[@]} -gt 0 ]; then
  python3 -c 'import math, sys; r = [float(x) for x in sys.argv[1:]]
print(f"\nbf16 geometric mean over the {len(r)} edge-list graphs: "
      f"{math.exp(sum(map(math.log, r)) / len(r)):.3f}x fp32")' "${ratios[@]}" >>"$table"
fi
cat "$table"
exit $status
