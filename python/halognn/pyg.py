"""PyTorch Geometric models -> HaloGNN layers (docs/PYG.md, "From Python").

Each supported module is mapped to the HaloGNN layer that computes the same function at inference
(model.eval(): dropout is the identity), checked against the engine's semantics
(docs/FORMAT.md, "Model file"); a setting the engine cannot express is refused with a
HaloError naming the module and the setting. Weights are taken as the model holds them; the
transposes to HaloGNN's [in, out] happen here.
"""
import numpy as np

from .model_file import HaloError

# torch.nn modules that are the identity at inference.
_IDENTITY_AT_INFERENCE = ("Dropout", "Identity", "AlphaDropout", "FeatureAlphaDropout")


def _matrix(param, where):
    """A Linear weight ([out, in] in torch) as HaloGNN's float32 [in, out]."""
    import torch
    if isinstance(param, torch.nn.parameter.UninitializedParameter):
        raise HaloError(f"{where}: a lazy module (in_channels=-1) whose weights are not "
                        "initialized yet; run one forward pass before saving")
    return param.detach().to("cpu", torch.float32).numpy().T.copy()


def _vector(param):
    import torch
    if param is None:
        return None
    return param.detach().to("cpu", torch.float32).numpy().reshape(-1).copy()


def _layer(kind, in_dim, out_dim, **arrays_and_attributes):
    layer = {"type": kind, "in_dim": int(in_dim), "out_dim": int(out_dim), "activation": "none"}
    layer.update(arrays_and_attributes)
    return layer


def _require(condition, where, setting, why):
    if not condition:
        raise HaloError(f"{where}: {setting} is not supported ({why})")


def _check_flow(conv, where):
    _require(getattr(conv, "flow", "source_to_target") == "source_to_target", where,
             f"flow={conv.flow!r}", "HaloGNN aggregates messages source -> target: row i of the "
             "adjacency sums its columns j for every edge j -> i")


def _check_aggr(conv, where, expected):
    aggr = getattr(conv, "aggr", expected)
    _require(isinstance(aggr, str) and aggr == expected, where, f"aggr={aggr!r}",
             f"HaloGNN's layer aggregates with {expected!r}")


def linear_layers(lin, where="Linear"):
    """torch.nn.Linear or torch_geometric.nn.Linear: x W + b."""
    w = _matrix(lin.weight, where)
    return [_layer("linear", w.shape[0], w.shape[1], weight=w, bias=_vector(lin.bias))]


def gcn_layers(conv, where="GCNConv"):
    """GCNConv: A_hat (x W) + b, A_hat = D^-1/2 (A + I) D^-1/2 with add_remaining_self_loops
    (a stored self-loop keeps its weight 1): HaloGNN gcn on a dataset partitioned with
    --normalize none."""
    _check_flow(conv, where)
    _check_aggr(conv, where, "add")
    _require(conv.normalize, where, "normalize=False", "HaloGNN's gcn always normalizes "
             "symmetrically")
    _require(conv.add_self_loops, where, "add_self_loops=False", "HaloGNN's gcn adds the "
             "remaining self-loops")
    _require(not conv.improved, where, "improved=True", "HaloGNN's gcn self-loops weigh 1, not 2")
    w = _matrix(conv.lin.weight, where)
    _require(conv.lin.bias is None, where, "a bias inside lin", "GCNConv's bias comes after "
             "the aggregation")
    return [_layer("gcn", w.shape[0], w.shape[1], weight=w, bias=_vector(conv.bias))]


def sage_layers(conv, where="SAGEConv"):
    """SAGEConv (mean): lin_l(mean_j x_j) + lin_r(x_i): HaloGNN sage. root_weight=False is
    written as a zero root weight (the same function)."""
    _check_flow(conv, where)
    _check_aggr(conv, where, "mean")
    _require(not conv.normalize, where, "normalize=True", "HaloGNN's sage does not L2-normalize "
             "its output rows")
    _require(not conv.project, where, "project=True", "HaloGNN's sage has no projection")
    w = _matrix(conv.lin_l.weight, where)
    if conv.root_weight:
        _require(conv.lin_r.bias is None, where, "a bias in lin_r", "HaloGNN's sage has one bias")
        root = _matrix(conv.lin_r.weight, where)
    else:
        root = np.zeros_like(w)
    return [_layer("sage", w.shape[0], w.shape[1], weight=w, bias=_vector(conv.lin_l.bias),
                   root_weight=root)]


