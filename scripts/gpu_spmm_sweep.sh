#!/usr/bin/env bash
# The data behind the default kernel choice (docs/NOTEBOOK.md "The default without stored
# choices: the cost model") and its check: bench/spmm_suite.sh over every shared graph and the
# given generator specs, the gcn operator as halo-infer builds it (A | A^T plus self-loops), widths
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
args=(--bench "$bench" --data "$data" --dims "${DIMS:-7,16,32,64,128,256}"
      --kernels "${KERNELS:-cusparse,accel_gcn,mergepath,rowsplit}" --normalize gcn
      --self-loops add --symmetrize-all --runs "${RUNS:-20}" --warmup "${WARMUP:-3}" --no-table)
[ -n "${COSTS-200,400}" ] && args+=(--mergepath-costs "${COSTS-200,400}")
if [ "${GRAPHS:-}" = none ]; then
  args+=(--no-shared)
elif [ -n "${GRAPHS:-}" ]; then
  args+=(--graphs "$GRAPHS")
fi
for spec in "$@"; do args+=(--spec "$spec"); done
work=$(mktemp -d "${TMPDIR:-/tmp}/halo-sweep-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
"$(dirname "${BASH_SOURCE[0]}")/../bench/spmm_suite.sh" "${args[@]}" --out "$work/sweep" \
  --pack "$(cd "$out" && pwd)/sweep.tar.gz"
