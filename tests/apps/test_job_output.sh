#!/usr/bin/env bash
# halo-infer's job as users see it (ctest label mpi; README "Exit codes", docs/RELIABILITY.md):
#   1. errors found before any rank reads its part (options, the model against the stored
#      feature width and the part count, the rank count, --out): one message on stderr, exit 1
#      (2 for a command line that cannot describe a job), no MPI_ABORT, no --out left behind;
#   2. an error on one rank later: one line naming the rank, every rank exits 1 within 30 s, no
#      MPI_ABORT, and the lock and the still empty --out are removed;
#   3. --out holding another job's result: refused without --overwrite (the old result intact),
#      replaced with it (a 2-rank result over a 4-rank one leaves no piece of the old one);
#   4. progress: one line per phase and per layer on stderr, the summary last on stdout; -q
#      prints nothing; halo-partition the same (--report-tables for its tables).
# Usage: test_job_output.sh BIN_DIR MPIEXEC
set -uo pipefail
bin=$(cd "$1" && pwd)
mpiexec=$2
source "$(dirname "${BASH_SOURCE[0]}")/harness.sh" job
cd "$work" || exit 1

"$bin/halo-partition" rmat:10:8:5 --parts 2 -q -o g2.h5 >/dev/null &&
  "$bin/halo-partition" rmat:10:8:5 --parts 4 -q -o g4.h5 >/dev/null ||
  { echo "FAIL - cannot partition the test graphs"; exit 1; }
# A dataset with features of width 3 (COO text: "# rows cols nnz", then "row col value").
{
  echo "# 1024 3 1024"
  for i in $(seq 0 1023); do echo "$i $((i % 3)) 1.5"; done
} >feat.txt
"$bin/halo-partition" rmat:10:8:5 --parts 3 --features feat.txt -q -o f3.h5 >/dev/null ||
  { echo "FAIL - cannot partition the dataset with features"; exit 1; }

# refused N STATUS REGEX LABEL -- ARGS: a job refused before start on N ranks.
refused() {
  local n=$1 want=$2 regex=$3 label=$4
  shift 5
  rm -rf out
  local out status errors
  out=$(timeout 60 "$mpiexec" -n "$n" --oversubscribe --allow-run-as-root "$bin/halo-infer" \
        "$@" 2>&1 >/dev/null)
  status=$?
  errors=$(grep -c "error" <<<"$out")
  if [ "$status" -ne "$want" ]; then
    fail "$label: exit status $status, expected $want"; echo "$out"
  elif ! grep -Eq -- "$regex" <<<"$out"; then
    fail "$label: the message does not match /$regex/"; echo "$out"
  elif [ "$errors" -ne 1 ] || grep -q "MPI_ABORT" <<<"$out"; then
    fail "$label: $errors error lines (expected one, no MPI_ABORT)"; echo "$out"
  elif [ -e out ]; then
    fail "$label: --out left behind: $(find out)"
  else
    pass "$label (exit $status): $(grep -m1 error <<<"$out" | cut -c1-200)"
  fi
}

# 1. Before start.
refused 2 1 "g2.h5 stores no features \(width 0\) but the model's first layer takes 16.*--random-features" \
  "no features without --random-features" -- g2.h5 --random-model 16,4 --out out
refused 3 1 "f3.h5 has features of width 3 but the model's first layer takes 16" \
  "the model's width against the stored features" -- f3.h5 --random-model 16,4 --out out
refused 3 1 "has 4 parts but the job has 3 ranks" "rank count" -- g4.h5 --random-model 3,4 --out out
refused 2 2 "cuda-graph needs --backend cuda" "conflicting options" -- g2.h5 --random-model 3,4 \
  --random-features --cuda-graph --out out
refused 2 2 "--bogus" "unknown option" -- g2.h5 --random-model 3,4 --bogus --out out
refused 2 2 "--repeat" "bad value" -- g2.h5 --random-model 3,4 --repeat 0 --out out
touch a-file
refused 2 1 "a-file: exists and is not a directory" "--out is a file" -- g2.h5 --random-model 3,4 \
  --random-features --out a-file
rm -f a-file

