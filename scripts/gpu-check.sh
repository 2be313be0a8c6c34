#!/usr/bin/env bash
# On the GPU machine (after `source .gpu/setup.sh`): configure, build and run every test label,
# writing logs to $OUT (or ./out). Usage: scripts/gpu-check.sh [extra ctest args]
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
build=build-gpu
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
    cmake --build $build -j 16 &&
    ctest --test-dir $build --output-on-failure -j 8 "$@"
} 2>&1 | tee "$out/gpu-check.log"
exit "${PIPESTATUS[0]}"
