"""Partitions a runtime would hand to an accelerator, what falls back to the CPU, and what crosses over.

:func:`partition` groups a target's supported nodes as ONNX Runtime's
``CreateSupportedPartitionNodeGroups`` (``core/providers/partitioning_utils.cc``) does:
nodes are taken in topological order; a supported node joins the open group; an
unsupported node that consumes from the open group is deferred until the group closes,
so no group ever has a path out through an unsupported node and back in (a cycle
between devices). What the runtime cannot place runs on the fallback device. Every
tensor whose producer and consumer are placed apart is a device transition: a copy per
inference, with its bytes when its shape is known. (Graph inputs and outputs are copied
to and from the device whatever the partitioning; they are not counted.)

Examples
--------
>>> from explorer import load
>>> from explorer.targets import get_target
>>> p = partition(load("zoo:detection_head"), get_target("nnapi"))
>>> p.partition_count >= 1, p.verdict.split(",")[0]
(True, '3 partitions on Android NNAPI (NPU / DSP / GPU)')
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.core.tensors import format_bytes
from explorer.targets.support import NodeFacts, NodeSupport

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph
    from explorer.targets.assignment import Assignment
    from explorer.targets.target import Target

__all__ = ["Transition", "Partitioning", "partition", "supported_groups", "HOST"]

HOST = "host"
"""Where graph inputs and outputs live (the application's memory)."""
_REASONS_SHOWN = 5


@dataclass(frozen=True)
class Transition:
    """A tensor copied between devices once per inference.

    Attributes
    ----------
    tensor : str
        The tensor.
    source, destination : str
        Placements: ``"partition 1"``..., the fallback device, or :data:`HOST`.
    bytes : int or None
        Its size, None when its shape is not fixed.
    """

    tensor: str
    source: str
    destination: str
    bytes: int | None


def supported_groups(graph: ModelGraph, supported: Mapping[str, bool]) -> list[list[str]]:
    """The maximal groups of supported nodes, as ONNX Runtime's partitioning forms them.

    Parameters
    ----------
    graph : ModelGraph
        The graph (its op nodes are grouped).
    supported : mapping
        Node id -> whether the target takes it.

    Returns
    -------
    list of list of str
        Each group's node ids, in the order they were taken.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:mlp")
    >>> ok = {n: n != "/relu1/Relu" for n in g.op_nodes()}
    >>> supported_groups(g, ok)
    [['/Flatten', '/fc1/Gemm'], ['/fc2/Gemm', '/relu2/Relu', '/fc3/Gemm']]
    """
    ops = graph.op_nodes()
    is_op = set(ops)
    producers = {n: {p for p in graph.nx.predecessors(n) if p in is_op and p != n} for n in ops}
    consumers = {n: [c for c in dict.fromkeys(graph.nx.successors(n)) if c in is_op and c != n] for n in ops}
    in_degree = {n: len(producers[n]) for n in ops}
    to_process = deque(n for n in ops if in_degree[n] == 0)
    with_next_group: deque[str] = deque()
    groups: list[list[str]] = []
    group: list[str] = []
    border: set[str] = set()

    def close() -> None:
        if group:
            groups.append(list(group))
        group.clear()
        border.clear()

    while to_process or with_next_group:
        if not to_process:
            close()
            to_process, with_next_group = with_next_group, deque()
            continue
        node = to_process.popleft()
        if not supported.get(node, False):
            if node in border:
                with_next_group.append(node)  # taken after the open group closes
                continue
        else:
            group.append(node)
            border.discard(node)
            border.update(consumers[node])
        for consumer in consumers[node]:
            in_degree[consumer] -= 1
            if in_degree[consumer] == 0:
                to_process.append(consumer)
    close()
    return groups


@dataclass(frozen=True)
class Partitioning:
    """How one target splits one graph.

    Attributes
    ----------
    target : str
        The target's name.
    device, fallback : str, str or None
        Where partitions run, and where the rest runs (None: nowhere, the model cannot run).
    groups : tuple of tuple of str
        The partitions' node ids.
    support : dict
        Node id -> :class:`~explorer.targets.support.NodeSupport`, in node-list order.
    transitions : tuple of Transition
        Tensors copied between devices per inference.
    assignment : Assignment or None
        The runtime's own placement, where it was asked (:func:`explorer.targets.real_assignment`).
    failure : str
        What an unsupported node means when there is no fallback (the target's ``failure``).

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.targets import get_target
    >>> p = partition(load("zoo:mlp"), get_target("ort-cpu"))
    >>> p.partition_count, p.fallback_nodes, p.verdict
    (1, (), 'all 6 nodes run on CPU')
    """

    target: str
    device: str
    fallback: str | None
    groups: tuple[tuple[str, ...], ...]
    support: dict[str, NodeSupport] = field(repr=False)
    transitions: tuple[Transition, ...] = ()
    assignment: Assignment | None = None
    failure: str = "the session cannot be created"

    @property
    def partition_count(self) -> int:
        """The number of partitions."""
        return len(self.groups)

    @property
    def total_nodes(self) -> int:
        """Operators in the graph."""
        return len(self.support)

    @property
    def supported_nodes(self) -> int:
        """Operators the target takes."""
        return sum(1 for s in self.support.values() if s.supported)

    @property
    def fallback_nodes(self) -> tuple[str, ...]:
        """The operators the target does not take, in node-list order."""
        return tuple(n for n, s in self.support.items() if not s.supported)

    @property
    def coverage(self) -> float:
        """Supported nodes over all nodes (1.0 for an empty graph)."""
        return self.supported_nodes / self.total_nodes if self.total_nodes else 1.0

    @property
    def transition_bytes(self) -> int:
        """Bytes copied between devices per inference (tensors of known size only)."""
        return sum(t.bytes or 0 for t in self.transitions)

    def overlay(self) -> dict[str, str]:
        """Node id -> placement: a categorical overlay for the graph figure.

        Examples
        --------
        >>> from explorer import load
        >>> from explorer.targets import get_target
        >>> set(partition(load("zoo:mlp"), get_target("ort-cpu")).overlay().values())
        {'partition 1'}
        """
        return _placements(self.groups, self.support, self.fallback)

    def boundary_marks(self) -> dict[str, str]:
        """Tensor -> ``"⇄ DESTINATION"`` for each tensor copied between devices: marks for the graph's edges.

        Examples
        --------
        >>> from explorer import load
        >>> from explorer.targets import get_target
        >>> partition(load("zoo:mlp"), get_target("ort-cpu")).boundary_marks()
        {}
        """
        marks: dict[str, list[str]] = {}
        for t in self.transitions:
            marks.setdefault(t.tensor, []).append(t.destination)
        return {tensor: "⇄ " + ", ".join(dests) for tensor, dests in marks.items()}

    def fallback_ops(self) -> dict[str, dict[str, Any]]:
        """Op -> ``{"count", "reasons"}`` of the nodes that fall back, most frequent first.

        Examples
        --------
        >>> from explorer import load
        >>> from explorer.targets import get_target
        >>> partition(load("zoo:mlp"), get_target("ort-cpu")).fallback_ops()
        {}
        """
        counts: Counter[str] = Counter()
        reasons: dict[str, list[str]] = {}
        for node in self.fallback_nodes:
            s = self.support[node]
            counts[s.op] += 1
            seen = reasons.setdefault(s.op, [])
            for r in s.blocking:
                if str(r) not in seen and len(seen) < _REASONS_SHOWN:
                    seen.append(str(r))
        return {op: {"count": n, "reasons": reasons[op]} for op, n in counts.most_common()}

    @property
    def verdict(self) -> str:
        """The outcome in one sentence.

        Examples
        --------
        >>> from explorer import load
        >>> from explorer.targets import get_target
        >>> partition(load("zoo:resnet18"), get_target("qnn-htp")).verdict[:40]  # a dynamic batch
        'nothing runs on Qualcomm Hexagon NPU (HT'
        """
        ops = self.fallback_ops()
        listed = _listed(ops)
        fall = len(self.fallback_nodes)
        if self.fallback is None:
            if not ops:
                return f"all {self.total_nodes} nodes run on {self.device}"
            return f"{self.failure}: {fall} of {self.total_nodes} nodes are not supported: {listed}"
        if not ops:
            return f"the whole graph ({self.total_nodes} nodes) runs on {self.device} as one partition"
        if not self.groups:
            total = self.total_nodes
            return (
                f"nothing runs on {self.device}; all {total} nodes fall back to the {self.fallback}: {listed}"
            )
        count = self.partition_count
        unknown = sum(1 for t in self.transitions if t.bytes is None)
        known = len(self.transitions) - unknown
        copied = " and ".join(
            part
            for part in (
                f"{format_bytes(self.transition_bytes)}" if known else "",
                f"{unknown} of unknown size" if unknown else "",
            )
            if part
        )
        crossing = f"{len(self.transitions)} tensors cross a boundary ({copied} per inference)"
        return (
            f"{count} partition{'s' if count > 1 else ''} on {self.device}, {fall} of {self.total_nodes} "
            f"nodes fall back to the {self.fallback}: {listed}; {crossing}"
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per node: op, placement, supported, reasons (and the runtime's EP when known)."""
        import pandas as pd

        overlay = self.overlay()
        rows = []
        for node, s in self.support.items():
            row = {
                "node": node,
                "op": s.op,
                "placement": overlay[node],
                "supported": s.supported,
                "reasons": "; ".join(str(r) for r in s.reasons),
            }
            if self.assignment is not None:
                row["assigned"] = self.assignment.providers.get(node, "")
            rows.append(row)
        return pd.DataFrame(rows).set_index("node") if rows else pd.DataFrame()

    def to_dict(self) -> dict[str, Any]:
        """Plain data: the counts, the verdict, the partitions, the fallback ops and transitions."""
        return {
            "target": self.target,
            "device": self.device,
            "fallback": self.fallback,
            "supported_nodes": self.supported_nodes,
            "total_nodes": self.total_nodes,
            "coverage": round(self.coverage, 4),
            "partitions": self.partition_count,
            "fallback_ops": self.fallback_ops(),
            "transitions": len(self.transitions),
            "transition_bytes": self.transition_bytes,
            "verdict": self.verdict,
            "groups": [list(g) for g in self.groups],
            "assignment": None if self.assignment is None else self.assignment.to_dict(),
        }


def _placements(
    groups: Sequence[Sequence[str]], nodes: Iterable[str], fallback: str | None
) -> dict[str, str]:
    """Node -> ``"partition K"`` (from 1) for grouped nodes, else the fallback (``"unsupported"`` if none)."""
    where = {n: f"partition {i}" for i, group in enumerate(groups, start=1) for n in group}
    return {n: where.get(n, fallback or "unsupported") for n in nodes}


def _listed(ops: Mapping[str, Mapping[str, Any]], shown: int = 6) -> str:
    """``"Resize x2 (attribute value), NonZero (op missing), ..."``: ops with their reason kinds."""
    parts = []
    for op, entry in list(ops.items())[:shown]:
        kinds = ", ".join(dict.fromkeys(r.split(":")[0] for r in entry["reasons"]))
        times = f" x{entry['count']}" if entry["count"] > 1 else ""
        parts.append(f"{op}{times} ({kinds})")
    return ", ".join(parts) + (", ..." if len(ops) > shown else "")


def _transitions(
    graph: ModelGraph, place: Mapping[str, str], tensor_bytes: Mapping[str, int]
) -> tuple[Transition, ...]:
    seen: set[tuple[str, str]] = set()
    out = []
    for u, v, tensor, data in graph.nx.edges(keys=True, data=True):
        src, dst = place.get(u, HOST), place.get(v, HOST)
        if src == dst or HOST in (src, dst) or (tensor, dst) in seen:
            continue
        seen.add((tensor, dst))
        out.append(Transition(tensor, src, dst, data.get("bytes") or tensor_bytes.get(tensor)))
    return tuple(out)


def partition(
    graph: ModelGraph,
    target: Target,
    *,
    support: Mapping[str, NodeSupport] | None = None,
    facts: Mapping[str, NodeFacts] | None = None,
    tensor_bytes: Mapping[str, int] | None = None,
) -> Partitioning:
    """Partition ``graph`` for ``target``: the groups it takes, the fallback nodes, the transitions.

    Parameters
    ----------
    graph : ModelGraph
        An ONNX graph.
    target : Target
        From :func:`explorer.targets.get_target`.
    support : mapping, optional
        ``target.support(graph)``, when already computed.
    facts : mapping, optional
        :func:`~explorer.targets.support.node_facts` of ``graph``, when already made.
    tensor_bytes : mapping, optional
        Tensor -> bytes per inference for tensors whose shape the graph leaves symbolic
        (:func:`explorer.targets.coverage.coverage` gives them, from the cost model's shapes).

    Returns
    -------
    Partitioning

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.targets import get_target
    >>> p = partition(load("zoo:resnet18", input_shapes={"input": [1, 3, 224, 224]}), get_target("qnn-htp"))
    >>> p.partition_count, len(p.fallback_nodes)
    (1, 0)
    """
    support = dict(target.support(graph, facts) if support is None else support)
    groups = supported_groups(graph, {n: s.supported for n, s in support.items()})
    if target.fallback is None:
        transitions: tuple[Transition, ...] = ()
    else:
        transitions = _transitions(graph, _placements(groups, support, target.fallback), tensor_bytes or {})
    return Partitioning(
        target.name,
        target.device,
        target.fallback,
        tuple(tuple(g) for g in groups),
        support,
        transitions,
        failure=target.failure,
    )
