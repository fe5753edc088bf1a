"""Our own results as overlays: a runtime's time per node, a target's placement and fallback reasons,
the output drift per node; each an :class:`~explorer.overlays.value.Overlay`, so the one writer
(:func:`explorer.overlays.model_explorer.write_model_explorer`) puts them in Model Explorer and
``GraphView(overlay=...)`` draws them on our graph.

Time is continuous: Model Explorer colours it with :data:`TIME_GRADIENT` (Viridis, the scale our
graph draws numbers with). Placement is categorical: each node's result carries its placement's
colour from :mod:`explorer.targets.palette` as ``bgColor`` (Model Explorer's format has no legend;
string values are listed with their counts on collapsed layers instead).

Examples
--------
>>> from explorer import load
>>> from explorer.targets import get_target, partition
>>> graph = load("zoo:mlp")
>>> overlay = placement_overlay(partition(graph, get_target("ort-cpu")), graph)
>>> overlay.name, overlay.values["/fc1/Gemm"].value, overlay.values["/fc1/Gemm"].color
('placement on ort-cpu', 'partition 1', '#2e7d32')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from explorer.overlays.value import NodeValue, Overlay, Unmapped
from explorer.targets.palette import FALLBACK_COLOR, partition_palette

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.runtimes.intermediates import IntermediateComparison
    from explorer.runtimes.profile import Profile
    from explorer.targets.partition import Partitioning

__all__ = [
    "TIME_GRADIENT",
    "DRIFT_COLOR",
    "profile_overlay",
    "placement_overlay",
    "fallback_overlay",
    "drift_overlay",
]

TIME_GRADIENT = tuple(
    {"stop": round(i / 9, 4), "bgColor": color}
    for i, color in enumerate(
        (
            "#440154",
            "#482878",
            "#3e4989",
            "#31688e",
            "#26828e",
            "#1f9e89",
            "#35b779",
            "#6ece58",
            "#b5de2b",
            "#fde725",
        )
    )
)
"""Model Explorer's ``gradient`` for times and errors: plotly's Viridis, as our graph draws numbers."""

DRIFT_COLOR = "#d62728"
"""A node whose output disagrees between the runtimes (its drift past the tolerance)."""


def _source(graph: ModelGraph | None, fallback: str) -> str:
    return graph.source if graph is not None else fallback


def profile_overlay(profile: Profile, graph: ModelGraph | None = None, *, call: str | None = None) -> Overlay:
    """A runtime's per-node time (:func:`explorer.runtimes.profile.profile`) as an overlay.

    Parameters
    ----------
    profile : Profile
        The runtime's kernels, mapped onto the ONNX nodes (``node_ms``).
    graph : ModelGraph, optional
        The graph profiled (its ``source`` names what the overlay is on).
    call : str, optional
        Which call of a decoder's generation (``prefill``, ``decode``): named in the overlay's name.

    Returns
    -------
    Overlay
        ``time_ms`` per node (``value`` too: what Model Explorer shows), coloured by
        :data:`TIME_GRADIENT`; the kernels put on no node in ``unmapped`` with their time, so
        ``time_share_mapped`` is the profile's coverage.

    Examples
    --------
    >>> from explorer.runtimes.profile import KernelTime, Profile
    >>> kernels = (KernelTime("a", "Conv", 1.5, "a"), KernelTime("r", "R", 0.5, None))
    >>> prof = Profile("ort", "ort", 1, 2.0, kernels, {"a": 1.5})
    >>> overlay = profile_overlay(prof)
    >>> overlay.name, overlay.values["a"].time_ms, overlay.time_share_mapped
    ('time on ort (ms)', 1.5, 0.75)
    """
    ops: dict[str, list[str]] = {}
    for kernel in profile.kernels:
        if kernel.node is not None:
            ops.setdefault(kernel.node, []).append(kernel.op)
    values = {
        node: NodeValue(
            node,
            time_ms=float(ms),
            value=round(float(ms), 6),
            op=", ".join(dict.fromkeys(ops.get(node, ()))) or None,
            entries=tuple(k.name for k in profile.kernels if k.node == node),
        )
        for node, ms in profile.node_ms.items()
    }
    unmapped = tuple(
        Unmapped(k.name, "the runtime's own work, put on no ONNX node", k.ms)
        for k in profile.kernels
        if k.node is None
    )
    where = f"{profile.label}, {call}" if call else profile.label
    return Overlay(
        "explorer-profile",
        None,
        _source(graph, profile.label),
        values,
        unmapped,
        float(sum(k.ms for k in profile.kernels)),
        {"runtime": profile.runtime, "label": profile.label, "runs": profile.runs, "call": call},
        gradient=TIME_GRADIENT,
        name=f"time on {where} (ms)",
    )


def placement_overlay(p: Partitioning, graph: ModelGraph | None = None) -> Overlay:
    """Where a target places each node (``partition 1``..., the fallback device, ``unsupported``).

    Each value is coloured from :func:`explorer.targets.palette.partition_palette`, the colours of
    our graph's partition overlay; ``compute_unit`` is the device the node runs on.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.targets import get_target, partition
    >>> graph = load("zoo:mlp", input_shapes={"input": [1, 1, 28, 28]})
    >>> overlay = placement_overlay(partition(graph, get_target("nnapi")), graph)
    >>> sorted({v.value for v in overlay.values.values()}), overlay.values["/fc1/Gemm"].compute_unit
    (['partition 1'], 'Android NNAPI (NPU / DSP / GPU)')
    """
    palette = partition_palette(p)
    placements = p.overlay()
    values = {
        node: NodeValue(
            node,
            value=place,
            color=palette.get(place),
            compute_unit=p.device if place.startswith("partition ") else (p.fallback or None),
            op=p.support[node].op if node in p.support else None,
        )
        for node, place in placements.items()
    }
    return Overlay(
        "explorer-placement",
        None,
        _source(graph, p.target),
        values,
        about={"target": p.target, "device": p.device, "fallback": p.fallback, "palette": palette},
        name=f"placement on {p.target}",
    )


def fallback_overlay(p: Partitioning, graph: ModelGraph | None = None) -> Overlay:
    """Why each node a target does not take falls back: its blocking reasons, in words.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.targets import get_target, partition
    >>> graph = load("zoo:resnet18")
    >>> overlay = fallback_overlay(partition(graph, get_target("coreml-mlprogram")), graph)
    >>> overlay.values["/bn1/BatchNormalization"].value.split(":")[0], overlay.name
    ('op missing', 'fallback reason on coreml-mlprogram')
    """
    values = {}
    for node in p.fallback_nodes:
        support = p.support[node]
        reasons = "; ".join(str(r) for r in support.blocking) or "not taken"
        values[node] = NodeValue(node, value=reasons, color=FALLBACK_COLOR, op=support.op)
    return Overlay(
        "explorer-fallback",
        None,
        _source(graph, p.target),
        values,
        about={"target": p.target, "fallback": p.fallback},
        name=f"fallback reason on {p.target}",
    )


def drift_overlay(comparison: IntermediateComparison, graph: ModelGraph | None = None) -> Overlay:
    """Each node's output drift between two runtimes (:func:`~explorer.runtimes.intermediates.
    compare_intermediates`): the largest absolute difference of its outputs, red where it is past
    the tolerance.

    Examples
    --------
    >>> from explorer.runtimes.intermediates import IntermediateComparison, TensorAgreement
    >>> agreement = TensorAgreement("a", "Relu", "y", (1,), 0.5, 0.1, False)
    >>> overlay = drift_overlay(IntermediateComparison("ort", "tvm", (agreement,), ()))
    >>> overlay.values["a"].value, overlay.values["a"].color
    (0.5, '#d62728')
    """
    worst: dict[str, tuple[float, bool, str]] = {}
    for t in comparison.tensors:
        err, agrees, op = worst.get(t.node, (0.0, True, t.op_type))
        worst[t.node] = (max(err, float(t.max_abs_err)), agrees and t.agrees, op)
    values = {
        node: NodeValue(node, value=err, color=None if agrees else DRIFT_COLOR, op=op)
        for node, (err, agrees, op) in worst.items()
    }
    unmapped = tuple(Unmapped(node, why) for node, why in comparison.not_compared)
    return Overlay(
        "explorer-drift",
        None,
        _source(graph, comparison.reference),
        values,
        unmapped,
        about={"reference": comparison.reference, "other": comparison.other},
        gradient=TIME_GRADIENT,
        name=f"max |{comparison.other} - {comparison.reference}| per node",
    )
