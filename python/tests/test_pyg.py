#!/usr/bin/env python3
"""halo-infer against PyTorch Geometric's own forward, through halognn (docs/PYG.md).

    python3 python/tests/test_pyg.py BIN_DIR MPIEXEC

For each supported model class (GCN, GraphSAGE, GIN, GAT, a PyG Sequential of GCNConv, SAGEConv,
GINConv and Linear, one of GATConv, TransformerConv, AGNNConv and Linear, a torch.nn.Sequential),
seeded random weights on a seeded directed graph with stored self-loops and an isolated node:
halognn.save_model and halognn.save_graph write the inputs, halo-partition makes 1, 2 and 3
parts, halo-infer runs on as many ranks (CPU backend), halognn.load_result reads the result;
its outputs must equal PyG's eval-mode logits within 1e-4 of their largest magnitude and every
prediction (argmax) must be PyG's. Settings the engine cannot express must be refused with a
message naming them. Exit 0 pass, 1 fail, 77 skipped (no torch / torch_geometric).
"""
import sys
import tempfile
from pathlib import Path

try:
    import torch
    import torch_geometric  # noqa: F401
except ImportError as e:
    print(f"SKIP: {e}; the PyG tests need torch and torch_geometric (scripts/pyg-venv.sh makes "
          "a venv with them; docs/PYG.md)")
    sys.exit(77)

from harness import Tools, check, finish, random_graph  # noqa: E402

import halognn  # noqa: E402
from torch_geometric import nn as gnn  # noqa: E402

RTOL = 1e-4
FEATURES, CLASSES = 12, 5


def models():
    """(name, model, forward(model, x, edge_index) -> logits)."""
    def call(m, x, ei):
        return m(x, ei)

    def chain(m, x, ei):
        # torch.nn.Sequential cannot pass edge_index: its modules are applied in order,
        # convolutions with (x, edge_index).
        for module in m:
            x = module(x, ei) if isinstance(module, gnn.MessagePassing) else module(x)
        return x

    torch.manual_seed(7)
    gin = gnn.models.GIN(FEATURES, 16, 2, CLASSES, train_eps=True)
    with torch.no_grad():
        for i, conv in enumerate(gin.convs):
            conv.eps.fill_(0.25 * (i + 1))
    yield "GCN", gnn.models.GCN(FEATURES, 16, 2, CLASSES, dropout=0.5), call
    yield "GraphSAGE", gnn.models.GraphSAGE(FEATURES, 16, 3, CLASSES, dropout=0.5), call
    yield "GIN (eps learnt)", gin, call
    # heads=4: the last layer has concat=False (a mean over heads) in PyG's BasicGNN GAT.
    yield "GAT", gnn.models.GAT(FEATURES, 16, 2, CLASSES, heads=4, dropout=0.6), call
    yield "Sequential gcn/sage/gin/linear", gnn.Sequential("x, edge_index", [
        (gnn.GCNConv(FEATURES, 16), "x, edge_index -> x"), torch.nn.ReLU(inplace=True),
        (gnn.SAGEConv(16, 16), "x, edge_index -> x"), torch.nn.ReLU(),
        torch.nn.Dropout(0.5),
        (gnn.GINConv(torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.ReLU(),
                                         torch.nn.Linear(24, 16)), eps=0.1),
         "x, edge_index -> h"),
        torch.nn.ReLU(),
        (torch.nn.Linear(16, CLASSES), "h -> out")]), call
    yield "Sequential gat/transformer/agnn", gnn.Sequential("x, edge_index", [
        (gnn.GATConv(FEATURES, 8, heads=2), "x, edge_index -> x"), torch.nn.ReLU(),
        (gnn.TransformerConv(16, 8, heads=2), "x, edge_index -> x"), torch.nn.ReLU(),
        (gnn.Linear(16, 16), "x -> x"),
        (gnn.AGNNConv(requires_grad=True), "x, edge_index -> x"),
        (gnn.GATConv(16, CLASSES, heads=3, concat=False), "x, edge_index -> x")]), call
    yield "torch.nn.Sequential", torch.nn.Sequential(
        gnn.SAGEConv(FEATURES, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3),
        gnn.TransformerConv(16, 16, heads=1, root_weight=False), torch.nn.ReLU(),
        gnn.GCNConv(16, CLASSES)), chain


