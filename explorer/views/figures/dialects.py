"""The dialect figure: ops per MLIR dialect after each lowering step, bars in the dialects' colours.

Each step is a stacked bar of its share of ops per dialect (hover: the count), so a learner sees
the torch dialect give way to linalg, then flow, stream, hal and vm, while the kernels' llvm ops
swell at ``executable-targets``. A dialect takes the colour of its category (the graph's boxes
use the same, :mod:`explorer.core.op_categories`); the legend names the dialect.

Examples
--------
>>> import pandas as pd
>>> frame = pd.DataFrame([{"torch": 3}, {"linalg": 2, "arith": 2}], index=["import", "input"]).fillna(0)
>>> [t.name for t in dialect_figure(frame).data]
['arith', 'linalg', 'torch']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

from explorer.views.figures.colors import category_color

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["dialect_figure"]


def dialect_figure(frame: pd.DataFrame, title: str = "Ops per dialect after each step") -> go.Figure:
    """Stacked bars: one per step (the frame's rows), each dialect's share of the step's ops.

    Parameters
    ----------
    frame : pandas.DataFrame
        Steps x dialects, op counts (:meth:`explorer.lower.iree.iree_pipeline.MlirTimeline.dialect_frame`).
    title : str
        The figure's title.

    Examples
    --------
    >>> import pandas as pd
    >>> fig = dialect_figure(pd.DataFrame([{"torch": 1, "func": 1}], index=["import"]))
    >>> fig.layout.barmode, fig.data[0].hovertemplate.startswith("%{x}")
    ('stack', True)
    """
    totals = frame.sum(axis=1).replace(0, 1)
    steps = [str(step) for step in frame.index]
    traces = []
    shades: dict[str, int] = {}  # dialects of one category: lighter each
    for dialect in sorted(frame.columns, key=str):
        counts = frame[dialect]
        if not counts.any():
            continue
        color = category_color(f"{dialect}.op", str(dialect))
        shade = shades.get(color, 0)
        shades[color] = shade + 1
        traces.append(
            go.Bar(
                name=str(dialect),
                x=steps,
                y=(counts / totals).tolist(),
                customdata=counts.astype(int).tolist(),
                marker_color=_lighter(color, shade),
                hovertemplate=f"%{{x}}: {dialect} %{{customdata}} ops (%{{y:.0%}})<extra></extra>",
            )
        )
    fig = go.Figure(traces)
    fig.update_layout(
        barmode="stack",
        title=title,
        yaxis={"tickformat": ".0%", "title": "share of the module's ops"},
        xaxis={"title": None},
        height=420,
        margin={"l": 60, "r": 10, "t": 50, "b": 90},
        legend={"title": {"text": "dialect"}},
    )
    return fig


def _lighter(color: str, step: int) -> str:
    """``#rrggbb`` a fifth of the way to white per ``step`` (at most four)."""
    if step == 0 or not (color.startswith("#") and len(color) == 7):
        return color
    mix = min(step, 4) / 5
    rgb = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * mix):02x}" for c in rgb)
