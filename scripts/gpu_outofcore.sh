#!/usr/bin/env bash
# On the GPU machine (one H100 80 GB or H200 141 GB, 16 cores, 128 GiB RAM): the out-of-core checks
# and measurements (docs/ENGINE.md "Out-of-core execution"). Stages, each writing under OUT:
#   build    configure and build BUILD (CUDA on, sm_90)
#   tests    the out-of-core GPU tests (memory report vs allocator peak, row blocks vs in memory,
#            pinned copies), the engine and CUDA backend GPU tests, and the unit and mpi suites
#   copy     halo-bench's copy figures: device-to-device, pinned and pageable host<->device
#   rmat24   R-MAT 24 (edge factor 16) symmetrized, 2-layer GCN 64-64-32, one GPU: in memory vs
#            --device-memory-limit 8GiB (and --out-of-core at 4GiB): time, copy GB/s, peak
#            device memory by component, and the results compared
#   rmat26   the same on R-MAT 26 with the limit 24GiB (z resident: about 95 GiB of host memory
#            with the shard's and the operator's host copies; about 30 GiB of disk); rmat26-16
#            adds 16GiB (rows gathered per block: about 17 GiB more host memory, slower); run
#            them last, if time allows
#   rmat26-streams  R-MAT 26 at 24GiB with each operator stream (the default, automatic: pattern
#            and z scaled once per layer on one part; --stream-operator-values;
#            --stream-operator-pattern) against in memory, results compared
# Every measured run appends a row to OUT/outofcore_table.md.
# Usage: scripts/gpu_outofcore.sh BUILD DATA OUT COMMIT STAGE...
#   e.g. scripts/gpu_outofcore.sh build-gpu ../shared/data out-ooc $(git rev-parse --short HEAD) \
#          build tests copy rmat24 rmat26
set -uo pipefail
# shellcheck source=scripts/lib/gpu_build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/gpu_build.sh"
build=$1 data=$2 out=$3 commit=$4
shift 4
mkdir -p "$out"
bin=$build/apps
timer=()  # GNU time's peak host memory where installed
if [ -x /usr/bin/time ]; then timer=(/usr/bin/time -v); fi
table=$out/outofcore_table.md
if [ ! -f "$table" ]; then
  {
    echo "| run | device | limit | out of core | run s (median) | forward s | device total (report) | allocator peak | bytes/nnz | row-block copy GB/s | max row blocks |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  } >"$table"
fi
# row NAME LOG RESULT_DIR LIMIT: one table row from halo-infer's manifest and log.
row() {
  python3 - "$@" "$table" <<'PY'
import json, re, sys
name, log, res, limit, table = sys.argv[1:6]
try:
    m = json.load(open(f"{res}/manifest.json"))
except Exception as e:
    open(table, "a").write(f"| {name} | - | {limit} | FAILED ({e.__class__.__name__}) | | | | | | | |\n")
    sys.exit(0)
text = open(log).read()
dev = re.search(r"device \d+ \(([^)]*)\)", text)
peak = re.search(r"peak over ranks max ([0-9.]+) GiB", text)
dm = m.get("device_memory", {})
gib = lambda b: f"{b / 2**30:.2f} GiB"
open(table, "a").write(
    f"| {name} | {dev.group(1) if dev else '?'} | {limit} | {dm.get('out_of_core')} | "
    f"{m['run_seconds_median']:.3f} | {m['forward_seconds_median']:.3f} | "
    f"{gib(dm.get('total', 0))} | {peak.group(1) + ' GiB' if peak else '?'} | "
    f"{dm.get('bytes_per_nonzero', 0):.2f} | {dm.get('row_block_copy_gbps_mean', 0):.2f} | "
    f"{dm.get('row_blocks', 0)} |\n")
PY
}
# compare DIR A:B ...: result B against result A (halo-inspect --compare: max |difference|,
# bit-identical values, identical predictions; rows matched by global id).
compare() {
  local dir=$1; shift
  for pair in "$@"; do
    local a=${pair%%:*} b=${pair##*:}
    echo "$b vs $a: $("$bin/halo-inspect" "$dir/$b" --compare "$dir/$a" 2>&1 | tail -1)"
  done
}
# measure SCALE LIMIT...: partition R-MAT SCALE once, then in memory and with each limit.
measure() {
  local scale=$1; shift
  local ds=$out/rmat$scale
  mkdir -p "$ds"
  if [ ! -f "$ds/rmat$scale.h5" ]; then
    "${timer[@]}" "$bin/halo-partition" "rmat:$scale:16" --parts 1 --symmetrize -q \
      -o "$ds/rmat$scale.h5" --report "$ds/partition.json" >"$ds/partition.log" 2>&1 ||
      { echo "partition of rmat:$scale failed"; tail -5 "$ds/partition.log"; return; }
  fi
  local args=(--backend cuda --random-model 64,64,32 --random-features --layer gcn --repeat 3 --layer-timing-only)
  run() {  # name limit extra...
    local name=$1 limit=$2; shift 2
    "${timer[@]}" "$bin/halo-infer" --report --overwrite "$ds/rmat$scale.h5" --out "$ds/$name" "${args[@]}" "$@" \
      >"$ds/$name.log" 2>&1 || { echo "FAILED $name"; tail -5 "$ds/$name.log"; }
    row "rmat$scale $name" "$ds/$name.log" "$ds/$name" "$limit"
    grep -A12 'device memory by component' "$ds/$name.log" | head -14
  }
  run inmem "-"
  local pairs=()
  for limit in "$@"; do
    run "limit$limit" "$limit" --device-memory-limit "$limit"
    pairs+=("inmem:limit$limit")
  done
  compare "$ds" "${pairs[@]}"
}
for stage in "$@"; do
  case "$stage" in
    build)
      build_all "$build" "$data" "$out" "$commit"
      ;;
    tests)
      ctest --test-dir "$build" -j4 --timeout 600 \
        -R 'cuda_out_of_core|cuda_backend|row_blocks|test_engine' \
        --output-on-failure >"$out/ctest-gpu.log" 2>&1
      echo "gpu tests: exit $?"
      grep -E 'tests passed|tests failed|\*\*\*Failed|Not Run|Skipped' "$out/ctest-gpu.log" | head -20
      ctest --test-dir "$build" -L '^(unit|mpi)$' -j8 --timeout 600 >"$out/ctest-cpu.log" 2>&1
      echo "unit+mpi: exit $?"
      grep -E 'tests passed|tests failed|\*\*\*Failed' "$out/ctest-cpu.log" | head -20
      ;;
    copy)
      "$bin/halo-bench" --graph rmat:16:8 --dims 64 --runs 5 --json "$out/copy.json" \
        >"$out/copy.log" 2>&1 || echo "halo-bench failed (see $out/copy.log)"
      grep -E 'device-to-device|host copies' "$out/copy.log"
      ;;
    rmat24)
      measure 24 12GiB 8GiB
      # Forced row blocks at a limit where the in-memory run would also fit in 80 GB.
      ds=$out/rmat24
      "$bin/halo-infer" --report --overwrite "$ds/rmat24.h5" --out "$ds/forced4GiB" --backend cuda \
        --random-model 64,64,32 --random-features --layer gcn --repeat 3 --layer-timing-only --out-of-core \
        --device-memory-limit 4GiB >"$ds/forced4GiB.log" 2>&1 || echo "FAILED forced4GiB"
      row "rmat24 forced4GiB" "$ds/forced4GiB.log" "$ds/forced4GiB" 4GiB
      compare "$ds" inmem:forced4GiB
      # A limit too small for one row: the error names the smallest limit that works.
      "$bin/halo-infer" --report --overwrite "$ds/rmat24.h5" --out "$ds/tiny" --backend cuda --random-model 64,64,32 --random-features \
        --layer gcn --device-memory-limit 1KiB 2>&1 | grep -m1 'too small' || echo "no error?"
      ;;
    rmat26)
      measure 26 24GiB
      ;;
    rmat26-16)
      measure 26 16GiB
      ;;
    rmat26-streams)
      measure 26 24GiB
      ds=$out/rmat26
      for flag in --stream-operator-values --stream-operator-pattern; do
        name=limit24GiB$flag
        "$bin/halo-infer" --report --overwrite "$ds/rmat26.h5" --out "$ds/$name" --backend cuda --random-model 64,64,32 --random-features \
          --layer gcn --repeat 3 --layer-timing-only --device-memory-limit 24GiB "$flag" \
          >"$ds/$name.log" 2>&1 || echo "FAILED $name"
        row "rmat26 24GiB $flag" "$ds/$name.log" "$ds/$name" 24GiB
        grep -E "streamed operator|fused" "$ds/$name.log"
        compare "$ds" "inmem:$name"
      done
      ;;
    *)
      echo "unknown stage $stage"
      ;;
  esac
done
echo "table: $table"
cat "$table"
