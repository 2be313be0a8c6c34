#!/usr/bin/env bash
# Past METIS's 2^31 limit (docs/PARTITION.md), for the 16-core, 128 GiB GPU machine:
#   A. the parallel CSR build: R-MAT 26, edge factor 16, symmetrized (2.1B nonzeros), --parts 1
#      (the baseline was 159 s of CSR build, 43 GiB peak; target <= 40 s);
#   B. R-MAT 26, edge factor 32, symmetrized (about 4.2B adjacency entries) partitioned into 4
#      parts by `mpirun -np 4 halo-partition ... --partitioner ptscotch`, phases timed;
#   C. halo-inspect --check of the joined dataset of B.
# Memory: A peaks near 50 GiB (int64 edge arrays 2 x 8.6 GiB, CSR 8.6 GiB, its dedupe copy);
# B about 25-30 GiB per rank at the peak (slice + exchanged entries, then PT-Scotch's graph and
# ghost arrays), 4 ranks on one node: 100-120 GiB of the 128 GiB. Disk: B's dataset is about 17 GiB
# (4.2B int32 column ids); A's about 8.5 GiB (removed after A).
# Expected time: A 1-2 min (target: CSR build <= 40 s). B is not known: PT-Scotch spends most of
# its time in sequential band-FM refinement on R-MAT graphs (docs/PARTITION.md, "R-MAT"); measure
# the growth first with STEPS=B SCALE_B=22, then 24, and run 26 in the background (nohup) if the
# extrapolation fits. C 5-10 min (reads every part once).
#
# Usage: scripts/partition_scale.sh [BUILD_DIR] [OUT_DIR]
# Environment: STEPS (default "A B C"), RANKS (default 4), PARTS (default 4),
# SCALE_A / EF_A (default 26 / 16), SCALE_B / EF_B (default 26 / 32), THREADS_PER_RANK (default
# nproc / RANKS), STRATEGY (PT-Scotch strategy, default quality).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
out=${2:-out/partition-scale}
bin=$build/apps
steps=${STEPS:-A B C}
ranks=${RANKS:-4}
parts=${PARTS:-4}
threads=${THREADS_PER_RANK:-$(($(nproc) / ranks))}
strategy=${STRATEGY:-quality}
mkdir -p "$out"
mpi_flags=()
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  mpi_flags=(--oversubscribe --allow-run-as-root --bind-to none)
fi
# /usr/bin/time -v where it exists (peak RSS of the whole job); halo-partition reports per rank.
timed() {
  local log=$1
  shift
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -v "$@" 2> "$log"
  else
    "$@" 2> "$log"
  fi
}
echo "# partition_scale: $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(df -h "$out" | awk 'NR==2 {print $4}') free disk"

if [[ " $steps " == *" A "* ]]; then
  spec="rmat:${SCALE_A:-26}:${EF_A:-16}"
  echo "## A. CSR build of $spec symmetrized, --parts 1 (all cores)"
  timed "$out/a.time" "$bin/halo-partition" "$spec" --parts 1 --symmetrize \
    -o "$out/a.h5" --report "$out/a.json" | tee "$out/a.log"
  grep -E "Maximum resident|Elapsed|Percent of CPU" "$out/a.time" || cat "$out/a.time"
  rm -f "$out/a.h5"
fi

if [[ " $steps " == *" B "* ]]; then
  spec="rmat:${SCALE_B:-26}:${EF_B:-32}"
  echo "## B. $spec symmetrized, $parts parts, mpirun -np $ranks --partitioner ptscotch ($threads threads per rank)"
  export OMP_NUM_THREADS=$threads
  timed "$out/b.time" mpirun -np "$ranks" "${mpi_flags[@]}" \
    -x OMP_NUM_THREADS "$bin/halo-partition" "$spec" --parts "$parts" --symmetrize \
    --partitioner ptscotch --scotch-strategy "$strategy" \
    -o "$out/b.h5" --report "$out/b.json" | tee "$out/b.log"
  grep -E "Maximum resident|Elapsed" "$out/b.time" || cat "$out/b.time"
  ls -la "$out"/b.h5*
fi

if [[ " $steps " == *" C "* ]]; then
  echo "## C. halo-inspect --check $out/b.h5"
  timed "$out/c.time" "$bin/halo-inspect" "$out/b.h5" --check | tail -20
  grep -E "Maximum resident|Elapsed" "$out/c.time" || cat "$out/c.time"
fi
