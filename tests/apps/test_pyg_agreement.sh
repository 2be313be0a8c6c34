#!/usr/bin/env bash
# Agreement of halo-infer with PyTorch Geometric (docs/PYG.md), as a test. Two modes:
#
#   test_pyg_agreement.sh pyg BIN_DIR REPO DATA_DIR [EXPORT_DIR]
#       runs scripts/pyg_agreement.sh on an export of trained PyG models (tools/export_pyg.py on
#       a machine with PyTorch). EXPORT_DIR is the argument (CMake cache variable
#       HALO_PYG_EXPORT_DIR) or, when that is empty, the environment variable HALO_PYG_EXPORT_DIR;
#       with neither, the test skips (exit 77).
#   test_pyg_agreement.sh random BIN_DIR REPO DATA_DIR
#       needs no PyTorch: tools/export_pyg.py --random-weights writes GCN, SAGE and GIN model
#       files for Cora and the logits of its float64 NumPy forward; scripts/pyg_agreement.sh must
#       find halo-infer's predictions identical on 1 and 2 ranks. This checks the model-file
#       layout written with h5py against halo-infer's reader and the whole agreement pipeline.
#       Skips (exit 77) without a python3 that has numpy and h5py, or without the shared data.
#
# MPIEXEC names mpiexec (default mpirun). Exit status: 0 pass, 1 fail, 77 skipped.
set -uo pipefail
mode=${1:-} bin=${2:-} repo=${3:-} data=${4:-}
[ -n "$data" ] || { echo "usage: $0 pyg|random BIN_DIR REPO DATA_DIR [EXPORT_DIR]" >&2; exit 1; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export MPIEXEC=${MPIEXEC:-mpirun}
work=$(mktemp -d "${TMPDIR:-/tmp}/halo-pyg-XXXXXX")
trap 'rm -rf "$work"' EXIT

case "$mode" in
  pyg)
    export_dir=${5:-${HALO_PYG_EXPORT_DIR:-}}
    if [ -z "$export_dir" ]; then
      echo "SKIP: no PyG export given. Run tools/export_pyg.py DATA_DIR --out DIR on a machine"
      echo "      with torch_geometric, then configure with -DHALO_PYG_EXPORT_DIR=DIR or set the"
      echo "      environment variable HALO_PYG_EXPORT_DIR=DIR (docs/PYG.md)."
      exit 77
    fi
    if [ ! -f "$export_dir/summary.json" ]; then
      echo "FAIL: HALO_PYG_EXPORT_DIR=$export_dir has no summary.json (not an export_pyg.py output)"
      exit 1
    fi
    [ -f "$data/cora.el.gz" ] || { echo "FAIL: shared data not found in $data"; exit 1; }
    bash "$repo/scripts/pyg_agreement.sh" "$bin" "$data" "$export_dir" "$work/agreement"
    ;;
  random)
    if [ ! -f "$data/cora.el.gz" ] || [ ! -f "$data/cora.feat.coo.txt.gz" ]; then
      echo "SKIP: shared data (cora) not found in $data"
      exit 77
    fi
    # The first python3 on PATH (or $HALO_PYTHON) that has numpy and h5py.
    python=""
    for candidate in ${HALO_PYTHON:-} $(type -ap python3); do
      if "$candidate" -c "import numpy, h5py" >/dev/null 2>&1; then
        python=$candidate
        break
      fi
    done
    if [ -z "$python" ]; then
      echo "SKIP: no python3 with numpy and h5py (apt-get install python3-numpy python3-h5py)"
      exit 77
    fi
    echo "python: $python"
    "$python" "$repo/tools/export_pyg.py" "$data" --random-weights --datasets cora \
      --models gcn,sage,gin --out "$work/export" || { echo "FAIL: export_pyg.py"; exit 1; }
    PYTHON=$python bash "$repo/scripts/pyg_agreement.sh" "$bin" "$data" "$work/export" \
      "$work/agreement" --parts "1 2" --backends cpu --rtol 1e-5
    ;;
  *)
    echo "usage: $0 pyg|random BIN_DIR REPO DATA_DIR [EXPORT_DIR]" >&2
    exit 1
    ;;
esac
