"""What every overlay reader shares: finding a graph's node by the name a tool gives it, splitting a
fused kernel's time over the nodes it came from, and gathering what lands on each node.

A tool names a node by its ONNX name (ONNX Runtime, TensorRT's metadata), by the tensor it writes
(Model Explorer's results), or by a name with its punctuation replaced (QNN's converters turn
``/layer1/conv/Conv`` into ``_layer1_conv_Conv``): :class:`NodeIndex` answers all three. A kernel
that ran several nodes fused gives its time to each of them by :data:`SPLIT_RULES`.

Examples
--------
>>> from explorer import load
>>> index = NodeIndex(load("zoo:mlp"))
>>> index.find("/fc1/Gemm"), index.find("_fc1_Gemm", sanitized=True), index.find("no-such")
('/fc1/Gemm', '/fc1/Gemm', None)
>>> spread(3.0, ["a", "b", "c"], "even")
{'a': 1.0, 'b': 1.0, 'c': 1.0}
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError
from explorer.core.node_ids import INPUT_PREFIX
from explorer.overlays.value import NodeValue, Overlay, Unmapped

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["SPLIT_RULES", "check_split", "sanitize", "NodeIndex", "spread", "Collect"]

SPLIT_RULES = ("even", "anchor")
"""How a kernel's time is split over the nodes it ran: ``even`` (each gets an equal share) or
``anchor`` (all of it on the member doing the work: the first in conv, pooling, normalization,
reduction order, :data:`explorer.runtimes.profile.HEAVY_CATEGORIES`, as the explorer's own profiles
place a fused kernel; its other members get 0 ms and are listed in ``shared_with``)."""

_NOT_WORD = re.compile(r"[^0-9A-Za-z_]")


def check_split(split: str) -> str:
    """Return ``split`` if it is one of :data:`SPLIT_RULES`, else raise a :class:`UsageError` naming them.

    Examples
    --------
    >>> check_split("even")
    'even'
    """
    if split not in SPLIT_RULES:
        raise UsageError(f"no split rule {split!r}; the rules are: {', '.join(SPLIT_RULES)}")
    return split


def sanitize(name: str) -> str:
    """``name`` with every character other than a letter, a digit or ``_`` replaced by ``_``: how
    QNN's converters (and so Qualcomm AI Hub's profiles) spell an ONNX node's name.

    Examples
    --------
    >>> sanitize("/layer1/layer1.0/conv1/Conv")
    '_layer1_layer1_0_conv1_Conv'
    """
    return _NOT_WORD.sub("_", name)


class NodeIndex:
    """The operator nodes of a graph, found by id, by ONNX name, by a tensor they write, or by a
    sanitized name (:func:`sanitize`).

    Examples
    --------
    >>> from explorer import load
    >>> index = NodeIndex(load("zoo:mlp"))
    >>> index.producer("/fc1/Gemm_output_0"), index.is_graph_input("input")
    ('/fc1/Gemm', True)
    """

    def __init__(self, graph: ModelGraph) -> None:
        self.graph = graph
        self.order = graph.op_nodes()
        nodes = graph.nx.nodes
        self.by_name: dict[str, str] = {}
        self.producers: dict[str, str] = {}
        for node in self.order:
            data = nodes[node]
            if data.get("name"):
                self.by_name.setdefault(data["name"], node)
            for tensor in data.get("outputs") or ():
                if tensor:
                    self.producers.setdefault(tensor, node)
        self.inputs = {
            str(node).removeprefix(INPUT_PREFIX)
            for node in graph.nx.nodes
            if str(node).startswith(INPUT_PREFIX)
        }
        self._sanitized: dict[str, list[str]] | None = None

    def op(self, node: str) -> str:
        """The node's op type.

        Examples
        --------
        >>> from explorer import load
        >>> NodeIndex(load("zoo:mlp")).op("/fc1/Gemm")
        'Gemm'
        """
        return str(self.graph.nx.nodes[node].get("op_type", ""))

    def producer(self, tensor: str) -> str | None:
        """The node writing ``tensor`` (None: no node writes it).

        Examples
        --------
        >>> from explorer import load
        >>> NodeIndex(load("zoo:mlp")).producer("nothing") is None
        True
        """
        return self.producers.get(tensor)

    def is_graph_input(self, name: str) -> bool:
        """Whether ``name`` is one of the graph's inputs (a tensor no node writes).

        Examples
        --------
        >>> from explorer import load
        >>> NodeIndex(load("zoo:mlp")).is_graph_input("/fc1/Gemm")
        False
        """
        return name in self.inputs

    def find(self, name: str, *, tensors: bool = False, sanitized: bool = False) -> str | None:
        """The node a tool's ``name`` stands for: a node id or ONNX name; with ``tensors``, the
        node writing a tensor of that name; with ``sanitized``, the one node whose name, or
        whose output's name, sanitized, is ``name`` (None when none is, or several are).

        Examples
        --------
        >>> from explorer import load
        >>> index = NodeIndex(load("zoo:mlp"))
        >>> index.find("/fc1/Gemm_output_0"), index.find("/fc1/Gemm_output_0", tensors=True)
        (None, '/fc1/Gemm')
        """
        nodes = self.graph.nx.nodes
        if name in self.by_name:
            return self.by_name[name]
        if name in nodes and nodes[name]["kind"] == "op":
            return name
        if tensors and name in self.producers:
            return self.producers[name]
        if sanitized:
            found = self.sanitized_matches(name)
            return found[0] if len(found) == 1 else None
        return None

    def sanitized_matches(self, name: str) -> list[str]:
        """Every node whose name, or a tensor it writes, sanitized is ``name``.

        Examples
        --------
        >>> from explorer import load
        >>> NodeIndex(load("zoo:mlp")).sanitized_matches("_fc1_Gemm")
        ['/fc1/Gemm']
        """
        if self._sanitized is None:
            table: dict[str, list[str]] = defaultdict(list)
            for node in self.order:
                data = self.graph.nx.nodes[node]
                for key in {data.get("name") or node, *(t for t in data.get("outputs") or () if t)}:
                    if node not in table[sanitize(key)]:
                        table[sanitize(key)].append(node)
            self._sanitized = dict(table)
        return list(self._sanitized.get(sanitize(name), []))


def _anchor(graph: ModelGraph | None, nodes: Sequence[str]) -> str:
    """The member doing a fused kernel's work: the first in HEAVY_CATEGORIES order, else the first."""
    if graph is None:
        return nodes[0]
    from explorer.core.op_categories import category_of
    from explorer.runtimes.profile import HEAVY_CATEGORIES

    for category in HEAVY_CATEGORIES:
        for node in nodes:
            if graph.nx.has_node(node) and category_of(graph.nx.nodes[node]) == category:
                return node
    return nodes[0]


