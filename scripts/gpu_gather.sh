#!/usr/bin/env bash
# On the GPU machine: the gather model against Nsight Compute (docs/NOTEBOOK.md "The
# gather-bound limit"): for each case below, `ncu` records the DRAM bytes each SpMM launch reads
# while halo-bench models them (MIN and LRU at the L2's size and at half of it), then
# bench/gather_check.py prints one table of both. Writes OUT/gather_check.md and OUT/ncu/.
# Usage: scripts/gpu_gather.sh BENCH DATA OUT
#   BENCH  the halo-bench binary; DATA  ../shared/data (uk-2007-05-100k, ego-Twitter, cit-HepPh)
# Environment: NCU (default ncu on PATH).
set -uo pipefail
bench=$1 data=$2 out=$3
ncu=${NCU:-ncu}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out/ncu"
l2=$(python3 -c "import torch; print(torch.cuda.get_device_properties(0).L2_cache_size / 2**20)" \
  2>/dev/null || echo 50)
half=$(python3 -c "print($l2 / 2)")
pairs=()
# case NAME halo-bench-args...: one profiled halo-bench run (one timed launch per kernel and width).
case_() {
  local name=$1
  shift
  if "$ncu" --clock-control none -k 'regex:mergepath|csrmm|rowsplit' \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct --csv \
      "$bench" "$@" --normalize gcn --runs 1 --warmup 0 --gather-cache-mib "$l2,$half" \
      --json "$out/ncu/$name.json" >"$out/ncu/$name.csv" 2>&1; then
    pairs+=("$out/ncu/$name.csv=$out/ncu/$name.json")
  else
    echo "FAILED $name (see $out/ncu/$name.csv)"
  fi
}
case_ cit-128 --graph "$data/cit-HepPh.el.gz" --symmetrize --dims 128 --kernels cusparse,mergepath
case_ ego-shuf-128 --graph "$data/ego-Twitter.el.gz" --symmetrize --dims 128 \
  --kernels cusparse,mergepath --shuffle-ids 1
case_ uk-256 --graph "$data/uk-2007-05-100k.el.gz" --symmetrize --dims 128,256 \
  --kernels cusparse,mergepath
case_ uk-shuf-256 --graph "$data/uk-2007-05-100k.el.gz" --symmetrize --dims 256 \
  --kernels cusparse,mergepath --shuffle-ids 1
case_ rmat20 --graph rmat:20:16 --dims 128,256 --kernels cusparse --mergepath-costs 400
case_ rmat22-128 --graph rmat:22:16 --dims 128 --kernels cusparse --mergepath-costs 400
case_ rmat22-256 --graph rmat:22:16 --dims 256 --kernels cusparse,mergepath_c400_t128 \
  --mergepath-costs 400
python3 "$here/../bench/gather_check.py" "${pairs[@]}" --output "$out/gather_check.md" &&
  cat "$out/gather_check.md"
