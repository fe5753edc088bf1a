"""The op histogram figure: how many nodes of each op type a model has, bars in category colours.

Examples
--------
>>> from explorer import load
>>> bars = op_histogram_figure(load("zoo:mlp").summary()).data[0]
>>> dict(zip(bars.x, bars.y, strict=True))
{'Gemm': 3, 'Relu': 2, 'Flatten': 1}
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

from explorer.views.figures.colors import category_color

if TYPE_CHECKING:
    from explorer.core.summary import ModelSummary

__all__ = ["op_histogram_figure"]


def op_histogram_figure(summary: ModelSummary, top: int = 30) -> go.Figure:
    """Bar chart of the op histogram of a model.

    Examples
    --------
    >>> from explorer import load
    >>> op_histogram_figure(load("zoo:resnet18").summary()).data[0].type
    'bar'
    """
    ops = sorted(summary.ops.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    fig = go.Figure(
        go.Bar(
            x=[op for op, _ in ops],
            y=[n for _, n in ops],
            marker_color=[category_color(op) for op, _ in ops],
            hovertemplate="%{x}: %{y}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"Operators ({summary.nodes} in the main graph)",
        height=320,
        margin={"l": 40, "r": 10, "t": 40, "b": 80},
    )
    return fig
