"""The value every overlay reader returns: what another tool measured, put on a graph's nodes.

An :class:`Overlay` holds one :class:`NodeValue` per node of the graph that got something from the
file (a time, a provider or compute unit, a value and a colour), the file's names that did not land
on any node (:class:`Unmapped`, each with the reason), and the file's total time, so
:attr:`Overlay.time_share_mapped` says how much of the time the graph holds. Like every result of
the explorer it is frozen, with ``to_dict()`` (JSON-ready: the ``onnx-explorer overlay --json``
document) and ``to_frame()`` (pandas).

Examples
--------
>>> overlay = Overlay(
...     "ort-profile",
...     "profile.json",
...     "zoo:mlp",
...     {"/fc1/Gemm": NodeValue("/fc1/Gemm", time_ms=0.75)},
...     (Unmapped("ReorderOutput", "added by ONNX Runtime", 0.25),),
...     total_ms=1.0,
... )
>>> overlay.mapped_nodes, overlay.time_share_mapped
(1, 0.75)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph

__all__ = ["NodeValue", "Unmapped", "Overlay", "NODE_FIELDS"]

NODE_FIELDS = (
    "time_ms",
    "provider",
    "compute_unit",
    "value",
    "color",
    "text_color",
    "op",
    "cycles",
)
"""The per-node fields an overlay may fill (each reader fills some of them)."""


@dataclass(frozen=True)
class NodeValue:
    """What a file says about one node of the graph.

    Attributes
    ----------
    node : str
        The node's id in the graph (without a graph: the name the file gives).
    time_ms : float, optional
        Milliseconds per inference that landed on the node (its share of a fused kernel's).
    provider : str, optional
        ONNX Runtime's execution provider that ran it (``CPUExecutionProvider``).
    compute_unit : str, optional
        Where a device ran it (Qualcomm AI Hub: ``NPU``, ``GPU``, ``CPU``; several joined by ``/``).
    value : float or str, optional
        A value of the file's own (Model Explorer's node data).
    color, text_color : str, optional
        A CSS colour for the node's box and its text (the file's, or from its thresholds or gradient).
    op : str, optional
        What ran, in the file's words (ORT's kernel op, AI Hub's layer type, TensorRT's layer type).
    cycles : float, optional
        Cycles the device counted (AI Hub's ``execution_cycles``).
    entries : tuple of str
        The file's names whose data landed here (kernels, layers, result keys).
    shared_with : tuple of str
        Other nodes the same entries' time was split with (the members of a fused kernel).
    """

    node: str
    time_ms: float | None = None
    provider: str | None = None
    compute_unit: str | None = None
    value: float | str | None = None
    color: str | None = None
    text_color: str | None = None
    op: str | None = None
    cycles: float | None = None
    entries: tuple[str, ...] = ()
    shared_with: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (those not set left out).

        Examples
        --------
        >>> NodeValue("/conv/Conv", time_ms=1.5, entries=("/conv/Conv",)).to_dict()
        {'node': '/conv/Conv', 'time_ms': 1.5, 'entries': ['/conv/Conv']}
        """
        data: dict[str, Any] = {"node": self.node}
        for name in NODE_FIELDS:
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        if self.entries:
            data["entries"] = list(self.entries)
        if self.shared_with:
            data["shared_with"] = list(self.shared_with)
        return data


@dataclass(frozen=True)
class Unmapped:
    """A name in the file that landed on no node of the graph, and why.

    Attributes
    ----------
    name : str
        As the file gives it.
    reason : str
        Why it did not map, in words.
    time_ms : float, optional
        Its time per inference (what :attr:`Overlay.time_share_mapped` misses).
    """

    name: str
    reason: str
    time_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields.

        Examples
        --------
        >>> Unmapped("x", "no node is named x").to_dict()
        {'name': 'x', 'reason': 'no node is named x', 'time_ms': None}
        """
        return {"name": self.name, "reason": self.reason, "time_ms": self.time_ms}


@dataclass(frozen=True)
class Overlay:
    """Another tool's data on a graph's nodes.

    Attributes
    ----------
    format : str
        The reader's name (a key of :data:`explorer.overlays.READERS`).
    source : str or None
        The file read (``None``: a value given in memory).
    mapped_onto : str or None
        The graph it was mapped onto (its ``source``; ``None``: read without a graph, the values
        are keyed by the file's own names); ``model`` in :meth:`to_dict`.
    values : mapping
        Node id -> :class:`NodeValue`, in graph order.
    unmapped : tuple of Unmapped
        The file's names that landed on no node, each with the reason.
    total_ms : float, optional
        The file's time per inference, every entry's (``None``: the file has no times).
    about : mapping
        What the reader found out, JSON-ready (ONNX Runtime's level and runs, the split rule, ...).
    notes : tuple of str
        Remarks for people (how the mapping was done).
    thresholds, gradient : tuple of dict
        Model Explorer's colour scales (``{"value", "bgColor"}``, ``{"stop", "bgColor"}``), kept so a
        node-data file written back keeps them.
    name : str, optional
        What the overlay shows, in words (``time on ort``, ``placement on nnapi``): the node data's
        ``name`` in Model Explorer, the colour menu's entry on our graph.
    """

    format: str
    source: str | None
    mapped_onto: str | None
    values: Mapping[str, NodeValue]
    unmapped: tuple[Unmapped, ...] = ()
    total_ms: float | None = None
    about: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    thresholds: tuple[Mapping[str, Any], ...] = ()
    gradient: tuple[Mapping[str, Any], ...] = ()
    name: str | None = None

    @property
    def mapped_nodes(self) -> int:
        """How many nodes of the graph got something from the file (0 without a graph).

        Examples
        --------
        >>> Overlay("f", None, "m", {"a": NodeValue("a", value=1)}).mapped_nodes
        1
        >>> Overlay("f", None, None, {"a": NodeValue("a", value=1)}).mapped_nodes
        0
        """
        return len(self.values) if self.mapped_onto is not None else 0

    @property
    def mapped_ms(self) -> float:
        """Milliseconds per inference that landed on the graph's nodes.

        Examples
        --------
        >>> Overlay("f", None, "m", {"a": NodeValue("a", time_ms=2.0)}).mapped_ms
        2.0
        """
        return float(sum(v.time_ms for v in self.values.values() if v.time_ms is not None))

    @property
    def time_share_mapped(self) -> float | None:
        """The share of the file's time that landed on the model's nodes (1.0: all of it); ``None``
        for a file without times, or read without a graph.

        Examples
        --------
        >>> values = {"a": NodeValue("a", time_ms=3.0)}
        >>> Overlay("f", None, "m", values, (Unmapped("b", "?", 1.0),), total_ms=4.0).time_share_mapped
        0.75
        """
        if self.mapped_onto is None or self.total_ms is None or self.total_ms <= 0:
            return None
        return round(min(1.0, self.mapped_ms / self.total_ms), 6)

    def by_node(self, name: str = "time_ms") -> dict[str, Any]:
        """Node id -> one field of its value (those without it left out): what a graph colours by.

        Examples
        --------
        >>> Overlay("f", None, "m", {"a": NodeValue("a", time_ms=2.0), "b": NodeValue("b")}).by_node()
        {'a': 2.0}
        """
        if name not in NODE_FIELDS:
            raise UsageError(f"no overlay field {name!r}; the fields are {', '.join(NODE_FIELDS)}")
        return {n: getattr(v, name) for n, v in self.values.items() if getattr(v, name) is not None}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the ``onnx-explorer overlay --json`` document.

        Examples
        --------
        >>> data = Overlay("f", None, "m", {"a": NodeValue("a", time_ms=1.0)}, total_ms=1.0).to_dict()
        >>> data["format"], data["mapped_nodes"], data["time_share_mapped"], data["unmapped"]
        ('f', 1, 1.0, [])
        """
        return {
            "format": self.format,
            "source": self.source,
            "model": self.mapped_onto,
            "mapped_nodes": self.mapped_nodes,
            "unmapped": [u.to_dict() for u in self.unmapped],
            "time_share_mapped": self.time_share_mapped,
            "total_ms": self.total_ms,
            "mapped_ms": self.mapped_ms if self.total_ms is not None else None,
            "about": dict(self.about),
            "notes": list(self.notes),
            "nodes": [v.to_dict() for v in self.values.values()],
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per node with a value: ``node``, each of :data:`NODE_FIELDS`, ``share`` (of the
        file's time), ``entries`` and ``shared_with``.

        Examples
        --------
        >>> frame = Overlay("f", None, "m", {"a": NodeValue("a", time_ms=1.0)}, total_ms=2.0).to_frame()
        >>> frame[["node", "time_ms", "share"]].values.tolist()
        [['a', 1.0, 0.5]]
        """
        import pandas as pd

        columns = ["node", *NODE_FIELDS, "share", "entries", "shared_with"]
        total = self.total_ms or 0.0
        rows = [
            {
                "node": v.node,
                **{name: getattr(v, name) for name in NODE_FIELDS},
                "share": v.time_ms / total if total and v.time_ms is not None else None,
                "entries": ", ".join(v.entries),
                "shared_with": ", ".join(v.shared_with),
            }
            for v in self.values.values()
        ]
        return pd.DataFrame(rows, columns=columns)

    def to_model_explorer(
        self, graph_id: str | None = None, *, field: str | None = None, graph: ModelGraph | None = None
    ) -> dict[str, Any]:
        """This overlay as Model Explorer's node data: ``{graph_id: {"results": {key: {"value", ...}}}}``.

        See :func:`explorer.overlays.model_explorer.node_data` (``field``: which value; ``graph``:
        key nodes as Model Explorer's ONNX adapter does, under the ONNX graph's name).

        Examples
        --------
        >>> overlay = Overlay("f", None, "m", {"a": NodeValue("a", time_ms=1.5)})
        >>> overlay.to_model_explorer()
        {'main_graph': {'results': {'a': {'value': 1.5}}}}
        """
        from explorer.overlays.model_explorer import node_data

        return node_data(self, graph_id, field=field, graph=graph)
