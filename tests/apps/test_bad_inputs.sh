#!/usr/bin/env bash
# Bad inputs across every command-line tool (ctest label mpi; the table of docs/RELIABILITY.md).
# Each case must exit non-zero with a one-line error that names the file, rank or value at fault
# (the regular expression given), without Open MPI's MPI_ABORT text for option errors (found
# before the job starts), and leave nothing behind: no dataset at -o, no temporary file beside
# it, no manifest in --out, no lock and no empty --out directory. Prints "ok   - <case>: <the error line>" for each.
# Usage: test_bad_inputs.sh BIN_DIR MPIEXEC
set -uo pipefail
bin=$(cd "$1" && pwd)
mpiexec=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/halo-bad-XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
cases=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; failures=$((failures + 1)); }
export OMP_NUM_THREADS=1
# numpy and h5py: python3, else the system one (a pyenv python3 may lack them).
py=python3
"$py" -c "import numpy, h5py" 2>/dev/null || py=/usr/bin/python3
mpi=("$mpiexec" --oversubscribe --allow-run-as-root)

# bad LABEL REGEX [--option-error] -- COMMAND...: runs COMMAND in an empty directory $work/run
# whose content afterwards must be empty (outputs go there), checks status and message.
bad() {
  local label=$1 regex=$2
  shift 2
  local option_error=0
  if [ "$1" = "--option-error" ]; then option_error=1; shift; fi
  [ "$1" = "--" ] && shift
  cases=$((cases + 1))
  rm -rf "$work/run"
  mkdir -p "$work/run"
  local out status
  out=$(cd "$work/run" && timeout 60 "$@" 2>&1)
  status=$?
  local line
  line=$(grep -m1 -E "error|Error|ERROR|required|not |must|expected" <<<"$out" | cut -c1-300)
  if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
    fail "$label: exit status $status"; echo "$out" | tail -5
  elif ! grep -Eq "$regex" <<<"$out"; then
    fail "$label: message does not match /$regex/:"; echo "$out" | tail -5
  elif [ "$option_error" -eq 1 ] && grep -q "MPI_ABORT" <<<"$out"; then
    fail "$label: an option error ended in MPI_ABORT"; echo "$out" | tail -5
  elif [ "$option_error" -eq 1 ] && [ "$(grep -c "error" <<<"$out")" -gt 1 ]; then
    fail "$label: the option error was printed more than once"; echo "$out"
  elif [ -n "$(find "$work/run" -mindepth 1 2>/dev/null)" ]; then
    fail "$label: left behind: $(find "$work/run" -mindepth 1)"
  else
    pass "$label: ${line:-$(head -n1 <<<"$out")}"
  fi
}

# ---- inputs --------------------------------------------------------------------------------------
d=$work/in
mkdir -p "$d"
"$bin/halo-partition" rmat:10:8:5 --parts 2 -q -o "$d/g2.h5" >/dev/null &&
  "$bin/halo-partition" rmat:10:8:5 --parts 3 -q -o "$d/g3.h5" >/dev/null ||
  { echo "FAIL - cannot partition the test graph"; exit 1; }
printf '0 1\n1 2\n2 0\n' >"$d/tri.el"
: >"$d/empty.el"
printf '0 1\nx 2\n' >"$d/token.el"
printf '0 1\n-1 2\n' >"$d/negative.el"
printf '0 1\n1 3000000000\n' >"$d/huge-id.el"
printf '0 1 1.5\n1 2\n' >"$d/ragged.el"
printf '0 1 nan\n' >"$d/nan-weight.el"
printf '\x1f\x8bgarbage that is not deflate' >"$d/corrupt.el.gz"
printf '0 1\n1 2\n' | gzip -c | head -c 12 >"$d/truncated.el.gz"
printf '%%%%MatrixMarket matrix array real general\n3 3\n' >"$d/banner.mtx"
printf '%%%%MatrixMarket matrix coordinate pattern general\n3 4 1\n1 2\n' >"$d/rect.mtx"
printf '%%%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 5\n' >"$d/range.mtx"
printf '%%%%MatrixMarket matrix coordinate pattern general\n3 3 4\n1 2\n2 3\n' >"$d/short.mtx"
printf '%%%%MatrixMarket matrix coordinate pattern general\n1000000000000 1000000000000 1\n1 1\n' \
  >"$d/trillion.mtx"
