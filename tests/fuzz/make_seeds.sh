#!/usr/bin/env bash
# Regenerates the seed corpus tests/fuzz/corpus/<target>/ (committed; run by hand when a format
# changes). Small valid files of every format, plus a few near-misses, so that the fuzzer starts
# from inputs that reach deep into each parser.
# Usage: tests/fuzz/make_seeds.sh BIN_DIR   (a build's apps directory: halo-partition, halo-infer)
set -euo pipefail
bin=$1
cd "$(dirname "${BASH_SOURCE[0]}")"
c=corpus
rm -rf "$c"
mkdir -p "$c"/{fuzz_edge_list,fuzz_edge_list_gzip,fuzz_matrix_market,fuzz_binary_csr,fuzz_npy}
mkdir -p "$c"/{fuzz_coo_features,fuzz_labels,fuzz_model,fuzz_dataset,fuzz_result}
tmp=$(mktemp -d)
# numpy and h5py: python3, else the system one (a pyenv python3 may lack them).
py=python3
"$py" -c "import numpy, h5py" 2>/dev/null || py=/usr/bin/python3
trap 'rm -rf "$tmp"' EXIT

# Edge lists: plain, weighted, comments, CRLF; the same gzip-compressed.
printf '0 1\n1 2\n2 0\n' >"$c/fuzz_edge_list/triangle.el"
printf '# comment\n%% other\n0\t1\t0.5\n1 2 2.5e-1\n3 3 1\n' >"$c/fuzz_edge_list/weighted.el"
printf '0 1\r\n1 2\r\n' >"$c/fuzz_edge_list/crlf.el"
printf '0 1\n1 2\n2 3\n3 0\n0 2\n' | gzip -9n >"$c/fuzz_edge_list/square.el.gz"
# fuzz_edge_list_gzip: first byte even -> the rest is compressed by the harness.
printf '\0000 1\n1 2\n2 0\n' >"$c/fuzz_edge_list_gzip/plain"
{ printf '\001'; printf '0 1\n1 2\n' | gzip -9n | tail -c +3; } >"$c/fuzz_edge_list_gzip/stream"

# Matrix Market.
printf '%%%%MatrixMarket matrix coordinate pattern general\n%% c\n3 3 3\n1 2\n2 3\n3 1\n' \
  >"$c/fuzz_matrix_market/pattern.mtx"
printf '%%%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 0.5\n3 3 1e2\n' \
  >"$c/fuzz_matrix_market/symmetric.mtx"
printf '%%%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 2 7\n2 1 -3\n' \
  >"$c/fuzz_matrix_market/integer.mtx"

# Binary CSR: the file as written, and (odd first byte) its content for the CRC-fixing mode.
"$bin/halo-partition" "$c/fuzz_edge_list/weighted.el" --parts 1 -q -o "$tmp/w.h5" \
  --save-csr "$c/fuzz_binary_csr/weighted.hcsr" >/dev/null
"$bin/halo-partition" "$c/fuzz_edge_list/triangle.el" --parts 1 -q -o "$tmp/t.h5" \
  --save-csr "$tmp/t.hcsr" >/dev/null
{ printf '\001'; head -c -4 "$tmp/t.hcsr"; } >"$c/fuzz_binary_csr/triangle-content"

# .npy (float32 and float64), COO features, labels and index lists.
"$py" - "$c" <<'PY'
import sys, numpy as np
c = sys.argv[1]
np.save(f"{c}/fuzz_npy/f4.npy", np.arange(6, dtype="<f4").reshape(3, 2))
np.save(f"{c}/fuzz_npy/f8.npy", np.arange(4, dtype="<f8").reshape(2, 2) / 3)
PY
printf '# 3 2 3\n0 0 1.0\n1 1 -2.5\n2 0 3e-2\n' >"$c/fuzz_coo_features/coo.txt"
printf '# 2 2 0\n' >"$c/fuzz_coo_features/empty.txt"
printf '0\n1\n-1\n2\n' >"$c/fuzz_labels/labels.txt"
printf '5\n0\n999\n' >"$c/fuzz_labels/index.txt"

# HDF5: a dataset (2 parts, features, labels), a model, a result piece and a manifest.
"$bin/halo-partition" rmat:5:4:1 --parts 2 -q -o "$c/fuzz_dataset/rmat5-2.h5" >/dev/null
# The same kind of graph with fp16 features (the 16-bit read path, docs/FORMAT.md "Versioning").
"$py" -c "import numpy as np, sys; np.save(sys.argv[1], (np.random.default_rng(3).standard_normal((32, 4)) * 100).astype(np.float32))" "$c/f32.npy"
"$bin/halo-partition" rmat:5:2:1 --parts 2 --features "$c/f32.npy" --quantize fp16 -q \
  -o "$c/fuzz_dataset/rmat5-2-fp16.h5" >/dev/null
rm -f "$c/f32.npy"
"$py" - "$c" <<'PY'
import sys, numpy as np, h5py
c = sys.argv[1]
with h5py.File(f"{c}/fuzz_model/gcn2.h5", "w") as f:
    f.attrs["format"] = "halo-model"; f.attrs["version"] = np.int32(1)
    f.attrs["num_layers"] = np.int32(2); f.attrs["name"] = "seed"
    for i, (a, b, act) in enumerate([(4, 3, "relu"), (3, 2, "none")]):
        g = f.create_group(f"layers/{i}")
        g.attrs["type"] = "gcn"; g.attrs["activation"] = act
        g.attrs["in_dim"] = np.int64(a); g.attrs["out_dim"] = np.int64(b)
        g.create_dataset("weight", data=np.ones((a, b), "<f4"))
        g.create_dataset("bias", data=np.zeros(b, "<f4"))
PY
"$bin/halo-partition" rmat:5:4:1 --parts 1 -q -o "$tmp/r1.h5" >/dev/null
mpiexec -n 1 --allow-run-as-root "$bin/halo-infer" "$tmp/r1.h5" --random-model 4,3 --out "$tmp/res" -q
{ printf '\000'; cat "$tmp/res/part-0.h5"; } >"$c/fuzz_result/piece"
{ printf '\001'; cat "$tmp/res/manifest.json"; } >"$c/fuzz_result/manifest"
du -sh "$c"
