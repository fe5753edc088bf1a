"""The adapter interface: what the core asks an IR's adapter, instead of switching on ``graph.ir``.

Each :class:`~explorer.core.graph.ModelGraph` carries the adapter that built it
(``graph.adapter``). The core, the views and the widgets ask it for what only the IR
knows: its summary, a digest of each weight's content (so a diff sees a weight
change), a weight's proto and statistics, and whether name scopes are read from
node names (ONNX) or are the IR's own functions (Relax, TIR: drawn collapsed).
:class:`GraphAdapter` itself answers for a graph that has only the graph model;
the ONNX adapter (:mod:`explorer.onnx_adapter.adapter`) and the Relax adapter
(:mod:`explorer.lower.tvm.relax_adapter`) subclass it.

Examples
--------
>>> import networkx as nx
>>> from explorer.core.graph import ModelGraph
>>> from explorer.core.graph_schema import node_data
>>> from explorer.core.tensors import TensorInfo
>>> g = nx.MultiDiGraph()
>>> w = TensorInfo("w", (2,), "float32", 2, 8, values=(1.0, 2.0))
>>> g.add_node("mul", **node_data("op", "Mul", "mul", weights=(w,)))
>>> graph = ModelGraph(g, name="tiny")
>>> graph.adapter.ir, graph.summary().params
('graph', 2)
>>> len(graph.adapter.weight_digests(graph)["w"])
32
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.core.summary import ModelSummary
    from explorer.core.tensors import TensorInfo

__all__ = ["GraphAdapter", "NEUTRAL", "graph_weights"]


def graph_weights(graph: ModelGraph) -> dict[str, TensorInfo]:
    """Every weight of a graph by name: those its nodes read, then those no node reads.

    Examples
    --------
    >>> from explorer import load
    >>> sorted(graph_weights(load("zoo:mlp")))[:2]
    ['fc1.bias', 'fc1.weight']
    """
    found = {w.name: w for _, d in graph.nx.nodes(data=True) for w in d.get("weights", ())}
    found.update(graph.weights)
    return found


class GraphAdapter:
    """The behaviour of a graph that has only the graph model (no protos, no files).

    Subclass it for an IR and override what the IR knows better. Instances are
    stateless: one per IR, shared by all its graphs, pickled by reference into the worker.

    Attributes
    ----------
    ir : str
        The IR's name, ``graph.ir`` of the graphs it builds.
    scopes_from_names : bool
        True when node scopes are read from node names (a rename moves a node between
        scopes); False when scopes are the IR's functions (drawn collapsed, and a
        change of function counts as a structural change in a diff).
    node_noun : str
        What one op node is called in sentences ("node", "Relax binding", "MLIR op").

    Examples
    --------
    >>> GraphAdapter().ir
    'graph'
    """

    ir: str = "graph"
    scopes_from_names: bool = False
    node_noun: str = "node"

    def summarize(self, graph: ModelGraph) -> ModelSummary:
        """The graph's summary, from the graph model alone.

        Examples
        --------
        >>> from explorer import load
        >>> NEUTRAL.summarize(load("zoo:mlp")).producer
        ''
        """
        from explorer.core.summary import summarize_graph

        return summarize_graph(graph)

    def weight_digests(self, graph: ModelGraph) -> dict[str, str]:
        """Weight name -> a digest of what the graph model knows of it (dtype, shape, kept values).

        Examples
        --------
        >>> from explorer import load
        >>> g = load("zoo:mlp")
        >>> NEUTRAL.weight_digests(g)["fc1.bias"] == NEUTRAL.weight_digests(g)["fc1.bias"]
        True
        """
        digests: dict[str, str] = {}
        for name, info in graph_weights(graph).items():
            hasher = hashlib.sha256(f"{info.dtype}:{list(info.shape)}".encode())
            if info.values is not None:
                hasher.update(repr(info.values).encode())
            digests[name] = hasher.hexdigest()[:32]
        return digests

    def find_tensor(self, graph: ModelGraph, name: str) -> Any | None:
        """The IR's own object holding a weight's values (an ONNX ``TensorProto``), or ``None``.

        Examples
        --------
        >>> from explorer import load
        >>> NEUTRAL.find_tensor(load("zoo:mlp"), "fc1.weight") is None
        True
        """
        return None

    def weight_stats(self, graph: ModelGraph, name: str) -> dict[str, float] | None:
        """``min``, ``max``, ``mean``, ``std`` of a weight when its values can be read, else ``None``.

        Examples
        --------
        >>> from explorer import load
        >>> NEUTRAL.weight_stats(load("zoo:mlp"), "fc1.weight") is None
        True
        """
        return None

    def payload(self, **fields: Any) -> Any:
        """What this IR keeps beside a graph model (its protos, its files), made from ``fields``.

        The graph model alone keeps nothing: any field is refused (an IR with protos, the ONNX
        adapter, overrides this).

        Examples
        --------
        >>> NEUTRAL.payload() is None
        True
        >>> NEUTRAL.payload(model_path="m.onnx")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        explorer.core.errors.UsageError: a graph in IR 'graph' keeps no model_path: ...
        """
        given = sorted(name for name, value in fields.items() if value is not None and value != ())
        if given:
            from explorer.core.errors import UsageError

            raise UsageError(
                f"a graph in IR {self.ir!r} keeps no {', '.join(given)}: only ONNX graphs have files"
            )
        return None

    def __reduce__(self) -> str:
        return self._instance_name

    _instance_name = "NEUTRAL"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.ir!r}>"


NEUTRAL = GraphAdapter()
"""The adapter of a graph built from the graph model alone."""
