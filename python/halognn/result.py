"""halo-infer's result directory (docs/FORMAT.md, "Results") -> numpy arrays in global-id order."""
import json
from pathlib import Path

import numpy as np

from .model_file import HaloError, attribute_text

RESULT_FORMAT = "halo-result"
MANIFEST_FORMAT = "halo-result-manifest"


class Result:
    """A whole result: output float32 [n, output_dim] (the last layer: logits for a
    classifier), prediction int32 [n] (argmax, lowest index on ties, as halo-infer took it),
    global_ids int64 [n] ascending (row r is node global_ids[r]; a result of a whole graph has
    global_ids = 0 .. num_nodes - 1, so row i is node i), layers {i: float32 [n, width_i]}
    (with halo-infer --save-layers and load_result(..., layers=True)), manifest (the dict of
    manifest.json: dataset, model, backend, accuracy, phases, ...)."""

    def __init__(self, output, prediction, global_ids, layers, manifest):
        self.output = output
        self.prediction = prediction
        self.global_ids = global_ids
        self.layers = layers
        self.manifest = manifest

    @property
    def complete(self):
        """Whether the rows are every node 0 .. num_nodes - 1."""
        n = int(self.manifest.get("num_nodes", -1))
        return self.global_ids.size == n and bool(
            (self.global_ids == np.arange(n, dtype=np.int64)).all())

    def __repr__(self):
        return (f"Result({self.output.shape[0]} rows x {self.output.shape[1]}, dataset "
                f"{self.manifest.get('dataset')!r}, model {self.manifest.get('model')!r}, "
                f"backend {self.manifest.get('backend')!r})")


def _read_piece(path, part, num_parts, want_layers):
    import h5py
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise HaloError(f"{path}: cannot open as HDF5 ({e})") from None
    with f:
        if attribute_text(f.attrs.get("format", "")) != RESULT_FORMAT:
            raise HaloError(f"{path}: not a halo-infer result piece (no format "
                            f"'{RESULT_FORMAT}')")
        for key, expected in (("part", part), ("num_parts", num_parts)):
            if int(f.attrs[key]) != expected:
                raise HaloError(f"{path}: attribute {key} = {int(f.attrs[key])}, the manifest "
                                f"says {expected}")
        ids = np.asarray(f["global_ids"][...], dtype=np.int64)
        output = np.asarray(f["output"][...], dtype=np.float32)
        prediction = np.asarray(f["prediction"][...], dtype=np.int32)
        if output.shape[0] != ids.size or prediction.shape != ids.shape:
            raise HaloError(f"{path}: {ids.size} global ids, output {list(output.shape)}, "
                            f"prediction {list(prediction.shape)}")
        layers = {}
        if want_layers and "layers" in f:
            for key in f["layers"]:
                layers[int(key)] = np.asarray(f["layers"][key][...], dtype=np.float32)
    return ids, output, prediction, layers


def load_result(result_dir, layers=False):
    """The result of `halo-infer ... --out result_dir` in global-id order, as a Result.

    A directory without manifest.json is an interrupted or failed run (rank 0 writes the manifest
    last) and is refused; so are pieces that disagree with it or hold a node twice."""
    result_dir = Path(result_dir)
    manifest_path = result_dir / "manifest.json"
    if not manifest_path.is_file():
        raise HaloError(f"{result_dir}: no manifest.json (not a halo-infer --out directory, or "
                        "an interrupted or failed run)")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as e:
        raise HaloError(f"{manifest_path}: cannot read ({e})") from None
    if manifest.get("format") != MANIFEST_FORMAT:
        raise HaloError(f"{manifest_path}: format {manifest.get('format')!r}, expected "
                        f"{MANIFEST_FORMAT!r}")
    num_parts = int(manifest["num_parts"])
    pieces = manifest.get("pieces", [])
    if len(pieces) != num_parts:
        raise HaloError(f"{manifest_path}: {len(pieces)} pieces for {num_parts} parts")
    ids, outputs, predictions, per_layer = [], [], [], {}
    for piece in pieces:
        i, o, p, lay = _read_piece(result_dir / piece["file"], int(piece["part"]), num_parts,
                                   layers)
        ids.append(i)
        outputs.append(o)
        predictions.append(p)
        for key, value in lay.items():
            per_layer.setdefault(key, []).append(value)
    ids = np.concatenate(ids)
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    twice = np.flatnonzero(ids[1:] == ids[:-1])
    if twice.size:
        raise HaloError(f"{result_dir}: node {int(ids[twice[0]])} appears in two pieces")
    output = np.concatenate(outputs)[order]
    expected_dim = int(manifest.get("output_dim", output.shape[1]))
    if output.shape[1] != expected_dim:
        raise HaloError(f"{result_dir}: output width {output.shape[1]}, the manifest says "
                        f"{expected_dim}")
    prediction = np.concatenate(predictions)[order]
    stacked = {}
    for key, values in per_layer.items():
        if len(values) != num_parts:
            raise HaloError(f"{result_dir}: layer {key} is saved by {len(values)} of "
                            f"{num_parts} pieces")
        stacked[key] = np.concatenate(values)[order]
    return Result(output, prediction, ids, stacked, manifest)
