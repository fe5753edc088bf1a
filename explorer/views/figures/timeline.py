"""The timeline figure: a model's node count after each step of a pipeline.

Examples
--------
>>> from explorer.passes.pipeline import run_pipeline
>>> bars = timeline_figure(run_pipeline("zoo:resnet18", "fuse_bn_into_conv", verify=False)).data[0]
>>> list(bars.x), list(bars.y)
(['0. original', '1. fuse_bn_into_conv'], [69, 49])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

if TYPE_CHECKING:
    from explorer.core.timeline import Timeline

__all__ = ["timeline_figure"]


def timeline_figure(timeline: Timeline) -> go.Figure:
    """Node count after each step of a pipeline; steps that changed nothing are grey, failed ones red.

    Examples
    --------
    >>> from explorer.passes.pipeline import run_pipeline
    >>> timeline_figure(run_pipeline("zoo:mlp", "eliminate_identity", verify=False)).data[0].type
    'bar'
    """
    names = [f"{s.index}. {s.name}" for s in timeline.snapshots]
    colors = ["#1f77b4" if s.changed or s.index == 0 else "#c7c7c7" for s in timeline.snapshots]
    colors = ["#d62728" if s.error else c for s, c in zip(timeline.snapshots, colors, strict=True)]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=[s.nodes for s in timeline.snapshots],
            marker_color=colors,
            customdata=[s.index for s in timeline.snapshots],
            hovertemplate="%{x}<br>%{y} nodes<extra></extra>",
        )
    )
    fig.update_layout(title="Nodes after each step", height=280, margin={"l": 40, "r": 10, "t": 40, "b": 90})
    return fig
