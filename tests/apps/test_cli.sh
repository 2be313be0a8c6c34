#!/usr/bin/env bash
# End-to-end checks of the command-line tools under mpiexec (ctest label mpi):
#   1. partition an R-MAT graph and Cora into 1, 2 and 3 parts; halo-inspect --check each;
#      the 3-part assignment saved with --save-owner and taken back with --owner (the part file,
#      or the dataset) gives the same shards;
#   2. halo-infer on 2 and 3 ranks equals 1 rank bit for bit (halo-inspect --compare --tolerance 0);
#   3. a rank count different from the dataset's parts fails with a clear message;
#   4. an injected fault on one rank makes the job exit non-zero within 30 s, with no manifest;
#   5. a stale manifest from an earlier run does not survive a failed run;
#   6. kernel metadata for maxk and fused3s is stored and listed; maxk, agnn, transformer and gat
#      layers on 2 ranks equal 1 rank bit for bit; --exchange int8 reports the bytes it saved;
#      --spmm aes:W runs on the cpu backend and a W outside 16..1024 is refused;
#   7. --partitioner ptscotch under mpiexec -n 1, 2 and 3: the joined dataset passes halo-inspect
#      --check, halo-infer on it equals halo-infer on the METIS dataset of the same graph bit for
#      bit (rows keep global column order, so the result does not depend on the partition); bad
#      input fails on every rank without a dataset;
#   7b. the same for --partitioner kaminpar and dkaminpar (1, 2 and 3 ranks); their bad inputs
#      (more parts than nodes, an empty graph, an unknown preset, rows+nnz) fail without a dataset,
#      and a rank without rows (2 nodes on 3 ranks) still gives a valid dataset;
#   8. a rank bound to one core of several is told how to launch (not with OMP_NUM_THREADS set);
#   9. sparse input features (--input-transform) equal the dense product bit for bit;
#  10. halo-bench --e2e --backend cpu (CUDA builds, no GPU needed): halo-infer's job on a one-part
#      dataset in a temporary directory, which is gone afterwards; per-layer medians and the
#      report header in its JSON; --layer names from the layer table.
# Usage: test_cli.sh BIN_DIR MPIEXEC [DATA_DIR]
set -uo pipefail
bin=$1
mpiexec=$2
data=${3:-}
source "$(dirname "${BASH_SOURCE[0]}")/harness.sh" cli

graphs=("rmat:11:8:5")
if [ -n "$data" ] && [ -f "$data/cora.el.gz" ]; then
  graphs+=("$data/cora.el.gz")
else
  echo "note: shared data not found; Cora steps skipped"
fi

for g in "${graphs[@]}"; do
  name=$(basename "$g" .el.gz | tr ':' '_')
  for p in 1 2 3; do
    if "$bin/halo-partition" "$g" --parts "$p" --symmetrize -q -o "$work/$name-$p.h5" \
         --save-owner "$work/$name.part.$p" >/dev/null &&
       "$bin/halo-inspect" "$work/$name-$p.h5" --check >"$work/inspect.log"; then
      pass "partition $name into $p parts and check it"
    else
      fail "partition $name into $p parts"; cat "$work/inspect.log"
    fi
  done
  # The part table (rows, nonzeros, interior, halo, send rows per part) of every way to the same
  # assignment (saved by the run that wrote $name-3.h5: the default partitioner, KaMinPar on
  # several threads, need not repeat its assignment).
  parts_table() { "$bin/halo-inspect" "$1" | grep -E '^ +[0-9]+ '; }
  for from in "$work/$name.part.3" "$work/$name-3.h5"; do
    if "$bin/halo-partition" "$g" --parts 3 --symmetrize -q -o "$work/$name-owner.h5" \
         --owner "$from" >/dev/null &&
       "$bin/halo-inspect" "$work/$name-owner.h5" --check >"$work/inspect.log" &&
       [ "$(parts_table "$work/$name-owner.h5")" = "$(parts_table "$work/$name-3.h5")" ] &&
       [ "$(wc -l <"$work/$name.part.3")" -gt 0 ]; then
      pass "$name: --owner $(basename "$from") gives the same 3 parts"
    else
      fail "$name: --owner $from"; cat "$work/inspect.log"
    fi
  done
  for layer in gcn sage gin; do
    for p in 1 2 3; do
      mpirun_n "$p" "$bin/halo-infer" "$work/$name-$p.h5" --random-model 24,16,5 --random-features --layer "$layer" \
        --seed 3 --out "$work/out-$name-$layer-$p" -q || fail "halo-infer $name $layer on $p ranks"
    done
    for p in 2 3; do
      if "$bin/halo-inspect" "$work/out-$name-$layer-$p" --compare "$work/out-$name-$layer-1" \
           --tolerance 0 >"$work/cmp.log"; then
        pass "$name $layer: $p ranks equal 1 rank bit for bit"
      else
        fail "$name $layer: $p ranks differ from 1 rank"; cat "$work/cmp.log"
      fi
    done
  done
