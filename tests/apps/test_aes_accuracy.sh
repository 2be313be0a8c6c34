#!/usr/bin/env bash
# scripts/aes_accuracy.py on a small generated graph (docs/AES.md, "Accuracy harness"), CPU
# backend, W = 16 and 1024, fp32 and int8 features, a random 2-layer GCN; then fp16 and bf16
# features with the exact SpMM (their error bounded by the unit roundoff). Checks the invariants:
# every error is finite and in [0, 1.5]; at W = 1024 (above the longest row) AES keeps every
# nonzero, so the fp32 SpMM error is at most the rounding of fused against separate multiply-adds
# (1e-6) and no prediction changes; at W = 16 the hub rows lose nonzeros (error > 0).
#
# Usage: test_aes_accuracy.sh BIN_DIR REPO. Exit 0 pass, 1 fail, 77 skipped (no python3 with numpy
# and h5py).
set -uo pipefail
bin=${1:?usage: $0 BIN_DIR REPO} repo=${2:?usage: $0 BIN_DIR REPO}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
python=""
for candidate in ${HALO_PYTHON:-} $(type -ap python3); do
  if "$candidate" -c "import numpy, h5py" >/dev/null 2>&1; then python=$candidate; break; fi
done
[ -n "$python" ] || { echo "SKIP: no python3 with numpy and h5py"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/halo-aes-acc-XXXXXX")
trap 'rm -rf "$work"' EXIT

# 300 nodes: a ring plus 3 hubs linked to 150-250 nodes (degree < 1024, > 16), 12 features with
# a nonzero mean, 4 labels, every third node a test node.
"$python" - "$work/data" <<'PY' || { echo "FAIL: generating the graph"; exit 1; }
import gzip, sys
from pathlib import Path
import numpy as np
d = Path(sys.argv[1]); d.mkdir()
rng = np.random.default_rng(7)
n, width = 300, 12
edges = {(i, (i + 1) % n) for i in range(n)}
for hub, deg in ((0, 250), (1, 150), (2, 200)):
    for j in rng.choice(np.arange(3, n), size=deg, replace=False):
        edges.add((hub, int(j)))
with gzip.open(d / "tiny.el.gz", "wt") as f:
    f.writelines(f"{u} {v}\n" for u, v in sorted(edges))
x = rng.random((n, width)).astype(np.float32)
with gzip.open(d / "tiny.feat.coo.txt.gz", "wt") as f:
    f.write(f"# {n} {width} {n * width}\n")
    f.writelines(f"{i} {j} {float(x[i, j])!r}\n" for i in range(n) for j in range(width))
with gzip.open(d / "tiny.labels.txt.gz", "wt") as f:
    f.writelines(f"{int(v)}\n" for v in rng.integers(0, 4, n))
with gzip.open(d / "tiny.test_index.txt.gz", "wt") as f:
    f.writelines(f"{i}\n" for i in range(0, n, 3))
PY

"$python" "$repo/scripts/aes_accuracy.py" "$bin" "$work/data" "$work/out" --datasets tiny \
  --ws 16,1024 --backends cpu --random-model 8,4 --layer gcn >"$work/log" 2>&1
status=$?
cat "$work/log"
[ $status -eq 0 ] || { echo "FAIL: aes_accuracy.py exit status $status"; exit 1; }

"$python" - "$work/out/aes_accuracy.json" <<'PY'
import json, math, sys
doc = json.load(open(sys.argv[1]))
problems = list(doc["failures"])
rows = [r for r in doc["rows"] if r["kind"] in ("spmm", "model")]
meta = [r for r in doc["rows"] if r["kind"] == "dataset"][0]
if meta["max_degree"] >= 1024:
    problems.append(f"longest row {meta['max_degree']} is not below 1024")
def where(r):
    return f"{r['dataset']} {r['model']} {r['backend']} {r['features']} W={r['w']} {r['operator']}"
spmm = [r for r in rows if r["kind"] == "spmm"]
model = [r for r in rows if r["kind"] == "model"]
# 2 operators x 2 feature types x (exact + 2 W); the model likewise.
if len(spmm) != 12 or len(model) != 6:
    problems.append(f"{len(spmm)} spmm rows and {len(model)} model rows, expected 12 and 6")
for r in spmm:
    e = r["rel_frobenius_error"]
    if not (math.isfinite(e) and 0 <= e <= 1.5):
        problems.append(f"{where(r)}: error {e} not finite in [0, 1.5]")
    if r["features"] == "fp32" and r["w"] == 1024 and e > 1e-6:
        problems.append(f"{where(r)}: error {e} at W above the longest row (expected <= 1e-6)")
    if r["features"] == "fp32" and r["w"] == 16 and not e > 0:
        problems.append(f"{where(r)}: error {e} at W = 16 with rows of 150+ nonzeros")
    if r["features"] == "int8" and r["w"] is None and not 0 < e < 0.05:
        problems.append(f"{where(r)}: int8 quantization error {e} not in (0, 0.05)")
for r in model:
    if r["features"] == "fp32" and r["w"] in (None, 1024) and r["changed_predictions"] != 0:
        problems.append(f"{where(r)}: {r['changed_predictions']} predictions changed")
    if r["test_accuracy"] is None or not 0 <= r["test_accuracy"] <= 1:
        problems.append(f"{where(r)}: test accuracy {r['test_accuracy']}")
for p in problems:
    print("FAIL - " + p)
print(f"{len(spmm)} spmm rows, {len(model)} model rows, {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
PY
status=$?

# The stored 16-bit feature types (halo-partition --quantize fp16 / bf16), exact SpMM only: the
# features lie in [0, 1) and A >= 0, so |A (round(X) - X)| <= u A X elementwise and the relative
# Frobenius error is in (0, u]: u = 2^-11 for fp16, 2^-8 for bf16 (plus the fp32 sums' rounding).
"$python" "$repo/scripts/aes_accuracy.py" "$bin" "$work/data" "$work/out16" --datasets tiny \
  --ws "" --features fp32,fp16,bf16 --backends cpu --random-model 8,4 --layer gcn \
  >"$work/log16" 2>&1 || { cat "$work/log16"; echo "FAIL - aes_accuracy.py --features fp16,bf16"; exit 1; }
cat "$work/log16"
"$python" - "$work/out16/aes_accuracy.json" <<'PY' || status=1
import json, math, sys
doc = json.load(open(sys.argv[1]))
problems = list(doc["failures"])
spmm = {(r["operator"], r["features"]): r["rel_frobenius_error"]
        for r in doc["rows"] if r["kind"] == "spmm"}
model = [r for r in doc["rows"] if r["kind"] == "model"]
if len(spmm) != 6 or len(model) != 3:
    problems.append(f"{len(spmm)} spmm rows and {len(model)} model rows, expected 6 and 3")
for (op, ft), e in sorted(spmm.items()):
    u = {"fp32": 0.0, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}[ft]
    if ft == "fp32":
        ok = e == 0
    else:
        ok = math.isfinite(e) and 0 < e <= u * (1 + 1e-3) + 1e-7
    if not ok:
        problems.append(f"{op} {ft}: relative error {e}, expected in (0, {u:.3g}]")
if ("gcn", "fp16") in spmm and ("gcn", "bf16") in spmm and not spmm[("gcn", "fp16")] < spmm[("gcn", "bf16")]:
    problems.append("fp16's error is not below bf16's (fp16 keeps 3 more significand bits)")
for p in problems:
    print("FAIL - " + p)
print(f"16-bit features: {len(spmm)} spmm rows, {len(model)} model rows, {len(problems)} problem(s)")
PY
exit $status
