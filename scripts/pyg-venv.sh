#!/usr/bin/env bash
# Makes the Python environment of the halognn PyG tests (python/tests/test_pyg.py, ctest
# test_halognn_pyg): a venv with torch 2.11, torch_geometric, h5py and numpy from PyPI, and the
# halognn package (pip install ./python). About 2 minutes and 4.7 GB on a fresh machine (the plain
# torch wheel brings its CUDA libraries, which it needs to import even without a GPU); a venv
# that already imports them is kept.
#
#   scripts/pyg-venv.sh [VENV_DIR]        (default: $HALO_PYG_VENV, else .venv-pyg; git-ignored)
#
# Exit status 0 when the venv imports torch and torch_geometric, 1 otherwise (no network, no
# python3-venv): callers such as .ci/run then let test_halognn_pyg skip with its message.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${1:-${HALO_PYG_VENV:-.venv-pyg}}
python=${PYTHON:-/usr/bin/python3}
[ -x "$python" ] || python=python3
check() { "$venv/bin/python" -c "import torch, torch_geometric, h5py, numpy" >/dev/null 2>&1; }
if [ -x "$venv/bin/python" ] && check; then
  echo "pyg-venv: $venv already has torch and torch_geometric"
else
  echo "pyg-venv: creating $venv (torch==2.11.0 torch_geometric h5py numpy from PyPI)"
  "$python" -m venv "$venv" || { echo "pyg-venv: '$python -m venv' failed (python3-venv?)" >&2; exit 1; }
  "$venv/bin/pip" install -q --disable-pip-version-check torch==2.11.0 torch_geometric h5py numpy \
    || { echo "pyg-venv: pip could not install torch / torch_geometric" >&2; exit 1; }
  check || { echo "pyg-venv: $venv does not import torch and torch_geometric" >&2; exit 1; }
fi
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps ./python \
  || { echo "pyg-venv: pip install ./python failed" >&2; exit 1; }
"$venv/bin/python" -c "import torch, torch_geometric, halognn; print('pyg-venv: torch', torch.__version__, 'torch_geometric', torch_geometric.__version__, 'halognn', halognn.__version__)"
