#!/usr/bin/env bash
# Strong and weak scaling of halo-infer over NCCL on the GPUs of one node (docs/NOTEBOOK.md,
# "Scaling on one node"). Stages, in the order given (default: all of them):
#   build      configure and build BUILD (Release, sm_90) if halo-infer is not there yet
#   partition  one METIS dataset per (scale, rank count) the runs below need, all at once in the
#              background (each halo-partition's wall time and peak RSS kept; they share the
#              machine's cores, so their times are an upper bound). With PARTITION_DETACH=1 the
#              partitions run in sessions of their own (setsid) and the stage returns at once:
#              they outlive the command (the device tool keeps such processes while it holds the
#              machine), so that partitions longer than one command (METIS takes about 4 minutes
#              for R-MAT 22, and more than 10 for R-MAT 24) run beside the next stages
#              With OWNERS=DIR, a pair whose assignment DIR holds (rmat-SCALE-efEF-pPARTS.part, or
#              .part.xz; what `halo-partition --save-owner` writes) takes it with --owner instead
#              of running METIS again: partition the big graphs once, on any machine (METIS is
#              serial: R-MAT 24 takes over 24 GiB and minutes there), and only build the shards
#              here. With SAVE_OWNERS=DIR every METIS partition also writes its assignment there
#              (--save-owner), for OWNERS in a later run
#   await      waits for the detached partitions (at most AWAIT_SECONDS, default 540); exits 3
#              when some are still running (run it again in the next command), 1 if one failed
#   strong     R-MAT $STRONG on every count of $GPUS, every layer type of $LAYERS:
#                run       defaults (overlap, per-layer timing): forward median and layer times
#                waiting   --step-timing: per step compute / exchange / waiting, overlap on
#                alone     --step-timing --no-overlap: how long the exchange takes by itself
#              (one GPU: the first only; it has no exchange)
#   weak       R-MAT $WEAK[i] on $GPUS[i] ranks (scale grows with the rank count), defaults
#   interior   the largest rank count of the strong runs with --overlap interior (only the rows
#              without halo columns overlap the exchange): "irun" and "iwaiting" as run, waiting
#   int8       the largest rank count of the strong runs with --exchange int8 (step timing, no
#              overlap, as "alone"): bytes and time against fp32 rows
#   check      the strong dataset on the largest rank count against one GPU, every layer type:
#              halo-inspect --compare --rtol 1e-5 of the two results
#   report     scripts/scaling_report.py: OUT/scaling.csv (one row per run and layer), the
#              Markdown tables (OUT/scaling.md) and, where matplotlib imports, the plots
# Usage: scripts/scaling.sh BUILD WORK OUT [STAGE...]
# Environment: GPUS="1 2 4" STRONG=24 WEAK="22 23 24" LAYERS="gcn sage" DIMS=128,128,128,64
#              PARTITION_DETACH=0 AWAIT_SECONDS=540 OWNERS= SAVE_OWNERS= BALANCE=rows+nnz
#              EF=16 REPEAT=10 SEED=1 OMP_THREADS=8 BACKEND=cuda (NCCL; cpu: the MPI transport, to try the
#              script without GPUs) SPLIT_SHARE= (halo-infer --split-share for every run with
#              overlap: the split overlap on that share of the boundary rows) INFER_ARGS= (more
#              halo-infer options for every run, e.g. --nccl-register; keep each setting's runs
#              in an OUT of their own)
# Every log and manifest lands in OUT (tag.log, tag.json); WORK holds datasets (local disk).
set -uo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
build=$1 work=$2 out=$3
shift 3
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build partition strong weak interior int8 check report)
read -r -a gpus <<<"${GPUS:-1 2 4}"
read -r -a weak <<<"${WEAK:-22 23 24}"
read -r -a layers <<<"${LAYERS:-gcn sage}"
strong=${STRONG:-24} ef=${EF:-16} dims=${DIMS:-128,128,128,64} repeat=${REPEAT:-10} seed=${SEED:-1}
backend=${BACKEND:-cuda}
bin=$build/apps
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$work" "$out"
if [ ${#weak[@]} -ne ${#gpus[@]} ]; then
  echo "scaling.sh: WEAK (${weak[*]}) needs one scale per GPU count (${gpus[*]})" >&2
  exit 2
fi
log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$out/stages.txt"; }
# BALANCE=rows+nnz (the default): METIS balances rows and nonzeros (halo-partition --balance):
# at 4 GPUs 1.19x (R-MAT 22) and 1.3-1.4x (R-MAT 24) faster than nonzeros alone
# (docs/NOTEBOOK.md); BALANCE=nnz: nonzeros alone. rows+nnz datasets and assignments are
# named apart (-rows); bench/owners holds R-MAT 24's at 4 parts and R-MAT 23's at 2.
balance=${BALANCE:-rows+nnz}
case $balance in nnz) bsuffix= ;; rows+nnz) bsuffix=-rows ;; *) echo "BALANCE: nnz or rows+nnz" >&2; exit 2 ;; esac
dataset() { echo "$work/rmat-$1-ef$ef-p$2$bsuffix.h5"; }
failures=0

