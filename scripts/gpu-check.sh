#!/usr/bin/env bash
# On the GPU machine (after `source .gpu/setup.sh`): configure, build and run every test label,
# writing logs to $OUT (or ./out).
# Usage: scripts/gpu-check.sh [extra ctest args]
#        scripts/gpu-check.sh --sanitize [ctest -R regex]
# The plain run: every test, 8 at a time, the GPU tests scheduled by the device memory each
# declares (a ctest resource spec written from nvidia-smi; cmake/HaloTesting.cmake). With
# HALO_TEST_REPORT_DEVICE_MEMORY=1 each GPU program's pool high-water mark goes to
# $OUT/gpu-memory.txt (what the declarations are set from).
# --sanitize runs every GPU test (labels gpu and gpu-mpi) under compute-sanitizer, once per tool:
# memcheck (with --leak-check full), racecheck and synccheck (HALO_SANITIZE_TOOLS overrides the
# list). Each run's log is $OUT/sanitize/<tool>/<test>.log; a summary table is printed and
# written to $OUT/sanitize/summary.txt; the exit status is non-zero if any run reports an error
# or fails. For an MPI test the sanitizer wraps each rank (mpiexec ... compute-sanitizer ... test),
# so every rank is checked. HALO_SANITIZE_DRY_RUN=1 prints the commands without running them;
# HALO_SANITIZE_JOBS=N runs N at once, HALO_SANITIZE_TIMEOUT=S stops a run after S seconds (TIMEOUT),
# HALO_SANITIZE_SHARDS=K splits each GoogleTest program into K runs (GTEST_TOTAL_SHARDS, named
# test.0 .. test.K-1), so that a slow program runs on K cores at once; a shard past the program's
# test count is reported "empty", not failed. Every run gets HALO_TEST_UNDER_SANITIZER=<tool>, and
# the longest sweeps (test_accel_gcn, test_spmm_lowp) then take their reduced cases
# (tests/common/halo_test.hpp, under_sanitizer): with the full ones, single tests of theirs ran
# over 7 minutes under memcheck and racecheck (2026-11-26).
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
build=${HALO_GPU_BUILD_DIR:-build-gpu}
sanitize=0
if [ "${1:-}" = "--sanitize" ]; then
  sanitize=1
  shift
fi

build_project() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
    cmake --build $build -j 16
}

