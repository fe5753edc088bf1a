"""Where quantisation hurts, as an overlay: each node's SQNR (:func:`explorer.runtimes.quant_error.
quant_error`) on the float model's graph, for ``GraphView(graph, overlay=...)`` and, through
:func:`explorer.overlays.export.export_overlays`, Model Explorer's node data.

Activations are drawn on the node that writes them, weights on the node that reads them; a node with
several rows of a kind shows its lowest. Colours follow :data:`~explorer.overlays.ours.TIME_GRADIENT`
(Viridis: dark is low SQNR, where it hurts); ``below=`` paints the nodes under a threshold red, and the
first breaking node (:func:`explorer.runtimes.qdq_bisect.first_breaking_node`) can be marked too.

Examples
--------
>>> from explorer.runtimes.quant_error import QuantErrorReport, TensorError
>>> rows = (TensorError("/conv/Conv", "Conv", "c", "activation", 31.5, 40.0),
...         TensorError(None, None, "input", "activation", 40.0, 40.0))
>>> overlay = quant_error_overlay(QuantErrorReport("f.onnx", "q.onnx", rows, "2 samples given", 2, False))
>>> overlay.name, overlay.values["/conv/Conv"].value, [u.name for u in overlay.unmapped]
('activation SQNR (dB)', 31.5, ['input'])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from explorer.core.errors import UsageError
from explorer.overlays.ours import DRIFT_COLOR, TIME_GRADIENT
from explorer.overlays.value import NodeValue, Overlay, Unmapped

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.runtimes.qdq_bisect import FirstBreaking
    from explorer.runtimes.quant_error import QuantErrorReport

__all__ = ["quant_error_overlay", "quant_error_overlays"]


def quant_error_overlay(
    report: QuantErrorReport,
    graph: ModelGraph | None = None,
    *,
    kind: str = "activation",
    below: float | None = None,
    first_breaking: FirstBreaking | None = None,
) -> Overlay:
    """Each node's SQNR in dB (its lowest of ``kind``) as an overlay of the float model's graph.

    Parameters
    ----------
    report : QuantErrorReport
        The SQNR per tensor.
    graph : ModelGraph, optional
        The float model's graph (its ``source`` names what the overlay is on; nodes not in it are left
        unmapped).
    kind : {"activation", "weight"}
        Which rows.
    below : float, optional
        Paint the nodes under this SQNR red.
    first_breaking : FirstBreaking, optional
        The search's answer: its node is painted red and named in ``about``.

    Returns
    -------
    Overlay
        ``value``: SQNR in dB per node, rounded to 3 decimals.

    Examples
    --------
    >>> from explorer.runtimes.quant_error import QuantErrorReport, TensorError
    >>> rows = (TensorError("a", "Conv", "w", "weight", 30.0), TensorError("b", "Gemm", "v", "weight", 9.0))
    >>> overlay = quant_error_overlay(QuantErrorReport("f", "q", rows, "", 1, False), kind="weight", below=10)
    >>> overlay.values["b"].color, overlay.values["a"].color is None
    ('#d62728', True)
    """
    if kind not in ("activation", "weight"):
        raise UsageError(f"kind must be 'activation' or 'weight', not {kind!r}")
    ops = {t.node: t.op_type for t in report.nodes}
    known = set(graph.op_nodes()) if graph is not None else None
    flagged = first_breaking.node if first_breaking is not None else None
    values: dict[str, NodeValue] = {}
    unmapped: list[Unmapped] = []
    for node, db in report.node_sqnr(kind).items():
        if known is not None and node not in known:
            unmapped.append(Unmapped(node, f"no node {node!r} in {graph.source}"))  # type: ignore[union-attr]
            continue
        red = (below is not None and db < below) or node == flagged
        values[node] = NodeValue(
            node, value=round(float(db), 3), color=DRIFT_COLOR if red else None, op=ops[node]
        )
    for row in report.tensors:
        if row.node is None and row.kind == kind:
            unmapped.append(Unmapped(row.tensor, f"a graph input: {row.sqnr_db:.3f} dB"))
    return Overlay(
        "explorer-quant-error",
        None,
        graph.source if graph is not None else report.float_source,
        values,
        tuple(unmapped),
        about={
            "float_model": report.float_source,
            "qdq_model": report.qdq_source,
            "kind": kind,
            "inputs": report.inputs,
            "first_breaking": flagged,
        },
        notes=tuple(report.notes),
        gradient=TIME_GRADIENT,
        name=f"{kind} SQNR (dB)",
    )


def quant_error_overlays(
    report: QuantErrorReport,
    graph: ModelGraph | None = None,
    *,
    first_breaking: FirstBreaking | None = None,
) -> list[Overlay]:
    """The activation overlay, then the weight overlay (when any weight was compared).

    Examples
    --------
    >>> from explorer.runtimes.quant_error import QuantErrorReport, TensorError
    >>> rows = (TensorError("a", "Conv", "w", "weight", 30.0),)
    >>> [o.name for o in quant_error_overlays(QuantErrorReport("f", "q", rows, "", 1, False))]
    ['activation SQNR (dB)', 'weight SQNR (dB)']
    """
    overlays = [quant_error_overlay(report, graph, first_breaking=first_breaking)]
    if report.node_sqnr("weight"):
        overlays.append(quant_error_overlay(report, graph, kind="weight"))
    return overlays