# The (scale, parts) pairs the selected stages need, one per line (partition alone: those of
# every experiment).
needed() {
  local s experiments=()
  for s in "${stages[@]}"; do
    case $s in strong | weak | interior | int8 | check) experiments+=("$s") ;; esac
  done
  [ ${#experiments[@]} -eq 0 ] && experiments=(strong weak)
  for s in "${experiments[@]}"; do
    case $s in
    strong | interior | int8 | check) for p in "${gpus[@]}"; do echo "$strong $p"; done ;;
    weak) for i in "${!gpus[@]}"; do echo "${weak[$i]} ${gpus[$i]}"; done ;;
    esac
  done | sort -u
}

# tag dataset ranks layer [halo-infer args...]: one run; its log and manifest kept in OUT, its
# result in WORK/res-tag only with KEEP=1.
infer() {
  local tag=$1 ds=$2 np=$3 layer=$4
  shift 4
  local extra=()
  read -r -a extra <<<"${INFER_ARGS:-}"
  local res=$work/res-$tag
  rm -rf "$res"
  local share=()
  if [ -n "${SPLIT_SHARE:-}" ] && [[ " $* " != *" --no-overlap "* ]]; then
    share=(--split-share "$SPLIT_SHARE")
  fi
  timeout 300 mpirun -np "$np" --allow-run-as-root --oversubscribe --bind-to none \
    -x OMP_NUM_THREADS="${OMP_THREADS:-8}" \
    "$bin/halo-infer" --report --overwrite "$ds" --random-model "$dims" --random-features --layer "$layer" --seed "$seed" \
    --backend "$backend" --repeat "$repeat" --no-sync --out "$res" ${share[@]+"${share[@]}"} \
    ${extra[@]+"${extra[@]}"} "$@" >"$out/$tag.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ] || ! cp "$res/manifest.json" "$out/$tag.json"; then
    echo "-- $tag: exit $rc" | tee -a "$out/failures.txt"
    tail -5 "$out/$tag.log"
    failures=$((failures + 1))
  else
    echo "-- $tag: $(grep -m1 -o 'forward [0-9.]* ms' "$out/$tag.log")"
  fi
  [ "${KEEP:-0}" = 1 ] || rm -rf "$res"
}

