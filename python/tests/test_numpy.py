#!/usr/bin/env python3
"""halognn without torch: save_graph from numpy arrays, write_model, load_result (docs/PYG.md).

    python3 python/tests/test_numpy.py BIN_DIR MPIEXEC

save_graph writes a directed graph (binary CSR and edge list) that halo-partition must turn into
the adjacency whose row i holds the sources of the edges into i (PyG's source_to_target); a
2-layer gcn and a sage model written with halognn.write_model must then give, through halo-infer
on 1 and 2 ranks and load_result, the float64 NumPy forward of tools/export_pyg.py on that
adjacency, and load_result must agree with halo-inspect --export. Bad graphs and damaged
result directories must be refused with a message naming the problem. Exit 0 pass, 1 fail, 77
skipped (no numpy / h5py).
"""
import shutil
import struct
import sys
import tempfile
import zlib
from pathlib import Path

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (apt-get install python3-numpy python3-h5py)")
    sys.exit(77)

from harness import REPO, Tools, check, finish, random_graph  # noqa: E402

import halognn  # noqa: E402

sys.path.insert(0, str(REPO / "tools"))
import export_pyg  # noqa: E402  (its float64 oracle)


def read_hcsr(path):
    buf = Path(path).read_bytes()
    magic, version, flags, rows, cols, nnz = struct.unpack_from("<8sIIqqq", buf, 0)
    crc_ok = zlib.crc32(buf[:-4]) == struct.unpack_from("<I", buf, len(buf) - 4)[0]
    indptr = np.frombuffer(buf, "<i8", rows + 1, 40)
    indices = np.frombuffer(buf, "<i4", nnz, 40 + 8 * (rows + 1))
    return magic, version, flags, crc_ok, indptr, indices, cols


def expect_error(words, call, what):
    try:
        call()
        message = "no error"
    except halognn.HaloError as e:
        message = str(e)
    check(words in message, f"{what} refused: {message}")


def check_graph_files(tools, tmp, graph):
    n, (src, dst) = graph["num_nodes"], graph["edge_index"]
    order = np.lexsort((src, dst))
    want_rows, want_cols = dst[order], src[order]
    for fmt in ("hcsr", "edgelist"):
        saved = halognn.save_graph(graph, tmp / fmt, graph_format=fmt)
        check((tmp / fmt / "partition.args").read_text().strip() == str(saved),
              f"{fmt}: partition.args holds the arguments ({saved})")
        if fmt == "hcsr":
            magic, version, flags, crc_ok, indptr, indices, cols = read_hcsr(tmp / fmt /
                                                                            "graph.hcsr")
            check(magic == b"HALOCSR\0" and version == 1 and flags == 0 and crc_ok and
                  cols == n, "hcsr: header and CRC-32 as docs/INPUT.md states")
        dataset = tmp / f"{fmt}.h5"
        tools.partition(saved, 1, dataset)
        tools.run([tools.bin / "halo-inspect", dataset, "--check"])
        with h5py.File(dataset, "r") as f:
            csr = f["parts/0/csr"]
            ids = f["parts/0/global_ids"][:]
            rows = np.repeat(ids, np.diff(csr["indptr"][:]))
            cols = np.concatenate([ids, f["parts/0/halo/global_ids"][:]])[csr["indices"][:]]
            order = np.lexsort((cols, rows))
            x = f["parts/0/features/values"][:]
            labels = f["parts/0/labels"][:] if "labels" in f["parts/0"] else None
        check(np.array_equal(rows[order], want_rows) and np.array_equal(cols[order], want_cols),
              f"{fmt}: the dataset's row i holds the sources of the edges into i "
              f"({rows.size} nonzeros, {src.size} edges)")
        check(np.array_equal(x, graph["x"][ids]), f"{fmt}: features arrive unchanged")
        check(labels is not None and np.array_equal(labels, graph["y"][ids]),
              f"{fmt}: labels arrive unchanged (-1 kept)")
    return halognn.save_graph(None, tmp / "kw", edge_index=graph["edge_index"], x=graph["x"],
                              y=graph["y"], eval_mask=graph["test_mask"])


