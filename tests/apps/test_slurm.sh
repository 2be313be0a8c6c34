#!/usr/bin/env bash
# The SLURM templates under a real Slurm (ctest label mpi; slurm/README.md): starts a one-node
# cluster on this machine (munged, slurmctld, slurmd as root, from Debian's slurm-wlm and munge,
# with their configuration, key, sockets, state and logs in a temporary directory), runs
#   1. slurm/partition.sbatch (rmat:11:8:5 into 2 parts) through sbatch --wait,
#   2. slurm/infer-1node.sbatch on 2 tasks, CPU backend (no GPU in the allocation), launched by
#      srun (PMIx) and by mpirun,
#   3. the same job requeued (scontrol requeue) while rank 1 waits before layer 3 of 3: the second
#      attempt passes --resume and goes on after layer 2,
# and checks each result against a direct mpirun of halo-infer bit for bit (on the dataset the
# template wrote and on one partitioned directly). Stops every daemon it started. Skipped (exit 77)
# with a message where the daemons are missing or cannot start (not root, no slurm-wlm).
# Usage: test_slurm.sh BIN_DIR MPIEXEC SOURCE_DIR
set -uo pipefail
bin=$(cd "$1" && pwd)
mpiexec=$2
src=$(cd "$3" && pwd)
skip() { echo "skipped: $1"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root (munged, slurmctld and slurmd run as root here)"
for tool in munged slurmctld slurmd sbatch squeue scontrol sinfo; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] ||
    skip "no $tool (Debian: apt-get install slurm-wlm munge; scripts/install-deps.sh does)"
done
export PATH=$PATH:/usr/sbin
work=$(mktemp -d "${TMPDIR:-/tmp}/halo-slurm-XXXXXX")
chmod 755 "$work"
failures=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; failures=$((failures + 1)); }
stop() {  # each daemon this test started, by its pid file
  local f pid
  for f in "$work/slurmd.pid" "$work/slurmctld.pid" "$work/munged.pid"; do
    pid=$(cat "$f" 2>/dev/null) || continue
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
}
trap 'stop; rm -rf "$work"' EXIT

# The cluster: one node (this host), one partition, ports of this test's own.
host=$(hostname -s)
port=$((20000 + $$ % 20000))
head -c 1024 /dev/urandom >"$work/munge.key" && chmod 400 "$work/munge.key"
mkdir -p "$work/state" "$work/spool"
cat >"$work/slurm.conf" <<EOF
ClusterName=halotest
SlurmctldHost=$host
SlurmUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$work/munge.sock
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=3
MpiDefault=none
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
export SLURM_CONF=$work/slurm.conf
munged --force --key-file="$work/munge.key" --socket="$work/munge.sock" \
  --pid-file="$work/munged.pid" --log-file="$work/munged.log" --seed-file="$work/munge.seed" ||
  skip "munged does not start: $(tail -n 2 "$work/munged.log" 2>/dev/null)"
slurmctld -f "$work/slurm.conf" || skip "slurmctld does not start: $(tail -n 2 "$work/slurmctld.log")"
slurmd -f "$work/slurm.conf" || skip "slurmd does not start: $(tail -n 2 "$work/slurmd.log")"
for _ in $(seq 1 100); do
  [ "$(sinfo -h -o %t 2>/dev/null)" = idle ] && break
  sleep 0.3
done
[ "$(sinfo -h -o %t 2>/dev/null)" = idle ] ||
  skip "the node does not come up: $(sinfo 2>&1 | tail -n 1); $(tail -n 2 "$work/slurmd.log")"
echo "note: a one-node Slurm $(sinfo -V 2>/dev/null) on $host, ports $port and $((port + 1))"
# srun launches the ranks through PMIx where Slurm has it, else the templates run mpirun.
launcher=srun
srun --mpi=list 2>&1 | grep -q pmix || launcher=mpirun
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1 HALO_BIN=$bin LAUNCHER=$launcher
cd "$work" || exit 1
mpirun_n() { local n=$1; shift; "$mpiexec" -n "$n" --oversubscribe --allow-run-as-root "$@"; }
same() { "$bin/halo-inspect" "$1" --compare "$2" --tolerance 0 >"$work/cmp.log" 2>&1; }