def refusals():
    """(model, words the message must contain)."""
    lin = torch.nn.Linear(16, CLASSES)
    yield gnn.models.GCN(FEATURES, 16, 2, CLASSES, jk="cat"), "jk='cat'"
    yield gnn.models.GCN(FEATURES, 16, 2, CLASSES, norm="batch_norm"), "norm BatchNorm"
    yield gnn.models.GraphSAGE(FEATURES, 16, 2, CLASSES, act="elu"), "act=ELU"
    yield gnn.models.GAT(FEATURES, 16, 2, CLASSES, v2=True), "GATv2Conv is not supported"
    yield gnn.models.GraphSAGE(FEATURES, 16, 2, CLASSES, aggr="max"), "aggr='max'"
    yield torch.nn.Sequential(gnn.GCNConv(FEATURES, 16, improved=True), lin), "improved=True"
    yield torch.nn.Sequential(gnn.GCNConv(FEATURES, 16), torch.nn.ELU(), lin), "ELU"
    yield torch.nn.Sequential(gnn.GCNConv(FEATURES, 16), torch.nn.BatchNorm1d(16), lin), \
        "BatchNorm1d is not supported"
    yield torch.nn.Sequential(gnn.TransformerConv(FEATURES, 16, beta=True)), "beta=True"
    yield torch.nn.Sequential(gnn.TransformerConv(FEATURES, 8, heads=2, concat=False)), \
        "concat=False"
    yield torch.nn.Sequential(gnn.GATConv(FEATURES, 8, edge_dim=3)), "edge_dim"
    yield torch.nn.Sequential(gnn.AGNNConv(), lin), "num_features="
    yield torch.nn.Sequential(torch.nn.ReLU(), gnn.GCNConv(FEATURES, 16)), "before the first"
    yield gnn.Sequential("x, edge_index", [
        (gnn.GCNConv(FEATURES, 16), "x, edge_index -> h"),
        (gnn.GCNConv(16, 16), "x, edge_index -> x")]), "the previous output"


def main():
    tools = Tools(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "mpiexec")
    torch.use_deterministic_algorithms(True)
    graph = random_graph(11, features=FEATURES, classes=CLASSES)
    with tempfile.TemporaryDirectory(prefix="halognn-pyg-") as tmp:
        tmp = Path(tmp)
        # torch tensors in, as a user's Data would hold them.
        data = torch_geometric.data.Data(
            edge_index=torch.from_numpy(graph["edge_index"]), x=torch.from_numpy(graph["x"]),
            y=torch.from_numpy(graph["y"]), test_mask=torch.from_numpy(graph["test_mask"]))
        saved = halognn.save_graph(data, tmp / "graph")
        datasets = {}
        for parts in (1, 2, 3):
            datasets[parts] = tmp / f"graph-{parts}.h5"
            tools.partition(saved, parts, datasets[parts])
        x, ei = data.x, data.edge_index
        for number, (name, model, forward) in enumerate(models()):
            model.eval()
            with torch.no_grad():
                expected = forward(model, x, ei).numpy()
            path = tmp / f"model-{number}.h5"
            layers = halognn.save_model(model, path)
            types = " ".join(f"{layer['type']}/{layer['activation']}" for layer in layers)
            scale = float(abs(expected).max())
            for parts, dataset in datasets.items():
                out = tmp / f"result-{number}-{parts}"
                tools.infer(dataset, parts, path, out, saved.infer_args)
                result = halognn.load_result(out)
                diff = float(abs(result.output - expected).max())
                same = float((result.prediction == expected.argmax(1)).mean())
                check(result.complete and diff <= RTOL * scale and same == 1.0,
                      f"{name} [{types}] on {parts} rank(s): max |diff| {diff:.3g} of "
                      f"max |logit| {scale:.3g}, identical predictions {same:.1%}")
        for model, words in refusals():
            try:
                halognn.save_model(model, tmp / "refused.h5")
                message = "no error"
            except halognn.HaloError as e:
                message = str(e)
            check(words in message and not (tmp / "refused.h5").exists(),
                  f"refused {type(model).__name__}: {message}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
