#!/usr/bin/env bash
# On the GPU machine: the whole halo-infer job, phase by phase (docs/NOTEBOOK.md, "The whole
# job"). Stages, in the order given:
#   build   configure and build BUILD (Release, sm_90), if not built
#   test    the GPU and store tests the job-speed work touches
#   tune    R-MAT 22: defaults (no stored choices), --spmm autotune (times, stores the choices
#           unasked), defaults again (the stored choices, nothing timed), --spmm autotune again
#   torch   defaults against the torch CSR composition and PyG on every shared graph and R-MAT
#           20/22 (scripts/gpu_speed.sh, 2-layer GCN 64-64-32, --repeat 20)
#   big     R-MAT SCALE (default 26) symmetrized: partition once, then halo-infer with no options
#           on a cold page cache, on a warm one, and with HALO_SERIAL_IO=1 (HDF5's own serial
#           pipeline: the previous read and write path, same run), each with its phase table;
#           halo-inspect --export of the result. BIG_RUNS picks the runs (default "cold warm
#           serial-io"; also "host-values": --host-operator-values, the operators' values built
#           on the host; "warm2", "warm3": more warm runs; "base": the halo-infer of BASE_BUILD, an earlier commit's build, warm;
#           "compare": halo-inspect --compare of the warm run's result against the base run's,
#           --rtol 1e-4); BIG_LIMIT adds a run with --device-memory-limit BIG_LIMIT (and, with
#           BASE_BUILD set, the same run of the base build); NO_EXPORT skips the export
#   features  R-MAT FEAT_SCALE (default 24) symmetrized with FEAT_DIM (default 64) random float32
#           features in the dataset: halo-infer with the features uploaded during the read (the
#           default) and after it (HALO_FEATURE_UPLOAD=0), alternating, FEAT_RUNS (default 2)
#           each, warm cache, after one cold-cache run of each; results compared (--rtol 1e-5)
# Usage: scripts/gpu_job_speed.sh BUILD DATA WORK OUT STAGE... (SCALE=26 in the environment)
# Every log and manifest lands in OUT; WORK holds datasets and results (local disk).
set -uo pipefail
# shellcheck source=scripts/lib/gpu_build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/gpu_build.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib/infer_flags.sh"
build=$1 data=$2 work=$3 out=$4
shift 4
scale=${SCALE:-26}
mkdir -p "$work" "$out"
mpi=(mpirun -np 1 --allow-run-as-root --bind-to none)
bin=$build/apps
log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$out/stages.txt"; }

infer() {  # tag dataset [halo-infer args...]: one run, its log and manifest kept
  local tag=$1 ds=$2
  shift 2
  local res=$work/res-$tag
  rm -rf "$res"
  local flags
  mapfile -t flags < <(halo_infer_flags "${INFER_BIN:-$bin/halo-infer}")
  /usr/bin/time -f "wall %e s, peak rss %M KiB" "${mpi[@]}" "${INFER_BIN:-$bin/halo-infer}" "$ds" \
    "${flags[@]}" --random-model "${DIMS:-64,64,32}" --backend cuda --out "$res" "$@" >"$out/infer-$tag.log" 2>&1
  local rc=$?
  cp "$res/manifest.json" "$out/manifest-$tag.json" 2>/dev/null
  echo "-- $tag (exit $rc)"
  sed -n '/^phase /,/^total/p' "$out/infer-$tag.log"
  grep -E "^wall|SpMM|stored|warning|error|operator[,:] |peak|^  (row_pointers|indices|values|total) " \
    "$out/infer-$tag.log" | head -14
  # The disk holds a few results of R-MAT 26 (9.4 GB each): only the warm and base ones stay
  # (export and compare read them).
  case $tag in
  *-warm | *-base | feat-*-1) ;;
  *) rm -rf "$res" ;;
  esac
}

