"""A deployment target: a runtime on a device, where its support knowledge comes from, and its check.

A :class:`Target` judges every operator of a graph at once (:meth:`Target.support`):
most targets apply a rule per node (:func:`per_node`), TVM imports each distinct node
for real. Targets that need static shapes fail every node with a tensor whose shape is
not fixed, whatever the op. ``fallback`` names where unsupported nodes run instead (the
CPU, for an accelerator); a target without one (ONNX Runtime's CPU provider) cannot run
a model with an unsupported node at all.

Examples
--------
>>> from explorer import load
>>> from explorer.targets.support import OP_MISSING, Reason
>>> def no_gemm(facts):
...     return [Reason(OP_MISSING, "no Gemm")] if facts.op == "Gemm" else []
>>> t = Target("toy", "toy runtime", "toy NPU", "Runs all but Gemm", KnowledgeSource("table", "made up"),
...            per_node(no_gemm), fallback="CPU")
>>> support = t.support(load("zoo:mlp"))
>>> sorted(n for n, s in support.items() if not s.supported)
['/fc1/Gemm', '/fc2/Gemm', '/fc3/Gemm']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.targets.rules import static_shape_reasons
from explorer.targets.support import NodeFacts, NodeSupport, Reason, node_facts

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["KnowledgeSource", "Target", "GraphCheck", "per_node"]

GraphCheck = Callable[["ModelGraph", Mapping[str, NodeFacts]], Mapping[str, list[Reason]]]
"""Judges every node of a graph: node id -> the reasons found (missing or empty: no objection)."""


@dataclass(frozen=True)
class KnowledgeSource:
    """Where a target's support knowledge comes from.

    Attributes
    ----------
    kind : {"measured", "table"}
        ``"measured"``: read from the installed build (a kernel registry, an importer);
        ``"table"``: a published table, with its date.
    what : str
        The registry or table, in words (with the version or commit).
    date : str or None
        The table's date (ISO), None for measured knowledge.
    url : str or None
        Where the table is published.

    Examples
    --------
    >>> KnowledgeSource("table", "ORT NNAPI table", "2026-01-01").describe()
    'table: ORT NNAPI table (2026-01-01)'
    """

    kind: str
    what: str
    date: str | None = None
    url: str | None = None

    def describe(self) -> str:
        """One line: kind, what, and the date when there is one."""
        return f"{self.kind}: {self.what}" + (f" ({self.date})" if self.date else "")

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {"kind": self.kind, "what": self.what, "date": self.date, "url": self.url}


def per_node(rule: Callable[[NodeFacts], list[Reason]]) -> GraphCheck:
    """A :data:`GraphCheck` that applies ``rule`` to each node on its own.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.targets.support import node_facts
    >>> g = load("zoo:mlp")
    >>> per_node(lambda facts: [])(g, node_facts(g))["/fc1/Gemm"]
    []
    """

    def check(graph: ModelGraph, facts: Mapping[str, NodeFacts]) -> dict[str, list[Reason]]:
        return {node: rule(f) for node, f in facts.items()}

    return check


@dataclass(frozen=True)
class Target:
    """A runtime on a device, and which ONNX nodes it takes.

    Attributes
    ----------
    name : str
        The CLI name (``"ort-cpu"``, ``"qnn-htp"``, ...).
    runtime : str
        The runtime and, for ONNX Runtime, its execution provider.
    device : str
        The device the target's nodes run on.
    description : str
        One sentence for a learner.
    source : KnowledgeSource
        Where the support knowledge comes from.
    check : GraphCheck
        Judges the nodes of a graph.
    requires_static_shapes : bool
        Whether every tensor of a node must have a fixed shape.
    fallback : str or None
        Where unsupported nodes run instead; None when the target is the last resort.
    provider : str or None
        The ONNX Runtime execution provider, for targets that are one.
    failure : str
        What an unsupported node means for a target without a fallback, in words.
    unavailable : str or None
        Why the target cannot judge here (its compiler is not installed, and what to install);
        None when it can. :meth:`support` then raises, and :func:`~explorer.targets.coverage`
        leaves it out of its default targets.

    Examples
    --------
    >>> from explorer.targets import get_target
    >>> get_target("qnn-htp").requires_static_shapes, get_target("ort-cpu").fallback
    (True, None)
    """

    name: str
    runtime: str
    device: str
    description: str
    source: KnowledgeSource
    check: GraphCheck = field(repr=False, compare=False)
    requires_static_shapes: bool = False
    fallback: str | None = None
    provider: str | None = None
    failure: str = "the session cannot be created"
    unavailable: str | None = None

    def support(
        self, graph: ModelGraph, facts: Mapping[str, NodeFacts] | None = None
    ) -> dict[str, NodeSupport]:
        """Judge every operator of ``graph``'s main graph, in node-list order.

        Parameters
        ----------
        graph : ModelGraph
            An ONNX graph.
        facts : mapping, optional
            :func:`~explorer.targets.support.node_facts` of ``graph``, when already made.

        Returns
        -------
        dict
            Node id -> :class:`~explorer.targets.support.NodeSupport`.

        Raises
        ------
        UsageError
            The target is :attr:`unavailable` here.

        Examples
        --------
        >>> from explorer import load
        >>> from explorer.targets import get_target
        >>> support = get_target("ort-cpu").support(load("zoo:resnet18"))
        >>> all(s.supported for s in support.values())
        True
        """
        if self.unavailable is not None:
            from explorer.core.errors import UsageError

            raise UsageError(f"target {self.name}: {self.unavailable}")
        facts = node_facts(graph) if facts is None else facts
        found = self.check(graph, facts)
        out = {}
        for node, f in facts.items():
            reasons = list(static_shape_reasons(f)) if self.requires_static_shapes else []
            reasons.extend(found.get(node) or ())
            out[node] = NodeSupport.judge(f, reasons)
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the check left out)."""
        return {
            "name": self.name,
            "runtime": self.runtime,
            "device": self.device,
            "description": self.description,
            "source": self.source.to_dict(),
            "requires_static_shapes": self.requires_static_shapes,
            "fallback": self.fallback,
            "provider": self.provider,
            "failure": self.failure,
            "unavailable": self.unavailable,
        }
