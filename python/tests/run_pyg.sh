#!/usr/bin/env bash
# run_pyg.sh BIN_DIR MPIEXEC: python/tests/test_pyg.py with the python of $HALO_PYG_PYTHON, else
# the venv that scripts/pyg-venv.sh makes (<repo>/.venv-pyg); without one, exit 77 (ctest's skip)
# with a note on how to make it.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=${HALO_PYG_PYTHON:-$repo/.venv-pyg/bin/python}
if [ ! -x "$python" ]; then
  echo "SKIP: no Python with torch and torch_geometric ($python not found): run"
  echo "      scripts/pyg-venv.sh (a venv with torch 2.11 and torch_geometric from PyPI, as .ci/run"
  echo "      does) or set HALO_PYG_PYTHON to a python that has them"
  exit 77
fi
exec "$python" "$repo/python/tests/test_pyg.py" "$@"