for stage in "${stages[@]}"; do
  case $stage in
  build)
    log build
    if [ ! -x "$bin/halo-infer" --report --overwrite ]; then
      cmake -S "$here/.." -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/configure.log" 2>&1 ||
        { tail -20 "$out/configure.log"; exit 1; }
    fi
    cmake --build "$build" -j "$(nproc)" --target halo-partition halo-infer halo-inspect \
      >"$out/build.log" 2>&1 || { grep -B2 -A8 error "$out/build.log" | head -60; exit 1; }
    ;;
  partition)
    log "partition: $(needed | tr '\n' ' ')"
    pids=()
    while read -r scale parts; do
      ds=$(dataset "$scale" "$parts")
      [ -f "$ds" ] && continue
      tag=partition-rmat$scale-p$parts
      args=("rmat:$scale:$ef" --parts "$parts" --symmetrize -q -o "$ds")
      owner=${OWNERS:+$OWNERS/rmat-$scale-ef$ef-p$parts$bsuffix.part}
      if [ -n "$owner" ] && [ -f "$owner.xz" ] && [ ! -f "$owner" ]; then
        xz -dc "$owner.xz" >"$work/${owner##*/}" && owner=$work/${owner##*/}
      fi
      if [ -n "$owner" ] && [ -f "$owner" ]; then
        args+=(--owner "$owner")
        echo "-- $tag: the assignment from $owner"
      elif [ "$parts" -gt 1 ]; then  # METIS runs
        [ "$balance" != nnz ] && args+=(--balance "$balance")
        if [ -n "${SAVE_OWNERS:-}" ]; then
          mkdir -p "$SAVE_OWNERS"
          args+=(--save-owner "$SAVE_OWNERS/rmat-$scale-ef$ef-p$parts$bsuffix.part")
        fi
      fi
      if [ "${PARTITION_DETACH:-0}" = 1 ]; then
        [ -f "$ds.running" ] && [ ! -f "$ds.rc" ] && continue  # still running
        rm -f "$ds.rc"
        touch "$ds.running"
        # The log goes to WORK (it outlives this command's OUT); await copies it.
        setsid bash -c '/usr/bin/time -f "wall %e s, peak rss %M KiB" "$@" >"$0.log" 2>&1
                        echo $? >"$0.rc"' "$ds" "$bin/halo-partition" "${args[@]}" \
          --report "$ds.report.json" </dev/null >/dev/null 2>&1 &
        echo "-- $tag: detached"
        continue
      fi
      /usr/bin/time -f "wall %e s, peak rss %M KiB" "$bin/halo-partition" "${args[@]}" \
        --report "$out/$tag.json" >"$out/$tag.log" 2>&1 &
      pids+=("$!:$tag")
    done < <(needed)
    for entry in "${pids[@]}"; do
      if ! wait "${entry%%:*}"; then
        echo "-- ${entry#*:} failed" | tee -a "$out/failures.txt"
        tail -5 "$out/${entry#*:}.log"
        failures=$((failures + 1))
      else
        echo "-- ${entry#*:}: $(tail -1 "$out/${entry#*:}.log")"
      fi
    done
    ;;
  await)
    log "await: $(needed | tr '\n' ' ')"
    deadline=$((SECONDS + ${AWAIT_SECONDS:-540}))
    while :; do
      pending=0 failed=0
      while read -r scale parts; do
        ds=$(dataset "$scale" "$parts")
        tag=partition-rmat$scale-p$parts
        if [ -f "$ds.rc" ]; then
          if [ "$(cat "$ds.rc")" != 0 ] || [ ! -f "$ds" ]; then
            failed=$((failed + 1))
            tail -3 "$ds.log"
          fi
          cp "$ds.log" "$out/$tag.log" 2>/dev/null
          cp "$ds.report.json" "$out/$tag.json" 2>/dev/null
        elif [ -f "$ds.running" ]; then
          pending=$((pending + 1))
        elif [ ! -f "$ds" ]; then
          echo "-- await: $tag was never started (run the partition stage with PARTITION_DETACH=1)"
          failed=$((failed + 1))
        fi
      done < <(needed)
      if [ $failed -gt 0 ]; then
        echo "-- await: $failed partition(s) failed" | tee -a "$out/failures.txt"
        exit 1
      fi
      [ $pending -eq 0 ] && break
      if [ $SECONDS -ge $deadline ]; then
        echo "-- await: $pending partition(s) still running; run the await stage again"
        exit 3
      fi
      sleep 5
    done
    while read -r scale parts; do
      tag=partition-rmat$scale-p$parts
      [ -f "$out/$tag.log" ] && echo "-- $tag: $(tail -1 "$out/$tag.log")"
    done < <(needed)
    ;;
  strong)
    for p in "${gpus[@]}"; do
      ds=$(dataset "$strong" "$p")
      for layer in "${layers[@]}"; do
        log "strong rmat$strong $layer on $p"
        infer "strong-rmat$strong-$layer-g$p-run" "$ds" "$p" "$layer"
        if [ "$p" -gt 1 ]; then
          infer "strong-rmat$strong-$layer-g$p-waiting" "$ds" "$p" "$layer" --step-timing
          infer "strong-rmat$strong-$layer-g$p-alone" "$ds" "$p" "$layer" --step-timing --no-overlap
        fi
      done
    done
    ;;
  weak)
    for i in "${!gpus[@]}"; do
      p=${gpus[$i]} scale=${weak[$i]}
      for layer in "${layers[@]}"; do
        log "weak rmat$scale $layer on $p"
        infer "weak-rmat$scale-$layer-g$p-run" "$(dataset "$scale" "$p")" "$p" "$layer"
      done
    done
    ;;
  interior)
    p=${gpus[-1]}
    for layer in "${layers[@]}"; do
      log "interior rmat$strong $layer on $p"
      ds=$(dataset "$strong" "$p")
      infer "strong-rmat$strong-$layer-g$p-irun" "$ds" "$p" "$layer" --overlap interior
      infer "strong-rmat$strong-$layer-g$p-iwaiting" "$ds" "$p" "$layer" --overlap interior \
        --step-timing
    done
    ;;
  check)
    p=${gpus[-1]}
    for layer in "${layers[@]}"; do
      log "check rmat$strong $layer: $p GPUs against 1"
      KEEP=1 infer "check-rmat$strong-$layer-g1" "$(dataset "$strong" 1)" 1 "$layer"
      KEEP=1 infer "check-rmat$strong-$layer-g$p" "$(dataset "$strong" "$p")" "$p" "$layer"
      if ! "$bin/halo-inspect" "$work/res-check-rmat$strong-$layer-g$p" --compare \
        "$work/res-check-rmat$strong-$layer-g1" --rtol 1e-5 >"$out/check-$layer.txt" 2>&1; then
        echo "-- check $layer failed" | tee -a "$out/failures.txt"
        failures=$((failures + 1))
      fi
      tail -1 "$out/check-$layer.txt"
      rm -rf "$work/res-check-rmat$strong-$layer-g"*
    done
    ;;
  int8)
    p=${gpus[-1]}
    for layer in "${layers[@]}"; do
      log "int8 rmat$strong $layer on $p"
      infer "int8-rmat$strong-$layer-g$p-alone" "$(dataset "$strong" "$p")" "$p" "$layer" \
        --step-timing --no-overlap --exchange int8
    done
    ;;
  report)
    log report
    python3 "$here/scaling_report.py" "$out" || failures=$((failures + 1))
    ;;
  *)
    echo "scaling.sh: unknown stage '$stage'" >&2
    exit 2
    ;;
  esac
done
[ $failures -eq 0 ] || echo "scaling.sh: $failures step(s) failed (OUT/failures.txt)" >&2
exit $((failures > 0))