done

# 3. Rank count mismatch.
out=$(mpirun_n 3 "$bin/halo-infer" "$work/rmat_11_8_5-2.h5" --random-model 8,4 --random-features --out "$work/bad" 2>&1)
status=$?
if [ $status -ne 0 ] && grep -q "has 2 parts but the job has 3 ranks" <<<"$out"; then
  pass "rank count mismatch rejected: $(grep -m1 'parts but' <<<"$out")"
else
  fail "rank count mismatch (status $status): $out"
fi

# 4. Injected fault on rank 1 before layer 1: the job must end, non-zero, within 30 s.
mkdir -p "$work/fault"
echo '{"stale": true}' >"$work/fault/manifest.json"
start=$(date +%s)
out=$(HALO_FAULT_INJECT=rank=1,layer=1 timeout 60 "$mpiexec" -n 2 --oversubscribe \
      --allow-run-as-root -x HALO_FAULT_INJECT "$bin/halo-infer" "$work/rmat_11_8_5-2.h5" \
      --random-model 8,8,4 --random-features --out "$work/fault" --overwrite 2>&1)
status=$?
elapsed=$(( $(date +%s) - start ))
if [ $status -ne 0 ] && [ $status -ne 124 ] && [ "$elapsed" -le 30 ] &&
   grep -q "injected fault" <<<"$out"; then
  pass "injected fault: exit status $status after ${elapsed}s"
else
  fail "injected fault: status $status after ${elapsed}s: $out"
fi
# 5. ... and neither a new manifest nor the stale one (removed by --overwrite) remains.
if [ ! -e "$work/fault/manifest.json" ]; then
  pass "no manifest after the failed run"
else
  fail "a manifest exists after the failed run"
fi

# 6. The layers and options of the MaxK, attention and AES issues.
km=$work/km
for p in 1 2; do
  "$bin/halo-partition" rmat:11:8:5 --parts $p --symmetrize -q -o "$km-$p.h5" \
    --kernel-metadata maxk,fused3s >/dev/null || fail "partition with --kernel-metadata ($p parts)"
done
if "$bin/halo-inspect" "$km-2.h5" --check >"$work/inspect.log" &&
   grep -q "part 1 kernel metadata: .*fused3s/adjacency.*fused3s/gcn.*maxk/gcn" "$work/inspect.log"; then
  pass "kernel metadata maxk and fused3s stored, listed and checked"
else
  fail "kernel metadata listing"; cat "$work/inspect.log"
fi
for layer in maxk agnn transformer gat; do
  for p in 1 2; do
    mpirun_n "$p" "$bin/halo-infer" "$km-$p.h5" --random-model 24,16,8 --random-features --layer "$layer" \
      --heads 2 --k 4 --seed 3 --out "$work/out-km-$layer-$p" -q ||
      fail "halo-infer $layer on $p ranks"
  done
  if "$bin/halo-inspect" "$work/out-km-$layer-2" --compare "$work/out-km-$layer-1" \
       --tolerance 0 >"$work/cmp.log"; then
    pass "$layer: 2 ranks equal 1 rank bit for bit"
  else
    fail "$layer: 2 ranks differ from 1 rank"; cat "$work/cmp.log"
  fi
