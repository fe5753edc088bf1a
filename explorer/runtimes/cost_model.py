"""What each node costs: FLOPs and bytes moved, from its shapes, to set measured times against.

A node's FLOPs follow its op: a convolution or matrix product counts a multiply and an add
per weight and output element (``2 * outputs * reduction``), an elementwise op one per
output element (three for softmax, five for layer-style normalisations), a pooling one per
window element, a reduction one per input element; data movement (reshape, transpose,
gather, concat) none. Bytes moved are every input (weights included) read once and every
output written once: a lower bound that a fused kernel beats by keeping tensors in cache.
Shapes are inferred again with the inputs fixed to concrete shapes
(:func:`explorer.onnx_adapter.inputs.concrete_input_shapes`: what the runtimes are timed on),
on a weight-stripped copy; a node whose shapes stay unknown has ``None`` costs. With a
profile's time per node, achieved GFLOP/s and the arithmetic intensity (FLOPs per byte)
place each node under the machine's roofline (:func:`explorer.views.runtime_figures.roofline_figure`).

Examples
--------
>>> from explorer import load
>>> costs = node_costs(load("zoo:mlp"))
>>> costs.get("/fc1/Gemm").flops, costs.get("/fc1/Gemm").bytes
(401408.0, 808000.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.core.op_categories import category_of
from explorer.core.tensors import dtype_bytes
from explorer.onnx_adapter.adapter import has_onnx_model

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph

__all__ = ["NodeCost", "CostModel", "node_costs", "bind_shape"]

_MATRIX_OPS = {"MatMul", "Gemm", "FusedMatMul", "FusedGemm", "MatMulInteger", "QLinearMatMul", "QGemm"}
_CONV_OPS = {"Conv", "FusedConv", "ConvInteger", "QLinearConv"}
_PER_ELEMENT = {"Softmax": 3, "LogSoftmax": 3, "BatchNormalization": 2}
_NORMALIZATION_FLOPS = 5  # mean, variance, normalise, scale, shift
_ELEMENTWISE_CATEGORIES = {"activation", "math", "logic", "quantization"}


@dataclass(frozen=True)
class NodeCost:
    """One node's work.

    Attributes
    ----------
    node, op_type, category : str
        The node, its op and its drawing category.
    flops : float or None
        Floating-point (or integer) operations per inference; None when shapes are unknown.
    bytes : float or None
        Bytes read (inputs and weights) and written (outputs) once each.
    """

    node: str
    op_type: str
    category: str
    flops: float | None
    bytes: float | None

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte moved (the roofline's x axis).

        Examples
        --------
        >>> NodeCost("a", "MatMul", "conv", 400.0, 100.0).intensity
        4.0
        """
        if not self.flops or not self.bytes:
            return None
        return self.flops / self.bytes

    def to_dict(self) -> dict[str, Any]:
        """The fields and the intensity.

        Examples
        --------
        >>> NodeCost("a", "Relu", "activation", 8.0, 64.0).to_dict()["intensity"]
        0.125
        """
        return {**asdict(self), "intensity": self.intensity}


