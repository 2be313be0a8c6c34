"""A graph and its node data -> halo-partition's inputs (docs/INPUT.md).

save_graph writes the adjacency as binary CSR (.hcsr) or as a text edge list, the features as
.npy, the labels and the evaluation index as text, and returns the halo-partition arguments that
read them. Orientation: PyG's edge_index[:, e] = (j, i) sends a message j -> i, so node i
aggregates x_j; HaloGNN's row i aggregates its columns j. Row i of the written CSR therefore
holds the sources of the edges into i (for the edge list: the line "i j").
"""
import os
import shlex
import struct
import zlib
from pathlib import Path

import numpy as np

from .model_file import HaloError

HCSR_MAGIC = b"HALOCSR\0"
HCSR_VERSION = 1
# Partition flags that keep PyG's adjacency as it is: no symmetrization, stored self-loops kept
# (GCNConv and GATConv add the missing ones themselves, as the engine does), no values.
PARTITION_FLAGS = ["--no-symmetrize", "--self-loops", "keep", "--normalize", "none"]


def _numpy(value, name):
    """A torch tensor or array-like as a numpy array (torch imported only when given one)."""
    if value is None:
        return None
    if type(value).__module__.startswith("torch"):
        value = value.detach().cpu().numpy()
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as e:
        raise HaloError(f"save_graph: {name} is not an array ({e})") from None


def _field(data, name):
    if data is None:
        return None
    if isinstance(data, dict):
        return data.get(name)
    return getattr(data, name, None)