done
out=$(mpirun_n 2 "$bin/halo-infer" "$km-2.h5" --random-model 24,16,8 --random-features --exchange int8 \
      --out "$work/out-int8" --report 2>&1)
if grep -Eq "halo exchange: .* saved\)" <<<"$out"; then
  pass "--exchange int8: $(grep -m1 'halo exchange:' <<<"$out")"
else
  fail "--exchange int8: $out"
fi
if mpirun_n 1 "$bin/halo-infer" "$km-1.h5" --random-model 24,16,8 --random-features --spmm aes:16 \
     --out "$work/out-aes" -q; then
  pass "--spmm aes:16 on the cpu backend"
else
  fail "--spmm aes:16 on the cpu backend"
fi
out=$(mpirun_n 1 "$bin/halo-infer" "$km-1.h5" --random-model 24,16,8 --random-features --spmm aes:9 \
      --out "$work/out-aes9" 2>&1)
if [ $? -ne 0 ] && grep -q "W = 9 outside \[16, 1024\]" <<<"$out"; then
  pass "--spmm aes:9 refused: $(grep -m1 "W = 9" <<<"$out")"
else
  fail "--spmm aes:9 accepted: $out"
fi

# Rows in reverse Cuthill-McKee order and in Rabbit order (--row-order rcm | rabbit): a valid
# dataset whose results equal the global order's bit for bit (a row's sum runs in global column
# order either way), on 1 to 3 ranks, for gcn, sage and gin.
for order in rcm rabbit; do
for p in 1 2 3; do
  ok=1
  "$bin/halo-partition" rmat:11:8:5 --parts "$p" --symmetrize --row-order "$order" -q \
    -o "$work/$order-$p.h5" >/dev/null &&
    "$bin/halo-inspect" "$work/$order-$p.h5" --check >"$work/inspect.log" &&
    grep -q "row order $order" "$work/inspect.log" || ok=0
  for layer in gcn sage gin; do
    [ "$ok" = 1 ] || break
    mpirun_n "$p" "$bin/halo-infer" "$work/$order-$p.h5" --random-model 24,16,5 --random-features --layer "$layer" \
      --seed 3 --out "$work/out-$order-$layer-$p" -q >"$work/order.log" 2>&1 &&
      "$bin/halo-inspect" "$work/out-$order-$layer-$p" --compare "$work/out-rmat_11_8_5-$layer-1" \
        --tolerance 0 >"$work/cmp.log" || ok=0
  done
  if [ "$ok" = 1 ]; then
    pass "--row-order $order on $p ranks: valid, gcn/sage/gin equal the global order bit for bit"
  else
    fail "--row-order $order on $p ranks"
    cat "$work/inspect.log" "$work/order.log" "$work/cmp.log" 2>/dev/null
  fi
done
done

# halo-inspect --gather-model: per part and width the X rows read, LRU's and MIN's misses (MIN
# never above LRU, both at least the distinct rows); a result directory is refused.
ok=1
"$bin/halo-inspect" "$work/rabbit-2.h5" --gather-model 16,64 --cache-mib 0.05 \
  >"$work/gather.log" 2>&1 || ok=0
rows=$(awk '$1 ~ /^[01]$/ && NF == 9 && $2 ~ /^(16|64)$/' "$work/gather.log")
[ "$(wc -l <<<"$rows")" = 4 ] || ok=0
while read -r part d cap reads distinct lru min gb ratio; do
  { [ "$min" -le "$lru" ] && [ "$min" -ge "$distinct" ] && [ "$reads" -ge "$lru" ]; } || ok=0
