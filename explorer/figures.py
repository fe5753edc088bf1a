"""Figures: pure functions from results to plotly figures (no widgets, no state).

The CLI, the HTML report and the notebook widgets all draw with these. The
graph figure has a fixed trace order, so widgets can update it in place:

0. ``edges``: one ``scattergl`` line trace, polylines separated by ``None``;
1. ``arrows``: arrowheads (triangles just above each edge's target), where they fit;
2. ``nodes``: one ``scattergl`` marker trace, ``customdata`` = item id;
3. ``labels``: op-type labels, shown when few enough items are in view.

Examples
--------
>>> from explorer import load
>>> fig = graph_figure(load("zoo:mlp"))
>>> [t.name for t in fig.data]
['edges', 'arrows', 'nodes', 'labels']
>>> len(fig.data[NODES].x)
8
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative

from .layout import GROUP_PREFIX, Layout, auto_collapse, layered
from .tensors import format_bytes, format_shape

if TYPE_CHECKING:
    from .diff import GraphDiff
    from .graph import ModelGraph
    from .summary import ModelSummary
    from .timeline import Timeline

__all__ = [
    "EDGES",
    "ARROWS",
    "NODES",
    "LABELS",
    "LABEL_LIMIT",
    "ARROW_LIMIT",
    "DIFF_COLORS",
    "COLOR_BY",
    "graph_figure",
    "node_colors",
    "node_hover",
    "diff_overlay",
    "fusion_notes",
    "op_color",
    "selection_ring",
    "op_histogram_figure",
    "timeline_figure",
    "initial_view",
    "VIEW_LAYERS",
]

EDGES, ARROWS, NODES, LABELS = 0, 1, 2, 3
"""Trace indices of :func:`graph_figure`."""

LABEL_LIMIT = 250
"""Labels are drawn when at most this many items are in view."""

ARROW_LIMIT = 3000
"""Arrowheads are drawn when the figure has at most this many edges."""

DIFF_COLORS = {
    "added": "#2ca02c",
    "removed": "#d62728",
    "changed": "#ff9f1c",
    "fused": "#9467bd",
    "kept": "#c7c7c7",
}
"""Colours of diff statuses: added green, removed red, changed amber, fused purple, kept grey."""

COLOR_BY = ("op_type", "scope", "kind")
"""Built-in colourings; an overlay (diff status, partition, latency) adds its own."""

_PALETTE = list(qualitative.Dark24) + list(qualitative.Light24)
_KIND_COLORS = {"input": "#1f77b4", "output": "#17becf", "outer": "#7f7f7f", "constant": "#bcbd22"}
_GROUP_COLOR = "#8c8c8c"


def selection_ring(items: Sequence[str], selected: str | None) -> tuple[Any, Any]:
    """Marker outline widths and colours that ring the ``selected`` item (scalars when none is).

    Examples
    --------
    >>> widths, colors = selection_ring(["a", "b"], "b")
    >>> widths.tolist(), colors
    ([0.5, 2.5], ['#444', '#000'])
    """
    if selected is None:
        return 0.5, "#444"
    widths = np.array([2.5 if i == selected else 0.5 for i in items])
    return widths, ["#000" if i == selected else "#444" for i in items]


def op_color(name: str) -> str:
    """A stable colour for an op type (or any category name).

    Examples
    --------
    >>> op_color("Conv") == op_color("Conv"), op_color("Conv").startswith("#")
    (True, True)
    """
    digest = int(hashlib.md5(name.encode(), usedforsecurity=False).hexdigest()[:8], 16)
    return _PALETTE[digest % len(_PALETTE)]


def _item_data(graph: ModelGraph, layout: Layout, item: str) -> dict[str, Any]:
    if item.startswith(GROUP_PREFIX) and item in layout.groups:
        return {"kind": "group", "scope": layout.scopes[item], "members": layout.groups[item]}
    return graph.nx.nodes[item]


def _shape_text(shape: Any, dtype: Any) -> str:
    return f"{format_shape(shape)} {dtype or ''}".strip()


def node_hover(graph: ModelGraph, layout: Layout, item: str) -> str:
    """Hover text of one item: op type, name, input/output shapes and dtypes, weights.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:mlp")
    >>> "Gemm" in node_hover(g, layered(g), "/fc1/Gemm")
    True
    """
    data = _item_data(graph, layout, item)
    if data["kind"] == "group":
        ops = Counter(graph.nx.nodes[m].get("op_type", "?") for m in data["members"])
        top = ", ".join(f"{op} {n}" for op, n in ops.most_common(6))
        name = "/".join(data["scope"])
        return f"<b>{name}</b><br>{len(data['members'])} nodes: {top}<br><i>click to expand</i>"
    lines = [f"<b>{data['op_type']}</b> {data['name'] or item}"]
    if data.get("domain"):
        lines[0] += f" ({data['domain']})"
    nx_graph = graph.nx
    for _, _, key, edge in nx_graph.in_edges(item, keys=True, data=True):
        lines.append(f"in  {key}: {_shape_text(edge['shape'], edge['dtype'])}")
    seen: set[str] = set()
    for _, _, key, edge in nx_graph.out_edges(item, keys=True, data=True):
        if key not in seen:
            seen.add(key)
            lines.append(f"out {key}: {_shape_text(edge['shape'], edge['dtype'])}")
    if data["kind"] in ("input", "output", "outer") and data.get("shape") is not None:
        lines.append(_shape_text(data.get("shape"), data.get("dtype")))
    for weight in data.get("weights", ())[:6]:
        lines.append(
            f"w   {weight.name}: {format_shape(weight.shape)} {weight.dtype} ({format_bytes(weight.nbytes)})"
        )
    if len(data.get("weights", ())) > 6:
        lines.append(f"... {len(data['weights']) - 6} more weights")
    if len(lines) > 14:
        lines = [*lines[:13], f"... {len(lines) - 13} more"]
    return "<br>".join(lines)


def node_colors(
    graph: ModelGraph,
    layout: Layout,
    color_by: str = "op_type",
    overlay: Mapping[str, Any] | None = None,
    palette: Mapping[str, str] | None = None,
) -> list[Any]:
    """Marker colours of the visible items, in ``layout.positions`` order.

    Parameters
    ----------
    graph, layout
        What is drawn.
    color_by : str
        ``"op_type"``, ``"scope"`` or ``"kind"``; ignored when ``overlay`` is given.
    overlay : mapping, optional
        Item (or node id inside a collapsed group) -> category (str) or value
        (number). Categories use ``palette`` (default :data:`DIFF_COLORS`, then
        stable colours); numbers are returned as they are for a colour scale.
    palette : mapping, optional
        Category -> colour.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:mlp")
    >>> len(node_colors(g, layered(g))) == len(layered(g).positions)
    True
    """
    colors: list[Any] = []
    palette = dict(DIFF_COLORS if palette is None else palette)
    for item in layout.positions:
        data = _item_data(graph, layout, item)
        if overlay is not None:
            value = overlay.get(item)
            if value is None and data["kind"] == "group":
                values = [overlay.get(m) for m in data["members"] if overlay.get(m) is not None]
                value = _group_value(values)
            if value is None:
                colors.append(
                    "#e5e5e5" if data["kind"] in ("op", "group") else _KIND_COLORS.get(data["kind"], "#999")
                )
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                colors.append(float(value))
            else:
                colors.append(palette.get(str(value)) or op_color(str(value)))
            continue
        if data["kind"] == "group":
            colors.append(op_color("/".join(data["scope"][:1])) if color_by == "scope" else _GROUP_COLOR)
        elif data["kind"] != "op":
            colors.append(_KIND_COLORS.get(data["kind"], "#999"))
        elif color_by == "scope":
            colors.append(op_color("/".join(data["scope"][:2]) or "(root)"))
        elif color_by == "kind":
            colors.append(op_color(data.get("domain") or "ai.onnx"))
        else:
            colors.append(op_color(data["op_type"]))
    return colors


def _group_value(values: Sequence[Any]) -> Any:
    if not values:
        return None
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return float(sum(values))
    ranked = Counter(str(v) for v in values)
    for status in ("removed", "added", "fused", "changed"):
        if status in ranked:
            return status
    return ranked.most_common(1)[0][0]


def _edge_xy(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """All edge polylines in two arrays, each polyline followed by a NaN (a gap in the line)."""
    points: list[tuple[float, float]] = []
    gap = (math.nan, math.nan)
    for edge in layout.edges:
        points.extend(layout.edge_points.get(edge) or (layout.positions[edge[0]], layout.positions[edge[1]]))
        points.append(gap)
    array = np.array(points, dtype=float).reshape(-1, 2)
    return array[:, 0], array[:, 1]


def _arrow_xy(layout: Layout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs, ys, angles = [], [], []
    gap = 0.28 * layout.vgap
    for edge in layout.edges:
        points = layout.edge_points.get(edge) or (layout.positions[edge[0]], layout.positions[edge[1]])
        (x0, y0), (x1, y1) = points[-2], points[-1]
        length = math.hypot(x1 - x0, y1 - y0)
        if length == 0:
            continue
        t = max(0.0, 1 - gap / length)
        xs.append(x0 + (x1 - x0) * t)
        ys.append(y0 + (y1 - y0) * t)
        # plotly's marker angle turns clockwise from "up"; triangle-up pointing along the edge
        angles.append(math.degrees(math.atan2(x1 - x0, y1 - y0)))
    return np.array(xs, dtype=float), np.array(ys, dtype=float), np.array(angles, dtype=float)


def fusion_notes(diff: GraphDiff, side: str = "after") -> dict[str, str]:
    """Node id -> a hover line linking each fusion's nodes on one side of a diff.

    Examples
    --------
    >>> from explorer.timeline import run_pipeline
    >>> t = run_pipeline("zoo:resnet18", "fuse_bn_into_conv", verify=False)
    >>> fusion_notes(t.diff(1), "before")["/bn1/BatchNormalization"]
    'fused into /conv1/Conv: Conv + BatchNormalization -> Conv'
    """
    notes: dict[str, str] = {}
    for fusion in diff.fusions:
        if side == "after":
            notes[fusion.into] = f"{fusion.kind} from {', '.join(fusion.sources)}: {fusion.pattern}"
        else:
            for source in fusion.sources:
                notes[source] = f"{fusion.kind} into {fusion.into}: {fusion.pattern}"
    return notes


def diff_overlay(diff: GraphDiff, side: str = "after") -> dict[str, str]:
    """Node id -> diff status, for colouring one side of a diff.

    Parameters
    ----------
    diff : GraphDiff
        The diff.
    side : {"after", "before"}
        ``after``: added / changed / fused / kept; ``before``: removed / changed / fused / kept.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.diff import diff
    >>> set(diff_overlay(diff(load("zoo:mlp"), load("zoo:mlp"))).values())
    {'kept'}
    """
    if side not in ("after", "before"):
        raise ValueError(f"side must be 'after' or 'before', not {side!r}")
    return diff.status_after() if side == "after" else diff.status_before()


def graph_figure(
    graph: ModelGraph,
    layout: Layout | None = None,
    overlay: Mapping[str, Any] | None = None,
    *,
    color_by: str = "op_type",
    palette: Mapping[str, str] | None = None,
    colorscale: str = "Viridis",
    title: str | None = None,
    height: int = 700,
    labels: bool | None = None,
    selected: str | None = None,
    notes: Mapping[str, str] | None = None,
) -> go.Figure:
    """Draw a ModelGraph: nodes, edges with arrowheads, op labels, hover details.

    Parameters
    ----------
    graph : ModelGraph
        The graph.
    layout : Layout, optional
        Positions; by default :func:`explorer.layout.layered` with
        :func:`~explorer.layout.auto_collapse` (big graphs open collapsed).
    overlay : mapping, optional
        Per-node values or categories to colour by (see :func:`node_colors`),
        e.g. :func:`diff_overlay`, partitions or latencies.
    color_by : str
        One of :data:`COLOR_BY` when there is no overlay.
    palette : mapping, optional
        Category colours of a categorical overlay.
    colorscale : str
        Colour scale of a numeric overlay.
    title : str, optional
        Figure title.
    height : int
        Figure height in pixels.
    labels : bool, optional
        Show op labels; by default when at most :data:`LABEL_LIMIT` items are drawn.
    selected : str, optional
        An item to mark with a ring.
    notes : mapping, optional
        Item -> a line added to its hover text (e.g. the fusion it took part in).

    Returns
    -------
    plotly.graph_objects.Figure

    Examples
    --------
    >>> from explorer import load
    >>> fig = graph_figure(load("zoo:resnet18"), title="ResNet-18")
    >>> fig.data[NODES].type, fig.data[EDGES].mode
    ('scattergl', 'lines')
    """
    if layout is None:
        layout = layered(graph, collapse=auto_collapse(graph))
    items = list(layout.positions)
    coords = np.array([layout.positions[i] for i in items], dtype=float).reshape(-1, 2)
    xs, ys = coords[:, 0], coords[:, 1]
    colors = node_colors(graph, layout, color_by, overlay, palette)
    numeric = any(isinstance(c, float) for c in colors)  # node_colors gives colour strings or values
    hover = [node_hover(graph, layout, i) for i in items]
    if notes:
        hover = [f"{h}<br><i>{notes[i]}</i>" if i in notes else h for h, i in zip(hover, items, strict=True)]
    is_group = [i in layout.groups for i in items]
    # numpy arrays and scalars where possible: plotly validates Python lists element by element
    sizes = np.array(
        [
            min(34, 14 + 3 * math.log2(len(layout.groups[i]))) if g else 12
            for i, g in zip(items, is_group, strict=True)
        ],
        dtype=float,
    )
    symbols: Any = ["square" if g else "circle" for g in is_group] if any(is_group) else "circle"
    line_widths, line_colors = selection_ring(items, selected)

    edge_x, edge_y = _edge_xy(layout)
    arrows = len(layout.edges) <= ARROW_LIMIT
    arrow_x, arrow_y, arrow_angle = _arrow_xy(layout) if arrows else (np.empty(0), np.empty(0), np.empty(0))
    show_labels = len(items) <= LABEL_LIMIT if labels is None else labels
    label_text = [_label(graph, layout, i) for i in items]

    marker: dict[str, Any] = {
        "size": sizes,
        "symbol": symbols,
        "line": {"width": line_widths, "color": line_colors},
        "opacity": 0.95,
    }
    if numeric:
        known = [c for c in colors if isinstance(c, float)]
        floor = min(known)  # items without a value take the bottom of the scale
        values = np.array([c if isinstance(c, float) else floor for c in colors], dtype=float)
        marker.update(color=values, colorscale=colorscale, showscale=True, colorbar={"thickness": 12})
    else:
        marker["color"] = colors

    fig = go.Figure(
        data=[
            go.Scattergl(
                x=edge_x,
                y=edge_y,
                mode="lines",
                name="edges",
                hoverinfo="skip",
                line={"width": 1, "color": "#9a9a9a"},
                showlegend=False,
            ),
            go.Scattergl(
                x=arrow_x,
                y=arrow_y,
                mode="markers",
                name="arrows",
                hoverinfo="skip",
                showlegend=False,
                marker={"symbol": "triangle-up", "size": 7, "color": "#8a8a8a", "angle": arrow_angle},
            ),
            go.Scattergl(
                x=xs,
                y=ys,
                mode="markers",
                name="nodes",
                customdata=items,
                hovertext=hover,
                hoverinfo="text",
                marker=marker,
                showlegend=False,
            ),
            go.Scatter(
                x=xs,
                y=ys,
                mode="text",
                name="labels",
                text=label_text,
                textposition="middle right",
                textfont={"size": 10, "color": "#333"},
                hoverinfo="skip",
                visible=show_labels,
                showlegend=False,
            ),
        ]
    )
    x_range, y_range = initial_view(layout)
    fig.update_layout(
        title=title,
        height=height,
        margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
        plot_bgcolor="white",
        paper_bgcolor="white",
        dragmode="pan",
        hovermode="closest",
        uirevision=layout.version or "graph",
        xaxis={"visible": False, "range": x_range},
        yaxis={"visible": False, "range": y_range},
        hoverlabel={"align": "left", "font": {"family": "monospace", "size": 11}},
    )
    return fig


VIEW_LAYERS = 32
"""The first view shows at most this many layers (the top of the graph); pan or zoom for the rest."""


def initial_view(layout: Layout) -> tuple[list[float], list[float]]:
    """Axis ranges of the first view: the whole width, and the top :data:`VIEW_LAYERS` layers.

    Examples
    --------
    >>> from explorer import load
    >>> x_range, y_range = initial_view(layered(load("zoo:mlp")))
    >>> y_range[1] > 0 > y_range[0]
    True
    """
    xmin, ymin, xmax, ymax = layout.bbox()
    bottom = max(ymin, ymax - VIEW_LAYERS * layout.vgap)
    return [xmin - layout.hgap, xmax + 2 * layout.hgap], [
        bottom - 0.7 * layout.vgap,
        ymax + 0.7 * layout.vgap,
    ]


def _label(graph: ModelGraph, layout: Layout, item: str) -> str:
    if item in layout.groups:
        return "  " + "/".join(layout.scopes[item][-1:]) + f" ({len(layout.groups[item])})"
    data = graph.nx.nodes[item]
    return "  " + (data["op_type"] if data["kind"] == "op" else data["name"])


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
            marker_color=[op_color(op) for op, _ in ops],
            hovertemplate="%{x}: %{y}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"Operators ({summary.nodes} in the main graph)",
        height=320,
        margin={"l": 40, "r": 10, "t": 40, "b": 80},
    )
    return fig


def timeline_figure(timeline: Timeline) -> go.Figure:
    """Node count after each step of a pipeline; steps that changed nothing are grey, failed ones red.

    Examples
    --------
    >>> from explorer.timeline import run_pipeline
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
