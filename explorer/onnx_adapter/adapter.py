"""The ONNX adapter's answers to the core (:class:`~explorer.core.adapter.GraphAdapter`).

An ONNX graph model keeps its protos beside it (``graph.model``, ``graph.proto``):
its summary reads them (producer, opsets, functions, external data), weights are
digested from their bytes (external files hashed from the file, once per region),
and a weight's ``TensorProto`` and statistics are found on demand.

Examples
--------
>>> from explorer import load
>>> g = load("zoo:mlp")
>>> g.adapter is ONNX, g.summary().producer != ""
(True, True)
>>> ONNX.find_tensor(g, "fc1.weight").dims
[256, 784]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from explorer.core.adapter import GraphAdapter
from explorer.core.errors import UsageError
from explorer.core.graph_memo import PerGraph
from explorer.onnx_adapter.payload import OnnxPayload

if TYPE_CHECKING:
    from onnx import TensorProto

    from explorer.core.graph import ModelGraph
    from explorer.core.summary import ModelSummary

__all__ = ["OnnxAdapter", "ONNX", "has_onnx_model", "onnx_model", "opset_versions"]


class OnnxAdapter(GraphAdapter):
    """The ONNX adapter: summaries, weight digests and tensors read from the graph's protos.

    Examples
    --------
    >>> ONNX.ir, ONNX.scopes_from_names
    ('onnx', True)
    """

    ir = "onnx"
    scopes_from_names = True
    _instance_name = "ONNX"

    def payload(self, **fields: Any) -> OnnxPayload:
        """The protos and files of an ONNX graph (:class:`~explorer.onnx_adapter.payload.OnnxPayload`).

        Examples
        --------
        >>> ONNX.payload(model_path=None).graph_path
        ()
        """
        return OnnxPayload(**fields)

    def summarize(self, graph: ModelGraph) -> ModelSummary:
        """The full ONNX summary (:func:`~explorer.onnx_adapter.summarize.summarize`).

        Examples
        --------
        >>> from explorer import load
        >>> ONNX.summarize(load("zoo:mlp")).opsets["ai.onnx"] > 0
        True
        """
        if graph.model is None:  # a subgraph: no model of its own
            return super().summarize(graph)
        from explorer.onnx_adapter.summarize import summarize

        return summarize(graph)

    def weight_digests(self, graph: ModelGraph) -> dict[str, str]:
        """Tensor name -> content digest of every initializer and Constant value of a top-level graph.

        Weights in external files are hashed from their files (once per file region);
        tensors whose data is not available get a digest of their shape and dtype only.

        Examples
        --------
        >>> from explorer import load
        >>> len(ONNX.weight_digests(load("zoo:mlp"))["fc1.weight"])
        32
        """
        from explorer.onnx_adapter.protos import constant_tensor, iter_graphs
        from explorer.onnx_adapter.weights import tensor_digest

        digests: dict[str, str] = {}
        model = graph.model
        if model is None:
            return super().weight_digests(graph)
        for proto, _ in iter_graphs(model.graph):
            tensors = list(proto.initializer)
            tensors += [
                t for n in proto.node if n.op_type == "Constant" and (t := constant_tensor(n)) is not None
            ]
            for tensor in tensors:
                digests.setdefault(tensor.name, tensor_digest(tensor, graph.weights_dir))
        return digests

    def find_tensor(self, graph: ModelGraph, name: str) -> TensorProto | None:
        """The ``TensorProto`` of an initializer or ``Constant`` output of this graph, or ``None``.

        Examples
        --------
        >>> from explorer import load
        >>> ONNX.find_tensor(load("zoo:mlp"), "fc1.weight").dims
        [256, 784]
        """
        from explorer.onnx_adapter.protos import constant_tensor

        if graph.proto is None:
            return None
        cache = _INITIALIZERS(graph)
        if name in cache:
            return cache[name]
        for node in graph.proto.node:
            if node.op_type == "Constant" and node.output and node.output[0] == name:
                return constant_tensor(node)
        return None

    def weight_stats(self, graph: ModelGraph, name: str) -> dict[str, float] | None:
        """``min``, ``max``, ``mean``, ``std`` of one weight, read when asked (external files in chunks).

        Examples
        --------
        >>> from explorer import load
        >>> sorted(ONNX.weight_stats(load("zoo:mlp"), "fc1.weight"))
        ['max', 'mean', 'min', 'std']
        """
        from explorer.onnx_adapter.weights import tensor_stats

        tensor = self.find_tensor(graph, name)
        info = graph.weights.get(name)
        if tensor is None or (info is not None and not info.loaded):
            return None
        try:
            return tensor_stats(tensor, graph.weights_dir, graph.source)
        except (TypeError, ValueError):  # exotic dtypes numpy cannot hold
            return None


def _initializers(graph: ModelGraph) -> dict[str, Any]:
    return {t.name: t for t in graph.proto.initializer}


_INITIALIZERS: PerGraph[dict[str, Any]] = PerGraph("initializers by name", _initializers)

ONNX = OnnxAdapter()
"""The ONNX adapter, shared by every ONNX graph model."""


def has_onnx_model(graph: ModelGraph) -> bool:
    """Whether a graph is a top-level ONNX graph, with the ``ModelProto`` it was built from.

    Examples
    --------
    >>> from explorer import load
    >>> has_onnx_model(load("zoo:mlp"))
    True
    """
    return graph.adapter is ONNX and graph.model is not None


def onnx_model(graph: ModelGraph, needed_by: str) -> Any:
    """The ``ModelProto`` of a top-level ONNX graph; for any other graph, a
    :class:`~explorer.core.errors.UsageError` naming ``needed_by``.

    Examples
    --------
    >>> from explorer import load
    >>> onnx_model(load("zoo:mlp"), "bench").graph.name != ""
    True
    """
    if not has_onnx_model(graph):
        what = "a subgraph" if graph.adapter is ONNX else f"a {graph.ir} graph"
        raise UsageError(
            f"{needed_by} needs a top-level ONNX graph (one with a ModelProto); {graph.source} is {what}"
        )
    return graph.model


def opset_versions(graph: ModelGraph) -> dict[str, int]:
    """Domain (``""`` for the default) -> opset version of an ONNX graph's model; empty for any other.

    Examples
    --------
    >>> from explorer import load
    >>> opset_versions(load("zoo:mlp"))[""] > 0
    True
    """
    if not has_onnx_model(graph):
        return {}
    return {(o.domain or ""): int(o.version) for o in graph.model.opset_import}