done <<<"$rows"
if "$bin/halo-inspect" "$work/out-rabbit-gcn-2" --gather-model 16 >/dev/null 2>&1; then ok=0; fi
if [ "$ok" = 1 ]; then
  pass "halo-inspect --gather-model: LRU and MIN misses per part and width"
else
  fail "halo-inspect --gather-model"
  cat "$work/gather.log"
fi

# Out of core (row blocks under --device-memory-limit) equals in memory bit for bit on
# 1, 2 and 3 ranks; the manifest holds the device memory by component; a limit too small for one
# row names the smallest that works.
for p in 1 2 3; do
  if mpirun_n "$p" "$bin/halo-infer" "$work/rmat_11_8_5-$p.h5" --random-model 24,16,5 --random-features \
       --layer gcn --seed 3 --out "$work/out-ooc-$p" --out-of-core --device-memory-limit 256KiB --report \
       >"$work/ooc.log" 2>&1 &&
     grep -q "out of core, .* aggregation blocks" "$work/ooc.log" &&
     grep -q '"device_memory"' "$work/out-ooc-$p/manifest.json" &&
     "$bin/halo-inspect" "$work/out-ooc-$p" --compare "$work/out-rmat_11_8_5-gcn-1" \
       --tolerance 0 >"$work/cmp.log"; then
    pass "out of core (256KiB) on $p ranks equals in memory on 1 rank bit for bit"
  else
    fail "out of core on $p ranks"; cat "$work/ooc.log" "$work/cmp.log"
  fi
done
# The manifest names the slowest rank of each layer's total and compute time (max_rank: the
# lowest rank whose time is the maximum; 4 entries for 2 layers, each a rank of the job).
ranks=$(tr -d ' \n' <"$work/out-ooc-3/manifest.json" | grep -o '"max_rank":-\{0,1\}[0-9]*' |
        cut -d: -f2)
if [ "$(wc -l <<<"$ranks")" -eq 4 ] && ! grep -qvE '^[012]$' <<<"$ranks"; then
  pass "the manifest names each layer's slowest of 3 ranks: $(tr '\n' ' ' <<<"$ranks")"
else
  fail "max_rank in the 3-rank manifest: '$(tr '\n' ' ' <<<"$ranks")'"
fi
out=$(mpirun_n 1 "$bin/halo-infer" "$work/rmat_11_8_5-1.h5" --random-model 24,16,5 --random-features \
      --out "$work/ooc-tiny" --out-of-core --device-memory-limit 1KiB 2>&1)
if [ $? -ne 0 ] && grep -q "1.00 KiB (1024 bytes) is too small.*smallest limit that works" <<<"$out"; then
  pass "--device-memory-limit 1KiB refused: $(grep -m1 -o 'the smallest limit .*' <<<"$out")"
else
  fail "--device-memory-limit 1KiB: $out"
fi
# 7. PT-Scotch under mpiexec.
for r in 1 2 3; do
  if mpirun_n "$r" "$bin/halo-partition" rmat:11:8:5 --parts 3 --symmetrize --partitioner ptscotch \
       -q -o "$work/pts-$r.h5" --report "$work/pts-$r.json" >"$work/pts.log" 2>&1 &&
     "$bin/halo-inspect" "$work/pts-$r.h5" --check >"$work/inspect.log" 2>&1; then
    pass "ptscotch on $r rank(s): 3 parts, halo-inspect --check"
  else
    fail "ptscotch on $r rank(s)"; cat "$work/pts.log" "$work/inspect.log"
  fi
  mpirun_n 3 "$bin/halo-infer" "$work/pts-$r.h5" --random-model 24,16,5 --random-features --layer gcn --seed 3 \
    --out "$work/out-pts-$r" -q || fail "halo-infer on the ptscotch dataset of $r rank(s)"
  if "$bin/halo-inspect" "$work/out-pts-$r" --compare "$work/out-rmat_11_8_5-gcn-1" \
       --tolerance 0 >"$work/cmp.log"; then
    pass "halo-infer on the ptscotch dataset ($r rank(s)) equals the METIS one bit for bit"
  else
    fail "ptscotch dataset ($r rank(s)) gives another result"; cat "$work/cmp.log"
  fi
