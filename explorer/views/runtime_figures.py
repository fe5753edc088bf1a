"""Figures of runtime measurements: latency distributions side by side, where the time goes, and
each node against the machine's roofline.

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

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from explorer.core.errors import UsageError
from explorer.runtimes.task_coverage import SCHEDULE_WORDS
from explorer.views.tables import html_table

if TYPE_CHECKING:
    from explorer.runtimes.bench import BenchReport
    from explorer.runtimes.profile import Profile
    from explorer.runtimes.roofline import Roofline
    from explorer.runtimes.task_coverage import TaskCoverage

__all__ = ["latency_figure", "kernel_time_figure", "roofline_figure", "task_coverage_table", "RUNTIME_COLORS"]

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
        raise UsageError(f"kind must be 'box' or 'violin', not {kind!r}")
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


def roofline_figure(rooflines: Sequence[Roofline]) -> go.Figure:
    """Every runtime's nodes under the machine's roofline: intensity (FLOPs per byte) against
    achieved GFLOP/s, log-log; a marker's area is the node's time, the roof is
    ``min(peak, bandwidth * intensity)``.

    Examples
    --------
    >>> from explorer.runtimes.machine import MachinePeak
    >>> from explorer.runtimes.roofline import Roofline, RooflinePoint
    >>> point = RooflinePoint("conv", "Conv", 2.0, 4e9, 1e8, 40.0, 2.0, 100.0, "compute")
    >>> fig = roofline_figure([Roofline("ort", "ONNX Runtime", MachinePeak(100.0, 20.0, 2), (point,))])
    >>> [t.name for t in fig.data]
    ['roof (100 GFLOP/s, 20 GB/s)', 'ONNX Runtime']
    """
    fig = go.Figure()
    if not rooflines:
        return fig
    peak = rooflines[0].peak
    intensities = [p.intensity for r in rooflines for p in r.points] or [peak.ridge]
    low, high = min(min(intensities), peak.ridge) / 4, max(max(intensities), peak.ridge) * 4
    xs = [low, peak.ridge, high]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[peak.attainable(x) for x in xs],
            mode="lines",
            line={"color": "#555555", "width": 2},
            name=f"roof ({peak.gflops:.0f} GFLOP/s, {peak.gbps:.0f} GB/s)",
            hoverinfo="skip",
        )
    )
    longest = max((p.ms for r in rooflines for p in r.points), default=1.0) or 1.0
    for index, line in enumerate(rooflines):
        points = line.points
        fig.add_trace(
            go.Scatter(
                x=[p.intensity for p in points],
                y=[max(p.gflops, 1e-6) for p in points],
                mode="markers",
                name=line.label,
                marker={
                    "color": RUNTIME_COLORS[index % len(RUNTIME_COLORS)],
                    "size": [6 + 24 * (p.ms / longest) ** 0.5 for p in points],
                    "opacity": 0.7,
                    "line": {"width": 0.5, "color": "white"},
                },
                customdata=[[p.node, p.op_type, p.ms, 100 * p.efficiency, p.bound] for p in points],
                hovertemplate="%{customdata[0]} (%{customdata[1]})<br>%{customdata[2]:.3f} ms, "
                "%{y:.1f} GFLOP/s at %{x:.1f} FLOP/B<br>%{customdata[3]:.0f}% of the roof, "
                "%{customdata[4]}-bound<extra>" + line.label + "</extra>",
            )
        )
    fig.update_layout(
        title="where each node stands against this machine's roofline",
        xaxis={"title": "arithmetic intensity (FLOPs per byte moved)", "type": "log"},
        yaxis={"title": "achieved GFLOP/s", "type": "log"},
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        height=420,
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def task_coverage_table(coverage: TaskCoverage, top: int = 20) -> str:
    """A TVM build's tasks as an HTML table: where each schedule came from, time, share, GFLOP/s.

    The line above the table gives the share of the time per schedule source, so a learner sees
    at once how much of the model still runs untuned kernels.

    Examples
    --------
    >>> from explorer.runtimes.task_coverage import TaskCoverage, TaskTime
    >>> html = task_coverage_table(TaskCoverage("TVM", (TaskTime("conv", "naive", 1, 9.0, 0.9, 0.018, 2.0),
    ...                                                  TaskTime("relu", "record", 1, 1.0, 0.1, 0.0, None))))
    >>> "90% plain loops" in html, "2.0" in html
    (True, True)
    """
    shares = coverage.share_by_schedule()
    words: dict[str, float] = {}
    for source, share in shares.items():
        words[SCHEDULE_WORDS.get(source, source)] = words.get(SCHEDULE_WORDS.get(source, source), 0.0) + share
    summary = ", ".join(f"{share:.0%} {word}" for word, share in sorted(words.items(), key=lambda kv: -kv[1]))
    rows = [
        (
            html.escape(t.task),
            SCHEDULE_WORDS.get(t.schedule, t.schedule),
            t.calls,
            f"{t.ms:.3f}",
            f"{t.share:.0%}",
            "" if t.gflops is None else f"{t.gflops:.1f}",
        )
        for t in coverage.tasks[:top]
    ]
    more = len(coverage.tasks) - top
    note = f"<br>(and {more} more tasks)" if more > 0 else ""
    columns = ["task", "schedule", "calls", "ms", "share", "GFLOP/s"]
    heading = f"<b>{html.escape(coverage.label)}</b>: time in kernels with {html.escape(summary)}"
    return f"{heading}{html_table(rows, columns, attrs={'class': 'oge-tasks'})}{note}"
