# shellcheck shell=bash
# The build steps of the scripts/gpu_*.sh stage runners, sourced by them; each function takes what
# it needs as arguments and runs in the repository root. sm_90: the GPU machines' H100 and H200.

# build_all BUILD DATA OUT COMMIT: configure BUILD (Release, sm_90, DATA as the tests' data, COMMIT
# as the commit halo-bench records) and build everything, logs in OUT; prints the exit status, the
# number of error lines and the first errors, and returns (the stages after it still run).
build_all() {
  local build=$1 data=$2 out=$3 commit=$4
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DHALO_TEST_DATA_DIR="$data" -DHALO_GIT_COMMIT="$commit" >"$out/cmake.log" 2>&1 &&
    cmake --build "$build" -j16 >"$out/build.log" 2>&1
  echo "build: exit $? ($(grep -c 'error' "$out/build.log") error lines)"
  grep -m5 -B2 -A6 'error' "$out/build.log"
}

# configure_or_exit BUILD OUT [CMAKE_ARG...]: configure BUILD (Release, sm_90), the log in
# OUT/configure.log; on failure its tail, and the script exits 1.
configure_or_exit() {
  local build=$1 out=$2
  shift 2
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "$@" \
    >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
}

# build_or_exit BUILD OUT JOBS [TARGET...]: build the targets (everything without one), the log in
# OUT/build.log; on failure its errors, and the script exits 1.
build_or_exit() {
  local build=$1 out=$2 jobs=$3
  shift 3
  local targets=()
  if [ $# -gt 0 ]; then targets=(--target "$@"); fi
  cmake --build "$build" -j"$jobs" ${targets[@]+"${targets[@]}"} >"$out/build.log" 2>&1 ||
    { grep -B2 -A8 error "$out/build.log" | head -60; exit 1; }
}