done
out=$(mpirun_n 2 "$bin/halo-partition" "$work/missing.el" --parts 2 --partitioner ptscotch \
      -o "$work/pts-missing.h5" 2>&1)
if [ $? -ne 0 ] && [ ! -e "$work/pts-missing.h5" ] && grep -q "missing.el" <<<"$out"; then
  pass "ptscotch on a missing input fails on every rank and writes nothing"
else
  fail "ptscotch on a missing input: $out"
fi
out=$(mpirun_n 2 "$bin/halo-partition" rmat:11:8:5 --parts 5000 --partitioner ptscotch \
      -o "$work/pts-many.h5" 2>&1)
if [ $? -ne 0 ] && grep -q "cannot split 2048 nodes into 5000 parts" <<<"$out"; then
  pass "ptscotch refuses more parts than nodes: $(grep -m1 "cannot split" <<<"$out")"
else
  fail "ptscotch with 5000 parts: $out"
fi
# 7b. KaMinPar in-process and dKaMinPar under mpiexec -n 1, 2 and 3: valid datasets whose
# inference equals the METIS one bit for bit; bad input fails without leaving a dataset. A build
# without KaMinPar must say so.
no_dataset() { ! ls "$1"* >/dev/null 2>&1; }  # neither the dataset nor a part file of it
out=$("$bin/halo-partition" rmat:11:8:5 --parts 3 --symmetrize --partitioner kaminpar \
      -o "$work/km.h5" --report "$work/km.json" 2>&1)
if [ $? -ne 0 ] && grep -q "HALO_WITH_KAMINPAR=OFF" <<<"$out"; then
  no_dataset "$work/km.h5" && pass "kaminpar in a build without it: $(grep -m1 -o 'not in this build.*' <<<"$out")" ||
    fail "kaminpar without KaMinPar left a dataset"
