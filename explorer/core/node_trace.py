"""One node followed across IRs: through each step of a timeline, and down to the Relax bindings made from it.

The Explorer's one selection rests on these two questions. Within one IR, a node is
followed step by step through each step's diff (matched pairs carry it on; a fusion or a
removal ends it): :func:`trace_node`. Across IRs, the graph model's ``origin`` names the
nodes of the IR a node was lowered from, so the Relax bindings (or fused kernels) of an
ONNX node are the nodes whose ``origin`` holds it: :func:`lowered_from`.

Examples
--------
>>> from explorer.passes.pipeline import run_pipeline
>>> t = run_pipeline("zoo:resnet18", "fuse_bn_into_conv", verify=False)
>>> trace_node(t, "/bn1/BatchNormalization").fate
'fused into /conv1/Conv (Conv, with 1 other node) by step 1 (fuse_bn_into_conv)'
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from explorer.core.diff import Fusion
from explorer.core.graph import ModelGraph
from explorer.core.timeline import Timeline

__all__ = ["NodeTrace", "trace_node", "lowered_from"]


@dataclass(frozen=True)
class NodeTrace:
    """Where one node of a timeline's first graph is at each step.

    Attributes
    ----------
    node : str
        The node id in snapshot 0.
    names : tuple of (str or None)
        Its id in each snapshot (None from the step that removed or fused it on).
    ended_by : int or None
        The step that removed or fused it (None: it lasts to the end).
    fused_into : str or None
        The node it was fused into, when a fusion ended it.
    fate : str
        In words: ``"kept through all 3 steps"``, ``"removed by step 2 (eliminate_identity)"``,
        ``"fused into /conv1/Conv (Conv, with 1 other node) by step 1 (fuse_bn_into_conv)"``.
    """

    node: str
    names: tuple[str | None, ...]
    ended_by: int | None
    fused_into: str | None
    fate: str

    def name_at(self, step: int) -> str | None:
        """The node's id in snapshot ``step`` (None when it no longer exists there).

        Examples
        --------
        >>> NodeTrace("a", ("a", "a2", None), 2, None, "removed by step 2 (p)").name_at(1)
        'a2'
        """
        return self.names[step] if 0 <= step < len(self.names) else None

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain values.

        Examples
        --------
        >>> NodeTrace("a", ("a",), None, None, "kept").to_dict()["fate"]
        'kept'
        """
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        """One row per snapshot: the node's id there (empty once it is gone).

        Examples
        --------
        >>> NodeTrace("a", ("a", None), 1, None, "removed by step 1 (p)").to_frame()["name"].tolist()
        ['a', None]
        """
        names = pd.Series(list(self.names), dtype=object, name="name")
        return names.rename_axis("step").to_frame()


def trace_node(timeline: Timeline, node: str) -> NodeTrace:
    """Follow ``node`` of the timeline's first graph through every step's diff.

    Parameters
    ----------
    timeline : Timeline
        Any timeline (ONNX passes, a lowering, a prepared model).
    node : str
        A node id of snapshot 0.

    Returns
    -------
    NodeTrace

    Examples
    --------
    >>> from explorer.passes.pipeline import run_pipeline
    >>> t = run_pipeline("zoo:resnet18", "fuse_bn_into_conv,eliminate_identity", verify=False)
    >>> trace = trace_node(t, "/conv1/Conv")
    >>> trace.fate, trace.name_at(2)
    ('kept through all 2 steps', '/conv1/Conv')
    """
    if node not in timeline[0].graph.nx:
        raise KeyError(f"no node {node!r} in the first graph of {timeline.source}")
    names: list[str | None] = [node]
    current: str | None = node
    for step in range(1, len(timeline)):
        if current is None:
            names.append(None)
            continue
        snap = timeline[step]
        if not snap.changed:
            names.append(current if current in snap.graph.nx else None)
            if names[-1] is None:
                return _ended(node, names, len(timeline), step, timeline, None)
            continue
        diff = timeline.diff(step)
        carried = {before: after for before, after in (*diff.kept, *diff.renamed)}
        carried.update({c.before: c.after for c in diff.changed})
        if current in carried:  # matched (a fusion's anchor is matched to its result too)
            current = carried[current]
            names.append(current)
            continue
        fusion = next((f for f in diff.fusions if current in f.sources), None)
        names.append(None)
        return _ended(node, names, len(timeline), step, timeline, fusion)
    steps = len(timeline) - 1
    return NodeTrace(node, tuple(names), None, None, f"kept through all {steps} step{'s' * (steps != 1)}")


def _ended(
    node: str, names: list[str | None], length: int, step: int, timeline: Timeline, fusion: Fusion | None
) -> NodeTrace:
    names = names + [None] * (length - len(names))
    when = f"by step {step} ({timeline[step].name})"
    if fusion is None:
        return NodeTrace(node, tuple(names), step, None, f"removed {when}")
    data = timeline[step].graph.nx.nodes.get(fusion.into, {})
    op = data.get("op") or data.get("op_type") or "?"
    others = len(fusion.sources) - 1
    company = f", with {others} other node{'s' * (others != 1)}" if others else ""
    fate = f"fused into {fusion.into} ({op}{company}) {when}"
    return NodeTrace(node, tuple(names), step, fusion.into, fate)


def lowered_from(graph: ModelGraph, node: str) -> list[str]:
    """The nodes of a lowered graph (Relax bindings, fused kernels) whose ``origin`` holds ``node``.

    Parameters
    ----------
    graph : ModelGraph
        A graph of a lower IR (``ir="relax"``), whose nodes name their source nodes in ``origin``.
    node : str
        A node id of the source (ONNX) graph.

    Returns
    -------
    list of str
        Node ids of ``graph``, in its node order.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.lower import relax_import
    >>> relax = relax_import(load("zoo:mlp"), {"input": [1, 1, 28, 28]}).graph
    >>> [relax.nx.nodes[n]["op"] for n in lowered_from(relax, "/fc1/Gemm")]
    ['relax.permute_dims', 'relax.matmul', 'relax.add']
    """
    return [n for n, data in graph.nx.nodes(data=True) if node in (data.get("origin") or ())]
