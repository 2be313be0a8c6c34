#!/usr/bin/env bash
# SpMM suite: runs halo-bench over the shared real graphs (../shared/data) and over R-MAT graphs of
# the scales given as arguments, one JSON file and one log per graph, then writes TABLE.md with
# bench/make_table.py and prints it. A graph whose run fails is reported and the suite goes on;
# the exit status is 1 if any run failed (a FAILED check, an ERROR or a crash), else 0.
#
#   bench/spmm_suite.sh --bench BUILD/apps/halo-bench [options] [SCALE ...]
#
# Options (defaults in brackets):
#   --bench PATH        the halo-bench binary [$HALO_BENCH, else halo-bench on PATH]
#   --data DIR          the shared graphs [$HALO_DATA_DIR, else <repo>/../shared/data]
#   --out DIR           results directory [bench-results]
#   --graphs "A B"      only these shared graphs (names as in MANIFEST.tsv, without .el.gz)
#   --no-shared         no shared graphs, R-MAT scales only
#   --edge-factor EF    R-MAT edge factor [16]
#   --dims LIST         dense widths [32,64,128,256]
#   --kernels LIST      kernels besides the cusparse baseline [cusparse]
#   --normalize KIND    none | gcn | mean [gcn]
#   --self-loops KIND   keep | drop | add, passed to halo-bench [its default]
#   --spec SPEC         also a generator graph (rmat:S:EF[:SEED] | er:N:M[:SEED]), named with
#                       ':' as '-'; may be given several times
#   --symmetrize-all    pass --symmetrize for the generated graphs too (the shared ones always)
#   --mergepath-costs L, --runs N, --warmup N, --device N, --row-order O, --shuffle-ids S,
#   --gather-cache-mib L, --l2-hints
#                       passed to halo-bench [its defaults]
#   --no-table          no TABLE.md (kernels make_table.py does not tabulate, e.g. auto)
#   --pack FILE         pack the results directory into FILE (.tar.gz) at the end
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/.." && pwd)"

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-0}"
}

bench="${HALO_BENCH:-}"
data="${HALO_DATA_DIR:-${repo}/../shared/data}"
out="bench-results"
only_graphs=""
shared=1
edge_factor=16
dims="32,64,128,256"
kernels="cusparse"
normalize="gcn"
extra=()
scales=()
specs=()
generated_flags=()
table=1
pack=""


need_value() {
    if [[ $# -lt 2 || -z "$2" ]]; then
        echo "spmm_suite.sh: $1 needs a value" >&2
        exit 2
    fi
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) usage 0 ;;
        --bench) need_value "$@"; bench="$2"; shift 2 ;;
        --data) need_value "$@"; data="$2"; shift 2 ;;
        --out) need_value "$@"; out="$2"; shift 2 ;;
        --graphs) need_value "$@"; only_graphs="$2"; shift 2 ;;
        --no-shared) shared=0; shift ;;
        --edge-factor) need_value "$@"; edge_factor="$2"; shift 2 ;;
        --dims) need_value "$@"; dims="$2"; shift 2 ;;
        --kernels) need_value "$@"; kernels="$2"; shift 2 ;;
        --normalize) need_value "$@"; normalize="$2"; shift 2 ;;
        --runs|--warmup|--device|--self-loops|--mergepath-costs|--row-order|--shuffle-ids|\
        --gather-cache-mib)
            need_value "$@"; extra+=("$1" "$2"); shift 2 ;;
        --l2-hints) extra+=("$1"); shift ;;
        --spec) need_value "$@"; specs+=("$2"); shift 2 ;;
        --symmetrize-all) generated_flags=(--symmetrize); shift ;;
        --no-table) table=0; shift ;;
        --pack) need_value "$@"; pack="$2"; shift 2 ;;
        --) shift; scales+=("$@"); break ;;
        -*) echo "spmm_suite.sh: unknown option $1" >&2; usage 2 ;;
        *) scales+=("$1"); shift ;;
    esac
done

if [[ -z "${bench}" ]]; then
    bench="$(command -v halo-bench || true)"
fi
if [[ -z "${bench}" || ! -x "${bench}" ]]; then
    echo "spmm_suite.sh: no halo-bench binary (give --bench BUILD/apps/halo-bench or set" \
         "HALO_BENCH; it exists only in CUDA builds)" >&2
    exit 2