else
  kaminpar_runs=("kaminpar 1 $work/km.h5")
  for r in 1 2 3; do
    if mpirun_n "$r" "$bin/halo-partition" rmat:11:8:5 --parts 3 --symmetrize \
         --partitioner dkaminpar --threads 1 -q -o "$work/dkm-$r.h5" --report "$work/dkm-$r.json" \
         >"$work/dkm.log" 2>&1; then
      kaminpar_runs+=("dkaminpar $r $work/dkm-$r.h5")
    else
      fail "dkaminpar on $r rank(s)"; cat "$work/dkm.log"
    fi
  done
  for run in "${kaminpar_runs[@]}"; do
    read -r method r file <<<"$run"
    if "$bin/halo-inspect" "$file" --check >"$work/inspect.log" 2>&1 &&
       mpirun_n 3 "$bin/halo-infer" "$file" --random-model 24,16,5 --random-features --layer gcn --seed 3 \
         --out "$work/out-$method-$r" -q &&
       "$bin/halo-inspect" "$work/out-$method-$r" --compare "$work/out-rmat_11_8_5-gcn-1" \
         --tolerance 0 >"$work/cmp.log"; then
      pass "$method ($r rank(s)): 3 valid parts, halo-infer on 3 ranks equals 1 rank bit for bit"
    else
      fail "$method ($r rank(s))"; cat "$work/inspect.log" "$work/cmp.log"
    fi
  done
  if grep -q '"partitioner": "dkaminpar"' "$work/dkm-2.json" &&
     grep -q '"edge_cut"' "$work/dkm-2.json" && grep -q '"kaminpar_preset": "default"' "$work/km.json"; then
    pass "--report names the partitioner, its preset and the cut"
  else
    fail "--report of kaminpar / dkaminpar"; cat "$work/km.json" "$work/dkm-2.json"
  fi
  if [ -n "$data" ] && [ -f "$data/cora.el.gz" ]; then
    for r in 2 3; do
      if mpirun_n "$r" "$bin/halo-partition" "$data/cora.el.gz" --parts "$r" --symmetrize \
           --partitioner dkaminpar --threads 1 -q -o "$work/cora-dkm-$r.h5" >"$work/dkm.log" 2>&1 &&
         "$bin/halo-inspect" "$work/cora-dkm-$r.h5" --check >"$work/inspect.log" 2>&1 &&
         mpirun_n "$r" "$bin/halo-infer" "$work/cora-dkm-$r.h5" --random-model 24,16,5 --random-features \
           --layer sage --seed 3 --out "$work/out-cora-dkm-$r" -q &&
         "$bin/halo-inspect" "$work/out-cora-dkm-$r" --compare "$work/out-cora-sage-1" \
           --tolerance 0 >"$work/cmp.log"; then
        pass "cora: dkaminpar on $r ranks into $r parts, halo-infer equals 1 rank bit for bit"
      else
        fail "cora dkaminpar on $r ranks"; cat "$work/dkm.log" "$work/inspect.log" "$work/cmp.log"
      fi
    done
  fi
  printf '# no edges\n' >"$work/empty.el"
  printf '0 1\n' >"$work/two.el"
  bad_kaminpar() {  # label, expected message (regex), ranks (0: no mpirun), partitioner, args...
    local label=$1 want=$2 ranks=$3 method=$4 out
    shift 4
    if [ "$ranks" = 0 ]; then
      out=$("$bin/halo-partition" "$@" --partitioner "$method" -o "$work/bad.h5" 2>&1)
    else
      out=$(mpirun_n "$ranks" "$bin/halo-partition" "$@" --partitioner "$method" \
            -o "$work/bad.h5" 2>&1)
    fi
    if [ $? -ne 0 ] && no_dataset "$work/bad.h5" && grep -qE "$want" <<<"$out"; then
      pass "$method: $label: $(grep -m1 -oE "$want.*" <<<"$out" | cut -c1-110)"
    else
      fail "$method: $label (no error, a dataset left, or no '$want'): $out"
    fi
    rm -f "$work/bad.h5"*
  }
  bad_kaminpar "more parts than nodes" "cannot split 2048 nodes into 5000 parts" 0 kaminpar \
    rmat:11:8:5 --parts 5000
  bad_kaminpar "more parts than nodes" "cannot split 2048 nodes into 5000 parts" 2 dkaminpar \
    rmat:11:8:5 --parts 5000
  bad_kaminpar "an empty graph" "empty.el: no edges" 0 kaminpar \
    "$work/empty.el" --parts 2
  bad_kaminpar "an empty graph" "cannot split 0 nodes into 2 parts" 2 dkaminpar \
    "$work/empty.el" --parts 2
  # A rank without a line of the file and without a row (2 nodes on 3 ranks) is no error: dKaMinPar
  # takes an empty block, and the dataset is whole.
  if mpirun_n 3 "$bin/halo-partition" "$work/two.el" --parts 2 --partitioner dkaminpar -q \
       -o "$work/two.h5" >"$work/dkm.log" 2>&1 &&
     "$bin/halo-inspect" "$work/two.h5" --check >"$work/inspect.log" 2>&1; then
    pass "dkaminpar: 2 nodes on 3 ranks (a rank without rows): a valid 2-part dataset"
  else
    fail "dkaminpar with a rank without rows"; cat "$work/dkm.log" "$work/inspect.log"
  fi
  bad_kaminpar "an unknown preset" "unknown KaMinPar preset 'nope'" 0 kaminpar \
    rmat:11:8:5 --parts 2 --kaminpar-preset nope
  bad_kaminpar "two balance constraints" "rows\+nnz is a METIS option \(two constraints" 0 \
    kaminpar rmat:11:8:5 --parts 2 --balance rows+nnz
