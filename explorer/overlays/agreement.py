"""A device's measured placement against a target's predicted one, node by node.

Qualcomm AI Hub's profile (:mod:`explorer.overlays.ai_hub`) says where each layer really ran
(``NPU``, ``GPU``, ``CPU``); ``coverage --target qnn-htp`` predicts it (a supported node runs on
the NPU, the rest falls back to the CPU). :func:`placement_agreement` joins the two on the model's
nodes: per node the predicted and the measured compute unit and whether they agree, the share
agreeing, the nodes we predicted on the NPU that ran elsewhere and those that ran on the NPU
though we predicted a fallback. :meth:`PlacementAgreement.to_overlay` draws it on our graph
(categories ``agree``, ``predicted NPU, measured CPU``, ...).

AI Hub compiles a model with static shapes, so the prediction is made with them: by default
the graph's dynamic dimensions are fixed as the benchmarks fix them (batch-like dimensions 1).

Examples
--------
>>> from explorer import load
>>> from explorer.overlays import read
>>> graph = load("zoo:mlp")
>>> measured = read({"execution_detail": [
...     {"name": "/fc1/Gemm", "type": "FullyConnected", "compute_unit": "NPU", "execution_time": 10},
...     {"name": "/relu1/Relu", "type": "Relu", "compute_unit": "CPU", "execution_time": 5}]}, graph)
>>> agreement = placement_agreement(graph, measured)
>>> agreement.share_agreeing, agreement.predicted_npu_measured_elsewhere
(0.5, ('/relu1/Relu',))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError
from explorer.overlays.value import NodeValue, Overlay

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph
    from explorer.targets.partition import Partitioning

__all__ = [
    "NodeAgreement",
    "PlacementAgreement",
    "placement_agreement",
    "AGREE",
    "NOT_MEASURED",
    "AGREEMENT_COLORS",
]

AGREE = "agree"
"""The category of a node measured where it was predicted."""

NOT_MEASURED = "not measured"
"""The category of a node the measured file has no compute unit for."""

AGREEMENT_COLORS = {
    AGREE: "#2e7d32",
    "predicted NPU, measured CPU": "#d62728",
    "predicted NPU, measured GPU": "#ff7f0e",
    "predicted CPU, measured NPU": "#1565c0",
    "predicted CPU, measured GPU": "#8e24aa",
    NOT_MEASURED: "#b4b4b4",
}
"""Category -> colour on our graph (a mixed unit, ``NPU/CPU``, gets a stable colour of its own)."""


@dataclass(frozen=True)
class NodeAgreement:
    """One node: where the target predicts it runs, where it was measured, whether they agree.

    Attributes
    ----------
    node, op : str
        The node's id and op type.
    predicted : str
        ``NPU`` (the target supports it) or ``CPU`` (it falls back).
    measured : str or None
        The measured compute unit (several joined by ``/``); None when not measured.
    agrees : bool or None
        ``measured == predicted``; None when not measured.
    reasons : str
        Why the target does not take it (empty when it does).
    """

    node: str
    op: str
    predicted: str
    measured: str | None
    agrees: bool | None
    reasons: str = ""

    @property
    def category(self) -> str:
        """``agree``, ``predicted NPU, measured CPU``, ... or ``not measured``.

        Examples
        --------
        >>> NodeAgreement("a", "Relu", "NPU", "CPU", False).category
        'predicted NPU, measured CPU'
        """
        if self.measured is None:
            return NOT_MEASURED
        return AGREE if self.agrees else f"predicted {self.predicted}, measured {self.measured}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields.

        Examples
        --------
        >>> NodeAgreement("a", "Relu", "NPU", "NPU", True).to_dict()["category"]
        'agree'
        """
        return {
            "node": self.node,
            "op": self.op,
            "predicted": self.predicted,
            "measured": self.measured,
            "agrees": self.agrees,
            "category": self.category,
            "reasons": self.reasons,
        }


