#!/usr/bin/env bash
# On the GPU machine: the checks of the engine's MaxK, attention, AES and int8-exchange paths
# (session 3 of docs/NOTEBOOK.md's log). Stages, each writing under OUT:
#   build    configure and build BUILD (CUDA on, sm_90)
#   tests    the GPU tests of those paths, plus the unit and mpi suites
#   layers   halo-infer on cora, CUDA vs CPU backend, 1 and 2 ranks, every new layer type, and
#            --exchange int8 / --spmm aes:W
#   graph    one rank: every layer type with --cuda-graph (recorded and replayed) against the
#            same run without it, and int8 features / AES with it
#   multi    (one GPU per rank, 2 GPUs) the same layers over NCCL, --exchange nccl-int8,
#            --int8-features, and R-MAT 20 on 2 GPUs: exchange time and bytes, fp32 vs int8 rows
# Usage: scripts/gpu_layers.sh BUILD DATA OUT COMMIT STAGE...
set -uo pipefail
# shellcheck source=scripts/lib/gpu_build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/gpu_build.sh"
build=$1 data=$2 out=$3 commit=$4
shift 4
mkdir -p "$out"
bin=$build/apps
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
# compare DIR A:B ...: max |difference|, same argmax and finiteness of result B against result A
# (directories under DIR, rows matched by global id).
compare() {
  python3 - "$@" <<'PY'
import glob, sys, h5py, numpy as np
ds = sys.argv[1]
def load(d):
    rows = {}
    for f in sorted(glob.glob(d + "/part-*.h5")):
        with h5py.File(f, "r") as h:
            for gid, row in zip(h["global_ids"][:], h["output"][:]):
                rows[int(gid)] = row
    return rows
for pair in sys.argv[2:]:
    a, b = pair.split(":")
    x, y = load(f"{ds}/{a}"), load(f"{ds}/{b}")
    if not x or x.keys() != y.keys():
        print(f"{b} vs {a}: missing results")
        continue
    ids = sorted(x)
    X = np.stack([x[i] for i in ids]); Y = np.stack([y[i] for i in ids])
    print(f"{b:>22} vs {a:<14} max|diff| {np.abs(X - Y).max():.3e} (max|x| {np.abs(X).max():.2f}), "
          f"same argmax {(X.argmax(1) == Y.argmax(1)).mean():.4f}, finite {np.isfinite(Y).all()}")
PY
}
for stage in "$@"; do
  case "$stage" in
    build)
      build_all "$build" "$data" "$out" "$commit"
      ;;
    tests)
      ctest --test-dir "$build" -j4 --timeout 300 \
        -R 'engine_plans|int8_exchanger|test_engine|test_maxk|fused3s|test_aes|cuda_backend|model_file|export_numpy' \
        --output-on-failure >"$out/ctest.log" 2>&1
      echo "tests: exit $?"
      grep -E 'tests passed|tests failed|\*\*\*Failed|Not Run|Skipped' "$out/ctest.log" | head -30
      ;;
    layers)
      ds=$out/ds; mkdir -p "$ds"
      for p in 1 2; do
        "$bin/halo-partition" "$data/cora.el.gz" --parts $p --symmetrize -q -o "$ds/cora$p.h5" \
          --kernel-metadata maxk,fused3s
      done
      run() {  # name ranks dataset args...
        local name=$1 np=$2 file=$3; shift 3
        "${mpi[@]}" -np "$np" "$bin/halo-infer" --report --overwrite "$file" --out "$ds/$name" "$@" \
          >"$ds/$name.log" 2>&1 || { echo "FAILED $name"; tail -5 "$ds/$name.log"; }
      }
      for layer in maxk agnn transformer gat gcn; do
        args=(--random-model 64,64,32 --random-features --layer "$layer" --heads 2 --k 8 --repeat 5)
        run "$layer-cpu-1" 1 "$ds/cora1.h5" "${args[@]}"
        run "$layer-cuda-1" 1 "$ds/cora1.h5" "${args[@]}" --backend cuda
        run "$layer-cuda-2" 2 "$ds/cora2.h5" "${args[@]}" --backend cuda
        run "$layer-cuda-exact-1" 1 "$ds/cora1.h5" "${args[@]}" --backend cuda --attention exact
        grep -h -A4 'kernels chosen' "$ds/$layer-cuda-1.log" | head -5
      done
      run gcn-cuda-int8-2 2 "$ds/cora2.h5" --random-model 64,64,32 --random-features --backend cuda --exchange int8
      run agnn-cuda-int8-2 2 "$ds/cora2.h5" --random-model 64,64,32 --random-features --layer agnn --backend cuda \
        --exchange int8
      run gcn-cuda-aes-1 1 "$ds/cora1.h5" --random-model 64,64,32 --random-features --backend cuda --spmm aes:16
      run gcn-cpu-aes-1 1 "$ds/cora1.h5" --random-model 64,64,32 --random-features --spmm aes:16
      grep -h 'halo exchange:' "$ds"/*int8*.log "$ds"/maxk-cuda-2.log
      pairs=()
      for layer in maxk agnn transformer gat gcn; do
        for other in cuda-1 cuda-2 cuda-exact-1; do pairs+=("$layer-cpu-1:$layer-$other"); done
      done
      compare "$ds" "${pairs[@]}" gcn-cpu-1:gcn-cuda-int8-2 agnn-cpu-1:agnn-cuda-int8-2 \
        gcn-cpu-1:gcn-cuda-aes-1 gcn-cpu-aes-1:gcn-cuda-aes-1
      ;;
    graph)
      ds=$out/graph; mkdir -p "$ds"
      "$bin/halo-partition" "$data/cora.el.gz" --parts 1 --symmetrize -q -o "$ds/cora1.h5" \
        --kernel-metadata maxk,fused3s
      "$bin/halo-partition" "$data/cora.el.gz" --parts 1 --symmetrize -q --quantize int8 \
        --features "$data/cora.feat.coo.txt.gz" -o "$ds/coraq.h5"
      run() {
        local name=$1 file=$2; shift 2
        "${mpi[@]}" -np 1 "$bin/halo-infer" --report --overwrite "$file" --out "$ds/$name" --backend cuda "$@" \
          >"$ds/$name.log" 2>&1 || { echo "FAILED $name"; tail -5 "$ds/$name.log"; }
      }
      pairs=()
      for layer in maxk agnn transformer gat gcn sage gin; do
        args=(--random-model 64,64,32 --random-features --layer "$layer" --heads 2 --k 8 --repeat 5)
        run "$layer" "$ds/cora1.h5" "${args[@]}"
        run "$layer-graph" "$ds/cora1.h5" "${args[@]}" --cuda-graph
        grep -h "recorded\|not recorded" "$ds/$layer-graph.log"
        pairs+=("$layer:$layer-graph")
      done
      args=(--random-model 1433,1433,7 --random-features --int8-features --spmm aes:64 --repeat 5)
      run int8 "$ds/coraq.h5" "${args[@]}"
      run int8-graph "$ds/coraq.h5" "${args[@]}" --cuda-graph
      grep -h "recorded\|not recorded" "$ds/int8-graph.log"
      compare "$ds" "${pairs[@]}" int8:int8-graph
      grep -h "forward" "$ds"/*.log | sed 's/^/  /' | head -20
      rm -f "$ds"/*.h5
      ;;
    multi)
      ds=$out/multi; mkdir -p "$ds"
      "$bin/halo-partition" "$data/cora.el.gz" --parts 2 --symmetrize -q -o "$ds/cora2.h5" \
        --kernel-metadata maxk,fused3s
      "$bin/halo-partition" "$data/cora.el.gz" --parts 1 --symmetrize -q -o "$ds/cora1.h5"
      for q in none int8; do
        for p in 1 2; do
          "$bin/halo-partition" "$data/cora.el.gz" --parts $p --symmetrize -q \
            --features "$data/cora.feat.coo.txt.gz" --quantize $q -o "$ds/coraf-$q-$p.h5"
        done
      done
      run() {
        local name=$1 np=$2 file=$3; shift 3
        "${mpi[@]}" -np "$np" "$bin/halo-infer" --report --overwrite "$file" --out "$ds/$name" "$@" \
          >"$ds/$name.log" 2>&1 || { echo "FAILED $name"; tail -5 "$ds/$name.log"; }
      }
      for layer in maxk agnn transformer gat gcn; do
        args=(--random-model 64,64,32 --random-features --layer "$layer" --heads 2 --k 8)
        run "$layer-cpu-1" 1 "$ds/cora1.h5" "${args[@]}"
        run "$layer-nccl-2" 2 "$ds/cora2.h5" "${args[@]}" --backend cuda --exchange nccl
        run "$layer-nccl-fast-2" 2 "$ds/cora2.h5" "${args[@]}" --backend cuda --exchange nccl \
          --layer-timing-only
      done
      run gcn-nccl-int8-2 2 "$ds/cora2.h5" --random-model 64,64,32 --random-features --backend cuda --exchange nccl-int8
      for L in gcn sage; do
        run "f-$L-cpu-1" 1 "$ds/coraf-none-1.h5" --random-model 1433,1433,7 --random-features --layer $L
        run "f-$L-int8-nccl-2" 2 "$ds/coraf-int8-2.h5" --random-model 1433,1433,7 --random-features --layer $L \
          --backend cuda --int8-features
        run "f-$L-int8-aes-1" 1 "$ds/coraf-int8-1.h5" --random-model 1433,1433,7 --random-features --layer $L \
          --backend cuda --int8-features --spmm aes:64
        run "f-$L-fp32-aes-1" 1 "$ds/coraf-none-1.h5" --random-model 1433,1433,7 --random-features --layer $L \
          --backend cuda --spmm aes:64
      done
      grep -h -E 'halo exchange:|kernels chosen' -A2 "$ds"/*nccl*.log | head -30
      pairs=()
      for layer in maxk agnn transformer gat gcn; do
        pairs+=("$layer-cpu-1:$layer-nccl-2" "$layer-nccl-2:$layer-nccl-fast-2")
      done
      for L in gcn sage; do
        pairs+=("f-$L-cpu-1:f-$L-int8-nccl-2" "f-$L-fp32-aes-1:f-$L-int8-aes-1")
      done
      compare "$ds" "${pairs[@]}" gcn-cpu-1:gcn-nccl-int8-2
      "$bin/halo-partition" rmat:20:16 --parts 2 --symmetrize -q -o "$ds/r20.h5"
      for x in nccl nccl-int8; do
        "${mpi[@]}" -np 2 "$bin/halo-infer" --report --overwrite "$ds/r20.h5" --random-model 128,128,64 --random-features --backend cuda \
          --exchange $x --repeat 10 --no-overlap --out "$ds/r20-$x" 2>&1 |
          grep -E '^ +[0-9] |halo exchange|forward'
      done
      rm -f "$ds"/*.h5
      ;;
  esac
done
