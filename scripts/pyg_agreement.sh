#!/usr/bin/env bash
# Agreement of halo-infer with PyTorch Geometric (docs/PYG.md). For every run that
# tools/export_pyg.py wrote to EXPORT_DIR (summary.json): partition its dataset into 1, 2 and 4
# parts exactly as PyG saw it, run halo-infer with the exported model file on each backend, and
# compare halo-infer's logits with PyG's own (halo-inspect --compare-logits): max |difference|,
# share of identical predictions, test accuracy of both. An exact layer (gcn, sage, gin, maxk,
# linear; agnn, transformer and gat on the cpu backend or with --attention exact) must predict
# every node as PyG does and reach PyG's test accuracy, or the script fails; models with
# attention layers also run on the fused fp16 kernel (backend "cuda"), reported, not required.
#
# Usage: scripts/pyg_agreement.sh BUILD_DIR DATA_DIR EXPORT_DIR OUT [options]
#   BUILD_DIR             build directory (or its apps/ directory) with halo-partition,
#                         halo-infer and halo-inspect
#   DATA_DIR              the shared data files the export read (../shared/data)
#   --parts "1 2 4"       rank counts
#   --backends LIST       auto (default: cpu, and cuda when BUILD_DIR was configured with CUDA and
#                         nvidia-smi sees a GPU) or a comma list of cpu, cuda
#   --rtol X              also fail when max |difference| exceeds X times the largest |logit|
#   --runs LIST           only these runs (comma list of <dataset>-<model>)
#   --keep                keep the datasets and result directories under OUT
# Environment: MPIEXEC (default mpirun), MPIEXEC_FLAGS (default for Open MPI:
# --allow-run-as-root --oversubscribe --bind-to none), PYTHON (default python3; standard library
# only, for the JSON files).
# Writes OUT/agreement.tsv and OUT/agreement.md (and prints the latter). Exit status: 0 when every
# exact case agrees, 1 when any case fails, 2 on bad usage.
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 4 ] || usage
build=$1 data=$2 export_dir=$3 out=$4
shift 4
parts="1 2 4" backends=auto rtol="" only="" keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --parts) parts=$2; shift 2 ;;
    --backends) backends=$2; shift 2 ;;
    --rtol) rtol=$2; shift 2 ;;
    --runs) only=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "pyg_agreement: unknown option '$1'" >&2; usage ;;
  esac
done

bin=$build/apps
[ -x "$bin/halo-infer" ] || bin=$build
for tool in halo-partition halo-infer halo-inspect; do
  [ -x "$bin/$tool" ] || { echo "pyg_agreement: $build: no $tool (build it first)" >&2; exit 2; }
done
[ -f "$export_dir/summary.json" ] || {
  echo "pyg_agreement: $export_dir/summary.json missing" \
       "(run tools/export_pyg.py DATA_DIR --out $export_dir)" >&2
  exit 2; }
python=${PYTHON:-python3}
mpiexec=${MPIEXEC:-mpirun}
if [ -z "${MPIEXEC_FLAGS+set}" ]; then
  MPIEXEC_FLAGS=""
  if "$mpiexec" --version 2>&1 | grep -Eq "Open MPI|OpenRTE"; then
    MPIEXEC_FLAGS="--allow-run-as-root --oversubscribe --bind-to none"
  fi
fi
read -r -a mpi_flags <<<"$MPIEXEC_FLAGS"

if [ "$backends" = auto ]; then
  backends=cpu
  cache=$build/CMakeCache.txt
  [ -f "$cache" ] || cache=$build/../CMakeCache.txt
  if grep -q '^HALO_ENABLE_CUDA:BOOL=ON' "$cache" 2>/dev/null &&
     nvidia-smi -L >/dev/null 2>&1; then
    backends=cpu,cuda
  fi
fi
IFS=, read -r -a backend_list <<<"$backends"
for b in "${backend_list[@]}"; do
  case "$b" in cpu | cuda) ;; *) echo "pyg_agreement: unknown backend '$b'" >&2; exit 2 ;; esac