def _gin_mlp(nn, where):
    """The two Linears of a GINConv MLP Linear -> ReLU -> Linear (dropout allowed between), as a
    torch.nn.Sequential or torch_geometric.nn.MLP without norms."""
    import torch
    from torch_geometric.nn.models import MLP
    if isinstance(nn, MLP):
        _require(len(nn.lins) == 2, where, f"an MLP of {len(nn.lins)} Linear layers",
                 "HaloGNN's gin MLP is Linear -> ReLU -> Linear")
        for norm in nn.norms:
            _require(isinstance(norm, torch.nn.Identity), where,
                     f"norm {type(norm).__name__} in the MLP", "HaloGNN's gin has no norm layers")
        _require(isinstance(nn.act, torch.nn.ReLU), where,
                 f"MLP activation {type(nn.act).__name__}", "HaloGNN's gin has a ReLU")
        _require(getattr(nn, "plain_last", True), where, "plain_last=False",
                 "HaloGNN's gin has no activation after its second Linear")
        return nn.lins[0], nn.lins[1]
    if isinstance(nn, torch.nn.Sequential):
        parts = [m for m in nn if type(m).__name__ not in _IDENTITY_AT_INFERENCE]
        names = [type(m).__name__ for m in parts]
        _require(names == ["Linear", "ReLU", "Linear"], where, f"MLP {' -> '.join(names)}",
                 "HaloGNN's gin MLP is Linear -> ReLU -> Linear")
        return parts[0], parts[2]
    raise HaloError(f"{where}: MLP {type(nn).__name__} is not supported (HaloGNN's gin MLP is "
                    "Linear -> ReLU -> Linear, as torch.nn.Sequential or torch_geometric MLP)")


def gin_layers(conv, where="GINConv"):
    """GINConv: MLP((1 + eps) x_i + sum_j x_j): HaloGNN gin with its two Linears."""
    _check_flow(conv, where)
    _check_aggr(conv, where, "add")
    first, second = _gin_mlp(conv.nn, where)
    w, w2 = _matrix(first.weight, where), _matrix(second.weight, where)
    return [_layer("gin", w.shape[0], w2.shape[1], weight=w, bias=_vector(first.bias),
                   weight2=w2, bias2=_vector(second.bias), hidden_dim=w.shape[1],
                   eps=float(np.float32(_vector(conv.eps)[0])))]


def gat_layers(conv, where="GATConv"):
    """GATConv: z = x W, per head softmax_j(LeakyReLU(a_dst . z_i + a_src . z_j)) over the
    neighbours and the node itself, concat, + bias: HaloGNN gat. concat=False with several heads
    (PyG's mean over heads, e.g. BasicGNN GAT's last layer) is a gat layer without bias followed
    by a linear layer that averages the heads and adds the bias."""
    _check_flow(conv, where)
    _check_aggr(conv, where, "add")
    _require(conv.add_self_loops, where, "add_self_loops=False", "HaloGNN's gat attends over "
             "the neighbours and the node itself")
    _require(getattr(conv, "lin_edge", None) is None, where, "edge_dim", "HaloGNN's gat has no "
             "edge features")
    _require(not getattr(conv, "residual", False), where, "residual=True", "HaloGNN's gat has no "
             "residual connection")
    lin = getattr(conv, "lin", None)
    if lin is None:
        _require(conv.lin_src is conv.lin_dst, where, "separate source and target weights "
                 "(in_channels as a tuple)", "HaloGNN's gat has one weight")
        lin = conv.lin_src
    _require(lin.bias is None, where, "a bias in lin", "HaloGNN's gat adds its bias after the "
             "aggregation")
    heads, width = int(conv.heads), int(conv.out_channels)
    w = _matrix(lin.weight, where)
    gat = dict(weight=w, att_src=_vector(conv.att_src), att_dst=_vector(conv.att_dst),
               heads=heads, negative_slope=float(np.float32(conv.negative_slope)))
    if conv.concat or heads == 1:
        return [_layer("gat", w.shape[0], heads * width, bias=_vector(conv.bias), **gat)]
    average = np.tile(np.eye(width, dtype=np.float32) / np.float32(heads), (heads, 1))
    return [_layer("gat", w.shape[0], heads * width, **gat),
            _layer("linear", heads * width, width, weight=average, bias=_vector(conv.bias))]