def spread(
    time_ms: float, nodes: Sequence[str], split: str = "even", graph: ModelGraph | None = None
) -> dict[str, float]:
    """Split one kernel's ``time_ms`` over the ``nodes`` it ran, by the rule ``split``
    (:data:`SPLIT_RULES`); ``graph`` tells ``anchor`` the nodes' ops.

    Examples
    --------
    >>> from explorer import load
    >>> graph = load("zoo:resnet18")
    >>> spread(3.0, ["/bn1/BatchNormalization", "/conv1/Conv", "/relu/Relu"], "anchor", graph)
    {'/bn1/BatchNormalization': 0.0, '/conv1/Conv': 3.0, '/relu/Relu': 0.0}
    """
    members = list(dict.fromkeys(nodes))
    if not members:
        return {}
    if check_split(split) == "anchor":
        heavy = _anchor(graph, members)
        return {n: (float(time_ms) if n == heavy else 0.0) for n in members}
    share = float(time_ms) / len(members)
    return dict.fromkeys(members, share)


class Collect:
    """What lands on each node, gathered entry by entry, then frozen into :class:`NodeValue` s.

    Times add up; a text field (provider, compute unit, op) seen with several values keeps each
    once, joined by ``/``; the last value and colour win.

    Examples
    --------
    >>> collect = Collect()
    >>> collect.add("a", entry="k1", time_ms=1.0, provider="CPUExecutionProvider")
    >>> collect.add("a", entry="k2", time_ms=0.5, shared_with=("b",))
    >>> collect.values(["a"])["a"]
    NodeValue(node='a', time_ms=1.5, provider='CPUExecutionProvider', compute_unit=None, \
value=None, color=None, text_color=None, op=None, cycles=None, entries=('k1', 'k2'), shared_with=('b',))
    """

    _TEXT = ("provider", "compute_unit", "op")
    _LAST = ("value", "color", "text_color")

    def __init__(self) -> None:
        self._data: dict[str, dict[str, Any]] = {}

    def add(
        self,
        node: str,
        *,
        entry: str,
        time_ms: float | None = None,
        cycles: float | None = None,
        shared_with: Iterable[str] = (),
        **fields: Any,
    ) -> None:
        """Add one entry's data to ``node`` (``fields``: provider, compute_unit, op, value, color,
        text_color).

        Examples
        --------
        >>> collect = Collect()
        >>> collect.add("a", entry="k", value=3)
        >>> collect.values(["a"])["a"].value
        3
        """
        data = self._data.setdefault(node, {"entries": [], "shared_with": []})
        if entry not in data["entries"]:
            data["entries"].append(entry)
        for other in shared_with:
            if other != node and other not in data["shared_with"]:
                data["shared_with"].append(other)
        for key, amount in (("time_ms", time_ms), ("cycles", cycles)):
            if amount is not None:
                data[key] = data.get(key, 0.0) + float(amount)
        for key, value in fields.items():
            if key in self._TEXT:
                if value:
                    data.setdefault(key, [])
                    if value not in data[key]:
                        data[key].append(str(value))
            elif key in self._LAST:
                if value is not None:
                    data[key] = value
            else:
                raise TypeError(f"Collect.add() got an unexpected field {key!r}")

    def __contains__(self, node: object) -> bool:
        return node in self._data

    def values(self, order: Sequence[str] = ()) -> dict[str, NodeValue]:
        """Node -> :class:`NodeValue`, the nodes of ``order`` first in that order, then the others as added.

        Examples
        --------
        >>> collect = Collect()
        >>> for node in ("b", "a"):
        ...     collect.add(node, entry=node, time_ms=1.0)
        >>> list(collect.values(["a", "b"]))
        ['a', 'b']
        """
        ordered = [n for n in order if n in self._data]
        ordered += [n for n in self._data if n not in set(ordered)]
        out = {}
        for node in ordered:
            data = self._data[node]
            text = {k: "/".join(data[k]) for k in self._TEXT if data.get(k)}
            out[node] = NodeValue(
                node,
                time_ms=data.get("time_ms"),
                cycles=data.get("cycles"),
                value=data.get("value"),
                color=data.get("color"),
                text_color=data.get("text_color"),
                entries=tuple(data["entries"]),
                shared_with=tuple(data["shared_with"]),
                **text,
            )
        return out

    def overlay(
        self,
        format_name: str,
        source: str | None,
        graph: ModelGraph | None,
        unmapped: Iterable[Unmapped],
        total_ms: float | None,
        about: Mapping[str, Any],
        **extra: Any,
    ) -> Overlay:
        """The :class:`Overlay` a reader returns: these values in the graph's node order, mapped onto it.

        Examples
        --------
        >>> collect = Collect()
        >>> collect.add("a", entry="k", time_ms=2.0)
        >>> overlay = collect.overlay("tensorrt-profile", "p.json", None, (), 4.0, {})
        >>> list(overlay.values), overlay.total_ms
        (['a'], 4.0)
        """
        order = graph.op_nodes() if graph is not None else ()
        return Overlay(
            format_name,
            source,
            graph.source if graph is not None else None,
            self.values(order),
            tuple(unmapped),
            total_ms,
            dict(about),
            **extra,
        )


def described(names: Mapping[str, Any] | Sequence[str], limit: int = 3) -> str:
    """At most ``limit`` names, quoted, and how many more.

    Examples
    --------
    >>> described(["a", "b", "c", "d"])
    "'a', 'b', 'c' and 1 more"
    """
    items = list(names)
    shown = ", ".join(repr(n) for n in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


__all__ += ["described"]