fi
out=$("$bin/halo-partition" rmat:11:8:5 --parts 2 --partitioner metis --symmetrize \
      -o "$work/m.h5" 2>&1)
[ $? -eq 0 ] && pass "metis still runs without mpirun" || fail "metis without mpirun: $out"

# 8. A rank bound to one core of several (and OMP_NUM_THREADS unset) is told how to launch; with
#    OMP_NUM_THREADS set, or all cores allowed, nothing is said.
# The first CPU this process may use (a container may not allow CPU 0).
cpu=$(taskset -pc $$ 2>/dev/null | sed 's/.*: *//' | cut -d, -f1 | cut -d- -f1)
if command -v taskset >/dev/null && [ -n "$cpu" ] && [ "$(nproc --all)" -ge 2 ]; then
  ds=$work/rmat_11_8_5-1.h5
  out=$(env -u OMP_NUM_THREADS taskset -c "$cpu" "$mpiexec" -n 1 --bind-to none --allow-run-as-root \
        "$bin/halo-infer" "$ds" --random-model 24,16,5 --random-features --out "$work/out-bound" 2>&1)
  if grep -q "note: this rank may use 1 of the node's .* --bind-to none" <<<"$out"; then
    pass "a rank bound to one core is told: $(grep -m1 -o 'may use 1 of the node.s [0-9]* cores' <<<"$out")"
  else
    fail "no binding note for a rank bound to one core: $(head -5 <<<"$out")"
  fi
  out=$(taskset -c "$cpu" "$mpiexec" -n 1 --bind-to none --allow-run-as-root "$bin/halo-infer" "$ds" \
        --random-model 24,16,5 --random-features --out "$work/out-bound2" 2>&1)
  if grep -q "may use 1 of the node" <<<"$out"; then
    fail "binding note despite OMP_NUM_THREADS=$OMP_NUM_THREADS"
  else
    pass "no binding note with OMP_NUM_THREADS set"
  fi
else
  echo "note: taskset missing or one usable core: binding note not checked"
fi

# 9. Sparse input features (Cora's bag-of-words rows): --input-transform sparse on 2 ranks equals
#    dense on 1 rank bit for bit, auto takes the SpMM (1.27% nonzeros) and says so in the manifest;
#    random inputs keep the GEMM.
if [ -n "$data" ] && [ -f "$data/cora.feat.coo.txt.gz" ]; then
  for p in 1 2; do
    "$bin/halo-partition" "$data/cora.el.gz" --parts "$p" --symmetrize \
      --features "$data/cora.feat.coo.txt.gz" -q -o "$work/cora-feat-$p.h5" >/dev/null ||
      fail "partition Cora with features into $p parts"
  done
  for layer in transformer sage; do
    mpirun_n 1 "$bin/halo-infer" "$work/cora-feat-1.h5" --random-model 1433,16,7 --layer "$layer" \
      --input-transform dense --out "$work/out-dense-$layer" -q >"$work/infer.log" 2>&1 ||
      fail "$layer dense input: $(tail -2 "$work/infer.log")"
    for mode in sparse auto; do
      if mpirun_n 2 "$bin/halo-infer" "$work/cora-feat-2.h5" --random-model 1433,16,7 \
           --layer "$layer" --input-transform "$mode" --out "$work/out-$mode-$layer" -q \
           >"$work/infer.log" 2>&1 &&
         "$bin/halo-inspect" "$work/out-$mode-$layer" --compare "$work/out-dense-$layer" \
           --tolerance 0 >"$work/compare.log" 2>&1 &&
         grep -q '"note": "input features: [0-9]* nonzeros of .*first-layer transforms as SpMM' \
           "$work/out-$mode-$layer/manifest.json"; then
        pass "$layer: --input-transform $mode on 2 ranks equals the dense product on 1 bit for bit"
      else
        fail "$layer --input-transform $mode: $(tail -2 "$work/infer.log") $(tail -1 "$work/compare.log")"
      fi
    done
  done
  mpirun_n 1 "$bin/halo-infer" "$work/cora-feat-1.h5" --random-model 1433,16,7 --out "$work/out-auto-gcn" \
    -q >/dev/null 2>&1
  if grep -q '"note": "input features: 49216 nonzeros of 2708 x 1433 (1.27%)' \
       "$work/out-auto-gcn/manifest.json"; then
    pass "--input-transform auto (the default) takes Cora's 49216 nonzeros"
  else
    fail "Cora's default input transform: $(grep -A2 input_transform "$work/out-auto-gcn/manifest.json")"
  fi
