#!/usr/bin/env bash
# Restart from the last finished layer (ctest label mpi; halo-infer --checkpoint / --resume):
#   1. a 3-rank job of a 3-layer model (CPU backend) with --checkpoint, one rank killed (kill -9)
#      during layer 2: the job ends, rank 0 removes the lock and the still empty --out, and every
#      rank's rows of layer 1 are in the checkpoint;
#   2. --resume continues after layer 1 and equals an uninterrupted run bit for bit;
#   3. layers finished by some ranks only: the run continues after the last layer every rank
#      finished, again bit for bit;
#   4. a checkpoint of another model, rank count or dataset is refused by name, before start.
# Usage: test_restart.sh BIN_DIR MPIEXEC
set -uo pipefail
bin=$(cd "$1" && pwd)
mpiexec=$2
source "$(dirname "${BASH_SOURCE[0]}")/harness.sh" restart
cd "$work" || exit 1
model=(--random-model 16,16,16,4 --random-features --seed 7)

"$bin/halo-partition" rmat:11:8:5 --parts 3 -q -o g3.h5 >/dev/null &&
  "$bin/halo-partition" rmat:11:8:5 --parts 2 -q -o g2.h5 >/dev/null &&
  "$bin/halo-partition" rmat:11:8:6 --parts 3 -q -o other3.h5 >/dev/null &&
  mpirun_n 3 "$bin/halo-infer" g3.h5 "${model[@]}" --out ref -q ||
  { echo "FAIL - cannot partition or run the reference"; exit 1; }

# 1. kill -9 of rank 1 while it waits before layer 2 (index 1), its peers in that layer.
HALO_FAULT_INJECT="rank=1,layer=1,sleep=60" "$mpiexec" -n 3 --oversubscribe --allow-run-as-root \
  -x HALO_FAULT_INJECT "$bin/halo-infer" g3.h5 "${model[@]}" --out res --checkpoint ck \
  >killed.log 2>&1 &
job=$!
for _ in $(seq 1 300); do grep -q "sleeping 60 s" killed.log && break; sleep 0.1; done
sleeper=$(sed -n 's/.*(pid \([0-9]*\)): sleeping.*/\1/p' killed.log | head -n 1)
if [ -z "$sleeper" ]; then
  fail "the rank did not reach layer 2"; cat killed.log; kill -9 "$job"; exit 1
fi
start=$(date +%s)
kill -9 "$sleeper"
wait "$job"
status=$?
elapsed=$(( $(date +%s) - start ))
if [ "$status" -ne 0 ] && [ "$elapsed" -le 30 ] && [ ! -e res ] &&
   [ -f ck/checkpoint.json ] && [ -f ck/layer-0/part-0.h5 ] && [ -f ck/layer-0/part-1.h5 ] &&
   [ -f ck/layer-0/part-2.h5 ] && [ ! -e ck/layer-1/part-1.h5 ]; then
  pass "killed during layer 2: exit $status after ${elapsed}s, no --out left, layer 1 of every rank checkpointed"
else
  fail "killed during layer 2: status $status after ${elapsed}s; left: $(find res ck 2>/dev/null | tr '\n' ' ')"
  cat killed.log
fi

# 2. Resume.
if mpirun_n 3 "$bin/halo-infer" g3.h5 "${model[@]}" --out res --checkpoint ck --resume ck \
     >resume.log 2>&1 && grep -q "resuming after layer 1 of 3" resume.log &&
   ! grep -q "layer 1 of 3 (gcn" resume.log &&
   "$bin/halo-inspect" res --compare ref --tolerance 0 >cmp.log 2>&1; then
  pass "--resume after layer 1 equals the uninterrupted run bit for bit: $(grep -o '100.0000% of values bit-identical' cmp.log)"
else
  fail "--resume"; cat resume.log cmp.log
fi

# 3. Layers finished by some ranks only: rank 0 finished 3, rank 1 2, rank 2 1.
rm -f ck/layer-2/part-1.h5 ck/layer-2/part-2.h5 ck/layer-1/part-2.h5
if [ -f ck/layer-2/part-0.h5 ] &&
   mpirun_n 3 "$bin/halo-infer" g3.h5 "${model[@]}" --out res2 --resume ck >resume2.log 2>&1 &&
   grep -q "resuming after layer 1 of 3" resume2.log &&
   "$bin/halo-inspect" res2 --compare ref --tolerance 0 >/dev/null 2>&1; then
  pass "ranks at layers 3, 2 and 1: resumed after layer 1, bit for bit"
else
  fail "resume after the last layer every rank finished"; cat resume2.log
fi

# 4. Another job's checkpoint, refused by name before start (no --out left).
refused() {
  local label=$1 regex=$2 n=$3
  shift 3
  local out
  rm -rf res3
  out=$(mpirun_n "$n" "$bin/halo-infer" "$@" --out res3 --resume ck 2>&1)
  if [ $? -eq 1 ] && grep -Eq "$regex" <<<"$out" && [ ! -e res3 ] &&
     [ "$(grep -c "error" <<<"$out")" -eq 1 ] && ! grep -q MPI_ABORT <<<"$out"; then
    pass "$label refused: $(grep -m1 error <<<"$out" | cut -c1-220)"
  else
    fail "$label: $out"
  fi
}
refused "another model" "a checkpoint of another job: its model weights .FNV-1a. is" 3 \
  g3.h5 --random-model 16,16,16,4 --random-features --seed 8
refused "another rank count" "a checkpoint of another job: its rank count is '3', this job's '2'" 2 \
  g2.h5 "${model[@]}"
refused "another dataset" "a checkpoint of another job: its dataset is '.*g3.h5', this job's '.*other3.h5'" 3 \
  other3.h5 "${model[@]}"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all restart checks passed"
