"""ModelGraph: a graph of any IR as a networkx ``MultiDiGraph``, the one graph model every stage uses.

An IR's adapter builds it (:mod:`explorer.onnx_adapter.graph_builder` for ONNX, the
Relax adapter in :mod:`explorer.lower` for TVM Relax and TIR) with nodes and edges made
by :func:`~explorer.core.graph_schema.node_data` / ``edge_data``, and hands it the
:class:`~explorer.core.adapter.GraphAdapter` that answers what only the IR knows
(its summary, weight digests, tensor values). Layout, figures, diff and widgets read
only the graph model.

Examples
--------
>>> import networkx as nx
>>> from explorer.core.graph_schema import node_data
>>> g = nx.MultiDiGraph()
>>> g.add_node("relu", **node_data("op", "Relu", "relu"))
>>> ModelGraph(g, name="tiny").op_counts
Counter({'Relu': 1})
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import networkx as nx

from explorer.core.adapter import NEUTRAL, GraphAdapter
from explorer.core.graph_schema import edge_data, node_data
from explorer.core.node_ids import CONSTANT_PREFIX
from explorer.core.tensors import TensorInfo

if TYPE_CHECKING:
    from explorer.core.summary import ModelSummary

__all__ = ["ModelGraph"]


def _payload_property(name: str, doc: str, default: Any = None) -> property:
    """A ModelGraph attribute that reads and writes field ``name`` of the graph's payload."""
    return property(
        lambda graph: getattr(graph.payload, name, default),
        lambda graph, value: graph._set_payload_field(name, value),
        doc=doc,
    )