for stage in "$@"; do
  case $stage in
  build)
    log build
    if [ ! -x "$bin/halo-infer" ]; then
      configure_or_exit "$build" "$out" -DHALO_TEST_DATA_DIR="$data"
    fi
    build_or_exit "$build" "$out" 16
    ;;
  test)
    log test
    ctest --test-dir "$build" --output-on-failure --timeout 600 \
      -R '^(test_cuda_backend|test_engine_plans_cuda|test_autotune|test_store|test_engine|test_cli|test_cuda_out_of_core|test_row_blocks|test_build_csr|test_distributed_partition.*|test_edge_list_slices)$' \
      >"$out/ctest.log" 2>&1
    grep -E "tests passed|Failed|Passed|Skipped" "$out/ctest.log" | tail -12
    ;;
  tune)
    log tune
    ds=$work/rmat22.h5
    "$bin/halo-partition" rmat:22:16 --parts 1 --symmetrize -q -o "$ds"
    infer tune-default-before "$ds" --repeat 10
    infer tune-autotune-first "$ds" --spmm autotune --repeat 10
    infer tune-default-after "$ds" --repeat 10
    infer tune-autotune-second "$ds" --spmm autotune --repeat 10
    infer tune-cusparse "$ds" --spmm cusparse --repeat 10
    for t in default-before autotune-first default-after autotune-second cusparse; do
      python3 - "$out/manifest-tune-$t.json" "$t" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
ph = {p["name"]: p["seconds"]["max"] for p in m["phases"]}
print(f'{sys.argv[2]:>16}: forward median {m["forward_seconds_median"]*1e3:8.3f} ms, tuning {ph["tuning"]:7.3f} s,'
      f' total {ph["total"]:7.3f} s, tuning share {100*ph["tuning"]/ph["total"]:5.2f}%, spmm {m["spmm"]}')
