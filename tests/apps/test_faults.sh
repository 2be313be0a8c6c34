#!/usr/bin/env bash
# Real faults on the CPU backend (ctest label mpi; docs/RELIABILITY.md). Each faulty job must end
# non-zero within 30 s on every rank, say what happened, and leave no manifest and no file that
# later reads as valid:
#   1. kill -9 of one rank in the middle of the forward pass (HALO_FAULT_INJECT=...,sleep=S holds
#      it before a layer while its peer waits in that layer's halo exchange);
#   2. SIGTERM to mpiexec (scancel, a batch system's time limit) and to one rank;
#   3. a full disk while writing results and while writing a dataset, and one full before the
#      dataset's file is created (H5Fcreate fails after making it): a small tmpfs where this
#      runs as root and may mount (ENOSPC), and always RLIMIT_FSIZE (ulimit -f with SIGXFSZ
#      ignored, so writes fail with EFBIG instead of killing the process);
#   4. two jobs writing the same --out: the second is refused at once, the first completes;
#   5. the dataset replaced (renamed over) while the job runs: no manifest.
# Usage: test_faults.sh BIN_DIR MPIEXEC
set -uo pipefail
bin=$(cd "$1" && pwd)
mpiexec=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/halo-faults-XXXXXX")
mnt=""
cleanup() {
  [ -n "$mnt" ] && umount "$mnt" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; failures=$((failures + 1)); }
mpirun_n() { local n=$1; shift; "$mpiexec" -n "$n" --oversubscribe --allow-run-as-root "$@"; }
export OMP_NUM_THREADS=1

"$bin/halo-partition" rmat:11:8:5 --parts 2 -q -o "$work/g2.h5" >/dev/null &&
  "$bin/halo-partition" rmat:11:8:6 --parts 2 -q -o "$work/other2.h5" >/dev/null ||
  { echo "FAIL - cannot partition the test graphs"; exit 1; }

