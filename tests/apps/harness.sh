# What the tool tests share (sourced; the caller has set `mpiexec`): a scratch directory removed
# on exit (`work`), pass/fail lines counted in `failures`, `mpirun_n N CMD...` (Open MPI as root
# and with more ranks than cores), and one OpenMP thread per rank.
# Usage: mpiexec=...; source "$(dirname "$0")/harness.sh" TAG
work=$(mktemp -d "${TMPDIR:-/tmp}/halo-$1-XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; failures=$((failures + 1)); }
mpirun_n() { local n=$1; shift; "$mpiexec" -n "$n" --oversubscribe --allow-run-as-root "$@"; }
export OMP_NUM_THREADS=1