def random_model(specs, seed):
    layers = export_pyg.random_layers(specs, seed)
    for layer in layers:
        layer.pop("has_weight", None)
    return layers


def check_results(tools, tmp, graph, saved):
    n, (src, dst) = graph["num_nodes"], graph["edge_index"]
    operators = export_pyg.aggregation_operators(*map(np.asarray, zip(*sorted(zip(dst, src)))), n)
    f = graph["x"].shape[1]
    for kind in ("gcn", "sage"):
        layers = random_model(export_pyg.random_specs(kind, [f, 16, 5]), 3)
        model = tmp / f"{kind}.h5"
        halognn.write_model(model, layers, kind)
        _, back = halognn.read_model(model)
        check(halognn.layers_equal(layers, back) is None, f"{kind}: model file round trip")
        expected = export_pyg.reference_forward(layers, operators, graph["x"])
        for parts in (1, 2):
            dataset = tmp / f"ds-{parts}.h5"
            if not dataset.exists():
                tools.partition(saved, parts, dataset)
            out = tmp / f"res-{kind}-{parts}"
            tools.infer(dataset, parts, model, out, [*saved.infer_args, "--save-layers"])
            r = halognn.load_result(out, layers=True)
            diff = float(abs(r.output - expected).max())
            check(r.complete and diff <= 1e-4 * float(abs(expected).max()) and np.array_equal(
                r.prediction, r.output.argmax(1)), f"{kind} on {parts} rank(s): load_result "
                f"gives the float64 forward (max |diff| {diff:.3g}), argmax predictions")
            check(sorted(r.layers) == [0, 1] and np.array_equal(r.layers[1], r.output),
                  f"{kind} on {parts} rank(s): --save-layers read, last layer = output")
            check(r.manifest.get("accuracy", {}).get("evaluated") ==
                  int((graph["y"][graph["test_mask"]] >= 0).sum()),
                  f"{kind} on {parts} rank(s): the evaluation index reached halo-infer")
            npy = tmp / f"export-{kind}-{parts}.npy"
            tools.run([tools.bin / "halo-inspect", out, "--export", npy])
            check(np.array_equal(np.load(npy), r.output),
                  f"{kind} on {parts} rank(s): load_result equals halo-inspect --export")
    damaged = tmp / "damaged"
    shutil.copytree(tmp / "res-gcn-2", damaged)
    (damaged / "part-1.h5").unlink()
    expect_error("part-1.h5", lambda: halognn.load_result(damaged), "a result missing a piece")
    (damaged / "manifest.json").unlink()
    expect_error("no manifest.json", lambda: halognn.load_result(damaged),
                 "a result without manifest")


def check_bad_graphs(tmp, graph):
    ei = graph["edge_index"]
    twice = np.concatenate([ei, ei[:, 5:6]], axis=1)
    expect_error("duplicate edge", lambda: halognn.save_graph(
        None, tmp / "bad", edge_index=twice, num_nodes=graph["num_nodes"]), "a duplicate edge")
    check(not (tmp / "bad" / "partition.args").exists(),
          "a refused graph leaves no partition.args")
    expect_error("outside [0, 57)", lambda: halognn.save_graph(
        None, tmp / "bad", edge_index=ei + 2, num_nodes=57), "an edge to a node past num_nodes")
    expect_error("x has shape", lambda: halognn.save_graph(
        None, tmp / "bad", edge_index=ei, x=graph["x"][:40], num_nodes=57), "short features")
    expect_error("integer classes", lambda: halognn.save_graph(
        None, tmp / "bad", edge_index=ei, y=graph["y"].astype(np.float32), num_nodes=57),
        "float labels")
    expect_error("no edge_index", lambda: halognn.save_graph({"x": graph["x"]}, tmp / "bad"),
                 "a graph without edges")


def main():
    tools = Tools(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "mpiexec")
    graph = random_graph(5)
    with tempfile.TemporaryDirectory(prefix="halognn-np-") as tmp:
        tmp = Path(tmp)
        saved = check_graph_files(tools, tmp, graph)
        check_results(tools, tmp, graph, saved)
        check_bad_graphs(tmp, graph)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