# The resource spec ctest schedules GPU tests by (cmake/HaloTesting.cmake, RESOURCE_GROUPS): one
# `gpus` entry per device, one slot per GiB of its memory less 2 (the CUDA contexts' and the
# libraries' own), so that tests side by side never declare more than a device holds.
write_resource_spec() {
  local spec=$1
  nvidia-smi --query-gpu=index,memory.total --format=csv,noheader,nounits | python3 -c '
import json, sys
gpus = []
for line in sys.stdin:
    index, mib = [x.strip() for x in line.split(",")]
    gpus.append({"id": index, "slots": max(int(mib) // 1024 - 2, 1)})
json.dump({"version": {"major": 1, "minor": 0}, "local": [{"gpus": gpus}]}, sys.stdout)
' >"$spec"
  echo "gpu-check: resource spec $spec: $(cat "$spec")"
}

if [ "$sanitize" -eq 0 ]; then
  # HALO_TEST_REPORT_DEVICE_MEMORY=1: every GPU test program prints its pool's high-water mark
  # (tests/common/halo_test.cpp); the peaks are listed in $out/gpu-memory.txt.
  {
    build_project && write_resource_spec "$out/resources.json" &&
      ctest --test-dir $build --output-on-failure -j 8 --resource-spec-file "$out/resources.json" \
        "$@"
  } 2>&1 | tee "$out/gpu-check.log"
  status=${PIPESTATUS[0]}
  if [ -n "${HALO_TEST_REPORT_DEVICE_MEMORY:-}" ]; then
    python3 - "$build/Testing/Temporary/LastTest.log" <<'PY' | tee "$out/gpu-memory.txt"
import re, sys
peaks, test = {}, None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"^\d+/\d+ Test: (\S+)$", line.strip())
    if m:
        test = m.group(1)
    m = re.search(r"high-water mark ([0-9.]+) MiB", line)
    if m and test:
        peaks[test] = max(peaks.get(test, 0.0), float(m.group(1)))
for name, mib in sorted(peaks.items(), key=lambda kv: -kv[1]):
    print("%-44s %10.1f MiB" % (name, mib))
PY
  fi
  exit "$status"
fi

# ---- --sanitize ----------------------------------------------------------------------------------
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ "${HALO_SANITIZE_DRY_RUN:-0}" != 1 ]; then
  [ -x "$sanitizer" ] || { echo "gpu-check: compute-sanitizer not found (PATH, /usr/local/cuda/bin)" >&2; exit 1; }
  build_project 2>&1 | tee "$out/gpu-check-build.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
fi
tools=${HALO_SANITIZE_TOOLS:-memcheck racecheck synccheck}
mkdir -p "$out/sanitize"
# One line per (tool, test): a NUL-free, tab-separated plan made from ctest's JSON listing: the
# test's name, its working directory, its environment (';'-joined) and its command with the
# sanitizer inserted before the test executable.
plan=$(ctest --test-dir "$build" --show-only=json-v1 -L '^(gpu|gpu-mpi)$' "$@" | python3 -c '
import json, os, shlex, sys
build = os.path.abspath(sys.argv[1])
sanitizer = sys.argv[2]
tools = sys.argv[3].split()
listing = json.load(sys.stdin)
for test in listing.get("tests", []):
    command = test.get("command") or []
    props = {p["name"]: p["value"] for p in test.get("properties", [])}
    labels = props.get("LABELS", [])
    if not command or not ({"gpu", "gpu-mpi"} & set(labels)):
        continue
    env = props.get("ENVIRONMENT", [])
    cwd = props.get("WORKING_DIRECTORY", build)
    # The test executable: the first argument that is a file under the build tree; for a script
    # test (bash file.sh ...) none is, and the sanitizer wraps the whole command and its children.
    exe = next((i for i, a in enumerate(command)
                if os.path.abspath(a).startswith(build + os.sep) and os.access(a, os.X_OK)), None)
    shards = int(sys.argv[4]) if exe is not None else 1
    for tool, shard in ((t, k) for t in tools for k in range(shards)):
        extra = ["--leak-check", "full"] if tool == "memcheck" else []
        if tool == "racecheck":
            extra = ["--racecheck-report", "all"]
        # API errors are not reported: several tests provoke them on purpose (an invalid device,
        # an allocation larger than the card) and check the exception; memory access, race,
        # synchronization and leak reports still fail the run.
        wrap = [sanitizer, "--tool", tool, "--error-exitcode", "86", "--print-limit", "100",
                "--report-api-errors", "no"] + extra
        if exe is None:
            full = wrap + ["--target-processes", "all"] + command
        else:
            full = command[:exe] + wrap + command[exe:]
        # The tests take their reduced sweeps under the sanitizer (tests/common/halo_test.hpp).
        name, shard_env = test["name"], list(env) + ["HALO_TEST_UNDER_SANITIZER=" + tool]
        if shards > 1:
            name += "." + str(shard)
            shard_env += ["GTEST_TOTAL_SHARDS=" + str(shards), "GTEST_SHARD_INDEX=" + str(shard)]
        print("\t".join([tool, name, cwd, ";".join(shard_env), shlex.join(full)]))
' "$(cd "$build" 2>/dev/null && pwd || echo "$build")" "$sanitizer" "$tools" "${HALO_SANITIZE_SHARDS:-1}")
if [ -z "$plan" ]; then
  echo "gpu-check: no GPU tests found in $build (labels gpu, gpu-mpi)" >&2
  exit 1
fi
summary=$out/sanitize/summary.txt
printf '%-10s %-40s %-8s %s\n' tool test result seconds | tee "$summary"
# HALO_SANITIZE_JOBS runs (tool, test) pairs side by side on the one GPU (default 1);
# HALO_SANITIZE_TIMEOUT (seconds) ends a run that takes longer and records it as TIMEOUT, which
# counts as not clean.
jobs=${HALO_SANITIZE_JOBS:-1}
run_timeout=${HALO_SANITIZE_TIMEOUT:-0}
run_one() {
  local tool=$1 name=$2 cwd=$3 env=$4 command=$5
  local log=$out/sanitize/$tool/$name.log
  mkdir -p "$out/sanitize/$tool"
  if [ "${HALO_SANITIZE_DRY_RUN:-0}" = 1 ]; then
    echo "[$tool] (cd $cwd && env ${env//;/ } $command)"
    return
  fi
  local start status seconds result
  start=$(date +%s)
  (
    cd "$cwd" || exit 1
    IFS=';' read -r -a vars <<<"$env"
    for v in "${vars[@]}"; do [ -n "$v" ] && export "$v"; done
    if [ "$run_timeout" -gt 0 ]; then
      eval "timeout -k 10 $run_timeout $command"
    else
      eval "$command"
    fi
  ) </dev/null >"$log" 2>&1
  status=$?
  seconds=$(( $(date +%s) - start ))
  # Every rank's sanitizer prints its own summary; any non-zero error count fails the run.
  if [ "$run_timeout" -gt 0 ] && { [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; }; then
    result=TIMEOUT
  elif grep -q '^\[==========\] 0 tests from 0 test suites ran' "$log"; then
    result=empty  # a shard beyond the program's test count (the sanitizer exits non-zero there)
  elif [ "$status" -ne 0 ] || grep -Eq "ERROR SUMMARY: [1-9]|LEAK SUMMARY: [1-9]" "$log"; then
    result=FAIL
  else
    result=ok
  fi
  printf '%-10s %-40s %-8s %s\n' "$tool" "$name" "$result" "$seconds" | tee -a "$summary"
}
while IFS=$'\t' read -r tool name cwd env command; do
  run_one "$tool" "$name" "$cwd" "$env" "$command" &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
done <<<"$plan"
wait
failed=$(grep -cE ' (FAIL|TIMEOUT) ' "$summary")
if [ "${HALO_SANITIZE_DRY_RUN:-0}" = 1 ]; then
  exit 0
fi
if [ "$failed" -gt 0 ]; then
  echo "gpu-check --sanitize: $failed run(s) failed; logs in $out/sanitize/<tool>/<test>.log" | tee -a "$summary"
  exit 1
fi
echo "gpu-check --sanitize: every GPU test clean under: $tools" | tee -a "$summary"