def transformer_layers(conv, where="TransformerConv"):
    """TransformerConv: per head softmax_j(q_i . k_j / sqrt(d)) over the stored neighbours (no
    self-loops added), concat, + lin_skip(x): HaloGNN transformer."""
    _check_flow(conv, where)
    _check_aggr(conv, where, "add")
    _require(getattr(conv, "lin_edge", None) is None, where, "edge_dim", "HaloGNN's transformer "
             "has no edge features")
    _require(not conv.beta, where, "beta=True", "HaloGNN's transformer adds the skip connection "
             "without a gate")
    heads, width = int(conv.heads), int(conv.out_channels)
    _require(conv.concat or heads == 1, where, "concat=False with several heads",
             "HaloGNN's transformer concatenates its heads")
    layer = {"heads": heads}
    for name, lin in (("query", conv.lin_query), ("key", conv.lin_key),
                      ("value", conv.lin_value)):
        layer[f"{name}_weight"] = _matrix(lin.weight, where)
        layer[f"{name}_bias"] = _vector(lin.bias)
    if conv.root_weight:  # lin_skip exists with root_weight=False too, unused
        layer["root_weight"] = _matrix(conv.lin_skip.weight, where)
        layer["bias"] = _vector(conv.lin_skip.bias)
    in_dim = layer["query_weight"].shape[0]
    return [_layer("transformer", in_dim, heads * width, **layer)]


def agnn_layers(conv, in_dim, where="AGNNConv"):
    """AGNNConv: softmax_j(beta cos(x_i, x_j)) over the neighbours and the node itself, sum of
    p_ij x_j: HaloGNN agnn without weight, width in_dim (a Linear before it stays its own
    linear layer)."""
    _check_flow(conv, where)
    _check_aggr(conv, where, "add")
    _require(conv.add_self_loops, where, "add_self_loops=False", "HaloGNN's agnn attends over "
             "the neighbours and the node itself")
    if in_dim is None:
        raise HaloError(f"{where}: its width is not known (an AGNNConv has no weights): pass "
                        "num_features= to save_model")
    return [_layer("agnn", in_dim, in_dim, beta=float(np.float32(_vector(conv.beta)[0])),
                   has_weight=False)]


def module_layers(module, in_dim, where):
    """HaloGNN layers of one supported module (a convolution or a Linear)."""
    import torch
    from torch_geometric import nn as gnn
    converters = ((gnn.GCNConv, gcn_layers), (gnn.SAGEConv, sage_layers),
                  (gnn.GINConv, gin_layers), (gnn.GATConv, gat_layers),
                  (gnn.TransformerConv, transformer_layers),
                  (torch.nn.Linear, linear_layers), (gnn.Linear, linear_layers))
    # Exact classes: a subclass (GATv2Conv is not one, but others may be) may compute more.
    for cls, convert in converters:
        if type(module) is cls:
            return convert(module, where)
    if type(module) is gnn.AGNNConv:
        return agnn_layers(module, in_dim, where)
    raise HaloError(f"{where}: {type(module).__name__} is not supported (HaloGNN takes GCNConv, "
                    "SAGEConv, GINConv, GATConv, TransformerConv, AGNNConv, Linear, ReLU and "
                    "dropout; docs/PYG.md)")


class _Stack:
    """Layers being assembled, with the activations that follow them."""

    def __init__(self, num_features):
        self.layers = []
        self.width = num_features

    def add(self, module, where):
        for layer in module_layers(module, self.width, where):
            if self.width is not None and layer["in_dim"] != self.width:
                raise HaloError(f"{where}: takes width {layer['in_dim']}, the layer before "
                                f"gives {self.width}")
            self.layers.append(layer)
            self.width = layer["out_dim"]

    def activation(self, module, where):
        import torch
        name = type(module).__name__
        if name in _IDENTITY_AT_INFERENCE:
            return
        if not isinstance(module, torch.nn.ReLU):
            raise HaloError(f"{where}: activation {name} is not supported (HaloGNN's layers "
                            "apply relu or none)")
        if not self.layers:
            raise HaloError(f"{where}: a ReLU before the first layer (HaloGNN applies "
                            "activations to layer outputs only)")
        self.layers[-1]["activation"] = "relu"  # relu(relu(x)) = relu(x)


