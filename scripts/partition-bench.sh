#!/usr/bin/env bash
# Partitioners side by side (docs/PARTITION.md, "KaMinPar and dKaMinPar"): METIS, KaMinPar (its
# default and eco presets), dKaMinPar on 1, 2 and 4 ranks and PT-Scotch (under a time cap), all
# through halo-partition with the node weights it uses (1 + degree), symmetrized graphs; edge cut,
# halo volume, nonzero imbalance, time and peak memory from halo-partition's --report and
# /usr/bin/time -v. No GPU needed. On the GPU host: `source .gpu/setup.sh` first.
#
# Usage: scripts/partition-bench.sh [MODE] BUILD_DIR OUT_DIR [DATA_DIR]
#   quality  (default) the shared graphs and R-MAT 20 at P = 2, 4, 8, every partitioner
#            (about 8 minutes on 16 cores)
#   rmat22   R-MAT 22 at P = 2, 4, 8, every partitioner (METIS about 2-3 minutes a run)
#   rmat24   R-MAT 24 at P = 4, every partitioner but METIS (1167 s on the 16-core host, over
#            one command's 10 minutes; METIS_CAP=N adds it under a cap of N s)
#   big26    R-MAT 26 symmetrized into 8 parts with --partitioner kaminpar, then halo-inspect --check
#   big27    R-MAT 27 symmetrized into 8 parts under mpirun -np 4 --partitioner dkaminpar, then
#            halo-inspect --check
#   scotch-threads  PT-Scotch on 4 ranks with SCOTCH_PTHREAD_NUMBER = 1, 2, 4 (item 5 of the issue)
#            on uk-2007-05-100k and R-MAT 18, under the cap
# Environment: GRAPHS (shared graph names without .el.gz; default all in DATA_DIR), RMAT (specs,
# overrides the mode's), PARTS, METHODS (any of metis kaminpar-default kaminpar-eco dkaminpar-1
# dkaminpar-2 dkaminpar-4 ptscotch), THREADS (kaminpar threads; default nproc), SCOTCH_RANKS
# (default 4), SCOTCH_CAP (seconds, default 30), METIS_CAP (default 300), CAP (every other run,
# default 600), SEED (default 1), NICE (e.g. "nice").
# Output in OUT_DIR: results.tsv (one line a run), results.md (the table and the ratios to METIS),
# env.txt (host, cores, commit, date, command), the --report JSONs and each run's log.
set -uo pipefail
mode=quality
case "${1:-}" in
  quality|rmat22|rmat24|big26|big27|scotch-threads) mode=$1; shift ;;
esac
if [ $# -lt 2 ]; then
  sed -n '2,28p' "$0"; exit 2
fi
build=$1
out=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data=${3:-$root/../shared/data}
bin=$build/apps
[ -x "$bin/halo-partition" ] || { echo "no $bin/halo-partition" >&2; exit 2; }
mkdir -p "$out"
cores=$(nproc)
threads=${THREADS:-$cores}
seed=${SEED:-1}
nice=${NICE:-}
scotch_ranks=${SCOTCH_RANKS:-4}
scotch_cap=${SCOTCH_CAP:-30}
metis_cap=${METIS_CAP:-300}
cap=${CAP:-600}
mpi_flags=(--bind-to none)
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  mpi_flags+=(--oversubscribe --allow-run-as-root)
fi
timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -v)
all_methods="metis kaminpar-default kaminpar-eco dkaminpar-1 dkaminpar-2 dkaminpar-4 ptscotch"
case $mode in
  quality) rmat=${RMAT-rmat:20:16}; parts=${PARTS:-2 4 8}; methods=${METHODS:-$all_methods} ;;
  rmat22) rmat=${RMAT-rmat:22:16}; parts=${PARTS:-2 4 8}; methods=${METHODS:-$all_methods}
          GRAPHS=${GRAPHS:-none} ;;
  rmat24) rmat=${RMAT-rmat:24:16}; parts=${PARTS:-4}; GRAPHS=${GRAPHS:-none}
          methods=${METHODS:-${all_methods/metis /}}
          [ -n "${METIS_CAP:-}" ] && methods="metis $methods" ;;
  big26) rmat=${RMAT-rmat:26:16}; parts=${PARTS:-8}; methods=${METHODS:-kaminpar-default}
         GRAPHS=${GRAPHS:-none} ;;
  big27) rmat=${RMAT-rmat:27:16}; parts=${PARTS:-8}; methods=${METHODS:-dkaminpar-4}
         GRAPHS=${GRAPHS:-none} ;;
  scotch-threads) rmat=${RMAT-rmat:18:16}; parts=${PARTS:-4}; GRAPHS=${GRAPHS:-uk-2007-05-100k}
                  methods=ptscotch-t1 ;;
