#!/usr/bin/env bash
# with_numpy_python.sh MODULES SCRIPT [ARG...]: runs SCRIPT with the first python3 on PATH (or
# $HALO_PYTHON) that imports every module of the comma-separated MODULES, so that a pyenv or venv
# python3 without them does not shadow the system one that has them (Debian's python3-numpy,
# python3-h5py, python3-scipy live in /usr/bin/python3). None: exit 77 (ctest's skip) with a note.
set -uo pipefail
modules=${1:?usage: $0 MODULES SCRIPT [ARG...]}
shift
for candidate in ${HALO_PYTHON:-} $(type -ap python3) /usr/bin/python3; do
  if [ -x "$candidate" ] && "$candidate" -c "import ${modules}" >/dev/null 2>&1; then
    exec "$candidate" "$@"
  fi
done
echo "SKIP: no python3 with ${modules} (apt-get install python3-numpy python3-h5py python3-scipy)"
exit 77