fi
for s in "${scales[@]+"${scales[@]}"}"; do
    if ! [[ "${s}" =~ ^[0-9]+$ ]] || (( s < 1 || s > 31 )); then
        echo "spmm_suite.sh: R-MAT scale '${s}' is not an integer in 1..31" >&2
        exit 2
    fi
done

# The shared graphs, smallest first (MANIFEST.tsv order), or every *.el.gz without a manifest.
graphs=()
if (( shared )); then
    if [[ ! -d "${data}" ]]; then
        echo "spmm_suite.sh: shared data directory ${data} not found; skipping the real graphs" \
             "(give --data DIR or set HALO_DATA_DIR)" >&2
    elif [[ -f "${data}/MANIFEST.tsv" ]]; then
        while IFS=$'\t' read -r file _; do
            [[ "${file}" == "file" || -z "${file}" ]] && continue
            graphs+=("${file%.el.gz}")
        done < "${data}/MANIFEST.tsv"
    else
        for f in "${data}"/*.el.gz; do
            [[ -e "${f}" ]] && graphs+=("$(basename "${f}" .el.gz)")
        done
    fi
    if [[ -n "${only_graphs}" ]]; then
        selected=()
        for g in ${only_graphs}; do
            if [[ ! -f "${data}/${g}.el.gz" ]]; then
                echo "spmm_suite.sh: --graphs: ${data}/${g}.el.gz not found" >&2
                exit 2
            fi
            selected+=("${g}")
        done
        graphs=("${selected[@]}")
    fi
fi
if [[ -d "${data}" ]]; then
    data="$(cd "${data}" && pwd)"
fi
if (( ${#graphs[@]} == 0 && ${#scales[@]} == 0 && ${#specs[@]} == 0 )); then
    echo "spmm_suite.sh: nothing to run (no shared graphs found, no R-MAT scale or --spec given)" >&2
    exit 2
fi

mkdir -p "${out}"
failed=()
jsons=()

# run NAME GRAPH_ARG [halo-bench options...]
run() {
    local name="$1" graph="$2"
    shift 2
    local json="${out}/${name}.json" log="${out}/${name}.log"
    printf '%-22s ' "${name}"
    rm -f "${json}"
    local start=${SECONDS} status=0
    "${bench}" --graph "${graph}" --dims "${dims}" --kernels "${kernels}" \
        --normalize "${normalize}" --json "${json}" "$@" \
        "${extra[@]+"${extra[@]}"}" > "${log}" 2>&1 || status=$?
    if [[ -f "${json}" ]]; then
        jsons+=("${json}")
    fi
    if (( status == 0 )); then
        echo "ok ($(( SECONDS - start )) s)"
    else
        echo "FAILED (exit ${status}, $(( SECONDS - start )) s): see ${log}"
        tail -n 3 "${log}" | sed 's/^/    /'
        failed+=("${name}")
    fi
}

echo "halo-bench: ${bench}"
echo "results:    ${out}"
for g in "${graphs[@]+"${graphs[@]}"}"; do
    # Real graphs are symmetrized: GNN aggregation runs over the undirected adjacency.
    run "${g}" "${data}/${g}.el.gz" --symmetrize
done
for s in "${scales[@]+"${scales[@]}"}"; do
    run "rmat-${s}-${edge_factor}" "rmat:${s}:${edge_factor}" \
        "${generated_flags[@]+"${generated_flags[@]}"}"
done
for spec in "${specs[@]+"${specs[@]}"}"; do
    run "${spec//:/-}" "${spec}" "${generated_flags[@]+"${generated_flags[@]}"}"
done

if [[ -n "${pack}" ]]; then
    tar -C "$(dirname "${out}")" -czf "${pack}" "$(basename "${out}")"
    echo "packed: ${pack}"
fi
if (( table && ${#jsons[@]} > 0 )); then
    python3 "${here}/make_table.py" --output "${out}/TABLE.md" "${jsons[@]}"
    echo
    cat "${out}/TABLE.md"
fi
if (( ${#failed[@]} > 0 )); then
    echo
    echo "spmm_suite.sh: ${#failed[@]} run(s) failed: ${failed[*]}" >&2
    exit 1
fi