esac
[ "$mode" = scotch-threads ] && methods="ptscotch-t1 ptscotch-t2 ptscotch-t4"
if [ -z "${GRAPHS:-}" ]; then
  GRAPHS=$(cd "$data" 2>/dev/null && ls *.el.gz 2>/dev/null | sed 's/\.el\.gz$//' | tr '\n' ' ')
fi
[ "${GRAPHS:-}" = none ] && GRAPHS=
inputs=()
for g in $GRAPHS; do
  if [ -f "$data/$g.el.gz" ]; then inputs+=("$g=$data/$g.el.gz"); else echo "skip $g: not in $data"; fi
done
for s in $rmat; do inputs+=("${s//:/-}=$s"); done

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
{
  echo "mode: $mode"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "host: $(hostname); $cores cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)); $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "commit: $commit"
  echo "command: $0 $mode $*"
  echo "settings: threads $threads, parts '$parts', methods '$methods', seed $seed, SCOTCH_RANKS $scotch_ranks, SCOTCH_CAP $scotch_cap s, METIS_CAP $metis_cap s, CAP $cap s"
  echo "inputs: ${inputs[*]}"
} >"$out/env.txt"
cat "$out/env.txt"
printf 'graph\tnnz\tparts\tmethod\tranks\tthreads\tstatus\tedge_cut\thalo_volume\tnnz_imbalance\trow_imbalance\tpartition_s\ttotal_s\tpeak_rss_mib_report\tmaxrss_mib_time\n' \
  >"$out/results.tsv"