PY
    done
    rm -f "$ds"
    ;;
  torch)
    log torch
    graphs=()
    for f in "$data"/*.el.gz; do
      g=$(basename "$f" .el.gz)
      graphs+=("$g=gcn:64x64x32")
    done
    graphs+=("rmat:20:16=gcn:64x64x32" "rmat:22:16=gcn:64x64x32")
    HALO_INFER_FLAGS="" scripts/gpu_speed.sh "$build" "$data" /nonexistent "$out/torch" "${graphs[@]}" \
      >"$out/torch.log" 2>&1
    python3 - "$out/torch/speed.jsonl" <<'PY'
import json, sys, math
rows = [json.loads(l) for l in open(sys.argv[1])]
ratios = []
for r in rows:
    t = r.get("torch_ms"); h = r.get("halo_ms")
    ratio = t / h if isinstance(t, (int, float)) and isinstance(h, (int, float)) and h else None
    if ratio: ratios.append(ratio)
    print(f'{r["graph"]:>22} halo {h if h is None else round(h, 4)!s:>9} ms  torch {t!s:>9}  pyg {r.get("pyg_ms")!s:>9}  torch/halo {ratio and round(ratio, 3)}')
if ratios:
    print(f"torch/halo: min {min(ratios):.3f}, geomean {math.exp(sum(map(math.log, ratios))/len(ratios)):.3f}, {sum(r > 1 for r in ratios)} of {len(ratios)} faster")
PY
    ;;
  big)
    log "big (R-MAT $scale symmetrized)"
    ds=$work/rmat${scale}s.h5
    if [ ! -f "$ds" ]; then
      /usr/bin/time -f "partition wall %e s, peak rss %M KiB" "$bin/halo-partition" \
        "rmat:$scale:16" --parts 1 --symmetrize -o "$ds" --report "$out/partition-$scale.json" \
        >"$out/partition-$scale.log" 2>&1
      tail -3 "$out/partition-$scale.log"
    fi
    ls -la "$ds"
    # The disk's own write rate, the ceiling of the result write (which syncs to disk).
    dd if=/dev/zero of="$work/dd.bin" bs=64M count=128 conv=fdatasync 2>&1 | tail -1 | tee "$out/disk-write.txt"
    rm -f "$work/dd.bin"
    sync
    for run in ${BIG_RUNS:-cold warm serial-io}; do
      case $run in
      cold)
        if echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
          infer "big$scale-cold" "$ds"
        else
          echo "cannot drop the page cache here: no cold-cache run"
        fi
        ;;
      warm | warm2 | warm3) infer "big$scale-$run" "$ds" ;;
      serial-io) HALO_SERIAL_IO=1 infer "big$scale-serial-io" "$ds" ;;
      host-values) infer "big$scale-host-values" "$ds" --host-operator-values ;;
      base) INFER_BIN=$BASE_BUILD/apps/halo-infer infer "big$scale-base" "$ds" ;;
      compare)
        "$bin/halo-inspect" "$work/res-big$scale-warm" --compare "$work/res-big$scale-base" \
          --rtol 1e-4 >"$out/compare-$scale.txt" 2>&1
        echo "-- compare (exit $?)"
        tail -3 "$out/compare-$scale.txt"
        ;;
      esac
    done
    if [ -n "${BIG_LIMIT:-}" ]; then
      infer "big$scale-limit" "$ds" --device-memory-limit "$BIG_LIMIT"
      grep -E "out of core|row-block|total " "$out/infer-big$scale-limit.log" | head -6
      if [ -n "${BASE_BUILD:-}" ]; then
        INFER_BIN=$BASE_BUILD/apps/halo-infer infer "big$scale-base-limit" "$ds" \
          --device-memory-limit "$BIG_LIMIT"
      fi
    fi
    if [ -z "${NO_EXPORT:-}" ]; then
      /usr/bin/time -f "export wall %e s, peak rss %M KiB" "$bin/halo-inspect" \
        "$work/res-big$scale-warm" --export "$work/export.h5" >"$out/export-$scale.log" 2>&1
      tail -2 "$out/export-$scale.log"
      rm -f "$work/export.h5"
    fi
    ;;
  features)
    fscale=${FEAT_SCALE:-24} fdim=${FEAT_DIM:-64}
    log "features (R-MAT $fscale symmetrized, $fdim features)"
    ds=$work/rmat${fscale}f.h5
    if [ ! -f "$ds" ]; then
      nodes=$((1 << fscale))
      python3 -c "import numpy as np, sys; np.random.default_rng(5).standard_normal(($nodes, $fdim), dtype=np.float32).tofile(sys.argv[1])" \
        "$work/features.f32" || { echo "numpy failed"; exit 1; }
      /usr/bin/time -f "partition wall %e s, peak rss %M KiB" "$bin/halo-partition" \
        "rmat:$fscale:16" --parts 1 --symmetrize --features "$work/features.f32" \
        --feature-width "$fdim" -o "$ds" >"$out/partition-features.log" 2>&1
      tail -2 "$out/partition-features.log"
      rm -f "$work/features.f32"
    fi
    ls -la "$ds"
    for mode in during after; do  # one cold run each, where the page cache can be dropped
      sync
      if echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
        if [ $mode = after ]; then export HALO_FEATURE_UPLOAD=0; fi
        DIMS="$fdim,64,32" infer "feat-cold-$mode" "$ds"
        unset HALO_FEATURE_UPLOAD
        grep -E "^dataset read|^input features" "$out/infer-feat-cold-$mode.log"
      fi
    done
    cat "$ds" >/dev/null
    for k in $(seq 1 "${FEAT_RUNS:-2}"); do
      DIMS="$fdim,64,32" infer "feat-during-$k" "$ds"
      grep -E "^dataset read|^input features|^download|^result write" "$out/infer-feat-during-$k.log"
      HALO_FEATURE_UPLOAD=0 DIMS="$fdim,64,32" infer "feat-after-$k" "$ds"
    done
    "$bin/halo-inspect" "$work/res-feat-during-1" --compare "$work/res-feat-after-1" --rtol 1e-5 \
      >"$out/compare-features.txt" 2>&1
    echo "-- compare during/after (exit $?)"
    tail -2 "$out/compare-features.txt"
    rm -rf "$work/res-feat-during-1" "$work/res-feat-after-1"
    ;;
  *)
    echo "unknown stage $stage"
    exit 2
    ;;
  esac
done
log done