def _is_activation_like(module):
    import torch
    return (type(module).__name__ in _IDENTITY_AT_INFERENCE or
            type(module).__module__.startswith("torch.nn.modules.activation") or
            isinstance(module, torch.nn.ReLU))


def _sequential_layers(model, num_features):
    """torch_geometric.nn.Sequential or torch.nn.Sequential: a chain of modules, each taking
    the previous one's output (and the edge index)."""
    import torch
    from torch_geometric.nn import Sequential as PygSequential
    stack = _Stack(num_features)
    if isinstance(model, PygSequential):
        params = list(model.signature.param_dict)
        _require(len(params) == 2, "Sequential", f"inputs {', '.join(params)}",
                 "HaloGNN runs stacks of (x, edge_index)")
        x_name, edge_name = params
        current = x_name
        for child in model._children:
            module = getattr(model, child.name)
            where = f"Sequential {child.name} ({type(module).__name__})"
            inputs = list(child.param_names)
            if len(child.return_names) != 1 or not inputs or inputs[0] != current or any(
                    name != edge_name for name in inputs[1:]):
                raise HaloError(f"{where}: maps '{', '.join(inputs)} -> "
                                f"{', '.join(child.return_names)}'; HaloGNN runs a chain "
                                f"where each module takes the previous output ('{current}') "
                                f"and at most '{edge_name}'")
            current = child.return_names[0]
            if _is_activation_like(module):
                stack.activation(module, where)
            else:
                stack.add(module, where)
    else:
        for index, module in enumerate(model):
            where = f"Sequential [{index}] ({type(module).__name__})"
            if isinstance(module, torch.nn.Sequential):
                raise HaloError(f"{where}: a nested Sequential is not supported")
            if _is_activation_like(module):
                stack.activation(module, where)
            else:
                stack.add(module, where)
    if not stack.layers:
        raise HaloError("Sequential: no layer HaloGNN can run")
    return stack.layers


def _basic_gnn_layers(model):
    """torch_geometric.nn.models GCN, GraphSAGE, GIN, GAT: convs with the model's activation
    between them, none after the last; dropout is the identity at inference."""
    import torch
    name = type(model).__name__
    _require(model.jk_mode is None, name, f"jk={model.jk_mode!r}", "HaloGNN has no jumping "
             "knowledge; build the model with jk=None")
    for i, norm in enumerate(model.norms):
        _require(isinstance(norm, torch.nn.Identity), name,
                 f"norm {type(norm).__name__} (after conv {i})", "HaloGNN has no norm layers; "
                 "build the model with norm=None")
    act = model.act
    _require(act is None or isinstance(act, torch.nn.ReLU), name,
             f"act={type(act).__name__}", "HaloGNN's layers apply relu or none")
    _require(not hasattr(model, "lin"), name, "a final lin", "HaloGNN's BasicGNN mapping has "
             "none")
    stack = _Stack(None)
    for i, conv in enumerate(model.convs):
        stack.add(conv, f"{name} convs[{i}] ({type(conv).__name__})")
        if act is not None and i + 1 < len(model.convs):
            stack.layers[-1]["activation"] = "relu"
    return stack.layers


def model_layers(model, num_features=None):
    """HaloGNN layers (model_file layer dicts) of a supported PyG model."""
    import torch
    from torch_geometric.nn.models.basic_gnn import GAT, GCN, GIN, BasicGNN, GraphSAGE
    if isinstance(model, BasicGNN):
        if type(model) not in (GCN, GraphSAGE, GIN, GAT):
            raise HaloError(f"{type(model).__name__}: HaloGNN takes the BasicGNN models GCN, "
                            "GraphSAGE, GIN and GAT")
        return _basic_gnn_layers(model)
    if isinstance(model, torch.nn.Sequential) or type(model).__name__ == "Sequential":
        return _sequential_layers(model, num_features)
    if isinstance(model, torch.nn.Module):
        stack = _Stack(num_features)
        stack.add(model, type(model).__name__)
        return stack.layers
    raise HaloError(f"save_model: {type(model).__name__} is not a torch.nn.Module")