# Waits (up to 120 s: a 2-rank job's start is slow on a loaded 2-core machine) until file $1
# contains text $2.
wait_for() {
  local i
  for i in $(seq 1 1200); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# No process of this test's job may survive it: every rank ends with mpiexec.
no_ranks_left() {
  local i
  for i in $(seq 1 50); do
    pgrep -f "halo-infer .*$1" >/dev/null || return 0
    sleep 0.2
  done
  return 1
}

# An output directory that "reads as valid" has a manifest; pieces without one are refused by
# halo-inspect and read_results.
check_left_behind() {
  local label=$1 out=$2
  if [ -e "$out/manifest.json" ]; then
    fail "$label: a manifest was left in $out"
  elif "$bin/halo-inspect" "$out" >/dev/null 2>&1; then
    fail "$label: $out still reads as a valid result"
  else
    pass "$label: no manifest, $out does not read as a result"
  fi
}

# Starts a 2-rank job whose rank $1 sleeps 60 s before layer 1, in the background; sets job_pid,
# job_log, job_out; returns once the rank is asleep (its peer then waits in the exchange).
start_sleeping_job() {
  local rank=$1 name=$2 dataset=${3:-$work/g2.h5}
  job_out=$work/$name
  job_log=$work/$name.log
  # mpiexec itself in the background (not a function's subshell): $! is its pid.
  HALO_FAULT_INJECT="rank=$rank,layer=1,sleep=60" "$mpiexec" -n 2 --oversubscribe \
    --allow-run-as-root -x HALO_FAULT_INJECT "$bin/halo-infer" "$dataset" \
    --random-model 16,16,4 --random-features --out "$job_out" >"$job_log" 2>&1 &
  job_pid=$!
  if ! wait_for "$job_log" "sleeping 60 s"; then
    fail "$name: the rank did not reach the sleep"; cat "$job_log"
    kill -9 "$job_pid" 2>/dev/null
    return 1
  fi
  sleeper_pid=$(sed -n 's/.*(pid \([0-9]*\)): sleeping.*/\1/p' "$job_log" | head -n 1)
}

# Waits for the background job; checks status, time and message.
finish_job() {
  local label=$1 start=$2 pattern=$3
  local status elapsed
  wait "$job_pid"
  status=$?
  elapsed=$(( $(date +%s) - start ))
  if [ "$status" -ne 0 ] && [ "$elapsed" -le 30 ] && grep -Eqi "$pattern" "$job_log"; then
    pass "$label: exit status $status after ${elapsed}s: $(grep -Eim1 "$pattern" "$job_log" | cut -c1-200)"
  else
    fail "$label: status $status after ${elapsed}s, expected non-zero within 30 s and /$pattern/"
    cat "$job_log"
  fi
  if no_ranks_left "$job_out"; then
    pass "$label: no rank left running"
  else
    fail "$label: ranks still running"; pgrep -af "halo-infer .*$job_out"
    pkill -9 -f "halo-infer .*$job_out"
  fi
  check_left_behind "$label" "$job_out"
}

# 1. kill -9 of rank 1 mid-run.
if start_sleeping_job 1 kill9; then
  start=$(date +%s)
  kill -9 "$sleeper_pid"
  finish_job "kill -9 of rank 1" "$start" "signal 9|killed"
fi

# 2. SIGTERM to mpiexec, then to one rank.
if start_sleeping_job 1 term-mpiexec; then
  start=$(date +%s)
  kill -TERM "$job_pid"
  finish_job "SIGTERM to mpiexec" "$start" "terminated|signal 15"
fi
if start_sleeping_job 0 term-rank; then
  start=$(date +%s)
  kill -TERM "$sleeper_pid"
  finish_job "SIGTERM to rank 0" "$start" "terminated by a signal"
fi

# 3. Full disk. Results: the pieces of this job take ~40 KiB; the limits below are smaller.
full_disk_infer() {
  local label=$1 out=$2 limit=${3:-}
  local start status elapsed
  local rank=("$bin/halo-infer")
  # A file-size limit is set in each rank (not on mpiexec, whose PMIx segments it would break);
  # the ranks' shared-memory transport needs large files, so these run over TCP.
  if [ -n "$limit" ]; then
    rank=(env OMPI_MCA_btl=self,tcp bash -c "ulimit -f $limit && exec \"\$0\" \"\$@\"" "$bin/halo-infer")
  fi
  start=$(date +%s)
  mpirun_n 2 -x OMPI_MCA_btl=self,tcp "${rank[@]}" "$work/g2.h5" --random-model 16,16,64 --random-features \
    --out "$out" >"$work/disk.log" 2>&1
  status=$?
  elapsed=$(( $(date +%s) - start ))
  if [ "$status" -ne 0 ] && [ "$elapsed" -le 30 ] &&
     grep -Eq "(part-[01]\.h5|$out).*(space|too large|write|flush|close)" "$work/disk.log"; then
    pass "$label: exit status $status after ${elapsed}s: $(grep -m1 "halo-[a-z]*: error" "$work/disk.log" | cut -c1-220)"
  else
    fail "$label: status $status after ${elapsed}s"; cat "$work/disk.log"
  fi
  check_left_behind "$label" "$out"
}
full_disk_partition() {
  local label=$1 target=$2
  shift 2
  local status
  "$@" "$bin/halo-partition" rmat:12:8:5 --parts 2 -q -o "$target" >"$work/disk.log" 2>&1
  status=$?
  if [ "$status" -eq 1 ] && grep -q "$(basename "$target").*\(space\|too large\)" "$work/disk.log"; then
    pass "$label: exit status $status: $(grep -m1 "halo-[a-z]*: error" "$work/disk.log" | cut -c1-220)"
  else
    fail "$label: status $status"; cat "$work/disk.log"
  fi
  if [ -z "$(ls -A "$(dirname "$target")")" ]; then
    pass "$label: nothing left in $(dirname "$target")"
  else
    fail "$label: left behind: $(ls -A "$(dirname "$target")")"
  fi
}
# RLIMIT_FSIZE: the limit holds for the shell function's processes only (a subshell).
# The tools ignore SIGXFSZ themselves (a write past the limit then fails with EFBIG).
fsize() { ( ulimit -f 24; "$@" ); }
mkdir -p "$work/fsize-data"
full_disk_infer "results on a file-size limit (ulimit -f)" "$work/fsize-out" 24
full_disk_partition "dataset on a file-size limit (ulimit -f)" "$work/fsize-data/g.h5" fsize
if [ "$(id -u)" -eq 0 ] && mkdir -p "$work/tmpfs" &&
   mount -t tmpfs -o size=96k tmpfs "$work/tmpfs" 2>/dev/null; then
  mnt=$work/tmpfs
  full_disk_infer "results on a full tmpfs" "$mnt/out"
  mkdir -p "$mnt/data"
  full_disk_partition "dataset on a full tmpfs" "$mnt/data/g.h5"
  # Full before the dataset is created: H5Fcreate itself fails, after making the file.
  mkdir -p "$mnt/data2"
  dd if=/dev/zero of="$mnt/fill" bs=4k 2>/dev/null
  full_disk_partition "dataset on a tmpfs full from the start" "$mnt/data2/g.h5"
  rm -f "$mnt/fill"
else
  echo "note: not root or no mount permission: the tmpfs (ENOSPC) cases are skipped"
fi

# 4. Two jobs, one --out: the second is refused while the first runs; the first completes.
if start_sleeping_job 1 shared-out; then
  job_pid_first=$job_pid
  start=$(date +%s)
  mpirun_n 2 "$bin/halo-infer" "$work/g2.h5" --random-model 16,16,4 --random-features --out "$job_out" \
    >"$work/second.log" 2>&1
  status=$?
  elapsed=$(( $(date +%s) - start ))
  if [ "$status" -ne 0 ] && [ "$elapsed" -le 30 ] &&
     grep -q "another halo-infer job is writing" "$work/second.log" &&
     ! grep -q "MPI_ABORT" "$work/second.log"; then
    pass "second job on the same --out refused after ${elapsed}s: $(grep -m1 error "$work/second.log")"
  else
    fail "second job on the same --out: status $status"; cat "$work/second.log"
  fi
  kill -9 "$sleeper_pid"
  wait "$job_pid_first"
  # A job that ends (even killed) releases the lock: a third one runs.
  if mpirun_n 2 "$bin/halo-infer" "$work/g2.h5" --random-model 16,16,4 --random-features --out "$job_out" -q &&
     "$bin/halo-inspect" "$job_out" >/dev/null; then
    pass "the lock is released when a job ends, even by kill -9"
  else
    fail "a job after the killed one could not write $job_out"
  fi
fi

# 5. The dataset replaced while the job runs: rank 1 sleeps 3 s before layer 1, meanwhile another
# dataset is renamed over the path (as halo-partition -o onto it would).
cp "$work/g2.h5" "$work/replaced.h5"
job_out=$work/replaced2
job_log=$work/replaced2.log
start=$(date +%s)
HALO_FAULT_INJECT="rank=1,layer=1,sleep=3" mpirun_n 2 -x HALO_FAULT_INJECT "$bin/halo-infer" \
  "$work/replaced.h5" --random-model 16,16,4 --random-features --out "$job_out" >"$job_log" 2>&1 &
job_pid=$!
if wait_for "$job_log" "sleeping 3 s"; then
  cp "$work/other2.h5" "$work/replaced.h5.new" && mv "$work/replaced.h5.new" "$work/replaced.h5"
fi
finish_job "dataset replaced during the run" "$start" "was replaced"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all fault checks passed"
