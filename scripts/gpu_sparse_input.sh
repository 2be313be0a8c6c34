#!/usr/bin/env bash
# On the GPU machine: where the first layer's transform as an SpMM of the input's nonzeros
# (halo-infer --input-transform sparse) beats the dense GEMM (--input-transform dense), as in
# docs/NOTEBOOK.md "Sparse input features: where the SpMM wins". Random 0/1 features of F
# columns at each density (k distinct columns per row, one per stratum of F / k), an Erdos-Renyi
# graph of N nodes; per density: a linear layer F -> 256, a 2-layer gcn and a transformer;
# forward medians of --repeat 30 with --cuda-graph. Needs python3 with numpy.
# Usage: scripts/gpu_sparse_input.sh BUILD OUT [N] [F] [DENSITIES]
set -uo pipefail
build=$1 out=$2 n=${3:-50000} F=${4:-1024} densities=${5:-"0.005 0.01 0.02 0.04 0.08"}
mkdir -p "$out"
median_ms() { python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['forward_seconds_median'] * 1e3, 4))" "$1/manifest.json"; }
for p in $densities; do
  python3 - "$n" "$F" "$p" "$out/feat.txt" <<'PY'
import sys
import numpy as np
n, F, p, path = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(7)
k = max(1, int(round(p * F)))
step = F // k
# k distinct, sorted columns per row: one in each of k strata of F // k columns.
cols = np.arange(k) * step + rng.integers(0, step, size=(n, k))
rows = np.repeat(np.arange(n), k)
with open(path, "w") as f:
    f.write(f"# {n} {F} {n * k}\n")
    np.savetxt(f, np.column_stack([rows, cols.ravel(), np.ones(n * k, dtype=int)]), fmt="%d")
PY
  "$build/apps/halo-partition" "er:$n:$((8 * n)):3" --parts 1 --symmetrize --features "$out/feat.txt" \
    -q -o "$out/f.h5" >/dev/null || { echo "partition failed at density $p"; continue; }
  for m in "linear $F,256" "gcn $F,256,16" "transformer $F,64,16"; do
    set -- $m
    for t in dense sparse; do
      "$build/apps/halo-infer" --report --overwrite "$out/f.h5" --random-model "$2" --layer "$1" --backend cuda \
        --cuda-graph --repeat 30 --input-transform "$t" --out "$out/res-$t" -q >"$out/log.txt" 2>&1 ||
        { echo "halo-infer failed: $(tail -2 "$out/log.txt")"; continue 2; }
    done
    echo "density $p $1 dense $(median_ms "$out/res-dense") sparse $(median_ms "$out/res-sparse")"
  done
done | tee "$out/crossover.txt"
rm -rf "$out/feat.txt" "$out/f.h5" "$out"/res-*