done

mkdir -p "$out"
# One line per exported run: key dataset model reference exact model logits graph features labels
# test_index num_nodes num_nonzeros test_correct test_evaluated (tab-separated).
runs=$("$python" - "$export_dir/summary.json" "$only" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
only = [r for r in sys.argv[2].split(",") if r]
missing = [r for r in only if r not in summary["runs"]]
if missing:
    sys.exit(f"pyg_agreement: {sys.argv[1]} has no run {', '.join(missing)}")
for key in sorted(summary["runs"]):
    if only and key not in only:
        continue
    r = summary["runs"][key]
    h = r["halo_inputs"]
    t = r["accuracy"]["test"]
    print("\t".join(str(v) for v in (
        key, r["dataset"], r["model"], r["reference"], int(bool(r.get("exact", True))),
        r["files"]["model"], r["files"]["logits"], h["graph"], h["features"], h["labels"],
        h["test_index"], h["num_nodes"], r["num_nonzeros"], t["correct"], t["evaluated"])))
PY
) || exit 2
[ -n "$runs" ] || { echo "pyg_agreement: no runs in $export_dir/summary.json" >&2; exit 2; }

tsv=$out/agreement.tsv
failures=0
record() { local IFS=$'\t'; printf '%s\n' "$*" >>"$tsv"; }
: >"$tsv"
record dataset model reference backend ranks max_abs_diff max_abs_logit identical_predictions \
  halo_test_accuracy reference_test_accuracy status
# The first line of a log that says what went wrong (errors first; Open MPI frames its messages
# in dashes).
first_error() {
  grep -v -e '^-*$' -e '^ *$' "$1" | grep -m1 -i 'error' ||
    grep -v -e '^-*$' -e '^ *$' "$1" | head -1
}
fail_all() {  # ranks why: every run of dataset $ds fails
  local d m ref
  while IFS=$'\t' read -r _ d m ref _; do
    if [ "$d" = "$ds" ]; then fail_row "$ds" "$m" "$ref" - "$1" "$2"; fi
  done <<<"$runs"
}
fail_row() {  # dataset model reference backend ranks why
  record "$1" "$2" "$3" "$4" "$5" - - - - - "FAIL: $6"
  echo "FAIL $1-$2 $4 $5 ranks: $6"
  failures=$((failures + 1))
}