printf '%%%%MatrixMarket matrix coordinate pattern general\n0 0 0 0\n' >"$d/sizeline.mtx"
printf 'NOTACSR\0' >"$d/magic.hcsr"; head -c 60 /dev/zero >>"$d/magic.hcsr"
"$bin/halo-partition" "$d/tri.el" --parts 1 -q -o "$d/tri.h5" --save-csr "$d/tri.hcsr" >/dev/null
head -c 50 "$d/tri.hcsr" >"$d/truncated.hcsr"
cp "$d/tri.hcsr" "$d/flipped.hcsr"
printf '\x07' | dd of="$d/flipped.hcsr" bs=1 seek=50 conv=notrunc status=none
printf 'not numpy' >"$d/magic.npy"
"$py" - "$d" <<'PY' 2>/dev/null || echo "note: python3 numpy/h5py missing: .npy and HDF5 craft cases skipped"
import sys, numpy as np, h5py
d = sys.argv[1]
np.save(f"{d}/three_d.npy", np.zeros((3, 2, 2), np.float32))
np.save(f"{d}/rows.npy", np.zeros((5, 4), np.float32))
np.save(f"{d}/int.npy", np.zeros((3, 4), np.int32))
a = np.zeros((3, 4), np.float32); a[1, 2] = np.nan
np.save(f"{d}/nan.npy", a)
with open(f"{d}/rows.npy", "rb") as f:
    raw = f.read()
open(f"{d}/cut.npy", "wb").write(raw[:-8])
# A model whose first weight declares 2^24 x 2^24 float32 (1 PiB) and stores nothing.
with h5py.File(f"{d}/huge-model.h5", "w") as f:
    f.attrs["format"] = "halo-model"; f.attrs["version"] = np.int32(1)
    f.attrs["num_layers"] = np.int32(1); f.attrs["name"] = "huge"
    g = f.create_group("layers/0")
    g.attrs["type"] = "gcn"; g.attrs["activation"] = "none"
    g.attrs["in_dim"] = np.int64(1 << 24); g.attrs["out_dim"] = np.int64(1 << 24)
    g.create_dataset("weight", shape=(1 << 24, 1 << 24), dtype="<f4", chunks=(64, 64))
# A dataset whose part 0 declares 10^12 owned rows.
import shutil
shutil.copy(f"{d}/g2.h5", f"{d}/trillion.h5")
with h5py.File(f"{d}/trillion.h5", "r+") as f:
    p = f["parts/0"]
    p.attrs["num_owned"] = np.int64(10**12)
    del p["global_ids"]
    p.create_dataset("global_ids", shape=(10**12,), dtype="<i8", chunks=(1024,))
PY
printf '# 3 2 1\n0 0 1.0\n' >"$d/coo.txt"
printf '# 1000000000000 1000 1\n0 0 1.0\n' >"$d/coo-huge.txt"
printf '# 3 2 1\n0 5 1.0\n' >"$d/coo-range.txt"
printf '# 3 2 1\n0 0 inf\n' >"$d/coo-inf.txt"
printf '# 3 2 1\n2 1 70000\n' >"$d/coo-fp16.txt"
printf 'abcd' >"$d/raw.bin"
printf '0\n1\nx\n' >"$d/labels-token.txt"
printf '0\n1\n' >"$d/labels-short.txt"
printf '0\n5000\n' >"$d/nodes-range.txt"
printf 'not hdf5\n' >"$d/text.h5"
head -c 4000 "$d/g2.h5" >"$d/truncated.h5"
mkdir -p "$d/nomanifest"
"${mpi[@]}" -n 2 "$bin/halo-infer" "$d/g2.h5" --random-model 8,4 --random-features --out "$d/res" -q
mkdir -p "$d/badjson" && cp "$d/res"/part-*.h5 "$d/badjson/" && echo '{"format":' >"$d/badjson/manifest.json"
mkdir -p "$d/badparts" && cp "$d/res"/part-*.h5 "$d/badparts/" &&
  sed 's/"num_parts": *2/"num_parts":3/; s/"num_parts":2/"num_parts":3/' "$d/res/manifest.json" >"$d/badparts/manifest.json"
mkdir -p "$d/missingpiece" && cp "$d/res/manifest.json" "$d/res/part-0.h5" "$d/missingpiece/"
touch "$d/a-file"

P=("$bin/halo-partition")
I=("${mpi[@]}" -n 2 "$bin/halo-infer")
I3=("${mpi[@]}" -n 3 "$bin/halo-infer")
S=("$bin/halo-inspect")