# 1. partition.sbatch.
if INPUT=rmat:11:8:5 PARTS=2 OUTPUT=$work/g2.h5 timeout 120 sbatch --wait --cpus-per-task="$(nproc)" \
     -o "$work/partition.out" --export=ALL "$src/slurm/partition.sbatch" >/dev/null &&
   grep -q "every invariant holds" "$work/partition.out"; then
  pass "partition.sbatch: $(grep -m1 'halo-partition' "$work/partition.out" | cut -c1-120)"
else
  fail "partition.sbatch"; cat "$work/partition.out" "$work/slurmctld.log" 2>/dev/null | tail -20
fi
"$bin/halo-partition" rmat:11:8:5 --parts 2 --symmetrize -q -o direct2.h5 >/dev/null
mpirun_n 2 "$bin/halo-infer" g2.h5 --random-model 16,16,16,4 --random-features --out direct-on-g2 -q
mpirun_n 2 "$bin/halo-infer" direct2.h5 --random-model 16,16,16,4 --random-features --out direct -q

# 2. infer-1node.sbatch on 2 tasks, no GPU: the CPU backend.
if DATASET=$work/g2.h5 RANDOM_MODEL=16:16:16:4 RANDOM_FEATURES=1 OUT=$work/res \
     timeout 120 sbatch --wait --ntasks-per-node=2 --cpus-per-task=1 -o "$work/infer.out" \
     --export=ALL "$src/slurm/infer-1node.sbatch" >/dev/null &&
   grep -q "2 ranks on 1 node(s), 0 GPU(s) per node, backend cpu" "$work/infer.out" &&
   same res direct-on-g2 && same res direct; then
  pass "infer-1node.sbatch ($launcher, 2 tasks, cpu) equals mpirun directly, bit for bit"
else
  fail "infer-1node.sbatch"; cat "$work/infer.out" "$work/cmp.log"
fi

# The other launcher of the templates, mpirun inside the allocation.
if [ "$launcher" = srun ] &&
   LAUNCHER=mpirun DATASET=$work/g2.h5 RANDOM_MODEL=16:16:16:4 RANDOM_FEATURES=1 OUT=$work/res-mpirun \
     timeout 120 sbatch --wait --ntasks-per-node=2 --cpus-per-task=1 -o "$work/infer-mpirun.out" \
     --export=ALL "$src/slurm/infer-1node.sbatch" >/dev/null &&
   same res-mpirun direct; then
  pass "infer-1node.sbatch with LAUNCHER=mpirun equals mpirun directly, bit for bit"
elif [ "$launcher" = srun ]; then
  fail "infer-1node.sbatch with LAUNCHER=mpirun"; cat "$work/infer-mpirun.out" "$work/cmp.log"
fi

# 3. Requeued while rank 1 waits before layer 3: the second attempt resumes after layer 2.
DATASET=$work/g2.h5 RANDOM_MODEL=16:16:16:4 RANDOM_FEATURES=1 OUT=$work/rq \
  HALO_FAULT_INJECT=rank=1,layer=2,sleep=6 timeout 240 sbatch --wait --ntasks-per-node=2 \
  --cpus-per-task=1 -o "$work/rq.out" --export=ALL "$src/slurm/infer-1node.sbatch" \
  >"$work/sbatch.log" 2>&1 &
waiter=$!
for _ in $(seq 1 300); do grep -q "sleeping 6 s" "$work/rq.out" 2>/dev/null && break; sleep 0.1; done
job=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' "$work/sbatch.log")
if [ -n "$job" ] && grep -q "sleeping 6 s" "$work/rq.out"; then
  scontrol requeue "$job"
  # A requeued job waits about two minutes before it may start again; let it start now.
  for _ in $(seq 1 120); do
    state=$(squeue -h -j "$job" -o %T 2>/dev/null)
    [ "$state" = PENDING ] && scontrol update JobId="$job" StartTime=now >/dev/null 2>&1
    grep -q "attempt 2" "$work/rq.out" && break
    sleep 0.5
  done
fi
wait "$waiter"
if grep -q "attempt 2" "$work/rq.out" && grep -q "resuming after layer 2 of 3" "$work/rq.out" &&
   same rq direct; then
  pass "requeued job $job resumed after layer 2 of 3 and equals mpirun directly, bit for bit"
else
  fail "requeued job '$job'"; cat "$work/sbatch.log" "$work/rq.out" "$work/cmp.log"
fi

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all Slurm checks passed"
