#!/usr/bin/env bash
# The main job, end to end on a fresh Debian/Ubuntu machine (README's first command):
#   1. install the dependencies (apt) and build HaloGNN (Release, CUDA code included when nvcc is
#      present, else the CPU-only configuration);
#   2. generate an R-MAT graph (scale 14, edge factor 16: 16K nodes, ~0.5M nonzeros) and partition
#      it into 2 parts (KaMinPar where the build has it, else METIS; and into 1 part, for the
#      reference run);
#   3. run `mpirun -np 2 halo-infer` with a random 2-layer GCN (128 -> 128 -> 64), on the CPU
#      backend with the MPI halo exchange, and the same model on one rank;
#   4. check that the 2-rank result equals the 1-rank result bit for bit, and print a summary.
# Options through the environment: SCALE (14), RANKS (2), MODEL (128,128,64), LAYER (gcn),
# BUILD_DIR (build), OUT (out/demo).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scale=${SCALE:-14}
ranks=${RANKS:-2}
model=${MODEL:-128,128,64}
layer=${LAYER:-gcn}
build=${BUILD_DIR:-build}
out=${OUT:-out/demo}

scripts/install-deps.sh
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cuda=OFF
if command -v nvcc >/dev/null 2>&1; then cuda=ON; fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHALO_ENABLE_CUDA=$cuda \
      -DHALO_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target halo-partition halo-infer halo-inspect
bin=$build/apps

mpi_flags=(--oversubscribe)
if [ "$(id -u)" -eq 0 ]; then mpi_flags+=(--allow-run-as-root); fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

mkdir -p "$out"
echo
echo "== partition rmat:$scale:16 into $ranks parts (the default partitioner) and into 1 part"
"$bin/halo-partition" "rmat:$scale:16" --parts "$ranks" --symmetrize -o "$out/rmat-$ranks.h5"
"$bin/halo-partition" "rmat:$scale:16" --parts 1 --symmetrize -q -o "$out/rmat-1.h5"
"$bin/halo-inspect" "$out/rmat-$ranks.h5" --check

echo
echo "== mpirun -np $ranks halo-infer (random $layer model $model)"
mpirun -np "$ranks" "${mpi_flags[@]}" "$bin/halo-infer" --report --overwrite "$out/rmat-$ranks.h5" \
  --random-model "$model" --random-features --layer "$layer" --seed 1 --out "$out/result-$ranks"
echo
echo "== the same on 1 rank"
mpirun -np 1 "${mpi_flags[@]}" "$bin/halo-infer" --report --overwrite "$out/rmat-1.h5" \
  --random-model "$model" --random-features --layer "$layer" --seed 1 --out "$out/result-1" -q

echo
echo "== check: $ranks ranks against 1 rank"
"$bin/halo-inspect" "$out/result-$ranks" --compare "$out/result-1" --tolerance 0
echo
echo "demo passed: $ranks-rank inference on rmat:$scale:16 equals the 1-rank result bit for bit;"
echo "results (one HDF5 piece per rank + manifest.json) in $out/result-$ranks"
