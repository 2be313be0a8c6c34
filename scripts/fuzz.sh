#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang, -DHALO_FUZZ=ON: ASan + UBSan + coverage) and
# runs each for a bounded time over its seed corpus tests/fuzz/corpus/<target>. Any crash, leak,
# sanitizer report, timeout or out-of-memory fails the run; the input that caused it is kept in
# $HALO_FUZZ_OUT/<target>/ (default fuzz-out/, ignored by git) and belongs, once fixed, in a
# regression test (tests/core/io/test_io_errors.cpp, tests/store/test_store_corrupt.cpp) and the corpus.
# Usage: scripts/fuzz.sh [seconds per target (default 20)] [target...]
# Environment: HALO_FUZZ_BUILD_DIR (default build-fuzz), HALO_JOBS (default nproc).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-20}
shift || true
build_dir=${HALO_FUZZ_BUILD_DIR:-build-fuzz}
out=${HALO_FUZZ_OUT:-fuzz-out}
jobs=${HALO_JOBS:-$(nproc)}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(fuzz_edge_list fuzz_edge_list_gzip fuzz_matrix_market fuzz_binary_csr fuzz_npy
           fuzz_coo_features fuzz_labels fuzz_model fuzz_dataset fuzz_result)
fi

CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHALO_ENABLE_CUDA=OFF -DHALO_BUILD_TESTS=OFF -DHALO_BUILD_BENCHMARKS=OFF -DHALO_FUZZ=ON \
  -DHALO_WITH_KAMINPAR=OFF
cmake --build "$build_dir" -j "$jobs" --target halo_fuzz

supp=$(pwd)/tests/sanitizers
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allocator_may_return_null=0:suppressions=$supp/asan.supp"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp"
failed=()
hdf5_findings=()

# The first stack frame of the fuzzer process's own report that is not the sanitizer's or
# glibc's (interceptors, malloc, memcpy): a finding whose frame lies in libhdf5 is a bug of the
# HDF5 library on a corrupt file (its code is not instrumented, so only its crashes and interceptor
# calls show). Those are kept and reported, but do not fail the run: CI must fail for HaloGNN's
# bugs, not keep failing for HDF5's. Each is looked at by hand (docs/RELIABILITY.md, "Fuzzing").
# The last report is the one that stopped the fuzzer: a report before it came from a child process
# (the guarded HDF5 read forks one, and a crash there is an error its parent reports).
first_frame() {
  awk '/ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error|Direct leak|Indirect leak/ {
         f = 1; frame = "" }
       f && frame == "" && /^ *#[0-9]+ / {
         if ($0 ~ /__interceptor_|in (malloc|calloc|realloc|free|operator new|operator delete)|__asan|__ubsan|__sanitizer|libclang_rt|fuzzer::|libc\.so|sysdeps\//) next
         frame = $0 }
       END { print frame }' "$1"
}
for t in "${targets[@]}"; do
  seeds=tests/fuzz/corpus/$t
  [ -d "$seeds" ] || { echo "fuzz: no seed corpus $seeds" >&2; exit 1; }
  # New inputs go to a scratch corpus (the first directory), never into the repository's seeds.
  work=$out/$t
  rm -rf "$work"
  mkdir -p "$work/corpus"
  echo "fuzz: $t for ${seconds}s"
  if ! "$build_dir/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$seeds" \
        >"$work/log.txt" 2>&1; then
    frame=$(first_frame "$work/log.txt")
    if grep -q "libhdf5" <<<"$frame"; then
      hdf5_findings+=("$t: $(ls "$work" | grep -E '^(crash|leak|timeout|oom)-' | head -n 1): $frame")
      echo "fuzz: $t: a finding inside the HDF5 library (not failing the run): $frame"
    else
      failed+=("$t")
      tail -n 60 "$work/log.txt" >&2
    fi
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$work/log.txt" |
      tr '\n' ' ' | sed "s/^/fuzz: $t: /"
    echo
  fi
done
if [ ${#hdf5_findings[@]} -gt 0 ]; then
  echo "fuzz: findings inside HDF5 (inputs kept in $out/<target>/):"
  printf '  %s\n' "${hdf5_findings[@]}"
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $out/<target>/crash-*, leak-*, timeout-*, oom-*)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets clean, ${seconds}s each"