@dataclass(frozen=True)
class CostModel:
    """Every op node's cost, in graph order.

    Attributes
    ----------
    costs : tuple of NodeCost
        One per op node.
    tensor_shapes : mapping
        Tensor -> its shape with the inputs fixed (what the costs were computed from).

    Examples
    --------
    >>> from explorer import load
    >>> costs = node_costs(load("zoo:mlp"))
    >>> round(costs.total_flops / 1e6, 2), costs.to_frame().shape[1]
    (0.47, 6)
    """

    costs: tuple[NodeCost, ...]
    tensor_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict, repr=False)

    def get(self, node: str) -> NodeCost | None:
        """The cost of ``node`` (None: not an op of the graph).

        Examples
        --------
        >>> CostModel(()).get("x") is None
        True
        """
        return next((c for c in self.costs if c.node == node), None)

    @property
    def total_flops(self) -> float:
        """FLOPs of the nodes whose shapes are known.

        Examples
        --------
        >>> CostModel((NodeCost("a", "Relu", "activation", 8.0, 64.0),)).total_flops
        8.0
        """
        return float(sum(c.flops for c in self.costs if c.flops))

    def to_frame(self) -> pd.DataFrame:
        """One row per node: node, op_type, category, flops, bytes, intensity.

        Examples
        --------
        >>> list(CostModel(()).to_frame().columns)
        ['node', 'op_type', 'category', 'flops', 'bytes', 'intensity']
        """
        import pandas as pd

        columns = ["node", "op_type", "category", "flops", "bytes", "intensity"]
        return pd.DataFrame([c.to_dict() for c in self.costs], columns=columns)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the total and every node.

        Examples
        --------
        >>> CostModel(()).to_dict()
        {'total_flops': 0.0, 'nodes': []}
        """
        return {"total_flops": self.total_flops, "nodes": [c.to_dict() for c in self.costs]}


def bind_shape(shape: Sequence[Any] | None, symbols: Mapping[str, int]) -> tuple[int, ...] | None:
    """``shape`` with its symbolic dimensions bound, or None when one stays unknown.

    Examples
    --------
    >>> bind_shape(("batch", 3, 224), {"batch": 1}), bind_shape(("n", 4), {})
    ((1, 3, 224), None)
    """
    if shape is None:
        return None
    out = []
    for d in shape:
        if isinstance(d, int) and d >= 0:
            out.append(d)
        elif isinstance(d, str) and d in symbols:
            out.append(int(symbols[d]))
        else:
            return None
    return tuple(out)


def _concrete_shapes(
    graph: ModelGraph, input_shapes: Mapping[str, Sequence[int]] | None
) -> dict[str, tuple[int, ...]]:
    """Tensor -> shape, inferred again with the inputs fixed: a dimension an exporter computes
    at run time (``unk__1`` after a Shape/Gather/Range) is then known."""
    from explorer.onnx_adapter.input_shapes import fix_input_shapes
    from explorer.onnx_adapter.inputs import concrete_input_shapes
    from explorer.onnx_adapter.shape_inference import infer_types
    from explorer.onnx_adapter.weights import stripped_copy

    if not has_onnx_model(graph):
        return {}
    model = stripped_copy(graph.model)  # weights: dims only; never the graph's own model
    fix_input_shapes(model, concrete_input_shapes(graph.model, input_shapes))
    types, _ = infer_types(model)
    found = {}
    for name, (shape, _) in types.get((), {}).items():
        bound = bind_shape(shape, {})
        if bound is not None:
            found[name] = bound
    return found


def _flops(
    op: str, category: str, data: dict[str, Any], inputs: list[Any], outputs: list[Any]
) -> float | None:
    """FLOPs from the bound input and output shapes (``None`` entries: unknown)."""
    out = outputs[0] if outputs else None
    if op in _CONV_OPS:
        weight = inputs[1] if len(inputs) > 1 else None
        if out is None or weight is None or len(weight) < 2:
            return None
        return 2.0 * math.prod(out) * math.prod(weight[1:])
    if op in _MATRIX_OPS:
        a = inputs[0] if inputs else None
        if out is None or a is None or not a:
            return None
        trans_a = op in ("Gemm", "FusedGemm") and data.get("attributes", {}).get("transA", 0)
        reduction = a[0] if trans_a and len(a) == 2 else a[-1]
        return 2.0 * math.prod(out) * reduction
    if category == "pooling":
        if op.startswith("Global"):
            return float(math.prod(inputs[0])) if inputs and inputs[0] is not None else None
        kernel = data.get("attributes", {}).get("kernel_shape") or []
        return float(math.prod(out) * math.prod(kernel)) if out is not None else None
    if category == "reduction":
        return float(math.prod(inputs[0])) if inputs and inputs[0] is not None else None
    if category == "normalization":
        per = _PER_ELEMENT.get(op, _NORMALIZATION_FLOPS)
        return float(per * math.prod(out)) if out is not None else None
    if category in _ELEMENTWISE_CATEGORIES:
        return float(_PER_ELEMENT.get(op, 1) * math.prod(out)) if out is not None else None
    return 0.0  # data movement, control flow, custom ops: no arithmetic counted


def node_costs(graph: ModelGraph, input_shapes: Mapping[str, Sequence[int]] | None = None) -> CostModel:
    """FLOPs and bytes of every op node of ``graph`` for the given input shapes.

    Parameters
    ----------
    graph : ModelGraph
        An ONNX graph (its shapes from loading).
    input_shapes : mapping, optional
        Shapes for dynamic inputs (default: the benchmark's, 1 for batch-like dims, 32 else).

    Returns
    -------
    CostModel

    Examples
    --------
    >>> from explorer import load
    >>> conv = node_costs(load("zoo:resnet18")).get("/conv1/Conv")
    >>> round(conv.flops / 1e9, 3)  # 2 * 64 * 112 * 112 * 3 * 7 * 7
    0.236
    """
    concrete = _concrete_shapes(graph, input_shapes)
    costs = []
    for node in graph.op_nodes():
        data = graph.nx.nodes[node]
        weights = {w.name: w for w in data.get("weights") or ()}
        edges_in = {k: d for _, _, k, d in graph.nx.in_edges(node, keys=True, data=True)}
        edges_out = {k: d for _, _, k, d in graph.nx.out_edges(node, keys=True, data=True)}
        shapes_in, shapes_out = [], []
        moved: float | None = 0.0
        for names, edges, shapes in (
            (data.get("inputs") or [], edges_in, shapes_in),
            (data.get("outputs") or [], edges_out, shapes_out),
        ):
            for name in names:
                if not name:
                    continue
                if name in weights:
                    shape, size = tuple(weights[name].shape or ()), dtype_bytes(weights[name].dtype)
                elif name in edges:
                    shape = concrete.get(name) or bind_shape(edges[name].get("shape"), {})
                    size = dtype_bytes(edges[name].get("dtype"))
                else:
                    shape, size = None, None
                shapes.append(shape)
                if moved is not None and shape is not None and size is not None:
                    moved += math.prod(shape) * size
                elif edges is edges_in or name in edges:  # an unused output moves nothing
                    moved = None
        category = category_of(data)
        flops = _flops(data["op_type"], category, data, shapes_in, shapes_out)
        costs.append(NodeCost(node, data["op_type"], category, flops, moved))
    return CostModel(tuple(costs), concrete)
