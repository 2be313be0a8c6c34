#!/usr/bin/env bash
# On the GPU machine (after `source .gpu/setup.sh`): the kernels library as a whole, after a change
# to its structure or to the SpMM kernel registry. Stages, in the order given:
#   build   configure BUILD (Release, sm_90) and build the kernel tests, halo-bench, halo-infer
#           and halo-partition
#   test    every kernel GPU test (tests/kernels/cuda), the Backend conformance suite once per
#           exact registered SpMM kernel included; `quick` leaves out test_spmm_shapes (every
#           shared graph at widths up to 1000, the longest)
#   bench   halo-bench's SpMM mode over every halo-bench kernel (fp32 and fp16 features), --e2e,
#           and its maxk, attention and aes modes on small R-MAT graphs: each kernel is checked
#           against the CPU reference, exit 3 on a wrong value
#   infer   halo-infer --backend cuda with every --spmm kernel on one small dataset (2 layers):
#           each exact kernel's result compared with the CPU backend's; aes:64 (approximate) runs
# Usage: scripts/gpu_kernels.sh BUILD OUT STAGE...   e.g. scripts/gpu_kernels.sh build-gpu "$OUT"
#        build quick bench infer
# Every log and JSON lands in OUT; the exit status is non-zero if any stage failed.
set -uo pipefail
# shellcheck source=scripts/lib/gpu_build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/gpu_build.sh"
build=$1 out=$2
shift 2
mkdir -p "$out"
bin=$build/apps
status=0
log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$out/stages.txt"; }
fail() { echo "FAILED: $*" | tee -a "$out/stages.txt"; status=1; }

kernel_tests='test_backend_conformance_cuda|test_cuda_backend|test_cuda_device|test_cuda_out_of_core|test_mergepath|test_rowsplit|test_resident|test_accel_gcn|test_autotune|test_spmm_lowp|test_fused3s_cuda|test_maxk_cuda|test_engine_plans_cuda|test_aes_cuda'

run_tests() {  # regex of test names
  ctest --test-dir "$build" --output-on-failure --timeout 600 -j 4 -R "^($1)\$" \
    >"$out/ctest.log" 2>&1 || fail "ctest"
  grep -E "tests passed|Failed|\*\*\*|Skipped" "$out/ctest.log" | tail -20
}

bench() {  # tag [halo-bench args...]
  local tag=$1
  shift
  "$bin/halo-bench" "$@" >"$out/bench-$tag.log" 2>&1
  local rc=$?
  echo "-- bench $tag: exit $rc"
  grep -E "^(ok|FAILED):|ERROR|FAILED" "$out/bench-$tag.log" | head -5
  [ $rc -eq 0 ] || fail "halo-bench $tag (exit $rc)"
}

for stage in "$@"; do
  case $stage in
  build)
    log build
    configure_or_exit "$build" "$out"
    build_or_exit "$build" "$out" 16 ${kernel_tests//|/ } test_spmm_shapes halo-bench halo-infer \
      halo-partition halo-inspect
    ;;
  test)
    log test
    run_tests "$kernel_tests|test_spmm_shapes"
    ;;
  quick)
    log quick
    run_tests "$kernel_tests"
    ;;
  bench)
    log bench
    bench spmm --graph rmat:14:16 --kernels cusparse,accel_gcn,accel_gcn_nosort,accel_gcn_nocombine,mergepath,rowsplit,autotune \
      --dims 32,128 --mergepath-costs 200 --warmup 3 --runs 20 --json "$out/bench-spmm.json"
    bench spmm-fp16 --graph rmat:14:16 --kernels accel_gcn,mergepath,rowsplit --feature-type fp16 \
      --dims 64 --warmup 3 --runs 20
    bench e2e --graph rmat:14:16 --e2e --warmup 2 --runs 5 --json "$out/bench-e2e.json"
    bench maxk maxk --graph rmat:13:16 --ks 8,32 --warmup 2 --runs 5 --json "$out/bench-maxk.json"
    bench attention attention --graph rmat:12:16 --dims 64 --warmup 2 --runs 5 \
      --json "$out/bench-attention.json"
    bench aes aes --graph rmat:13:16 --dims 64 --ws 16,64 --warmup 2 --runs 5 \
      --json "$out/bench-aes.json"
    ;;
  infer)
    log infer
    work=$(mktemp -d)
    "$bin/halo-partition" rmat:12:16 --parts 1 --kernel-metadata accel_gcn -o "$work/g.h5" \
      >"$out/partition.log" 2>&1 || fail "halo-partition"
    mpirun -np 1 --allow-run-as-root "$bin/halo-infer" --report --overwrite "$work/g.h5" --random-model 32,16,8 --random-features \
      --seed 3 --out "$work/cpu" >"$out/infer-cpu.log" 2>&1 || fail "halo-infer cpu"
    mpirun -np 1 --allow-run-as-root "$bin/halo-infer" --report --overwrite "$work/g.h5" --random-model 32,16,8 --random-features \
      --seed 3 --backend cuda --spmm aes:64 --out "$work/aes" >"$out/infer-aes.log" 2>&1 ||
      fail "halo-infer --spmm aes:64"
    "$bin/halo-inspect" "$work/cpu" --export "$out/infer-cpu.npy" >/dev/null 2>&1
    for spmm in auto cusparse accel_gcn mergepath rowsplit autotune; do
      tag=$spmm
      mpirun -np 1 --allow-run-as-root "$bin/halo-infer" --report --overwrite "$work/g.h5" --random-model 32,16,8 --random-features \
        --seed 3 --backend cuda --spmm "$spmm" --no-save-tuning --out "$work/$tag" \
        >"$out/infer-$tag.log" 2>&1 || fail "halo-infer --spmm $spmm"
      "$bin/halo-inspect" "$work/$tag" --export "$out/infer-$tag.npy" >/dev/null 2>&1
      python3 - "$out/infer-cpu.npy" "$out/infer-$tag.npy" "$spmm" <<'PY' || fail "halo-infer --spmm $spmm differs from the CPU"
import sys
import numpy as np
cpu, gpu, spmm = np.load(sys.argv[1]), np.load(sys.argv[2]), sys.argv[3]
# An exact kernel against the CPU: float32 sums in another order, two layers.
err = np.abs(cpu - gpu).max() / max(np.abs(cpu).max(), 1e-30)
print(f"--spmm {spmm}: max |gpu - cpu| / max |cpu| = {err:.2e}")
sys.exit(0 if err < 1e-4 else 1)
PY
    done
    rm -rf "$work"
    ;;
  *)
    echo "unknown stage $stage" >&2
    exit 2
    ;;
  esac
done
exit $status