class ModelGraph:
    """A graph of any IR as a networkx ``MultiDiGraph`` with everything the views need.

    For ONNX, build one with :func:`explorer.load` (or :func:`build_graph` for an
    already-checked model): the ONNX adapter fills the graph and keeps the protos
    beside it (``proto``, ``model``) for passes and runtimes. Another IR's adapter
    (Relax, later MLIR) constructs it directly, with nodes and edges made by
    :func:`explorer.core.graph_schema.node_data` / ``edge_data`` and no proto: layout,
    figures, diff and widgets read only the graph model.

    Attributes
    ----------
    nx : networkx.MultiDiGraph
        Operators, graph inputs (``input:NAME``), graph outputs (``output:NAME``)
        and, in subgraphs, values read from the enclosing graph (``outer:NAME``).
        Node data: ``kind`` (``"op"``, ``"input"``, ``"output"``, ``"outer"``,
        ``"constant"``), ``op_type``, ``domain``, ``name``, ``index`` (position
        in the ONNX node list), ``attributes`` (decoded), ``inputs``, ``outputs``,
        ``scope`` (name-scope path), ``weights`` (tuple of TensorInfo),
        ``subgraphs`` (attribute names holding subgraphs).
        Edge data (key = tensor name): ``tensor``, ``shape``, ``dtype``,
        ``bytes``, ``slots`` (input positions at the consumer), ``implicit``
        (read by a subgraph of the consumer).
    ir : str
        The IR the graph is in (``"onnx"``, ``"relax"``, ...); the adapter's by default.
    adapter : GraphAdapter
        What answers for the IR (:mod:`explorer.core.adapter`): the summary, weight digests,
        a weight's values; :data:`~explorer.core.adapter.NEUTRAL` for a graph built from the
        graph model alone.
    op_counts : collections.Counter
        Op type -> count over the IR's own node list (for ONNX the graph's node list,
        ``Constant`` nodes included though they are folded into weights).
    payload : object or None
        What the IR's adapter keeps beside the graph model (:meth:`GraphAdapter.payload
        <explorer.core.adapter.GraphAdapter.payload>`): for ONNX an
        :class:`~explorer.onnx_adapter.payload.OnnxPayload` with the protos and files below;
        None for a graph of the graph model alone. The six attributes below read and write it.
    model : onnx.ModelProto or None
        The ONNX model (top-level ONNX graphs only). Never mutated; copy it before changing it.
    proto : onnx.GraphProto or None
        The ONNX graph this ModelGraph was built from (None for other IRs).
    subgraphs : dict
        ``node id -> {attribute name: ModelGraph}``; ``GRAPHS`` attributes use
        ``"name[i]"`` keys.
    weights : dict
        Tensor name -> TensorInfo for every initializer and folded ``Constant``.
    source : str
        Where the model came from (a path, ``"<bytes>"``, ``"zoo:resnet18"``...).
    notes : list of str
        Things worth knowing that are not errors (e.g. shape inference fell back).
    model_path : Path or None
        A file holding exactly this model (its source, or a pass's output), which
        workers read instead of a re-serialized copy; ``None`` when there is none.
    weights_dir : Path or None
        The folder the model's external tensors resolve against; ``None`` when
        their values are not available (no external data, or ``external_data=False``).
        :func:`explorer.onnx_adapter.weights.tensor_array` reads them on demand.
    lazy_file : FileStamp or None
        The model file whose own bytes hold the large tensors :func:`explorer.load` left
        there (:func:`explorer.onnx_adapter.model_wire.read_model_lazily`: they read as external data
        pointing into it, resolved in ``weights_dir``), as it was when loaded; ``None``
        when every weight is in memory or in external files.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:mlp")
    >>> g.summary().nodes == len(g.model.graph.node)
    True
    """

    def __init__(
        self,
        graph: nx.MultiDiGraph,
        *,
        proto: Any = None,
        model: Any = None,
        weights: dict[str, TensorInfo] | None = None,
        source: str = "<model>",
        notes: list[str] | None = None,
        depth: int = 0,
        ir: str | None = None,
        name: str | None = None,
        op_counts: Mapping[str, int] | None = None,
        adapter: GraphAdapter = NEUTRAL,
        payload: Any = None,
    ) -> None:
        self.nx = graph
        self.adapter = adapter
        if payload is None and (proto is not None or model is not None):
            payload = adapter.payload(proto=proto, model=model)
        self.payload = payload
        proto = self.proto
        self.ir = ir if ir is not None else adapter.ir
        if name is None:
            name = proto.name if proto is not None else str(graph.name or "")
        self._name = name
        if op_counts is not None:
            counts = Counter(op_counts)
        elif proto is not None:
            counts = Counter(n.op_type for n in proto.node)
        else:
            counts = Counter(d["op_type"] for _, d in graph.nodes(data=True) if d["kind"] == "op")
        self.op_counts: Counter[str] = counts
        self.weights: dict[str, TensorInfo] = weights or {}
        self.subgraphs: dict[str, dict[str, ModelGraph]] = {}
        self.source = source
        self.notes: list[str] = notes if notes is not None else []
        self.depth = depth
        self._summary: ModelSummary | None = None

    # -- the IR's payload (ONNX: protos and files), read and written through these -------------

    def _set_payload_field(self, name: str, value: Any) -> None:
        if self.payload is None:
            self.payload = self.adapter.payload(**{name: value})  # the neutral adapter refuses a value
            if self.payload is None:
                return
        setattr(self.payload, name, value)

    proto = _payload_property("proto", "The ONNX graph this ModelGraph was built from (None for other IRs).")
    model = _payload_property("model", "The ONNX model (top-level ONNX graphs only); never mutated.")
    model_path = _payload_property("model_path", "A file holding exactly this model, or None.")
    weights_dir = _payload_property(
        "weights_dir", "The folder the model's external tensors resolve against, or None."
    )
    lazy_file = _payload_property(
        "lazy_file", "The model file holding the large tensors a lazy load left there, or None."
    )
    graph_path = _payload_property(
        "graph_path", "Where a subgraph sits in its model (``()`` for the main graph and other IRs).", ()
    )

    @property
    def name(self) -> str:
        """The graph's name."""
        return self._name

    def op_nodes(self) -> list[str]:
        """Ids of the operator nodes, in ONNX node-list order.

        Examples
        --------
        >>> from explorer import load
        >>> load("zoo:mlp").op_nodes()[:1]
        ['/Flatten']
        """
        ops = [(data["index"], n) for n, data in self.nx.nodes(data=True) if data["kind"] == "op"]
        return [n for _, n in sorted(ops)]

    def node(self, node_id: str) -> dict[str, Any]:
        """Return the data of one node (raises ``KeyError`` naming the id if absent)."""
        try:
            return self.nx.nodes[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id!r} in graph {self.name!r}") from None

    def iter_subgraphs(self) -> Iterator[tuple[tuple[str, ...], ModelGraph]]:
        """Yield ``(path, subgraph)`` for all nested subgraphs, iteratively.

        The path alternates node ids and attribute names, e.g. ``("/If", "then_branch")``.
        """
        stack: list[tuple[tuple[str, ...], ModelGraph]] = [((), self)]
        while stack:
            path, graph = stack.pop()
            for node_id, attrs in graph.subgraphs.items():
                for attr, sub in attrs.items():
                    sub_path = (*path, node_id, attr)
                    yield sub_path, sub
                    stack.append((sub_path, sub))

    def summary(self) -> ModelSummary:
        """Return (and cache) the :class:`~explorer.core.summary.ModelSummary` of the model.

        The graph's adapter makes it: ONNX models get the full summary
        (:func:`~explorer.onnx_adapter.summarize.summarize`), a graph of another IR one from the
        graph model alone (:func:`~explorer.core.summary.summarize_graph`).
        """
        if self._summary is None:
            self._summary = self.adapter.summarize(self)
        return self._summary

    def with_constant_nodes(self) -> ModelGraph:
        """Return a copy whose initializers and ``Constant`` outputs are drawn as nodes.

        Constant nodes get ids ``const:TENSOR`` and ``kind="constant"``; an edge
        goes from each to every operator that reads it.

        Examples
        --------
        >>> from explorer import load
        >>> g = load("zoo:mlp").with_constant_nodes()
        >>> any(k == "constant" for _, k in g.nx.nodes(data="kind"))
        True
        """
        graph = self.nx.copy()
        nodes = []
        edges = []
        for node_id, data in self.nx.nodes(data=True):
            for slot_info in data.get("weights", ()):
                const_id = CONSTANT_PREFIX + slot_info.name
                kind = "Initializer" if slot_info.source == "initializer" else "Constant"
                nodes.append(
                    (
                        const_id,
                        node_data(
                            "constant",
                            kind,
                            slot_info.name,
                            outputs=[slot_info.name],
                            scope=data.get("scope", ()),
                            weights=(slot_info,),
                        ),
                    )
                )
                edge = edge_data(slot_info.name, slot_info.shape, slot_info.dtype, slot_info.nbytes)
                edges.append((const_id, node_id, slot_info.name, edge))
        graph.add_nodes_from(nodes)
        graph.add_edges_from(edges)
        twin = self.derive(graph)
        twin.subgraphs = self.subgraphs
        return twin

    def derive(self, graph: nx.MultiDiGraph, **changes: Any) -> ModelGraph:
        """A graph model like this one (protos, files, adapter, source, notes) over another networkx graph.

        A view that redraws a graph (weights as nodes, Q/DQ hidden) keeps everything else;
        ``changes`` replace constructor fields (``notes``, ``op_counts``, ...). Subgraphs are
        not carried: the new graph has its own.

        Examples
        --------
        >>> from explorer import load
        >>> g = load("zoo:mlp")
        >>> twin = g.derive(g.nx.copy(), notes=["redrawn"])
        >>> twin.model is g.model, twin.model_path == g.model_path, twin.notes
        (True, True, ['redrawn'])
        """
        fields: dict[str, Any] = {
            "payload": copy.copy(self.payload),  # the twin's files may change apart (a pass's output)
            "weights": self.weights,
            "source": self.source,
            "notes": list(self.notes),
            "depth": self.depth,
            "ir": self.ir,
            "name": self.name,
            "op_counts": self.op_counts,
            "adapter": self.adapter,
        }
        fields.update(changes)
        payload = fields["payload"]
        if payload is not None:  # new protos given: the files kept, the protos replaced
            for name in ("proto", "model"):
                if name in fields:
                    setattr(payload, name, fields.pop(name))
        return ModelGraph(graph, **fields)

    def __len__(self) -> int:
        return sum(1 for _, kind in self.nx.nodes(data="kind") if kind == "op")

    def __repr__(self) -> str:
        return (
            f"<ModelGraph {self.name!r} from {self.source}: {len(self)} ops, "
            f"{self.nx.number_of_edges()} tensor edges, {len(self.subgraphs)} nodes with subgraphs>"
        )
