"""halognn: from a trained PyTorch Geometric model and its graph to HaloGNN, and back.

    import halognn
    halognn.save_model(model, "model.h5")            # GCN, GraphSAGE, GIN, GAT, Sequential stacks
    saved = halognn.save_graph(data, "graph")         # PyG Data or arrays -> halo-partition inputs
    print(saved)                                      # the halo-partition arguments
    result = halognn.load_result("result")            # halo-infer --out -> numpy, global-id order
    result.prediction, result.output, result.manifest

numpy and h5py are required; torch and torch_geometric are imported by save_model only (and by
save_graph when it is given tensors). docs/PYG.md has the supported modules and their mapping.
"""
from .graph import PARTITION_FLAGS, SavedGraph, save_graph, write_hcsr
from .model_file import (ACTIVATIONS, LAYER_TYPES, HaloError, check_layers, layers_equal,
                         read_model, write_model)
from .result import Result, load_result

__version__ = "0.1.0"
__all__ = ["save_model", "save_graph", "load_result", "model_layers", "read_model",
           "write_model", "check_layers", "layers_equal", "write_hcsr", "HaloError", "Result",
           "SavedGraph", "LAYER_TYPES", "ACTIVATIONS", "PARTITION_FLAGS"]


def model_layers(model, num_features=None):
    """HaloGNN's layers (model_file layer dicts) of a PyG model, without writing a file."""
    from .pyg import model_layers as convert
    return convert(model, num_features=num_features)


def save_model(model, path, num_features=None, name=None):
    """Writes a trained PyG model as a HaloGNN model file (docs/FORMAT.md, "Model file") that
    `halo-infer --model path` reads; returns its layers.

    Supported: torch_geometric.nn.models GCN, GraphSAGE, GIN, GAT (act "relu" or None; no jk,
    no norm; dropout is the identity at inference), and torch_geometric.nn.Sequential /
    torch.nn.Sequential chains of GCNConv, SAGEConv, GINConv, GATConv, TransformerConv,
    AGNNConv, Linear, ReLU and Dropout. Anything else, or a setting the engine cannot express
    (improved=True, aggr="max", edge_dim, ...), raises HaloError naming the module and the
    setting. num_features: the input width, needed only when the first layer has no weights
    (AGNNConv). The file is read back and compared before this returns."""
    layers = model_layers(model, num_features=num_features)
    label = name if name is not None else f"{type(model).__name__} (halognn.save_model)"
    write_model(path, layers, label)
    _, back = read_model(path)
    differs = layers_equal(layers, back)
    if differs is not None:
        raise HaloError(f"{path}: does not read back as written ({differs})")
    return layers