# 2. Later: rank 1 fails before layer 1 (its peers wait for it in the layer's halo exchange);
# the lock and the --out it created are gone. Run twice: as users run it (mpirun ends the job
# once a rank exits non-zero), and with mpirun told not to (orte_abort_on_non_zero_status 0, as
# srun without --kill-on-bad-exit), where every rank must end by itself: each runs under a shell
# that records its exit status.
late_run() {
  HALO_FAULT_INJECT=rank=1,layer=1 timeout 60 "$mpiexec" -n 3 --oversubscribe --allow-run-as-root \
    -x HALO_FAULT_INJECT "$@" sh -c \
    '"$@"; rc=$?; echo "$rc" >"rank-status.$OMPI_COMM_WORLD_RANK"; exit "$rc"' \
    sh "$bin/halo-infer" f3.h5 --random-model 3,8,4 --out late 2>&1
}
start=$(date +%s)
out=$(late_run)
status=$?
elapsed=$(( $(date +%s) - start ))
if [ "$status" -eq 1 ] && [ "$elapsed" -le 30 ] &&
   [ "$(grep -c "rank 1: halo-infer: error: injected fault before layer 1" <<<"$out")" -eq 1 ] &&
   [ "$(grep -c "halo-infer: error" <<<"$out")" -eq 1 ] && ! grep -q "MPI_ABORT" <<<"$out" &&
   ! grep -q "signal" <<<"$out"; then
  pass "an error on rank 1 during the run: exit 1 after ${elapsed}s, one line naming the rank, no MPI_ABORT"
else
  fail "an error on rank 1 during the run: status $status after ${elapsed}s"; echo "$out"
fi
rm -rf late rank-status.*
start=$(date +%s)
out=$(late_run --mca orte_abort_on_non_zero_status 0)
elapsed=$(( $(date +%s) - start ))
ranks=$(cat rank-status.0 rank-status.1 rank-status.2 2>/dev/null | tr '\n' ' ')
if [ "$ranks" = "1 1 1 " ] && [ "$elapsed" -le 30 ] &&
   [ "$(grep -c "halo-infer: error" <<<"$out")" -eq 1 ] && ! grep -q "MPI_ABORT" <<<"$out"; then
  pass "the same where mpirun does not end the job: every rank exits 1 by itself after ${elapsed}s"
else
  fail "every rank by itself: statuses '$ranks' after ${elapsed}s"; echo "$out"
fi
if [ ! -e late ]; then
  pass "the failed job removed its lock and its empty --out"
else
  fail "left behind after the failed job: $(find late)"
fi

# 3. Safe output: a 4-rank result, then a 2-rank job on the same --out.
if mpirun_n 4 "$bin/halo-infer" g4.h5 --random-model 8,4 --random-features --out res -q &&
   mpirun_n 2 "$bin/halo-infer" g2.h5 --random-model 8,4 --random-features --out ref2 -q; then
  before=$(cd res && ls -A | sort | tr '\n' ' ')
  out=$(mpirun_n 2 "$bin/halo-infer" g2.h5 --random-model 8,4 --random-features --out res 2>&1)
  status=$?
  after=$(cd res && ls -A | sort | tr '\n' ' ')
  if [ "$status" -eq 1 ] && grep -q "res: holds another job's result.*--overwrite" <<<"$out" &&
     [ "$before" = "$after" ] && "$bin/halo-inspect" res >/dev/null; then
    pass "another job's result refused without --overwrite, left intact: $after"
  else
    fail "reusing --out without --overwrite: status $status, before '$before' after '$after'"
    echo "$out"
  fi
  if mpirun_n 2 "$bin/halo-infer" g2.h5 --random-model 8,4 --random-features --out res \
       --overwrite -q && [ ! -e res/part-2.h5 ] && [ ! -e res/part-3.h5 ] &&
     [ "$(cd res && ls -A | sort | tr '\n' ' ')" = "manifest.json part-0.h5 part-1.h5 " ] &&
     "$bin/halo-inspect" res --compare ref2 --tolerance 0 >/dev/null; then
    pass "--overwrite: the 2-rank result replaced the 4-rank one, no old piece left"
  else
    fail "--overwrite: $(cd res && ls -A | tr '\n' ' ')"
  fi