datasets=$(cut -f2 <<<"$runs" | sort -u)
for ds in $datasets; do
  first=$(awk -F'\t' -v d="$ds" '$2 == d { print; exit }' <<<"$runs")
  IFS=$'\t' read -r _ _ _ _ _ _ _ graph features labels test_index num_nodes nnz _ _ <<<"$first"
  for p in $parts; do
    h5=$out/$ds-p$p.h5
    report=$out/$ds-p$p.partition.json
    # The flags export_pyg.py records in halo_inputs.partition_flags: A | A^T, the file's
    # self-loops kept, raw adjacency (halo-infer derives each layer's operator).
    if ! "$bin/halo-partition" "$data/$graph" --parts "$p" --symmetrize --self-loops keep \
         --normalize none --num-nodes "$num_nodes" --features "$data/$features" \
         --labels "$data/$labels" -q -o "$h5" --report "$report" >"$out/partition.log" 2>&1; then
      fail_all "$p" "halo-partition: $(first_error "$out/partition.log")"
      continue
    fi
    got=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["num_nonzeros"])' \
          "$report")
    if [ "$got" != "$nnz" ]; then
      fail_all "$p" "the adjacency has $got nonzeros, PyG's had $nnz"
      continue
    fi
    # The runs come on descriptor 3: mpiexec forwards (and so consumes) its standard input.
    while IFS=$'\t' read -r -u 3 key d model ref exact model_file logits _ _ _ _ _ _ test_correct \
          test_eval; do
      [ "$d" = "$ds" ] || continue
      # Variants: every backend as is; for a model with attention layers (exact = 0) the cuda
      # backend runs them on the fp16 Fused3S kernel (judged without --require-identical) and
      # again with --attention exact (cuda-exact), which must agree like any exact layer.
      variants=()
      for backend in "${backend_list[@]}"; do
        variants+=("$backend")
        [ "$backend" = cuda ] && [ "$exact" = 0 ] && variants+=(cuda-exact)
      done
      for backend in "${variants[@]}"; do
        res=$out/result-$key-$backend-p$p
        cmp=$out/compare-$key-$backend-p$p.json
        extra=()
        identical=1
        case "$backend" in
          cuda-exact) extra=(--backend cuda --attention exact) ;;
          cuda) extra=(--backend cuda); identical=$exact ;;
          *) extra=(--backend "$backend") ;;
        esac
        if ! "$mpiexec" -n "$p" "${mpi_flags[@]}" "$bin/halo-infer" "$h5" \
             --model "$export_dir/$model_file" "${extra[@]}" \
             --eval-nodes "$data/$test_index" --out "$res" --overwrite -q \
             </dev/null >"$out/infer.log" 2>&1; then
          fail_row "$ds" "$model" "$ref" "$backend" "$p" \
            "halo-infer: $(first_error "$out/infer.log")"
          continue
        fi
        checks=()
        [ "$identical" = 1 ] && checks+=(--require-identical)
        [ -n "$rtol" ] && checks+=(--rtol "$rtol")
        "$bin/halo-inspect" "$res" --compare-logits "$export_dir/$logits" \
          --labels "$data/$labels" --test-index "$data/$test_index" "${checks[@]}" \
          --json "$cmp" >"$out/inspect.log" 2>&1
        status=$?
        if [ ! -f "$cmp" ]; then
          fail_row "$ds" "$model" "$ref" "$backend" "$p" \
            "halo-inspect: $(first_error "$out/inspect.log")"
          continue
        fi
        line=$("$python" - "$cmp" "$test_correct" "$test_eval" "$status" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
a = c["accuracy"]
problems = list(c["failures"])
if sys.argv[4] not in ("0", "3"):
    problems.append(f"halo-inspect exit status {sys.argv[4]}")
# PyG's accuracy as the export computed it must be what its logits file gives here.
if (a["reference_correct"], a["evaluated"]) != (int(sys.argv[2]), int(sys.argv[3])):
    problems.append(f"reference logits give {a['reference_correct']} of {a['evaluated']}, the "
                    f"export recorded {sys.argv[2]} of {sys.argv[3]}")
status = "ok" if not problems else "FAIL: " + "; ".join(problems)
print("\t".join([f"{c['max_abs_diff']:.3e}", f"{c['max_abs_reference']:.3e}",
                 f"{100 * c['identical_prediction_share']:.2f}%", f"{a['halo']:.4f}",
                 f"{a['reference']:.4f}", status]))
PY
)
        record "$ds" "$model" "$ref" "$backend" "$p" "$line"
        case "$line" in
          *FAIL*)
            failures=$((failures + 1))
            echo "FAIL $key $backend $p ranks: ${line##*FAIL: }" ;;
          *) echo "ok   $key $backend $p ranks: $(cut -f1,3,4,5 <<<"$line" | tr '\t' ' ')" ;;
        esac
        [ $keep = 1 ] || rm -rf "$res"
      done
    done 3<<<"$runs"
    [ $keep = 1 ] || rm -f "$h5"
  done
done

md=$out/agreement.md
{
  echo "| dataset | model | reference | backend | ranks | max abs diff | max abs logit |" \
       "identical predictions | halo test acc | reference test acc | status |"
  echo "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
  tail -n +2 "$tsv" | awk -F'\t' -v OFS=' | ' '{ $1 = $1; print "| " $0 " |" }'
} >"$md"
cat "$md"
echo "$failures failure(s); table in $tsv and $md"
[ "$failures" -eq 0 ]
