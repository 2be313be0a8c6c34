#!/usr/bin/env bash
# On a GPU machine: halo-infer --backend cuda against --backend cpu on every shared graph (one
# rank, GCN, SAGE and GIN with random 64 -> 32 -> 8 models), compared by global id with
# halo-inspect --compare --rtol RTOL (default 1e-5 of the largest value).
# Usage: scripts/gpu_agreement.sh BUILD_DIR DATA_DIR OUT_DIR [RTOL]
set -uo pipefail
build=$1 data=$2 out=$3 rtol=${4:-1e-5}
bin=$build/apps
mkdir -p "$out"
mpi=(mpirun -np 1 --allow-run-as-root --bind-to none)
failures=0
for f in "$data"/*.el.gz; do
  name=$(basename "$f" .el.gz)
  "$bin/halo-partition" "$f" --parts 1 --symmetrize -q -o "$out/$name.h5" >/dev/null || {
    echo "FAIL $name: partition"; failures=$((failures + 1)); continue; }
  for layer in gcn sage gin; do
    for backend in cpu cuda; do
      "${mpi[@]}" "$bin/halo-infer" --report --overwrite "$out/$name.h5" --random-model 64,32,8 --random-features --layer $layer \
        --backend $backend --out "$out/$name-$layer-$backend" -q || echo "FAIL $name $layer $backend"
    done
    if line=$("$bin/halo-inspect" "$out/$name-$layer-cuda" --compare "$out/$name-$layer-cpu" \
                --rtol "$rtol" 2>&1); then
      echo "ok   $name $layer: ${line##*: }"
    else
      echo "FAIL $name $layer: $line"; failures=$((failures + 1))
    fi
    rm -rf "$out/$name-$layer-cpu" "$out/$name-$layer-cuda"
  done
  rm -f "$out/$name.h5"
done
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