else
  echo "note: shared Cora features not found; sparse input steps skipped"
fi

# 10. halo-bench --e2e on the CPU backend.
if [ -x "$bin/halo-bench" ]; then
  mkdir -p "$work/e2e-tmp"
  if out=$(TMPDIR="$work/e2e-tmp" "$bin/halo-bench" --graph rmat:9:8:3 --e2e --backend cpu \
             --layer sage --model-dims 16,32,8 --warmup 1 --runs 3 --step-timing \
             --json "$work/e2e.json" 2>&1) &&
     [ -z "$(ls -A "$work/e2e-tmp" | grep halo-bench-e2e)" ] &&
     python3 - "$work/e2e.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tool"] == "halo-bench --e2e" and d["backend"] == "cpu", d
# The header every halo-bench mode writes (apps/bench_report.hpp): no device opened on the CPU.
assert d["device"] == {"name": "cpu"} and d["copy_bandwidth"] is None, d
assert d["git_commit"] and d["date"] and "--e2e" in d["command"], d
assert d["graph"]["source"] == "rmat:9:8:3" and d["graph"]["rows"] == 512, d["graph"]
assert d["settings"]["runs"] == 3 and d["settings"]["warmup"] == 1, d["settings"]
assert d["replayed"] is False and d["step_timing"] is True, d
assert [(l["in_dim"], l["out_dim"]) for l in d["layers"]] == [(16, 32), (32, 8)], d["layers"]
for l in d["layers"]:
    assert l["total_ms"] > 0 and l["spmm_ms"] > 0 and l["dense_ms"] > 0, l
    assert l["spmm_ms"] + l["dense_ms"] <= l["total_ms"] * 1.05, l
assert d["forward_ms"]["median"] > 0, d["forward_ms"]
PY
  then
    pass "halo-bench --e2e --backend cpu: $(grep -m1 '^forward' <<<"$out")"
  else
    fail "halo-bench --e2e --backend cpu: $(tail -5 <<<"$out"); left in TMPDIR: $(ls -A "$work/e2e-tmp" | grep halo-bench-e2e)"
  fi
  # --layer takes its names from the layer table: gat (no hand-kept list had it) runs; an
  # unknown name is refused, naming the table's types.
  if "$bin/halo-bench" --graph rmat:9:8:3 --e2e --backend cpu --layer gat --model-dims 16,8 \
       --warmup 0 --runs 1 >"$work/e2e-gat.log" 2>&1; then
    pass "halo-bench --e2e --layer gat"
  else
    fail "halo-bench --e2e --layer gat: $(tail -3 "$work/e2e-gat.log")"
  fi
  out=$("$bin/halo-bench" --graph rmat:9:8:3 --e2e --backend cpu --layer nosuch 2>&1)
  if [ $? -ne 0 ] && grep -q -- "--layer: nosuch not in {gcn,sage,gin,.*gat}" <<<"$out"; then
    pass "halo-bench --e2e --layer nosuch refused"
  else
    fail "halo-bench --e2e --layer nosuch: $out"
  fi
else
  echo "note: no halo-bench in $bin (a build without CUDA): --e2e step skipped"
fi

if [ $failures -eq 0 ]; then
  echo "all CLI checks passed"
  exit 0
fi
echo "$failures CLI check(s) failed"
exit 1