# ---- halo-partition: graphs --------------------------------------------------------------------
bad "partition: missing graph file" "nope\.el" -- "${P[@]}" "$d/nope.el" --parts 2 -o g.h5
bad "partition: empty edge list" "empty\.el" -- "${P[@]}" "$d/empty.el" --parts 2 -o g.h5
bad "partition: non-integer node id" "token\.el:2.*'x'" -- "${P[@]}" "$d/token.el" --parts 2 -o g.h5
bad "partition: negative node id" "negative\.el:2" -- "${P[@]}" "$d/negative.el" --parts 2 -o g.h5
bad "partition: node id beyond int32" "huge-id\.el|3000000000" -- "${P[@]}" "$d/huge-id.el" --parts 2 -o g.h5
bad "partition: ragged edge list columns" "ragged\.el:2" -- "${P[@]}" "$d/ragged.el" --parts 2 -o g.h5
bad "partition: NaN edge weight" "nan-weight\.el:1" -- "${P[@]}" "$d/nan-weight.el" --parts 1 -o g.h5
bad "partition: corrupt gzip" "corrupt\.el\.gz" -- "${P[@]}" "$d/corrupt.el.gz" --parts 2 -o g.h5
bad "partition: truncated gzip" "truncated\.el\.gz" -- "${P[@]}" "$d/truncated.el.gz" --parts 2 -o g.h5
bad "partition: Matrix Market array banner" "banner\.mtx" -- "${P[@]}" "$d/banner.mtx" --parts 1 -o g.h5
bad "partition: Matrix Market not square" "rect\.mtx:2.*not square" -- "${P[@]}" "$d/rect.mtx" --parts 1 -o g.h5
bad "partition: Matrix Market entry out of range" "range\.mtx:3" -- "${P[@]}" "$d/range.mtx" --parts 1 -o g.h5
bad "partition: Matrix Market fewer entries than declared" "short\.mtx" -- "${P[@]}" "$d/short.mtx" --parts 1 -o g.h5
bad "partition: Matrix Market 10^12 rows (size before allocation)" "trillion\.mtx:2.*(GiB|int32|2\^31)" -- "${P[@]}" "$d/trillion.mtx" --parts 1 -o g.h5
bad "partition: Matrix Market size line of 4 fields" "sizeline\.mtx:2" -- "${P[@]}" "$d/sizeline.mtx" --parts 1 -o g.h5
bad "partition: binary CSR bad magic" "magic\.hcsr" -- "${P[@]}" "$d/magic.hcsr" --parts 1 -o g.h5
bad "partition: binary CSR truncated" "truncated\.hcsr.*truncated" -- "${P[@]}" "$d/truncated.hcsr" --parts 1 -o g.h5
bad "partition: binary CSR checksum mismatch" "flipped\.hcsr.*(checksum|CRC)" -- "${P[@]}" "$d/flipped.hcsr" --parts 1 -o g.h5
bad "partition: generator spec not a number" "rmat:abc" -- "${P[@]}" rmat:abc:8 --parts 2 -o g.h5
bad "partition: generator negative size" "er:-5" -- "${P[@]}" er:-5:3 --parts 2 -o g.h5
bad "partition: --num-nodes below an id" "tri\.el.*(2|node)" -- "${P[@]}" "$d/tri.el" --num-nodes 2 --parts 1 -o g.h5
# ---- halo-partition: options -----------------------------------------------------------------------
bad "partition: --parts 0" "parts.*0|0.*parts" -- "${P[@]}" "$d/tri.el" --parts 0 -o g.h5
bad "partition: more parts than nodes" "3 nodes|parts" -- "${P[@]}" "$d/tri.el" --parts 5 -o g.h5
bad "partition: unknown partitioner" "partitioner.*foo|foo" -- "${P[@]}" "$d/tri.el" --parts 1 --partitioner foo -o g.h5
bad "partition: unknown row order" "row-order.*spiral|spiral" --option-error -- "${P[@]}" "$d/tri.el" --parts 1 --row-order spiral -o g.h5
bad "partition: --row-order rcm with ptscotch" "row-order rcm.*ptscotch" -- "${P[@]}" "$d/tri.el" --parts 1 --partitioner ptscotch --row-order rcm -o g.h5
bad "partition: unknown quantization" "quantize.*int4|int4" -- "${P[@]}" "$d/tri.el" --parts 1 --quantize int4 -o g.h5
bad "partition: --quantize fp16 of a value past 65504" "coo-fp16\.txt.*70000.*node 2 \(column 1\).*fp16.*65504.*bf16" -- "${P[@]}" "$d/tri.el" --parts 1 --features "$d/coo-fp16.txt" --quantize fp16 -o g.h5
bad "partition: --quantize bf16 without features" "quantize bf16 needs --features" -- "${P[@]}" "$d/tri.el" --parts 1 --quantize bf16 -o g.h5
bad "partition: --symmetrize with --no-symmetrize" "symmetrize.*excludes|excludes" -- "${P[@]}" rmat:8:4 --symmetrize --no-symmetrize --parts 1 -o g.h5
bad "partition: unknown kernel metadata" "kernel-metadata|bogus" -- "${P[@]}" "$d/tri.el" --parts 1 --kernel-metadata bogus -o g.h5
bad "partition: output directory missing" "/nonexistent/dir/g\.h5" -- "${P[@]}" "$d/tri.el" --parts 1 -o /nonexistent/dir/g.h5
bad "partition: no -o" "output.*required|required" -- "${P[@]}" "$d/tri.el" --parts 1
bad "partition: imbalance below 1" "imbalance|0\.5" -- "${P[@]}" "$d/tri.el" --parts 1 --imbalance 0.5 -o g.h5
bad "partition: --balance rows+nnz with the block partitioner" "balance rows\+nnz is a METIS option" --option-error -- "${P[@]}" "$d/tri.el" --parts 2 --balance rows+nnz --partitioner block -o g.h5
# A command line that cannot describe a run exits 2 in every tool (not CLI11's 105 or 109).
for usage in "halo-partition $d/tri.el --parts 1 --no-such-option -o g.h5" \
             "halo-partition $d/tri.el --parts zero -o g.h5" \
             "halo-inspect $d/g2.h5 --no-such-option" "halo-inspect $d/g2.h5 --cache-mib -1"; do
  cases=$((cases + 1))
  out=$(cd "$work" && "$bin/${usage%% *}" ${usage#* } 2>&1)
  status=$?
  if [ "$status" -eq 2 ] && grep -q -- "--help lists the options" <<<"$out"; then
    pass "usage error exits 2: $usage"
  else
    fail "usage error: $usage: exit $status"; echo "$out" | tail -3
  fi
done
printf '0\n3\n1\n' >"$d/tri3.part"
printf '1\n1\n1\n' >"$d/tri-one.part"
bad "partition: --owner part id past --parts" "tri3\.part:2: part id '3' of node 1 is outside \[0, 2\)" -- "${P[@]}" "$d/tri.el" --parts 2 --owner "$d/tri3.part" -o g.h5
bad "partition: --owner leaves a part empty" "tri-one\.part: part 0 of 2 owns no node" -- "${P[@]}" "$d/tri.el" --parts 2 --owner "$d/tri-one.part" -o g.h5
bad "partition: --owner from another graph's dataset" "g2\.h5: the dataset has 1024 nodes, but the graph has 3" -- "${P[@]}" "$d/tri.el" --parts 2 --owner "$d/g2.h5" -o g.h5
bad "partition: --owner file missing (before the graph is built)" "owner: File does not exist: .*missing\.part" --option-error -- "${P[@]}" "$d/tri.el" --parts 2 --owner "$d/missing.part" -o g.h5
bad "partition: --owner with --partitioner ptscotch" "owner replaces the partitioner.*ptscotch" --option-error -- "${P[@]}" "$d/tri.el" --parts 2 --owner "$d/tri3.part" --partitioner ptscotch -o g.h5
# ---- halo-partition: node data -----------------------------------------------------------------
bad "partition: features bad .npy magic" "magic\.npy" -- "${P[@]}" "$d/tri.el" --parts 1 --features "$d/magic.npy" -o g.h5
if [ -f "$d/three_d.npy" ]; then
bad "partition: features 3-D .npy" "three_d\.npy.*3-D" -- "${P[@]}" "$d/tri.el" --parts 1 --features "$d/three_d.npy" -o g.h5
bad "partition: features rows differ from nodes" "rows\.npy.*5 feature rows.*3 nodes" -- "${P[@]}" "$d/tri.el" --parts 1 --features "$d/rows.npy" -o g.h5
bad "partition: features int32 .npy" "int\.npy.*dtype" -- "${P[@]}" "$d/tri.el" --parts 1 --features "$d/int.npy" -o g.h5
bad "partition: features NaN" "nan\.npy.*(row 1|NaN)" -- "${P[@]}" "$d/tri.el" --parts 1 --features "$d/nan.npy" -o g.h5
bad "partition: features truncated .npy" "cut\.npy.*truncated" -- "${P[@]}" "$d/tri.el" --parts 1 --features "$d/cut.npy" -o g.h5
fi
bad "partition: COO features 10^12 rows (size before allocation)" "coo-huge\.txt:1.*(GiB|too large)" -- "${P[@]}" "$d/tri.el" --parts 1 --features "$d/coo-huge.txt" -o g.h5
bad "partition: COO feature column out of range" "coo-range\.txt:2" -- "${P[@]}" "$d/tri.el" --parts 1 --features "$d/coo-range.txt" -o g.h5
bad "partition: COO feature value infinite" "coo-inf\.txt:2" -- "${P[@]}" "$d/tri.el" --parts 1 --features "$d/coo-inf.txt" -o g.h5
bad "partition: raw features without --feature-width" "raw\.bin.*width" -- "${P[@]}" "$d/tri.el" --parts 1 --features "$d/raw.bin" -o g.h5
bad "partition: unknown feature file type" "coo\.dat.*unknown feature file type" -- "${P[@]}" "$d/tri.el" --parts 1 --features "$d/coo.dat" -o g.h5
bad "partition: label not an integer" "labels-token\.txt:3" -- "${P[@]}" "$d/tri.el" --parts 1 --labels "$d/labels-token.txt" -o g.h5
bad "partition: fewer labels than nodes" "labels-short\.txt.*2.*3" -- "${P[@]}" "$d/tri.el" --parts 1 --labels "$d/labels-short.txt" -o g.h5

# ---- halo-partition under mpirun (ptscotch, dkaminpar): every rank exits with the status, one
# message, no MPI_ABORT banner, no dataset or part file left -----------------------------------------
# bad_ranks LABEL REGEX STATUS N [--keep PATH] [--env NAME=VALUE] -- ARGS...: mpirun -n N halo-partition ARGS in an
# empty $work/run, within 30 s; each rank prints its own exit status, which must be STATUS on all
# N (the wrapper then exits 0, and mpirun is told not to end the job once a rank exits non-zero:
# every rank must end by itself). --keep: a path the case made itself, which must still be there
# (and is all that may be). --env: a variable for every rank. Each rank's shell ignores SIGTERM,
# and so does the rank (an ignored signal stays ignored across exec): where one rank exits without
# MPI_Finalize (the failure watch's path) mpirun ends the others by a signal, and the test is that
# each has ended by itself before.
bad_ranks() {
  local label=$1 regex=$2 want=$3 n=$4
  shift 4
  local keep="" env=()
  if [ "$1" = "--keep" ]; then keep=$2; shift 2; fi
  if [ "$1" = "--env" ]; then env=(env "$2"); shift 2; fi
  [ "$1" = "--" ] && shift
  cases=$((cases + 1))
  local out status left
  local start=$SECONDS
  out=$(cd "$work/run" && timeout 120 "${mpi[@]}" -n "$n" --mca orte_abort_on_non_zero_status 0 \
    "${env[@]}" bash -c 'trap "" TERM; "$0" "$@"; echo "rank-exit $?"' "$bin/halo-partition" "$@" \
    2>&1)
  status=$?
  local elapsed=$((SECONDS - start))
  left=$(find "$work/run" -mindepth 1 -maxdepth 1 ! -path "$work/run/$keep" 2>/dev/null)
  local line
  line=$(grep -m1 "halo-partition: error" <<<"$out" | cut -c1-300)
  if [ "$status" -eq 124 ] || [ "$elapsed" -gt 30 ]; then
    fail "$label: not over within 30 s (mpirun status $status)"; echo "$out" | tail -5
  elif [ "$(grep -c "^rank-exit $want\$" <<<"$out")" -ne "$n" ]; then
    fail "$label: not every one of $n ranks exited $want:"; grep "^rank-exit" <<<"$out"
  elif ! grep -Eq "$regex" <<<"$out"; then
    fail "$label: message does not match /$regex/:"; echo "$out" | tail -5
  elif grep -Eq "MPI_ABORT was invoked|terminated by a signal|after MPI_FINALIZE" <<<"$out"; then
    fail "$label: ended by MPI_Abort or a signal:"; echo "$out" | tail -8
  elif [ "$(grep -c "halo-partition: error" <<<"$out")" -ne 1 ]; then
    fail "$label: the error was printed $(grep -c "halo-partition: error" <<<"$out") times:"
    echo "$out"
  elif [ -n "$left" ] || { [ -n "$keep" ] && [ ! -e "$work/run/$keep" ]; }; then
    fail "$label: left behind: $left"
  else
    pass "$label: $line"
  fi
  rm -rf "$work/run"
  mkdir -p "$work/run"
}
mkdir -p "$work/run"
bad_ranks "partition -n 2: ptscotch with --labels (usage)" "ptscotch does not take --features, --labels" 2 2 -- "$d/tri.el" --parts 2 --partitioner ptscotch --labels "$d/tri.el" -o g.h5
bad_ranks "partition -n 3: mistyped option (usage)" "not expected: --bogus" 2 3 -- "$d/tri.el" --parts 2 --partitioner ptscotch --bogus -o g.h5
bad_ranks "partition -n 2: ptscotch, input missing" "nope\.el: cannot open" 1 2 -- "$d/nope.el" --parts 2 --partitioner ptscotch -q -o g.h5
bad_ranks "partition -n 3: ptscotch, more parts than nodes" "cannot split 3 nodes into 5 parts" 1 3 -- "$d/tri.el" --parts 5 --partitioner ptscotch -q -o g.h5
bad_ranks "partition -n 2: ptscotch, node ids out of range in both slices" "^halo-partition: error: .*tri\.el \(slice [01] of 2\).*not below the node count 2" 1 2 -- "$d/tri.el" --parts 2 --partitioner ptscotch --num-nodes 2 -q -o g.h5
printf '0 1\n1 2\n2 0\n0 5\n' >"$d/last-bad.el"
bad_ranks "partition -n 2: ptscotch, node id out of range in rank 1's slice only" "^rank 1: halo-partition: error: .*last-bad\.el \(slice 1 of 2\).*not below the node count 3" 1 2 -- "$d/last-bad.el" --parts 2 --partitioner ptscotch --num-nodes 3 -q -o g.h5
if "$bin/halo-partition" --help | grep -q "auto (kaminpar in this build)"; then
bad_ranks "partition -n 3: dkaminpar, input missing" "nope\.el: cannot open" 1 3 -- "$d/nope.el" --parts 3 --partitioner dkaminpar -q -o g.h5
fi
# One rank fails while the others wrote their part files: rank 1's part file name is a directory.
mkdir -p "$work/run/g.h5.rank1-of-2/x"
bad_ranks "partition -n 2: rank 1 cannot write its part file (one rank's error)" "^rank 1: halo-partition: error: .*g\.h5\.rank1-of-2" 1 2 --keep g.h5.rank1-of-2 -- "$d/tri.el" --parts 2 --partitioner ptscotch -q -o g.h5
# A failure the other ranks cannot know of (after the write, before the next collective): the
# failure watch tells them; every rank removes what it wrote.
bad_ranks "partition -n 3: rank 1 fails alone after the write (failure watch)" "^rank 1: halo-partition: error: injected fault" 1 3 --env HALO_PARTITION_FAULT_INJECT=1 -- "$d/tri.el" --parts 3 --partitioner ptscotch -q -o g.h5
bad_ranks "partition -n 2: --report in a missing directory (after the dataset)" "rank 0: halo-partition: error: .*/nonexistent/r\.json" 1 2 -- "$d/tri.el" --parts 2 --partitioner ptscotch -q --report /nonexistent/r.json -o g.h5

# ---- halo-infer: options, found before the job starts (no MPI_ABORT, one message) -------------------
bad "infer: --layer maxk --exchange int8 on 3 ranks" "maxk" --option-error -- "${I3[@]}" "$d/g3.h5" --random-model 16,8 --random-features --layer maxk --exchange int8 --out out
bad "infer: --exchange nccl on the cpu backend" "exchange nccl needs --backend cuda" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --exchange nccl --out out
bad "infer: --nccl-register on, on the cpu backend" "nccl-register on needs the NCCL exchange" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --nccl-register on --out out
bad "infer: --nccl-register maybe" "nccl-register: maybe not in" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --nccl-register maybe --out out
bad "infer: --exchange-pieces 4, on the cpu backend" "exchange-pieces 4 needs the NCCL exchange" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --exchange-pieces 4 --out out
bad "infer: --exchange-pieces 0" "exchange-pieces: Value 0 not in range" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --exchange-pieces 0 --out out
bad "infer: --spmm cusparse on the cpu backend" "spmm cusparse needs --backend cuda" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --spmm cusparse --out out
bad "infer: --spmm aes:5 (width outside 16..1024)" "W = 5 outside" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --spmm aes:5 --out out
bad "infer: --spmm foo" "foo" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --spmm foo --out out
bad "infer: --save-tuning without autotune" "save-tuning needs --spmm autotune" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --save-tuning --out out
bad "infer: --int8-features with --exchange mpi-int8" "int8-features with --exchange mpi-int8" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --int8-features --exchange mpi-int8 --out out
bad "infer: --split-share 1.5" "split-share: Value 1.5 not in range" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --split-share 1.5 --out out
bad "infer: --split-share with the interior overlap" "split-share 0.5 needs the split overlap" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --split-share 0.5 --out out
bad "infer: --input-transform foo" "input-transform: foo not in" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --input-transform foo --out out
bad "infer: --cuda-graph on the cpu backend" "cuda-graph needs --backend cuda" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --cuda-graph --out out
bad "infer: --device on the cpu backend" "device needs --backend cuda" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --device 0 --out out
bad "infer: --pattern-operators on the cpu backend" "pattern-operators needs --backend cuda" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --pattern-operators --out out
bad "infer: --l2-hints on the cpu backend" "l2-hints needs --backend cuda" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --l2-hints --out out
bad "infer: --pattern-operators with --host-operator-values" "pattern-operators with --host-operator-values" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --backend cuda --pattern-operators --host-operator-values --out out
bad "infer: neither --model nor --random-model" "model or --random-model" --option-error -- "${I[@]}" "$d/g2.h5" --out out
bad "infer: --model with --random-model" "excludes" --option-error -- "${I[@]}" "$d/g2.h5" --model m.h5 --random-model 16,8 --random-features --out out
bad "infer: --stream-operator-pattern with --stream-operator-values" "excludes" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --stream-operator-pattern --stream-operator-values --out out
bad "inspect: --gather-model on a result directory" "gather-model works on datasets" -- "$bin/halo-inspect" "$d" --gather-model 16
bad "inspect: --gather-model 0" "gather-model" -- "$bin/halo-inspect" "$d/g2.h5" --gather-model 0
bad "inspect: --cache-mib 0" "cache-mib" -- "$bin/halo-inspect" "$d/g2.h5" --gather-model 16 --cache-mib 0
bad "infer: --random-model 16,x" "16,x|'x'" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,x --random-features --out out
bad "infer: --repeat 0" "repeat" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --repeat 0 --out out
bad "infer: --layer unknown" "layer.*resnet|resnet" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --layer resnet --out out
bad "infer: no --out" "out.*required|required" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features
# ---- halo-infer: data ------------------------------------------------------------------------------
bad "infer: dataset missing" "nope\.h5" --option-error -- "${I[@]}" "$d/nope.h5" --random-model 16,8 --random-features --out out
bad "infer: dataset not HDF5" "text\.h5" --option-error -- "${I[@]}" "$d/text.h5" --random-model 16,8 --random-features --out out
bad "infer: dataset truncated" "truncated\.h5" --option-error -- "${I[@]}" "$d/truncated.h5" --random-model 16,8 --random-features --out out
bad "infer: 2-part dataset on 3 ranks" "has 2 parts but the job has 3 ranks" --option-error -- "${I3[@]}" "$d/g2.h5" --random-model 16,8 --random-features --out out
bad "infer: model file missing" "nomodel\.h5" --option-error -- "${I[@]}" "$d/g2.h5" --model "$d/nomodel.h5" --out out
bad "infer: a dataset given as the model" "g2\.h5.*not a HaloGNN model" -- "${I[@]}" "$d/g2.h5" --model "$d/g2.h5" --out out
if [ -f "$d/huge-model.h5" ]; then
bad "infer: model weight declaring 2^24 x 2^24 (size before allocation)" "huge-model\.h5: /layers/0/weight.*declares" -- "${I[@]}" "$d/g2.h5" --model "$d/huge-model.h5" --out out
bad "infer: part declaring 10^12 rows (size before allocation)" "trillion\.h5.*(global_ids|num_owned)" -- "${I[@]}" "$d/trillion.h5" --random-model 16,8 --random-features --out out
fi
bad "infer: --eval-nodes file missing" "nodes-missing\.txt: no such file" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --eval-nodes "$d/nodes-missing.txt" --out out
bad "infer: --eval-nodes on a dataset without labels" "no labels" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --eval-nodes "$d/nodes-range.txt" --out out
bad "infer: --out is a file" "a-file" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --out "$d/a-file"
bad "infer: --out not writable" "/proc/halo-out" --option-error -- "${I[@]}" "$d/g2.h5" --random-model 16,8 --random-features --out /proc/halo-out
bad "infer: HALO_FAULT_INJECT malformed" "HALO_FAULT_INJECT='bogus'" --option-error -- env HALO_FAULT_INJECT=bogus "${mpi[@]}" -n 2 -x HALO_FAULT_INJECT "$bin/halo-infer" "$d/g2.h5" --random-model 16,8 --random-features --out out
# ---- halo-inspect ------------------------------------------------------------------------------------
bad "inspect: path missing" "nope\.h5" -- "${S[@]}" "$d/nope.h5"
bad "inspect: results without manifest" "nomanifest.*no manifest" -- "${S[@]}" "$d/nomanifest"
bad "inspect: manifest not JSON" "badjson/manifest\.json.*JSON" -- "${S[@]}" "$d/badjson"
bad "inspect: manifest num_parts disagrees with its pieces" "badparts" -- "${S[@]}" "$d/badparts"
bad "inspect: a piece named by the manifest missing" "missingpiece/part-1\.h5" -- "${S[@]}" "$d/missingpiece"
bad "inspect: --part beyond the dataset's parts" "part 7|7" -- "${S[@]}" "$d/g2.h5" --part 7
bad "inspect: --check of a truncated dataset" "truncated\.h5" -- "${S[@]}" "$d/truncated.h5" --check
bad "inspect: --compare with a missing directory" "nodir" -- "${S[@]}" "$d/res" --compare "$d/nodir"

# ---- halo-bench (CUDA builds): errors found before the device is opened, so a machine without a
# GPU reports them too, not "no CUDA device visible" ------------------------------------------------
if [ -x "$bin/halo-bench" ]; then
B=("$bin/halo-bench")
bad "bench: graph file missing" "nope\.el: cannot open" -- "${B[@]}" --graph "$d/nope.el" --dims 32
bad "bench: generator spec not a number" "rmat:abc" -- "${B[@]}" --graph rmat:abc:8
bad "bench: generator negative size" "er:-5" -- "${B[@]}" --graph er:-5:3
bad "bench: --dims 0" "width 0 outside" -- "${B[@]}" --graph rmat:8:4 --dims 0
bad "bench: unknown kernel" "unknown kernel 'foo'" -- "${B[@]}" --graph rmat:8:4 --kernels foo
bad "bench: unknown normalization" "normalize.*foo" -- "${B[@]}" --graph rmat:8:4 --normalize foo
bad "bench: negative --device" "device -1" -- "${B[@]}" --graph rmat:8:4 --device -1
bad "bench: --json in a missing directory" "/nonexistent/x\.json" -- "${B[@]}" --graph rmat:8:4 --json /nonexistent/x.json
bad "bench: --e2e --model-dims 16,x" "16,x" -- "${B[@]}" --graph rmat:8:4 --e2e --model-dims 16,x
bad "bench: --mergepath-costs -3" "cost -3" -- "${B[@]}" --graph rmat:8:4 --mergepath-costs -3
bad "bench: --rowchunk-lengths 0" "length 0 must be at least 1" -- "${B[@]}" --graph rmat:8:4 --rowchunk-lengths 0
bad "bench: no --graph" "graph is required" -- "${B[@]}" --dims 32
bad "bench maxk: k beyond the width" "k = 300 outside" -- "${B[@]}" maxk --graph rmat:8:4 --ks 300
bad "bench maxk: unknown group order" "unknown SSD group order 'bogus'" -- "${B[@]}" maxk --graph rmat:8:4 --orders rows,bogus
bad "bench attention: unsupported width" "d = 48" -- "${B[@]}" attention --graph rmat:8:4 --dims 48
bad "bench attention: graph file missing" "nope\.mtx" -- "${B[@]}" attention --graph "$d/nope.mtx"
bad "bench aes: sample width 5" "W = 5 outside" -- "${B[@]}" aes --graph rmat:8:4 --ws 5
bad "bench load: dataset missing" "nope\.h5" -- "${B[@]}" load --fp32 "$d/nope.h5" --int8 "$d/g2.h5"
else
  echo "note: no halo-bench in $bin (a build without CUDA): its cases skipped"
fi

echo "$cases cases, $failures failure(s)"
[ "$failures" -eq 0 ] || exit 1
