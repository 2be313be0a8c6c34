#!/usr/bin/env bash
# halo-inspect --export-logits / --compare-logits (the comparison behind scripts/pyg_agreement.sh)
# on a small R-MAT graph with random models, no Python needed:
#   1. a 1-rank result exported as .npy compares equal to itself and to the 2-rank result
#      (rows matched by global id), with accuracies of both from a labels file and a test index
#      (unlabelled nodes and repeated ids left out);
#   2. the .npy with one value changed by one unit in the last place: --tolerance 0 fails (status
#      3), --require-identical and --tolerance 1e-5 pass; the reported difference is that change;
#   3. logits of another model: --require-identical fails, naming the differing predictions and the
#      accuracies; --json records passed = false;
#   4. a reference of the wrong shape and a dataset path instead of a result are errors naming the
#      file.
# Usage: test_inspect_logits.sh BIN_DIR MPIEXEC
set -uo pipefail
bin=$1
mpiexec=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/halo-inspect-logits-XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; failures=$((failures + 1)); }
run_n() {
  local n=$1
  shift
  "$mpiexec" -n "$n" --oversubscribe --allow-run-as-root "$@" </dev/null
}
export OMP_NUM_THREADS=1

graph=rmat:9:8:7
nodes=512
for p in 1 2; do
  "$bin/halo-partition" "$graph" --parts "$p" -q -o "$work/g$p.h5" >/dev/null ||
    { fail "partition into $p parts"; exit 1; }
done
# Labels 0..3 with every seventh node unlabelled (-1); the test set is the upper half.
for ((i = 0; i < nodes; i++)); do
  if ((i % 7 == 3)); then echo -1; else echo $((i * 5 % 4)); fi
done >"$work/labels.txt"
seq $((nodes / 2)) $((nodes - 1)) >"$work/test.txt"
labelled=0
for ((i = nodes / 2; i < nodes; i++)); do ((i % 7 == 3)) || labelled=$((labelled + 1)); done
infer() {  # parts seed width out
  run_n "$1" "$bin/halo-infer" "$work/g$1.h5" --random-model "16,12,$3" --random-features --layer sage --seed "$2" \
    --out "$4" -q || fail "halo-infer on $1 rank(s), seed $2"
}
infer 1 3 4 "$work/a1"
infer 2 3 4 "$work/a2"
infer 1 4 4 "$work/b1"
infer 1 3 5 "$work/w1"
cmp_logits() {  # result reference [options...]
  "$bin/halo-inspect" "$1" --compare-logits "$2" --labels "$work/labels.txt" \
    --test-index "$work/test.txt" "${@:3}" >"$work/out.log" 2>&1
}

# 1. Export and compare equal.
# .npy: a header padded to a multiple of 64 bytes, then the float32 values.
header=-1
if "$bin/halo-inspect" "$work/a1" --export-logits "$work/a.npy" >"$work/out.log" 2>&1; then
  header=$(($(stat -c %s "$work/a.npy") - nodes * 4 * 4))
fi
if [ "$header" -gt 0 ] && [ $((header % 64)) -eq 0 ] &&
   head -c 6 "$work/a.npy" | grep -q NUMPY; then
  pass "--export-logits writes $nodes x 4 float32 after a $header-byte header"
else
  fail "--export-logits"; cat "$work/out.log"
fi
same_accuracy="accuracy on .*test.txt: ([0-9.]+) here \(([0-9]+) of $labelled\), \1 in the"
same_accuracy+=" reference \(\2 of $labelled\)"
for r in a1 a2; do
  if cmp_logits "$work/$r" "$work/a.npy" --require-identical --tolerance 0 &&
     grep -q "max |difference| 0.000e+00" "$work/out.log" &&
     grep -q "identical predictions 100.0000% ($nodes of $nodes)" "$work/out.log" &&
     grep -Eq "$same_accuracy" "$work/out.log"; then
    pass "$r equals its exported logits: $(grep -o 'accuracy on.*' "$work/out.log" | sed 's/.*: //')"
  else
    fail "$r against its exported logits"; cat "$work/out.log"
  fi
done

# Ids listed twice count once, as halo-infer --eval-nodes counts them.
cat "$work/test.txt" "$work/test.txt" >"$work/test-twice.txt"
if "$bin/halo-inspect" "$work/a1" --compare-logits "$work/a.npy" --labels "$work/labels.txt" \
     --test-index "$work/test-twice.txt" >"$work/out.log" 2>&1 &&
   grep -q "here ([0-9]* of $labelled)" "$work/out.log"; then
  pass "a test index listing every id twice evaluates $labelled nodes"
else
  fail "duplicate test ids"; cat "$work/out.log"
fi

# 2. One value one ulp off: flip the lowest bit of the low byte of element (5, 2).
cp "$work/a.npy" "$work/ulp.npy"
offset=$((header + (5 * 4 + 2) * 4))
byte=$(od -An -tu1 -j "$offset" -N1 "$work/ulp.npy" | tr -d ' ')
printf "\\x$(printf %02x $((byte ^ 1)))" |
  dd of="$work/ulp.npy" bs=1 seek="$offset" conv=notrunc status=none
cmp_logits "$work/a1" "$work/ulp.npy" --tolerance 0
status=$?
if [ $status -eq 3 ] && grep -q "at node 5 column 2" "$work/out.log" &&
   grep -q "exceeds --tolerance 0.000e+00" "$work/out.log"; then
  pass "one ulp off fails --tolerance 0 (status 3) at node 5 column 2"
else
  fail "one ulp off with --tolerance 0 (status $status)"; cat "$work/out.log"
fi
if cmp_logits "$work/a2" "$work/ulp.npy" --require-identical --tolerance 1e-5; then
  pass "one ulp off passes --require-identical --tolerance 1e-5"
else
  fail "one ulp off with --require-identical --tolerance 1e-5"; cat "$work/out.log"
fi

# 3. Another model's logits.
"$bin/halo-inspect" "$work/b1" --export-logits "$work/b.npy" >/dev/null 2>&1
cmp_logits "$work/a2" "$work/b.npy" --require-identical --json "$work/cmp.json"
status=$?
if [ $status -eq 3 ] && grep -Eq "predictions differ \(first at node [0-9]+\)" "$work/out.log" &&
   grep -q '"passed": false' "$work/cmp.json" &&
   grep -q '"reference_correct"' "$work/cmp.json"; then
  pass "another model fails --require-identical: $(grep -m1 'predictions differ' "$work/out.log")"
else
  fail "another model with --require-identical (status $status)"
  cat "$work/out.log" "$work/cmp.json"
fi
if cmp_logits "$work/a2" "$work/b.npy"; then
  pass "without checks the comparison only reports (status 0)"
else
  fail "comparison without checks returned non-zero"; cat "$work/out.log"
fi

# 4. Errors.
"$bin/halo-inspect" "$work/w1" --export-logits "$work/w.npy" >/dev/null 2>&1
if ! cmp_logits "$work/a1" "$work/w.npy" &&
   grep -q "w.npy: shape \[$nodes, 5\]" "$work/out.log"; then
  pass "wrong width rejected: $(grep -m1 'shape' "$work/out.log")"
else
  fail "wrong-width reference accepted"; cat "$work/out.log"
fi
if ! "$bin/halo-inspect" "$work/g1.h5" --compare-logits "$work/a.npy" >"$work/out.log" 2>&1 &&
   grep -q "g1.h5: not a result directory" "$work/out.log"; then
  pass "a dataset path with --compare-logits is rejected"
else
  fail "a dataset path with --compare-logits"; cat "$work/out.log"
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
