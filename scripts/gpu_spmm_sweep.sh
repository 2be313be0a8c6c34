#!/usr/bin/env bash
# The data behind the default kernel choice (docs/PERFORMANCE.md "The default without stored
# choices: the cost model") and its check: halo-bench over every shared graph and the given
# generator specs, the gcn operator as halo-infer builds it (A | A^T plus self-loops), widths
# DIMS, the kernels KERNELS (`auto` is the cost model's pick, `autotune` the timed one), one JSON
# per graph, packed into OUT/sweep.tar.gz with the logs (the device tool returns a few files).
# Usage: scripts/gpu_spmm_sweep.sh BENCH DATA OUT [SPEC ...]
#   BENCH  the halo-bench binary; DATA  ../shared/data; SPEC  rmat:S:EF[:SEED] | er:N:M[:SEED]
# Environment: DIMS (default 7,16,32,64,128,256), KERNELS (default cusparse,accel_gcn,mergepath,
# rowsplit), COSTS (MergePath's extra costs, default 200,400; empty: none), RUNS (20), WARMUP (3),
# GRAPHS (shared graph names; default every *.el.gz in DATA; "none": generator specs only).
set -uo pipefail
bench=$1 data=$2 out=$3
shift 3
dims=${DIMS:-7,16,32,64,128,256}
kernels=${KERNELS:-cusparse,accel_gcn,mergepath,rowsplit}
runs=${RUNS:-20} warmup=${WARMUP:-3}
costs=()
[ -n "${COSTS-200,400}" ] && costs=(--mergepath-costs "${COSTS-200,400}")
work=$(mktemp -d "${TMPDIR:-/tmp}/halo-sweep-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/sweep"
graphs=()
if [ "${GRAPHS:-}" = none ]; then
  :
elif [ -n "${GRAPHS:-}" ]; then
  for g in $GRAPHS; do graphs+=("$data/$g.el.gz"); done
else
  for f in "$data"/*.el.gz; do graphs+=("$f"); done
fi
failed=0
for g in "${graphs[@]}" "$@"; do
  name=$(basename "$g" .el.gz | tr ':' '-')
  t0=$SECONDS
  # As halo-infer's gcn operator: the undirected adjacency plus self-loops, D^-1/2 (A + I) D^-1/2.
  if "$bench" --graph "$g" --symmetrize --self-loops add --normalize gcn --dims "$dims" \
      --kernels "$kernels" \
      "${costs[@]}" --runs "$runs" --warmup "$warmup" \
      --json "$work/sweep/$name.json" >"$work/sweep/$name.log" 2>&1; then
    status=ok
  else
    status="FAILED ($?)"; failed=$((failed + 1))
  fi
  printf '%-24s %-10s %5d s\n' "$name" "$status" "$((SECONDS - t0))"
done
tar -C "$work" -czf "$out/sweep.tar.gz" sweep
echo "$failed failed; $out/sweep.tar.gz"
[ "$failed" -eq 0 ]