def _atomic_write(path, write):
    """write(file) into a temporary file beside path, flushed, then renamed onto path."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def csr_of_edges(edge_index, num_nodes):
    """(indptr int64, indices int32) of the adjacency whose row i holds the sources j of the
    edges j -> i, columns sorted. Duplicate edges are an error: PyG counts every copy, HaloGNN's
    CSR builder merges them, so the two would compute different sums."""
    src, dst = edge_index[0].astype(np.int64), edge_index[1].astype(np.int64)
    keys = dst * num_nodes + src
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    same = np.flatnonzero(keys[1:] == keys[:-1])
    if same.size:
        e = int(order[same[0] + 1])
        raise HaloError(f"save_graph: edge_index has {same.size} duplicate edge(s), the first "
                        f"{int(src[e])} -> {int(dst[e])} (column {e}); PyG counts every copy, "
                        "HaloGNN's adjacency holds each edge once: coalesce the graph first "
                        "(torch_geometric.utils.coalesce) and use the same graph in PyG")
    rows, cols = keys // num_nodes, keys % num_nodes
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=num_nodes), out=indptr[1:])
    return indptr, cols.astype(np.int32)


def write_hcsr(path, indptr, indices, num_cols):
    """Binary CSR (docs/INPUT.md, "Binary CSR"): header, indptr, indices, CRC-32; no values."""
    num_rows, nnz = indptr.size - 1, indices.size
    if num_cols > 2**31 - 1:
        raise HaloError(f"{path}: {num_cols} columns exceed the format's 2^31 - 1")
    body = (struct.pack("<8sIIqqq", HCSR_MAGIC, HCSR_VERSION, 0, num_rows, num_cols, nnz) +
            np.ascontiguousarray(indptr, dtype="<i8").tobytes() +
            np.ascontiguousarray(indices, dtype="<i4").tobytes())
    _atomic_write(Path(path), lambda f: f.write(body + struct.pack("<I", zlib.crc32(body))))


def _eval_ids(data, eval_mask, num_nodes):
    """Node ids of the evaluation set: a field name of data (a boolean mask or an index), an
    array (mask or index), or None."""
    if eval_mask is None:
        return None
    if isinstance(eval_mask, str):
        value = _field(data, eval_mask)
        if value is None:
            return None
        name = eval_mask
    else:
        value, name = eval_mask, "eval_mask"
    ids = _numpy(value, name)
    if ids.dtype == np.bool_:
        if ids.shape != (num_nodes,):
            raise HaloError(f"save_graph: {name} is a mask of shape {ids.shape}, the graph has "
                            f"{num_nodes} nodes")
        return np.flatnonzero(ids)
    ids = ids.reshape(-1)
    if ids.size and (not np.issubdtype(ids.dtype, np.integer) or ids.min() < 0
                     or ids.max() >= num_nodes):
        raise HaloError(f"save_graph: {name} must be a boolean mask or node ids in "
                        f"[0, {num_nodes})")
    return ids.astype(np.int64)


class SavedGraph:
    """What save_graph wrote. partition_args: halo-partition's arguments (add --parts P and
    -o DATASET); infer_args: halo-infer's (--eval-nodes FILE where an evaluation set was
    written). str() is the partition arguments as one shell line."""

    def __init__(self, directory, partition_args, infer_args, num_nodes, num_edges,
                 num_features):
        self.directory = directory
        self.partition_args = partition_args
        self.infer_args = infer_args
        self.num_nodes = num_nodes
        self.num_edges = num_edges
        self.num_features = num_features

    def __str__(self):
        return shlex.join(self.partition_args)

    def __repr__(self):
        return (f"SavedGraph({str(self.directory)!r}, {self.num_nodes} nodes, {self.num_edges} "
                f"edges, {self.num_features} features: halo-partition {self})")


def save_graph(data, directory, *, edge_index=None, x=None, y=None, eval_mask="test_mask",
               num_nodes=None, graph_format="hcsr"):
    """Writes a graph and its node data as halo-partition's inputs into `directory` (created).

    data: a torch_geometric.data.Data, a dict with the same keys, or None; the keywords
    edge_index, x, y and num_nodes override its fields (torch tensors or numpy arrays).
    edge_index [2, E]: messages flow edge_index[0] -> edge_index[1] (PyG's default). Edge
    weights and edge features are not written: HaloGNN's layers use the unweighted adjacency, as
    PyG's do when called as model(x, edge_index). x [N, F] -> features.npy (float32); y [N]
    integer classes (-1: none) -> labels.txt; eval_mask (a field name such as "test_mask", a
    boolean mask or node ids; None: none) -> eval_index.txt for halo-infer --eval-nodes.
    graph_format "hcsr" (binary CSR, graph.hcsr) or "edgelist" (graph.el, a line "i j" per edge
    j -> i).

    Returns a SavedGraph whose partition_args are halo-partition's arguments; they are also
    written to directory/partition.args (one shell line, written last: a directory without it
    is an interrupted save)."""
    directory = Path(directory)
    edge_index = _numpy(edge_index if edge_index is not None else _field(data, "edge_index"),
                        "edge_index")
    x = _numpy(x if x is not None else _field(data, "x"), "x")
    y = _numpy(y if y is not None else _field(data, "y"), "y")
    if edge_index is None:
        raise HaloError("save_graph: no edge_index (give a Data or edge_index=)")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2 or (
            edge_index.size and not np.issubdtype(edge_index.dtype, np.integer)):
        raise HaloError(f"save_graph: edge_index must be an integer array [2, E], not "
                        f"{edge_index.dtype} {list(edge_index.shape)}")
    if num_nodes is None:
        num_nodes = _field(data, "num_nodes") if data is not None else None
    if num_nodes is None:
        num_nodes = x.shape[0] if x is not None else (
            int(edge_index.max()) + 1 if edge_index.size else 0)
    num_nodes = int(num_nodes)
    if num_nodes < 1:
        raise HaloError("save_graph: the graph has no nodes")
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        bad = int(edge_index.min()) if edge_index.min() < 0 else int(edge_index.max())
        raise HaloError(f"save_graph: edge_index holds node {bad}, outside [0, {num_nodes})")
    if x is not None and (x.ndim != 2 or x.shape[0] != num_nodes):
        raise HaloError(f"save_graph: x has shape {list(x.shape)}, expected [{num_nodes}, F]")
    if x is not None and not np.isfinite(x).all():
        raise HaloError("save_graph: x has non-finite values")
    if y is not None:
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.shape != (num_nodes,) or not np.issubdtype(y.dtype, np.integer):
            raise HaloError(f"save_graph: y must be integer classes [{num_nodes}] (-1: no label), "
                            f"not {y.dtype} {list(y.shape)}")
        if y.size and y.min() < -1:
            raise HaloError(f"save_graph: y holds {int(y.min())}; labels are classes >= 0 or -1")
    ids = _eval_ids(data, eval_mask, num_nodes)
    if graph_format not in ("hcsr", "edgelist"):
        raise HaloError(f"save_graph: graph_format {graph_format!r} (expected hcsr or edgelist)")

    directory.mkdir(parents=True, exist_ok=True)
    done = directory / "partition.args"
    if done.exists():
        done.unlink()
    indptr, indices = csr_of_edges(edge_index, num_nodes)
    if graph_format == "hcsr":
        graph = directory / "graph.hcsr"
        write_hcsr(graph, indptr, indices, num_nodes)
        args = [str(graph)]
    else:
        graph = directory / "graph.el"
        rows = np.repeat(np.arange(num_nodes, dtype=np.int64), np.diff(indptr))
        lines = np.stack([rows, indices.astype(np.int64)], axis=1)
        header = f"# HaloGNN edge list: line 'i j' = edge j -> i\n# Nodes: {num_nodes}\n"
        _atomic_write(graph, lambda f: (f.write(header.encode()),
                                        np.savetxt(f, lines, fmt="%d")))
        args = [str(graph), "--num-nodes", str(num_nodes)]
    args += PARTITION_FLAGS
    if x is not None:
        features = directory / "features.npy"
        _atomic_write(features, lambda f: np.save(f, np.ascontiguousarray(x, dtype="<f4")))
        args += ["--features", str(features)]
    if y is not None:
        labels = directory / "labels.txt"
        _atomic_write(labels, lambda f: np.savetxt(f, y.astype(np.int64), fmt="%d"))
        args += ["--labels", str(labels)]
    infer_args = []
    if ids is not None:
        index = directory / "eval_index.txt"
        _atomic_write(index, lambda f: np.savetxt(f, ids, fmt="%d"))
        infer_args = ["--eval-nodes", str(index)]
    saved = SavedGraph(directory, args, infer_args, num_nodes, int(indices.size),
                       0 if x is None else int(x.shape[1]))
    _atomic_write(directory / "infer.args", lambda f: f.write(
        (shlex.join(infer_args) + "\n").encode()))
    _atomic_write(done, lambda f: f.write((str(saved) + "\n").encode()))
    return saved