else
  fail "the 4-rank and 2-rank runs"
fi

# 4. Progress on stderr, the summary line last on stdout; -q prints nothing.
mpirun_n 3 "$bin/halo-infer" f3.h5 --random-model 3,8,8,4 --out prog >prog.out 2>prog.err
status=$?
if [ "$status" -eq 0 ] &&
   grep -q "dataset read: .* s" prog.err && grep -q "layer 3 of 3 (gcn 8->4): .* s" prog.err &&
   grep -q "result write: " prog.err &&
   [ "$(wc -l <prog.out)" -eq 1 ] &&
   grep -q "^1024 nodes, 3 ranks, cpu backend, model .*forward .* ms.*total .* s; results in prog/" \
     prog.out; then
  pass "progress: $(wc -l <prog.err) lines on stderr; stdout: $(cat prog.out)"
else
  fail "progress (status $status)"; cat prog.err prog.out
fi
mpirun_n 3 "$bin/halo-infer" f3.h5 --random-model 3,8,4 --out quiet -q >q.out 2>q.err
if [ $? -eq 0 ] && [ ! -s q.out ] && [ ! -s q.err ]; then
  pass "-q: nothing printed"
else
  fail "-q printed: $(cat q.out q.err)"
fi
mpirun_n 3 "$bin/halo-infer" f3.h5 --random-model 3,8,4 --out rep --report >rep.out 2>/dev/null
if grep -q "^layer " rep.out && grep -q "^phase " rep.out && tail -n 1 rep.out | grep -q "^1024 nodes"; then
  pass "--report: the tables, then the summary line last"
else
  fail "--report"; cat rep.out
fi

# halo-partition the same: progress on stderr, the one-line summary on stdout, the tables with
# --report-tables (before the summary), nothing with -q; serial and under mpirun (ptscotch).
"$bin/halo-partition" rmat:10:8:5 --parts 3 -o hp.h5 >hp.out 2>hp.err
status=$?
if [ "$status" -eq 0 ] && [ "$(wc -l <hp.out)" -eq 1 ] && grep -q "building the CSR" hp.err &&
   grep -Eq "^1024 nodes, 3 parts \([a-z]+\): edge cut [0-9]+, partition .* s, total .* s; dataset hp.h5$" hp.out; then
  pass "halo-partition: $(wc -l <hp.err) progress lines on stderr; stdout: $(cat hp.out)"
else
  fail "halo-partition's summary (status $status)"; cat hp.out hp.err
fi
"$bin/halo-partition" rmat:10:8:5 --parts 3 -o hp.h5 --report-tables >hpt.out 2>/dev/null
if grep -q "owned rows" hpt.out && grep -q "^edge cut .* halo volume" hpt.out &&
   tail -n 1 hpt.out | grep -q "^1024 nodes, 3 parts"; then
  pass "halo-partition --report-tables: the tables, then the summary line last"
else
  fail "halo-partition --report-tables"; cat hpt.out
fi
"$bin/halo-partition" rmat:10:8:5 --parts 3 -o hp.h5 -q >hpq.out 2>hpq.err
if [ $? -eq 0 ] && [ ! -s hpq.out ] && [ ! -s hpq.err ]; then
  pass "halo-partition -q: nothing printed"
else
  fail "halo-partition -q printed: $(cat hpq.out hpq.err)"
fi
mpirun_n 2 "$bin/halo-partition" rmat:10:8:5 --parts 2 --partitioner ptscotch -o hpd.h5 \
  >hpd.out 2>hpd.err
status=$?
if [ "$status" -eq 0 ] && [ "$(wc -l <hpd.out)" -eq 1 ] &&
   grep -q "^1024 nodes, 2 parts (ptscotch): edge cut [0-9]*, .*; dataset hpd.h5$" hpd.out; then
  pass "halo-partition under mpirun: one summary line: $(cat hpd.out)"
else
  fail "halo-partition under mpirun (status $status)"; cat hpd.out hpd.err
fi

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all job checks passed"
