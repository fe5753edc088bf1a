"""Figures of runtime measurements: latency distributions side by side, and where the time goes.

Pure functions from results to plotly figures (the widgets only show them).

Examples
--------
>>> from explorer import load
>>> from explorer.runtimes import bench
>>> fig = latency_figure(bench(load("zoo:mlp"), ["ort"], min_runs=3, min_seconds=0.0))
>>> fig.data[0].type, fig.data[0].name
('box', 'ONNX Runtime CPU (all)')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

if TYPE_CHECKING:
    from .runtimes.bench import BenchReport
    from .runtimes.profile import Profile

__all__ = ["latency_figure", "kernel_time_figure", "RUNTIME_COLORS"]

RUNTIME_COLORS = ("#33558a", "#c0561b", "#1f6f5f", "#8e2f25", "#6d3f8f")
"""One colour per runtime, in the order of the report."""


def latency_figure(report: BenchReport, kind: str = "box", log_scale: bool | None = None) -> go.Figure:
    """Each runtime's run times as a box (or violin) plot, side by side, medians in the hover.

    ``log_scale`` (default: when the medians differ more than 20x) puts the time axis on a
    log scale, so an untuned compiler and ONNX Runtime both stay readable.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.runtimes import bench
    >>> report = bench(load("zoo:mlp"), ["ort"], min_runs=3, min_seconds=0.0)
    >>> latency_figure(report, kind="violin").data[0].type
    'violin'
    """
    if kind not in ("box", "violin"):
        raise ValueError(f"kind must be 'box' or 'violin', not {kind!r}")
    fig = go.Figure()
    for index, result in enumerate(report.results):
        color = RUNTIME_COLORS[index % len(RUNTIME_COLORS)]
        common = {
            "y": list(result.times_ms),
            "name": result.label,
            "marker": {"color": color},
            "hovertemplate": f"{result.label}<br>%{{y:.3f}} ms"
            f"<extra>median {result.median_ms:.3f} ms</extra>",
        }
        if kind == "box":
            fig.add_trace(go.Box(boxpoints="all", jitter=0.3, pointpos=0, **common))
        else:
            fig.add_trace(go.Violin(box_visible=True, meanline_visible=True, points="all", **common))
    medians = [r.median_ms for r in report.results if r.median_ms > 0]
    if log_scale is None:
        log_scale = len(medians) > 1 and max(medians) / min(medians) > 20
    fig.update_layout(
        title=f"latency per inference, {report.source}",
        yaxis={"title": "ms", "type": "log" if log_scale else "linear"},
        showlegend=False,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
        height=360,
    )
    return fig


def kernel_time_figure(profile: Profile, top: int = 15) -> go.Figure:
    """The ``top`` slowest kernels of a profile as horizontal bars (ms per inference), unmapped greyed.

    Examples
    --------
    >>> from explorer.runtimes.profile import KernelTime, Profile
    >>> kernels = (KernelTime("a", "Conv", 1.5, "a"), KernelTime("b", "x", 0.5, None))
    >>> p = Profile("ort", "ONNX Runtime", 1, 2.0, kernels)
    >>> list(kernel_time_figure(p).data[0].y)
    ['b', 'a']
    """
    kernels = list(profile.kernels[:top])[::-1]  # slowest at the top
    fig = go.Figure(
        go.Bar(
            x=[k.ms for k in kernels],
            y=[k.name for k in kernels],
            orientation="h",
            marker={"color": ["#33558a" if k.node else "#9e9e9e" for k in kernels]},
            customdata=[k.node or "not on an ONNX node" for k in kernels],
            hovertemplate="%{y}<br>%{x:.3f} ms<br>%{customdata}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"slowest kernels, {profile.label} (overlay holds {profile.coverage:.1%} of the time)",
        xaxis={"title": "ms per inference"},
        margin={"l": 220, "r": 20, "t": 50, "b": 40},
        height=max(260, 22 * len(kernels) + 90),
    )
    return fig
