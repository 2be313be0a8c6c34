#!/usr/bin/env bash
# On a GPU machine with 2+ GPUs (after `source .gpu/setup.sh`, Release build in BUILD_DIR):
#   1. the GPU-exchanger tests (NCCL across GPUs, MPI over device buffers);
#   2. CUDA backend over NCCL (registered buffers and NCCL's own, in pieces and in one) and over
#      MPI on 2 ranks equals the CPU backend (Cora, R-MAT 16);
#   3. an injected fault on one rank of a CUDA/NCCL job ends the job quickly, without a manifest;
#   4. overlap: a 2-layer GCN on R-MAT (scale given, default 22) split over 2 GPUs, with and
#      without overlapping the exchange with interior aggregation (median of --repeat runs).
# Usage: scripts/gpu_multi.sh BUILD_DIR DATA_DIR OUT_DIR [SCALE]
set -uo pipefail
build=$1 data=$2 out=$3 scale=${4:-22}
bin=$build/apps
mkdir -p "$out"
mpi=(mpirun -np 2 --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=8)
echo "== 1. exchanger tests"
ctest --test-dir "$build" -R 'nccl_exchanger|mpi_device_exchanger|cuda_backend' --output-on-failure \
  2>&1 | grep -E 'tests passed|Failed|FAILED|Skipped' | head -20

echo "== 2. CUDA (NCCL, MPI) against CPU on 2 ranks"
for g in "$data/cora.el.gz" rmat:16:16; do
  name=$(basename "$g" .el.gz | tr ':' '-')
  "$bin/halo-partition" "$g" --parts 2 --symmetrize -q -o "$out/$name-2.h5" >/dev/null
  for layer in gcn sage gin; do
    "${mpi[@]}" "$bin/halo-infer" --report --overwrite "$out/$name-2.h5" --random-model 64,32,8 --random-features --layer $layer \
      --backend cpu --out "$out/$name-$layer-cpu" -q
    # nccl: registered buffers and 2 pieces (the default); nccl-off: NCCL's own buffers;
    # nccl-p1: in one piece
    for ex in nccl nccl-off nccl-p1 mpi; do
      extra=()
      [ $ex = nccl-off ] && extra=(--nccl-register off)
      [ $ex = nccl-p1 ] && extra=(--exchange-pieces 1)
      "${mpi[@]}" "$bin/halo-infer" --report --overwrite "$out/$name-2.h5" --random-model 64,32,8 --random-features --layer $layer \
        --backend cuda --exchange ${ex%-*} "${extra[@]}" \
        --out "$out/$name-$layer-$ex" -q
      echo -n "$name $layer cuda/$ex vs cpu: "
      "$bin/halo-inspect" "$out/$name-$layer-$ex" --compare "$out/$name-$layer-cpu" \
        --rtol 1e-5 | tail -1
    done
  done
done

echo "== 3. injected fault on rank 1 (cuda, nccl)"
start=$(date +%s)
HALO_FAULT_INJECT=rank=1,layer=1 timeout 120 "${mpi[@]}" -x HALO_FAULT_INJECT "$bin/halo-infer" --report --overwrite \
  "$out/rmat-16-16-2.h5" --random-model 64,64,8 --random-features --backend cuda --out "$out/fault" 2>&1 | tail -3
echo "exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s; manifest: $(ls "$out/fault/manifest.json" 2>/dev/null || echo none)"

echo "== 4. overlap on rmat:$scale:16 over 2 GPUs"
"$bin/halo-partition" "rmat:$scale:16" --parts 2 --symmetrize -q -o "$out/rmat-$scale-2.h5" \
  --report "$out/rmat-$scale-2.partition.json" >/dev/null
for mode in overlap no-overlap; do
  flag=""
  [ $mode = no-overlap ] && flag=--no-overlap
  "${mpi[@]}" "$bin/halo-infer" --report --overwrite "$out/rmat-$scale-2.h5" --random-model 128,128,64 --random-features --backend cuda \
    --repeat 20 --sync-layers $flag --out "$out/overlap-$mode" 2>&1 | tail -8
  cp "$out/overlap-$mode/manifest.json" "$out/overlap-$mode.json"
done
rm -f "$out"/*.h5
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
on = json.load(open(f"{out}/overlap-overlap.json"))
off = json.load(open(f"{out}/overlap-no-overlap.json"))
print("| layer | width | overlap: layer ms | no overlap: layer ms | exchange alone ms | hidden |")
print("| ---: | --- | ---: | ---: | ---: | ---: |")
for a, b in zip(on["layers"], off["layers"]):
    t_on, t_off, ex = a["total_ms"]["max"], b["total_ms"]["max"], b["exchange_ms"]["max"]
    hidden = (t_off - t_on) / ex if ex > 0 else 0.0
    print(f"| {a['layer']} | {a['in_dim']}->{a['out_dim']} | {t_on:.3f} | {t_off:.3f} | {ex:.3f} | {100 * hidden:.0f}% |")
print(f"forward median: overlap {on['forward_seconds_median'] * 1e3:.3f} ms, "
      f"no overlap {off['forward_seconds_median'] * 1e3:.3f} ms")
PY
