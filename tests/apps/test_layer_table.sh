#!/usr/bin/env bash
# The table of layer types (include/halo/core/layer_type.hpp) against what the Python side takes from
# it (docs/CONTRIBUTING.md, "Adding a layer type"):
#   1. `halo-inspect --layer-types` equals python/halognn/layer_types.json, the copy that
#      python/halognn/model_file.py reads (names, scalar attributes, arrays and shapes);
#   2. every type the table maps to a PyG module has its converter `<type>_layers` in
#      python/halognn/pyg.py, and every type tools/export_pyg.py converts is in the table with
#      a PyG module.
# Usage: test_layer_table.sh HALO_INSPECT REPO_ROOT. Needs python3 (standard library only).
set -u
inspect=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
if ! "$inspect" --layer-types >"$tmp/table.json"; then
    echo "FAIL - $inspect --layer-types exited with an error"
    exit 1
fi
if diff -u "$root/python/halognn/layer_types.json" "$tmp/table.json"; then
    echo "pass - python/halognn/layer_types.json is the table"
else
    echo "FAIL - python/halognn/layer_types.json differs from the table (above); regenerate it:"
    echo "       halo-inspect --layer-types > python/halognn/layer_types.json"
    status=1
fi
python3 - "$tmp/table.json" "$root" <<'PY' || status=1
import ast
import json
import sys
from pathlib import Path

table = json.loads(Path(sys.argv[1]).read_text())["layer_types"]
root = Path(sys.argv[2])
pyg = {t["name"]: t["pyg"] for t in table}
tree = ast.parse((root / "python/halognn/pyg.py").read_text())
functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
failed = False
for name, module in pyg.items():
    if module and f"{name}_layers" not in functions:
        print(f"FAIL - the table maps {name} to {module}, but python/halognn/pyg.py has no "
              f"{name}_layers")
        failed = True
exporter = ast.parse((root / "tools/export_pyg.py").read_text())
converted = set()
for node in ast.walk(exporter):
    if (isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "converters" for t in node.targets)
            and isinstance(node.value, ast.Dict)):
        converted |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
if not converted:
    print("FAIL - tools/export_pyg.py has no `converters = {...}` mapping to check")
    failed = True
for name in sorted(converted):
    if not pyg.get(name):
        print(f"FAIL - tools/export_pyg.py converts {name!r}, which the table "
              f"{'maps to no PyG module' if name in pyg else 'does not have'}")
        failed = True
if not failed:
    print(f"pass - {len(pyg)} layer types; converters in python/halognn/pyg.py for "
          f"{sum(bool(m) for m in pyg.values())}; tools/export_pyg.py converts "
          f"{', '.join(sorted(converted))} through them")
sys.exit(1 if failed else 0)
PY
exit $status