# One halo-partition run: appends its line to results.tsv.
run_one() {
  local name=$1 input=$2 p=$3 method=$4
  local tag="$name-$method-$p" ranks=1 run_threads=1 limit=$cap
  local args=("$input" --parts "$p" --symmetrize -q --seed "$seed" -o "$out/$tag.h5"
              --report "$out/$tag.json")
  local launch=()
  local envs=(env OMP_NUM_THREADS="$threads")
  case $method in
    metis) args+=(--partitioner metis); limit=$metis_cap ;;
    kaminpar-*) args+=(--partitioner kaminpar --kaminpar-preset "${method#kaminpar-}"
                       --threads "$threads"); run_threads=$threads ;;
    dkaminpar-*) ranks=${method#dkaminpar-}; run_threads=$(( threads / ranks > 0 ? threads / ranks : 1 ))
                 args+=(--partitioner dkaminpar --threads "$run_threads")
                 launch=(mpirun -np "$ranks" "${mpi_flags[@]}")
                 envs=(env OMP_NUM_THREADS="$run_threads") ;;
    ptscotch*) ranks=$scotch_ranks; limit=$scotch_cap; run_threads=${method#ptscotch-t}
               [ "$run_threads" = ptscotch ] && run_threads=1
               args+=(--partitioner ptscotch)
               launch=(mpirun -np "$ranks" "${mpi_flags[@]}" -x SCOTCH_PTHREAD_NUMBER)
               envs=(env OMP_NUM_THREADS=1 SCOTCH_PTHREAD_NUMBER="$run_threads") ;;
  esac
  rm -f "$out/$tag.json"
  local start=$SECONDS status=ok
  $nice timeout --kill-after=10 "$limit" "${timer[@]}" "${envs[@]}" "${launch[@]}" \
    "$bin/halo-partition" "${args[@]}" >"$out/$tag.log" 2>&1
  local rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    status="timeout ${limit}s"
  elif [ $rc -ne 0 ]; then
    status="failed rc $rc"
  fi
  local maxrss
  maxrss=$(awk -F: '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$out/$tag.log")
  if [ "$status" = ok ] && [ "$mode" = big26 -o "$mode" = big27 ]; then
    if "$bin/halo-inspect" "$out/$tag.h5" --check >"$out/$tag.check.log" 2>&1; then
      status="ok, halo-inspect --check passed"
    else
      status="halo-inspect --check FAILED"
    fi
  fi
  python3 - "$out/$tag.json" "$name" "$p" "$method" "$ranks" "$run_threads" "$status" \
    "${maxrss:-n/a}" "$((SECONDS - start))" >>"$out/results.tsv" <<'PY'
import json, sys
path, name, p, method, ranks, threads, status, maxrss, wall = sys.argv[1:]
try:
    r = json.load(open(path))
except (OSError, ValueError):
    r = None
if r is None or not status.startswith("ok"):
    print("\t".join([name, "", p, method, ranks, threads, status] + [""] * 5 + [wall, "", maxrss]))
else:
    s = r["seconds"]
    part = s.get("partition", 0) + s.get("refine", 0)
    print("\t".join(str(x) for x in [
        name, r["num_nonzeros"], p, method, ranks, threads, status, r["edge_cut"],
        r["halo_volume"], f"{r['nnz_imbalance']:.3f}", f"{r['row_imbalance']:.3f}",
        f"{part:.2f}", f"{s['total']:.2f}", f"{r['peak_rss_bytes'] / 2**20:.0f}", maxrss]))
PY
  tail -n 1 "$out/results.tsv"
  [ "$mode" = big26 ] || [ "$mode" = big27 ] || rm -f "$out/$tag.h5"*
}

for entry in "${inputs[@]}"; do
  name=${entry%%=*}
  input=${entry#*=}
  for p in $parts; do
    for method in $methods; do
      run_one "$name" "$input" "$p" "$method"
    done
  done
done

python3 - "$out" <<'PY' | tee "$out/results.md"
import csv, math, pathlib, sys
out = pathlib.Path(sys.argv[1])
rows = list(csv.DictReader(open(out / "results.tsv"), delimiter="\t"))
env = (out / "env.txt").read_text().strip().splitlines()
print("\n".join(f"- {line}" for line in env))
print()
print("| graph | nnz | P | partitioner | ranks x threads | edge cut | cut / METIS | halo volume "
      "| nnz imbalance | partition s | total s | peak MiB (report, max rank) | max RSS MiB (time -v) "
      "| status |")
print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
metis = {(r["graph"], r["parts"]): r for r in rows if r["method"] == "metis" and r["edge_cut"]}
ratios = {}
nnz = {}
for r in rows:
    nnz.setdefault(r["graph"], r["nnz"]) if r["nnz"] else None
for r in rows:
    m = metis.get((r["graph"], r["parts"]))
    ratio = ""
    if m and r["edge_cut"] and int(m["edge_cut"]) > 0:
        x = int(r["edge_cut"]) / int(m["edge_cut"])
        ratio = f"{x:.3f}"
        if r["method"] != "metis":
            ratios.setdefault(r["method"], []).append(x)
    print(f"| {r['graph']} | {r['nnz'] or nnz.get(r['graph'], '')} | {r['parts']} | {r['method']} "
          f"| {r['ranks']} x {r['threads']} | {r['edge_cut']} | {ratio} | {r['halo_volume']} "
          f"| {r['nnz_imbalance']} | {r['partition_s']} | {r['total_s']} "
          f"| {r['peak_rss_mib_report']} | {r['maxrss_mib_time']} | {r['status']} |")
# The compact table: per graph and P, METIS's cut and partitioning time, then every other
# partitioner's cut over METIS's and its partitioning time.
methods = list(dict.fromkeys(r["method"] for r in rows if r["method"] != "metis"))
if metis and methods:
    print("\nCompact: cut / METIS's cut (partitioning s; halo-partition's report, seconds.partition)\n")
    print("| graph | nnz | P | METIS cut (s) | " + " | ".join(methods) + " |")
    print("| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in methods) + " |")
    by = {(r["graph"], r["parts"], r["method"]): r for r in rows}
    for (g, p), m in metis.items():
        cells = []
        for method in methods:
            r = by.get((g, p, method))
            if r is None:
                cells.append("")
            elif not r["edge_cut"]:
                cells.append(r["status"])
            elif int(m["edge_cut"]) == 0:
                cells.append(f"cut {r['edge_cut']} ({r['partition_s']})")
            else:
                cells.append(f"{int(r['edge_cut']) / int(m['edge_cut']):.3f} ({r['partition_s']})")
        print(f"| {g} | {m['nnz']} | {p} | {m['edge_cut']} ({m['partition_s']}) | "
              + " | ".join(cells) + " |")
if ratios:
    print("\n| partitioner | pairs with METIS | cut / METIS: geometric mean | max | within 1.10x |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for method, xs in ratios.items():
        geo = math.exp(sum(math.log(x) for x in xs) / len(xs))
        print(f"| {method} | {len(xs)} | {geo:.3f} | {max(xs):.3f} "
              f"| {sum(x <= 1.10 for x in xs)} of {len(xs)} |")
PY