@dataclass(frozen=True)
class PlacementAgreement:
    """A target's predicted placement against a measured one, per node.

    Attributes
    ----------
    target : str
        The target predicted (``qnn-htp``).
    model : str
        The graph's source.
    measured_from : str or None
        The measured file (the overlay's source).
    nodes : tuple of NodeAgreement
        One per operator of the graph, in graph order.
    input_shapes : mapping
        The static shapes the prediction was made with (empty: the graph's own).
    """

    target: str
    model: str
    measured_from: str | None
    nodes: tuple[NodeAgreement, ...]
    input_shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)

    @property
    def compared(self) -> int:
        """Nodes both predicted and measured.

        Examples
        --------
        >>> PlacementAgreement("t", "m", None, (NodeAgreement("a", "Relu", "NPU", None, None),)).compared
        0
        """
        return sum(1 for n in self.nodes if n.agrees is not None)

    @property
    def agreeing(self) -> int:
        """Nodes measured where they were predicted."""
        return sum(1 for n in self.nodes if n.agrees)

    @property
    def share_agreeing(self) -> float | None:
        """``agreeing / compared`` (None when nothing was measured).

        Examples
        --------
        >>> rows = (NodeAgreement("a", "Relu", "NPU", "NPU", True),
        ...         NodeAgreement("b", "Add", "NPU", "CPU", False))
        >>> PlacementAgreement("t", "m", None, rows).share_agreeing
        0.5
        """
        return round(self.agreeing / self.compared, 6) if self.compared else None

    @property
    def predicted_npu_measured_elsewhere(self) -> tuple[str, ...]:
        """Nodes we predicted on the NPU that ran (at least partly) on the CPU or GPU."""
        return tuple(n.node for n in self.nodes if n.predicted == "NPU" and n.agrees is False)

    @property
    def measured_npu_predicted_elsewhere(self) -> tuple[str, ...]:
        """Nodes we predicted to fall back that ran (at least partly) on the NPU."""
        return tuple(
            n.node
            for n in self.nodes
            if n.predicted != "NPU" and n.agrees is False and "NPU" in (n.measured or "").split("/")
        )

    @property
    def not_measured(self) -> tuple[str, ...]:
        """Nodes the measured file says nothing about (fused into a neighbour's layer, or left out)."""
        return tuple(n.node for n in self.nodes if n.measured is None)

    def categories(self) -> dict[str, int]:
        """Category -> node count, most frequent first.

        Examples
        --------
        >>> rows = (NodeAgreement("a", "Relu", "NPU", "NPU", True),
        ...         NodeAgreement("b", "Add", "NPU", "CPU", False))
        >>> PlacementAgreement("t", "m", None, rows).categories()
        {'agree': 1, 'predicted NPU, measured CPU': 1}
        """
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.category] = counts.get(n.category, 0) + 1
        return dict(sorted(counts.items(), key=lambda item: -item[1]))

    def summary(self) -> str:
        """The outcome in one sentence.

        Examples
        --------
        >>> rows = (NodeAgreement("a", "Relu", "NPU", "NPU", True),
        ...         NodeAgreement("b", "Add", "NPU", "CPU", False))
        >>> PlacementAgreement("qnn-htp", "m", None, rows).summary()
        'qnn-htp predicted vs measured: 1 of 2 nodes agree (50.0%); 1 predicted NPU ran elsewhere'
        """
        if not self.compared:
            return f"{self.target} predicted vs measured: no node of the model was measured"
        text = (
            f"{self.target} predicted vs measured: {self.agreeing} of {self.compared} nodes agree "
            f"({self.share_agreeing:.1%})"
        )
        parts = []
        if self.predicted_npu_measured_elsewhere:
            parts.append(f"{len(self.predicted_npu_measured_elsewhere)} predicted NPU ran elsewhere")
        if self.measured_npu_predicted_elsewhere:
            parts.append(f"{len(self.measured_npu_predicted_elsewhere)} predicted fallback ran on the NPU")
        if self.not_measured:
            parts.append(f"{len(self.not_measured)} not measured")
        return text + ("; " + ", ".join(parts) if parts else "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the counts, the two lists of disagreeing nodes and every node.

        Examples
        --------
        >>> rows = (NodeAgreement("a", "Relu", "NPU", "CPU", False),)
        >>> data = PlacementAgreement("qnn-htp", "m", None, rows).to_dict()
        >>> data["share_agreeing"], data["predicted_npu_measured_elsewhere"]
        (0.0, ['a'])
        """
        return {
            "target": self.target,
            "model": self.model,
            "measured_from": self.measured_from,
            "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
            "compared": self.compared,
            "agreeing": self.agreeing,
            "share_agreeing": self.share_agreeing,
            "categories": self.categories(),
            "predicted_npu_measured_elsewhere": list(self.predicted_npu_measured_elsewhere),
            "measured_npu_predicted_elsewhere": list(self.measured_npu_predicted_elsewhere),
            "not_measured": list(self.not_measured),
            "nodes": [n.to_dict() for n in self.nodes],
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per node: ``node``, ``op``, ``predicted``, ``measured``, ``agrees``, ``category``,
        ``reasons``.

        Examples
        --------
        >>> rows = (NodeAgreement("a", "Relu", "NPU", "CPU", False),)
        >>> PlacementAgreement("t", "m", None, rows).to_frame()[["node", "agrees"]].values.tolist()
        [['a', False]]
        """
        import pandas as pd

        columns = ["node", "op", "predicted", "measured", "agrees", "category", "reasons"]
        return pd.DataFrame([n.to_dict() for n in self.nodes], columns=columns)

    def to_overlay(self) -> Overlay:
        """The agreement as an overlay for our graph: each node's category as its value, in
        :data:`AGREEMENT_COLORS`; ``compute_unit`` the measured one, ``provider`` the predicted one.

        Examples
        --------
        >>> rows = (NodeAgreement("a", "Relu", "NPU", "CPU", False),)
        >>> overlay = PlacementAgreement("qnn-htp", "m", "hub.json", rows).to_overlay()
        >>> overlay.name, overlay.values["a"].value, overlay.values["a"].color
        ('qnn-htp: predicted vs measured', 'predicted NPU, measured CPU', '#d62728')
        """
        from explorer.targets.palette import PARTITION_COLORS

        extra = iter(PARTITION_COLORS[2:])
        colors = dict(AGREEMENT_COLORS)
        values = {}
        for n in self.nodes:
            if n.category not in colors:
                colors[n.category] = next(extra, "#6d4c41")
            values[n.node] = NodeValue(
                n.node,
                value=n.category,
                color=colors[n.category],
                op=n.op,
            )
        return Overlay(
            "explorer-placement-agreement",
            self.measured_from,
            self.model,
            values,
            about={"target": self.target, "share_agreeing": self.share_agreeing},
            notes=(self.summary(),),
            name=f"{self.target}: predicted vs measured",
        )


def _static_graph(graph: ModelGraph, input_shapes: Mapping[str, Sequence[int]] | None) -> tuple[Any, dict]:
    """The graph with static input shapes (the given ones, else dynamic dimensions fixed to 1)."""
    from explorer.onnx_adapter.adapter import has_onnx_model
    from explorer.onnx_adapter.inputs import concrete_input_shapes
    from explorer.onnx_adapter.load import load

    if not has_onnx_model(graph):
        return graph, {}
    shapes = concrete_input_shapes(graph.model, input_shapes)
    declared = {name: tuple(graph.nx.nodes.get(f"input:{name}", {}).get("shape") or ()) for name in shapes}
    if input_shapes is None and all(tuple(shapes[n]) == declared[n] for n in shapes):
        return graph, {}  # already static
    return load(graph.model, input_shapes=shapes, name=graph.source), shapes


def placement_agreement(
    graph: ModelGraph,
    measured: Overlay,
    target: str = "qnn-htp",
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    partitioning: Partitioning | None = None,
    device_unit: str = "NPU",
    fallback_unit: str = "CPU",
) -> PlacementAgreement:
    """Join the measured compute unit per node with ``target``'s predicted placement.

    Parameters
    ----------
    graph : ModelGraph
        The model (the one ``measured`` was read onto).
    measured : Overlay
        An overlay with a compute unit per node: Qualcomm AI Hub's profile
        (:func:`explorer.overlays.read`).
    target : str
        The target whose prediction is compared (``qnn-htp``: Qualcomm's Hexagon NPU).
    input_shapes : mapping, optional
        The static shapes the model was compiled with (default: dynamic dimensions 1).
    partitioning : Partitioning, optional
        The target's partitioning, already computed (a coverage report's); then ``input_shapes``
        is not used.
    device_unit, fallback_unit : str
        The compute unit a supported node is predicted on, and a fallen-back one.

    Returns
    -------
    PlacementAgreement

    Raises
    ------
    UsageError
        ``measured`` is not mapped onto a graph, or has no compute unit on any node.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.overlays import read
    >>> graph = load("zoo:control_flow")
    >>> measured = read({"execution_detail": [
    ...     {"name": "/loop/Loop", "type": "Loop", "compute_unit": "NPU", "execution_time": 10}]}, graph)
    >>> agreement = placement_agreement(graph, measured)
    >>> agreement.measured_npu_predicted_elsewhere, agreement.input_shapes
    (('/loop/Loop',), {'x': [1, 16]})
    """
    from explorer.targets import get_target, partition

    if measured.mapped_onto is None:
        raise UsageError(f"{measured.source or '<value>'}: the overlay was read without a model")
    units = measured.by_node("compute_unit")
    if not units:
        raise UsageError(
            f"{measured.source or '<value>'}: no node has a compute unit ({measured.format}); "
            "placement is compared with a Qualcomm AI Hub profile"
        )
    shapes: dict = {}
    if partitioning is None:
        judged, shapes = _static_graph(graph, input_shapes)
        partitioning = partition(judged, get_target(target))
    rows = []
    for node, support in partitioning.support.items():
        predicted = device_unit if support.supported else fallback_unit
        unit = units.get(node)
        rows.append(
            NodeAgreement(
                node,
                support.op,
                predicted,
                unit,
                None if unit is None else unit == predicted,
                "; ".join(str(r) for r in support.blocking),
            )
        )
    return PlacementAgreement(partitioning.target, graph.source, measured.source, tuple(rows), shapes)
