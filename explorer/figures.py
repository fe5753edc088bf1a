"""Figures: pure functions from results to plotly figures (no widgets, no state).

The CLI, the HTML report and the notebook widgets all draw with these. A graph
is drawn the way people read graphs (as Netron does): each op is a box sized
to its text, with a header naming the op, coloured by its category (see
:mod:`explorer.op_categories`, shown in the legend), and a body with the
weights' shapes and key attributes; collapsed scopes are stacked boxes with
their name, node count and op mix; edges are smooth curves (vertical
tangents at every point of the layout's route) with tensor shapes beside
them. Box text shows from :data:`~explorer.node_boxes.TEXT_ZOOM` pixels per
layout unit on, edge shapes when at most :data:`EDGE_LABEL_LIMIT` are in
view (:func:`text_visibility`; GraphView and the report's script follow the
zoom). The axes keep one scale (``scaleanchor``), so boxes keep their shape.

The graph figure has a fixed trace order, so widgets can update it in place.
Edges, arrows and the hover markers are SVG (``scatter``) when at most
:data:`SVG_MAX_ITEMS` items are drawn, and WebGL (``scattergl``) above: a first WebGL
plot costs a context and shaders (about 0.35 s of a small graph's 0.5 s in headless
Chromium), while SVG markers get slow to pan in the thousands. WebGL traces are drawn
above the SVG ones whatever their index; SVG edges run under the boxes, as in Netron:

0. ``edges``: one line trace, curves separated by NaN (one gap per edge);
1. ``arrows``: arrowheads (triangles) on each target's top edge, where they fit;
2. ``nodes``: one invisible marker per item at its box centre, for hover and
   clicks; ``customdata`` = item id, ``marker.color`` = the item's colour (category, colour-by
   or overlay), ``marker.line`` = :func:`selection_ring`;
3. ``shadows``: the stacked look of collapsed scopes (SVG, filled);
4. ``BODIES`` (:data:`BODY_SLOTS` SVG traces, filled): box bodies, one trace per body colour
   (white; or the overlay / colour-by colour, tinted, with a strong outline);
5. ``HEADS`` (one SVG trace per category of the data file, filled): headers, in the legend;
6. ``selection``: the outline of the selected box;
7. ``labels``: header text (op type, scope name);
8. ``details``: body text (weights, attributes, op mix, shapes);
9. ``edge labels``: tensor shapes beside the edges.

Examples
--------
>>> from explorer import load
>>> fig = graph_figure(load("zoo:mlp"))
>>> [fig.data[i].name for i in (EDGES, ARROWS, NODES, LABELS, DETAILS, EDGE_LABELS)]
['edges', 'arrows', 'nodes', 'labels', 'details', 'edge labels']
>>> len(fig.data[NODES].x), len(fig.data) == TRACE_COUNT
(8, True)
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go
from plotly.colors import hex_to_rgb, qualitative, sample_colorscale, unlabel_rgb

from .layout import BOX_GAP, GROUP_PREFIX, Layout, auto_collapse, layered
from .node_boxes import (
    BODY_FONT,
    HEADER_FONT,
    HEADER_PX,
    PX_PER_UNIT,
    TEXT_ZOOM,
    BoxText,
    box_size_px,
    box_text,
    dims_text,
    group_data,
)
from .op_categories import CATEGORIES, category_of
from .tensors import format_bytes, format_shape

if TYPE_CHECKING:
    import pandas as pd

    from .diff import GraphDiff
    from .graph import ModelGraph
    from .summary import ModelSummary
    from .timeline import Timeline

__all__ = [
    "EDGES",
    "GRAPH_TEMPLATE",
    "ARROWS",
    "NODES",
    "SHADOWS",
    "BODIES",
    "HEADS",
    "SELECTION",
    "LABELS",
    "DETAILS",
    "EDGE_LABELS",
    "TRACE_COUNT",
    "BODY_SLOTS",
    "LABEL_LIMIT",
    "EDGE_LABEL_LIMIT",
    "ARROW_LIMIT",
    "SVG_MAX_ITEMS",
    "DIFF_COLORS",
    "COLOR_BY",
    "BoxGeometry",
    "box_geometry",
    "item_data",
    "graph_figure",
    "node_colors",
    "node_hover",
    "diff_overlay",
    "fusion_notes",
    "op_color",
    "category_color",
    "selection_ring",
    "selection_outline",
    "text_visibility",
    "text_in_view",
    "plot_height",
    "op_histogram_figure",
    "timeline_figure",
    "initial_view",
]

BODY_SLOTS = 24
"""Body traces: at most this many body colours in one figure (more share the last one)."""

EDGES, ARROWS, NODES, SHADOWS = 0, 1, 2, 3
BODIES = 4
"""Index of the first body trace (:data:`BODY_SLOTS` of them)."""
HEADS = BODIES + BODY_SLOTS
"""Index of the first header trace (one per category, in :data:`~explorer.op_categories.CATEGORIES` order)."""
SELECTION = HEADS + len(CATEGORIES)
LABELS, DETAILS, EDGE_LABELS = SELECTION + 1, SELECTION + 2, SELECTION + 3
TRACE_COUNT = EDGE_LABELS + 1
"""How many traces :func:`graph_figure` draws (always the same)."""

LABEL_LIMIT = 250
"""Box text is drawn when at most this many items are in view (and the zoom is close enough)."""

EDGE_LABEL_LIMIT = 60
"""Tensor shapes beside edges are drawn when at most this many edges are in view."""

ARROW_LIMIT = 3000
"""Arrowheads are drawn when the figure has at most this many edges."""

SVG_MAX_ITEMS = 500
"""Figures of at most this many drawn items draw edges, arrows and hover markers as SVG; more, WebGL."""

_EDGE_LABEL_MAX = 5000  # no edge labels at all above this many edges (they could never show)
_CURVE_SAMPLES = 10  # points per curved segment of an edge
_RADIUS = 5.0 / PX_PER_UNIT  # box corner radius
_SHADOW = 6.0 / PX_PER_UNIT  # offset of a collapsed scope's stacked card
_ARROW = 5.0 / PX_PER_UNIT  # arrowhead centre above the target's top edge
_GAP_BOXES = BOX_GAP  # least room between neighbouring boxes of one layer: the layout's rule
_GAP_BEND = 12.0 / PX_PER_UNIT  # least room between a box and an edge passing it
_MAX_X_SCALE = 3.0
_CORNER_POINTS = 3  # points per rounded box corner (fewer points: faster redraws)
_LABEL_DX, _LABEL_DY = 2.0 / PX_PER_UNIT, 10.0 / PX_PER_UNIT  # a tensor shape's place below its source
_INSET = 6.0 / PX_PER_UNIT  # body text starts this far right of the box's left edge

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
_BODY = "#ffffff"
_GROUP_BODY = "#f2f2f2"
_NEUTRAL_LINE = "#8c8c8c"
_PLAIN_BODIES = frozenset({_BODY, _GROUP_BODY})
_MARGIN = {"l": 10, "r": 10, "b": 46}  # the legend sits below the plot (two rows fit)


def selection_ring(items: Sequence[str], selected: str | Collection[str] | None) -> tuple[Any, Any]:
    """Marker outline widths and colours that ring the ``selected`` item or items (scalars when none is).

    The ``nodes`` trace keeps them as the selection's record; the box outline
    that shows it is :func:`selection_outline`.

    Examples
    --------
    >>> widths, colors = selection_ring(["a", "b"], "b")
    >>> widths.tolist(), colors
    ([0.5, 2.5], ['#444', '#000'])
    >>> selection_ring(["a", "b", "c"], {"a", "c"})[0].tolist()
    [2.5, 0.5, 2.5]
    """
    if selected is None or (not isinstance(selected, str) and not selected):
        return 0.5, "#444"
    chosen = {selected} if isinstance(selected, str) else set(selected)
    widths = np.array([2.5 if i in chosen else 0.5 for i in items])
    return widths, ["#000" if i in chosen else "#444" for i in items]


def op_color(name: str) -> str:
    """A stable colour for any category name (scopes, domains, overlay categories).

    Examples
    --------
    >>> op_color("Conv") == op_color("Conv"), op_color("Conv").startswith("#")
    (True, True)
    """
    digest = int(hashlib.md5(name.encode(), usedforsecurity=False).hexdigest()[:8], 16)
    return _PALETTE[digest % len(_PALETTE)]


def category_color(op_type: str, domain: str = "") -> str:
    """The header colour of an op type's category (the colour op boxes and histogram bars share).

    Examples
    --------
    >>> category_color("Conv") == CATEGORIES["conv"].color
    True
    """
    return CATEGORIES[category_of({"kind": "op", "op_type": op_type, "domain": domain})].color


def item_data(graph: ModelGraph, layout: Layout, item: str) -> dict[str, Any]:
    """The data dict of a drawn item: the node's data, or :func:`~explorer.node_boxes.group_data`.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:resnet18")
    >>> item_data(g, layered(g, collapse=1), "scope:layer1")["ops"]["Conv"]
    4
    """
    if item.startswith(GROUP_PREFIX) and item in layout.groups:
        return group_data(graph, layout.scopes[item], layout.groups[item])
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
    return _hover(graph, item_data(graph, layout, item), item)


def _hover(graph: ModelGraph, data: Mapping[str, Any], item: str) -> str:
    if data["kind"] == "group":
        top = ", ".join(f"{op} {n}" for op, n in data["ops"].most_common(6))
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
    """Colours of the visible items, in ``layout.positions`` order.

    Parameters
    ----------
    graph, layout
        What is drawn.
    color_by : str
        ``"op_type"`` (the op's category colour), ``"scope"`` or ``"kind"``;
        ignored when ``overlay`` is given.
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
    return _colors(
        graph, layout, [item_data(graph, layout, i) for i in layout.positions], color_by, overlay, palette
    )


def _colors(
    graph: ModelGraph,
    layout: Layout,
    datas: Sequence[Mapping[str, Any]],
    color_by: str,
    overlay: Mapping[str, Any] | None,
    palette: Mapping[str, str] | None,
) -> list[Any]:
    colors: list[Any] = []
    palette = dict(DIFF_COLORS if palette is None else palette)
    for item, data in zip(layout.positions, datas, strict=True):
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
            colors.append(CATEGORIES[category_of(data)].color)
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


# -- geometry ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BoxGeometry:
    """Where each item's box is drawn, in figure coordinates (layout units, x scaled).

    Attributes
    ----------
    items : tuple of str
        Items in ``layout.positions`` order.
    x, y : numpy.ndarray
        Box centres.
    width, height : numpy.ndarray
        Box sizes (layout units, :func:`~explorer.node_boxes.node_box_size`).
    texts : tuple of BoxText
        Header and body text of each box.
    x_scale : float
        How much the layout's x was stretched so neighbouring boxes do not
        overlap (1 when the layout already leaves room for the boxes).
    """

    items: tuple[str, ...]
    x: np.ndarray
    y: np.ndarray
    width: np.ndarray
    height: np.ndarray
    texts: tuple[BoxText, ...]
    x_scale: float

    def to_frame(self) -> pd.DataFrame:
        """One row per box.

        Examples
        --------
        >>> from explorer import load
        >>> g = load("zoo:mlp")
        >>> list(box_geometry(g, layered(g)).to_frame().columns)
        ['item', 'x', 'y', 'width', 'height', 'header', 'category']
        """
        import pandas as pd

        return pd.DataFrame(
            {
                "item": list(self.items),
                "x": self.x,
                "y": self.y,
                "width": self.width,
                "height": self.height,
                "header": [t.header for t in self.texts],
                "category": [t.category for t in self.texts],
            }
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict.

        Examples
        --------
        >>> from explorer import load
        >>> g = load("zoo:mlp")
        >>> box_geometry(g, layered(g)).to_dict()["x_scale"]
        1.0
        """
        return {
            "items": list(self.items),
            "x": self.x.tolist(),
            "y": self.y.tolist(),
            "width": self.width.tolist(),
            "height": self.height.tolist(),
            "texts": [t.to_dict() for t in self.texts],
            "x_scale": self.x_scale,
        }


def box_geometry(
    graph: ModelGraph, layout: Layout, datas: Sequence[Mapping[str, Any]] | None = None
) -> BoxGeometry:
    """Box centres and sizes of every visible item, with the layout's x stretched where boxes would overlap.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:resnet18")
    >>> geo = box_geometry(g, layered(g))
    >>> len(geo.items) == len(geo.width), geo.x_scale >= 1
    (True, True)
    """
    items = tuple(layout.positions)
    if datas is None:
        datas = [item_data(graph, layout, i) for i in items]
    texts = tuple(box_text(d) for d in datas)
    sizes = np.array([box_size_px(t) for t in texts], dtype=float).reshape(-1, 2) / PX_PER_UNIT
    coords = np.array([layout.positions[i] for i in items], dtype=float).reshape(-1, 2)
    scale = _x_scale(layout, items, coords[:, 0], sizes[:, 0])
    return BoxGeometry(items, coords[:, 0] * scale, coords[:, 1], sizes[:, 0], sizes[:, 1], texts, scale)


def _x_scale(layout: Layout, items: Sequence[str], xs: np.ndarray, widths: np.ndarray) -> float:
    """The least stretch of x that leaves room between neighbouring boxes (and edges passing them)."""
    if len(items) < 2:
        return 1.0
    rows = [layout.layers[i] for i in items]
    half = list(widths / 2)
    bend_x: list[float] = []
    bend_row: list[int] = []
    vgap = layout.vgap or 1.0
    for points in layout.edge_points.values():
        for x, y in points[1:-1]:
            bend_x.append(x)
            bend_row.append(round(-y / vgap))
    row = np.array(rows + bend_row, dtype=float)
    x = np.concatenate([xs, np.array(bend_x, dtype=float)])
    hw = np.array(half + [0.0] * len(bend_x), dtype=float)
    is_box = np.array([True] * len(items) + [False] * len(bend_x))
    order = np.lexsort((x, row))
    row, x, hw, is_box = row[order], x[order], hw[order], is_box[order]
    same = (row[1:] == row[:-1]) & (is_box[1:] | is_box[:-1])
    dx = x[1:] - x[:-1]
    gap = np.where(is_box[1:] & is_box[:-1], _GAP_BOXES, _GAP_BEND)
    need = hw[1:] + hw[:-1] + gap
    ok = same & (dx > 1e-9)
    if not ok.any():
        return 1.0
    return float(min(_MAX_X_SCALE, max(1.0, float((need[ok] / dx[ok]).max()))))


def _edge_routes(layout: Layout, geo: BoxGeometry) -> list[np.ndarray]:
    """Each edge's route in figure coordinates, from the source's bottom edge to the target's top edge."""
    index = {item: k for k, item in enumerate(geo.items)}
    scale = geo.x_scale
    vgap = layout.vgap or 1.0
    band: dict[int, float] = {}  # half the tallest box of each layer: a lane runs straight past it
    for k, item in enumerate(geo.items):
        row = layout.layers.get(item, 0)
        band[row] = max(band.get(row, 0.0), float(geo.height[k]) / 2)
    routes = []
    for u, v in layout.edges:
        iu, iv = index[u], index[v]
        points = layout.edge_points.get((u, v)) or ((0.0, 0.0), (0.0, 0.0))
        inner = []
        for x, y in points[1:-1]:  # a bend becomes a vertical run past its layer's boxes
            half = band.get(round(-y / vgap), 0.0)
            inner += [(x * scale, y + half), (x * scale, y - half)]
        start = (geo.x[iu], geo.y[iu] - geo.height[iu] / 2)
        end = (geo.x[iv], geo.y[iv] + geo.height[iv] / 2 + 2 * _ARROW)
        routes.append(np.array([start, *inner, end], dtype=float))
    return routes


def _curves(routes: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Smooth curves through the routes (cubic Beziers with vertical tangents), one NaN after each."""
    if not routes:
        return np.empty(0), np.empty(0)
    k = _CURVE_SAMPLES
    counts = np.array([len(r) - 1 for r in routes])
    starts = np.concatenate([r[:-1] for r in routes])
    ends = np.concatenate([r[1:] for r in routes])
    t = np.linspace(0.0, 1.0, k, endpoint=False)[None, :]
    a = (1 - t) ** 3 + 3 * (1 - t) ** 2 * t  # weight of the start (x): both x-controls sit above their ends
    mid = (starts[:, 1:2] + ends[:, 1:2]) / 2
    sx = starts[:, 0:1] * a + ends[:, 0:1] * (1 - a)
    sy = starts[:, 1:2] * (1 - t) ** 3 + mid * 3 * (1 - t) * t + ends[:, 1:2] * t**3
    blocks = counts * k + 2
    edge_start = np.cumsum(blocks) - blocks
    seg_edge = np.repeat(np.arange(len(routes)), counts)
    seg_rank = np.arange(len(starts)) - np.repeat(np.cumsum(counts) - counts, counts)
    idx = (edge_start[seg_edge] + seg_rank * k)[:, None] + np.arange(k)[None, :]
    out = np.full((int(blocks.sum()), 2), np.nan)
    out[idx, 0], out[idx, 1] = sx, sy
    last = np.array([r[-1] for r in routes])
    out[edge_start + counts * k] = last
    return out[:, 0], out[:, 1]


def _rects(
    x0: np.ndarray, x1: np.ndarray, y0: np.ndarray, y1: np.ndarray, top: float, bottom: float
) -> tuple[np.ndarray, np.ndarray]:
    """Rounded rectangles (corner radius ``top`` above, ``bottom`` below), each closed and followed by NaN."""
    n = len(x0)
    if n == 0:
        return np.empty(0), np.empty(0)
    quarter = np.linspace(0.0, math.pi / 2, _CORNER_POINTS)
    parts_x, parts_y = [], []
    limit = np.minimum(x1 - x0, y1 - y0) / 2
    # corners counter-clockwise from the top right: (base x, base y, sign x, sign y, radius)
    for k, (bx, by, sx, sy, r) in enumerate(
        ((x1, y1, -1, -1, top), (x0, y1, 1, -1, top), (x0, y0, 1, 1, bottom), (x1, y0, -1, 1, bottom))
    ):
        radius = np.minimum(r, limit)[:, None]
        angles = quarter[None, :] + k * math.pi / 2
        parts_x.append(bx[:, None] + sx * radius + radius * np.cos(angles))
        parts_y.append(by[:, None] + sy * radius + radius * np.sin(angles))
    px, py = np.concatenate(parts_x, axis=1), np.concatenate(parts_y, axis=1)
    gap = np.full((n, 1), np.nan)
    return (
        np.concatenate([px, px[:, :1], gap], axis=1).ravel(),
        np.concatenate([py, py[:, :1], gap], axis=1).ravel(),
    )


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


def _rgb(color: str) -> tuple[float, float, float] | None:
    try:
        if color.startswith("#"):
            return tuple(float(c) for c in hex_to_rgb(color))  # type: ignore[return-value]
        if color.startswith("rgb"):
            return tuple(float(c) for c in unlabel_rgb(color))  # type: ignore[return-value]
    except (ValueError, TypeError):
        return None
    return None


def _tint(color: str, amount: float = 0.55) -> str:
    rgb = _rgb(color)
    if rgb is None:
        return color
    r, g, b = (round(c + (255 - c) * amount) for c in rgb)
    return f"#{r:02x}{g:02x}{b:02x}"


def _body_colors(
    colors: Sequence[Any], datas: Sequence[Mapping[str, Any]], plain: bool, colorscale: str
) -> list[str]:
    """Each box's body colour key: plain white (grey for scopes), or the item's colour."""
    if plain:
        return [_GROUP_BODY if d["kind"] == "group" else _BODY for d in datas]
    plain_colors = {"#e5e5e5", *_KIND_COLORS.values()}  # no value, or a graph input / output: plain
    colors = [
        (_GROUP_BODY if d["kind"] == "group" else _BODY) if isinstance(c, str) and c in plain_colors else c
        for c, d in zip(colors, datas, strict=True)
    ]
    numbers = [c for c in colors if isinstance(c, float)]
    if not numbers:
        return [str(c) for c in colors]
    low, high = min(numbers), max(numbers)
    span = (high - low) or 1.0
    levels = BODY_SLOTS - 2  # a numeric overlay is binned into this many colours
    keys = []
    for c in colors:
        if isinstance(c, float):
            keys.append(
                sample_colorscale(colorscale, [round((c - low) / span * (levels - 1)) / (levels - 1)])[0]
            )
        else:
            keys.append(str(c))
    return keys


def text_visibility(
    x: Sequence[float],
    y: Sequence[float],
    edge_x: Sequence[float],
    edge_y: Sequence[float],
    x_range: Sequence[float],
    y_range: Sequence[float],
    plot_px: float,
) -> tuple[bool, bool]:
    """Whether box text and edge shapes should show in a view (GraphView and the report ask this).

    Box text shows when the zoom reaches :data:`~explorer.node_boxes.TEXT_ZOOM`
    pixels per layout unit and at most :data:`LABEL_LIMIT` boxes are in view;
    edge shapes also need at most :data:`EDGE_LABEL_LIMIT` edge labels in view.

    Parameters
    ----------
    x, y : sequence of float
        Box centres (the ``nodes`` trace).
    edge_x, edge_y : sequence of float
        Edge label positions (the ``edge labels`` trace).
    x_range, y_range : sequence of float
        The view.
    plot_px : float
        Height of the plot area in pixels (:func:`plot_height`).

    Examples
    --------
    >>> text_visibility([0], [0], [0], [-0.5], [-3, 3], [-3, 3], 600)
    (True, True)
    >>> text_visibility([0], [0], [0], [-0.5], [-300, 300], [-300, 300], 600)
    (False, False)
    """
    (x0, x1), (y0, y1) = sorted(x_range), sorted(y_range)
    if y1 <= y0 or plot_px / (y1 - y0) < TEXT_ZOOM:
        return False, False
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    boxes = int(((xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)).sum())
    ex, ey = np.asarray(edge_x, dtype=float), np.asarray(edge_y, dtype=float)
    edges = int(((ex >= x0) & (ex <= x1) & (ey >= y0) & (ey <= y1)).sum())
    return boxes <= LABEL_LIMIT, boxes <= LABEL_LIMIT and edges <= EDGE_LABEL_LIMIT


def plot_height(layout: Any) -> float:
    """Height in pixels of a graph figure's plot area (figure height less its margins).

    Examples
    --------
    >>> from explorer import load
    >>> plot_height(graph_figure(load("zoo:mlp"), height=500).layout)
    444.0
    """
    margin = layout.margin
    return float((layout.height or 700) - (margin.t or 0) - (margin.b or 0))


def selection_outline(
    graph: ModelGraph,
    layout: Layout,
    item: str | Sequence[str] | None,
    center: tuple[float, float] | Sequence[tuple[float, float]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The outline around a selected item's box, or around each of several (empty when none).

    ``center`` is the box centre in the figure (the ``nodes`` trace's x and y), by default
    the layout's position; one per item when ``item`` is a sequence.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:mlp")
    >>> xs, ys = selection_outline(g, layered(g), "/fc1/Gemm")
    >>> len(xs) == len(ys) > 4
    True
    >>> len(selection_outline(g, layered(g), ["/fc1/Gemm", "/fc2/Gemm"])[0]) == 2 * len(xs)
    True
    """
    if item is None:
        return np.empty(0), np.empty(0)
    items = [item] if isinstance(item, str) else list(item)
    if not items:
        return np.empty(0), np.empty(0)
    if center is None:
        centers = [layout.positions[i] for i in items]
    else:
        centers = [center] if isinstance(item, str) else list(center)  # type: ignore[list-item]
    sizes = [[v / PX_PER_UNIT for v in box_size_px(box_text(item_data(graph, layout, i)))] for i in items]
    x = np.array([c[0] for c in centers], dtype=float)
    y = np.array([c[1] for c in centers], dtype=float)
    w = np.array([s[0] for s in sizes])
    h = np.array([s[1] for s in sizes])
    pad = 4.0 / PX_PER_UNIT
    corner = _RADIUS + pad
    return _rects(x - w / 2 - pad, x + w / 2 + pad, y - h / 2 - pad, y + h / 2 + pad, corner, corner)


def _tensor_shapes(graph: ModelGraph, layout: Layout) -> dict[str, Any]:
    """Tensor name -> shape, for the tensors the visible edges stand for."""
    nx_graph = graph.nx
    shapes: dict[str, Any] = {}
    producers: dict[str, str] | None = None
    for (u, _), tensors in layout.edge_tensors.items():
        missing = [t for t in tensors if t not in shapes]
        if not missing:
            continue
        if u in nx_graph:
            sources = [u]
        else:  # a collapsed scope: the members that make the tensors
            if producers is None:
                producers = {out: n for n, outs in nx_graph.nodes(data="outputs") for out in outs or ()}
            sources = [producers[t] for t in missing if t in producers]
        for source in sources:
            for _, _, key, shape in nx_graph.out_edges(source, keys=True, data="shape"):
                shapes.setdefault(key, shape)
    return shapes


def _edge_label(tensors: Sequence[str], shapes: Mapping[str, Any], marks: Mapping[str, str]) -> str:
    if not tensors:
        return ""
    first = tensors[0]
    text = dims_text(shapes[first]) if first in shapes else ""
    marked = [marks[t] for t in tensors if t in marks]
    if marked:
        text = f"{marked[0]} {text}".strip()
    if len(tensors) > 1:
        text += f" +{len(tensors) - 1}"
    return " " + text


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
    webgl: bool | None = None,
    edge_marks: Mapping[str, str] | None = None,
) -> go.Figure:
    """Draw a ModelGraph: op boxes by category, smooth edges with arrowheads and shapes, hover details.

    Parameters
    ----------
    graph : ModelGraph
        The graph.
    layout : Layout, optional
        Positions; by default :func:`explorer.layout.layered` with
        :func:`~explorer.layout.auto_collapse` (big graphs open collapsed).
    overlay : mapping, optional
        Per-node values or categories to colour by (see :func:`node_colors`),
        e.g. :func:`diff_overlay`, partitions or latencies: box bodies take the
        colour (tinted) and a strong outline; headers keep the op category.
    color_by : str
        One of :data:`COLOR_BY` when there is no overlay (``"op_type"``: plain
        white bodies under category headers; the others colour the bodies).
    palette : mapping, optional
        Category colours of a categorical overlay.
    colorscale : str
        Colour scale of a numeric overlay.
    title : str, optional
        Figure title.
    height : int
        Figure height in pixels.
    labels : bool, optional
        Show box text; by default when the first view is close enough (:func:`text_visibility`).
    selected : str, optional
        An item to outline.
    notes : mapping, optional
        Item -> a line added to its hover text (e.g. the fusion it took part in).
    webgl : bool, optional
        Draw edges, arrows and hover markers with WebGL (``scattergl``) rather than SVG;
        by default when more than :data:`SVG_MAX_ITEMS` items are drawn. A widget that
        redraws one figure in place passes the same value every time (trace types stay).
    edge_marks : mapping, optional
        Tensor -> a mark written before its shape on its edges (e.g. a partition boundary:
        ``"⇄ CPU"``), shown with the tensor shapes.

    Returns
    -------
    plotly.graph_objects.Figure

    Examples
    --------
    >>> from explorer import load
    >>> fig = graph_figure(load("zoo:resnet18"), title="ResNet-18")
    >>> fig.data[NODES].type, fig.data[EDGES].mode, fig.data[HEADS].fill
    ('scatter', 'lines', 'toself')
    >>> graph_figure(load("zoo:mlp"), webgl=True).data[EDGES].type
    'scattergl'
    """
    if layout is None:
        layout = layered(graph, collapse=auto_collapse(graph), node_size="auto")
    items = list(layout.positions)
    point_trace = "scattergl" if (len(items) > SVG_MAX_ITEMS if webgl is None else webgl) else "scatter"
    datas = [item_data(graph, layout, i) for i in items]
    geo = box_geometry(graph, layout, datas)
    colors = _colors(graph, layout, datas, color_by, overlay, palette)
    numeric = any(isinstance(c, float) for c in colors)  # colour strings, or values for a scale
    hover = [_hover(graph, d, i) for d, i in zip(datas, items, strict=True)]
    if notes:
        hover = [f"{h}<br><i>{notes[i]}</i>" if i in notes else h for h, i in zip(hover, items, strict=True)]
    line_widths, line_colors = selection_ring(items, selected)

    x0, x1 = geo.x - geo.width / 2, geo.x + geo.width / 2
    y0, y1 = geo.y - geo.height / 2, geo.y + geo.height / 2
    head_h = HEADER_PX / PX_PER_UNIT
    categories = [t.category for t in geo.texts]
    groups = np.array([d["kind"] == "group" for d in datas], dtype=bool)

    routes = _edge_routes(layout, geo)
    edge_x, edge_y = _curves(routes)
    arrows = len(layout.edges) <= ARROW_LIMIT
    if arrows and routes:
        ends = np.array([r[-1] for r in routes])
        arrow_x, arrow_y = ends[:, 0], ends[:, 1] - _ARROW
    else:
        arrow_x = arrow_y = np.empty(0)
    if len(layout.edges) <= _EDGE_LABEL_MAX and routes:
        shapes = _tensor_shapes(graph, layout)
        # one label per tensor, just below its source and right of where its edges leave: the edges
        # start straight down and only then bend away, so the label crosses none of them
        first: dict[tuple[str, str], int] = {}
        texts = [_edge_label(layout.edge_tensors.get(e, ()), shapes, edge_marks or {}) for e in layout.edges]
        for k, (u, _) in enumerate(layout.edges):
            first.setdefault((u, texts[k]), k)
        chosen = sorted(first.values())
        edge_text = [texts[k] for k in chosen]
        starts = np.array([routes[k][0] for k in chosen], dtype=float).reshape(-1, 2)
        label_x, label_y = starts[:, 0] + _LABEL_DX, starts[:, 1] - _LABEL_DY
    else:
        edge_text, label_x, label_y = [], np.empty(0), np.empty(0)

    x_range, y_range = initial_view(geo, plot_height_px := float(height - _top_margin(title) - _MARGIN["b"]))
    auto_text, auto_edges = text_visibility(geo.x, geo.y, label_x, label_y, x_range, y_range, plot_height_px)
    show_text = auto_text if labels is None else labels
    show_edges = auto_edges if labels is None else labels

    marker: dict[str, Any] = {
        "size": 10,
        "symbol": "square",
        "line": {"width": line_widths, "color": line_colors},
        "opacity": 0,
    }
    if numeric:
        known = [c for c in colors if isinstance(c, float)]
        floor = min(known)  # items without a value take the bottom of the scale
        values = np.array([c if isinstance(c, float) else floor for c in colors], dtype=float)
        marker.update(
            color=values, colorscale=colorscale, showscale=True, colorbar={"thickness": 12, "len": 0.5}
        )
    else:
        marker["color"] = colors

    traces: list[Any] = [
        dict(
            type=point_trace,
            x=edge_x,
            y=edge_y,
            mode="lines",
            name="edges",
            hoverinfo="skip",
            line={"width": 1.2, "color": "#5f5f5f"},
            showlegend=False,
        ),
        dict(
            type=point_trace,
            x=arrow_x,
            y=arrow_y,
            mode="markers",
            name="arrows",
            hoverinfo="skip",
            showlegend=False,
            marker={"symbol": "triangle-down", "size": 7, "color": "#5f5f5f"},
        ),
        dict(
            type=point_trace,
            x=geo.x,
            y=geo.y,
            mode="markers",
            name="nodes",
            customdata=items,
            hovertext=hover,
            hoverinfo="text",
            marker=marker,
            showlegend=False,
        ),
    ]
    sx, sy = _rects(
        x0[groups] + _SHADOW,
        x1[groups] + _SHADOW,
        y0[groups] - _SHADOW,
        y1[groups] - _SHADOW,
        _RADIUS,
        _RADIUS,
    )
    traces.append(_fill("shadows", sx, sy, "#c9c9c9", "#9a9a9a", 0.8))

    plain = overlay is None and color_by == "op_type"
    keys = _body_colors(colors, datas, plain, colorscale)
    slots = list(dict.fromkeys(keys))[:BODY_SLOTS]
    slot_of = {k: min(n, BODY_SLOTS - 1) for n, k in enumerate(dict.fromkeys(keys))}
    key_array = np.array([slot_of[k] for k in keys], dtype=int)
    legend_bodies = overlay is not None and not numeric
    names = {}
    if legend_bodies:
        palette_names: dict[str, list[str]] = {}
        for category, colour in dict(DIFF_COLORS if palette is None else palette).items():
            palette_names.setdefault(colour, []).append(category)  # categories may share a colour
        names = {k: ", ".join(palette_names.get(k, [k])) for k in slots}
    for slot in range(BODY_SLOTS):
        mask = key_array == slot
        bx, by = _rects(x0[mask], x1[mask], y0[mask], y1[mask], _RADIUS, _RADIUS)
        key = slots[slot] if slot < len(slots) else _BODY
        strong = key not in _PLAIN_BODIES
        traces.append(
            _fill(
                names.get(key, f"body {slot}"),
                bx,
                by,
                _tint(key) if strong else key,
                key if strong else _NEUTRAL_LINE,
                2.4 if strong else 0.8,
                legend=legend_bodies and slot < len(slots) and strong,
            )
        )
    category_array = np.array(categories, dtype=object)
    for name, category in CATEGORIES.items():
        mask = category_array == name
        hx, hy = _rects(x0[mask], x1[mask], y1[mask] - head_h, y1[mask], _RADIUS, 0.0)
        traces.append(
            _fill(category.legend, hx, hy, category.color, category.color, 0.5, legend=bool(mask.any()))
        )

    if selected is not None and selected in layout.positions:
        k = items.index(selected)
        sel_x, sel_y = selection_outline(graph, layout, selected, (geo.x[k], geo.y[k]))
    else:
        sel_x, sel_y = np.empty(0), np.empty(0)
    traces.append(
        dict(
            type="scatter",
            x=sel_x,
            y=sel_y,
            mode="lines",
            name="selection",
            hoverinfo="skip",
            showlegend=False,
            line={"width": 3, "color": "#111"},
        )
    )
    # plotly widens the narrow x range of the first view to the plot: draw the text of a wide view
    center, span = (x_range[0] + x_range[1]) / 2, y_range[1] - y_range[0]
    view = ([center - 2 * span, center + 2 * span], y_range)
    has_body = np.array([bool(t.body) for t in geo.texts], dtype=bool)
    traces += [
        _text_trace(
            "labels",
            geo.x,
            y1 - head_h / 2,
            [t.header for t in geo.texts],
            [CATEGORIES[c].text for c in categories],
            "middle center",
            HEADER_FONT,
            show_text,
            view,
        ),
        _text_trace(
            "details",
            (x0 + _INSET)[has_body],
            ((y1 - head_h + y0) / 2)[has_body],
            ["<br>".join(t.body) for t in geo.texts if t.body],
            ["#333"] * int(has_body.sum()),
            "middle right",
            BODY_FONT,
            show_text,
            view,
        ),
        _text_trace(
            "edge labels",
            label_x,
            label_y,
            edge_text,
            ["#666"] * len(edge_text),
            "middle right",
            8,
            show_edges,
            view,
        ),
    ]
    layout_props = dict(
        title=title,
        height=height,
        margin={**_MARGIN, "t": _top_margin(title)},
        plot_bgcolor="white",
        paper_bgcolor="white",
        dragmode="pan",
        hovermode="closest",
        hoverdistance=40,
        uirevision=layout.version or "graph",
        xaxis={"visible": False, "range": x_range},
        yaxis={"visible": False, "range": y_range, "scaleanchor": "x", "scaleratio": 1},
        hoverlabel={"align": "left", "font": {"family": "monospace", "size": 11}},
        legend={
            "orientation": "h",
            "x": 0,
            "y": 0,
            "yanchor": "top",
            "font": {"size": 11},
            "itemclick": False,
            "itemdoubleclick": False,
            "bgcolor": "rgba(255,255,255,0.8)",
        },
        showlegend=True,
        meta={"x_scale": geo.x_scale},
        template=GRAPH_TEMPLATE,
    )
    # the traces are built here, with numpy arrays: plotly's validation would cost more than the drawing
    return go.Figure(data=traces, layout=layout_props, _validate=False)


GRAPH_TEMPLATE: dict[str, Any] = {
    "layout": {
        "font": {"color": "#2a3f5f"},
        "title": {"x": 0.05},
        "hoverlabel": {"align": "left"},
        "colorway": ["#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692"],
    }
}
"""The graph figure's plotly template: what it takes from plotly's default one (the figure sets
the rest itself). The default template is 7 KB of JSON that FigureWidget validates again (0.03-0.06
s of a GraphView in the kernel) and plotly.js applies in the page."""


def _top_margin(title: str | None) -> int:
    return 40 if title else 10


def _text_trace(
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    text: Sequence[str],
    colors: Sequence[str],
    position: str,
    size: int,
    show: bool,
    view: tuple[Sequence[float], Sequence[float]],
) -> dict[str, Any]:
    """A text trace holding all its text in ``meta``, drawing what is near the view (:func:`text_in_view`)."""
    meta = {"x": np.asarray(x, dtype=float).tolist(), "y": np.asarray(y, dtype=float).tolist()}
    meta.update(text=list(text), color=list(colors))
    shown = text_in_view(meta, *view) if show else text_in_view(meta, [0.0, 0.0], [1.0, -1.0])
    return dict(
        type="scatter",
        mode="text",
        name=name,
        x=shown["x"],
        y=shown["y"],
        text=shown["text"],
        textposition=position,
        textfont={"size": size, "color": shown["color"]},
        hoverinfo="skip",
        visible=show,
        showlegend=False,
        meta=meta,
    )


def text_in_view(
    meta: Mapping[str, Sequence[Any]], x_range: Sequence[float], y_range: Sequence[float]
) -> dict[str, list[Any]]:
    """The part of a text trace's ``meta`` (``x``, ``y``, ``text``, ``color``) near a view.

    Text traces draw only this part (a few hundred SVG texts at most), so a
    1k-node graph pans as fast with its text shown as without; GraphView and
    the report's script call it again when the view moves. The view is
    widened by half its size on each side, so small pans need no update.

    Examples
    --------
    >>> meta = {"x": [0, 5, 50], "y": [0, 0, 0], "text": ["a", "b", "c"], "color": ["#000"] * 3}
    >>> text_in_view(meta, [-1, 1], [-1, 1])["text"]
    ['a']
    >>> text_in_view(meta, [-10, 10], [-1, 1])["text"]
    ['a', 'b']
    """
    (x0, x1), (y0, y1) = sorted(x_range), sorted(y_range)
    dx, dy = (x1 - x0) / 2, (y1 - y0) / 2
    xs, ys = np.asarray(meta["x"], dtype=float), np.asarray(meta["y"], dtype=float)
    keep = np.flatnonzero((xs >= x0 - dx) & (xs <= x1 + dx) & (ys >= y0 - dy) & (ys <= y1 + dy))
    text, color = meta["text"], meta["color"]
    return {
        "x": xs[keep].tolist(),
        "y": ys[keep].tolist(),
        "text": [text[k] for k in keep],
        "color": [color[k] for k in keep],
    }


def _fill(
    name: str, x: np.ndarray, y: np.ndarray, fill: str, line: str, width: float, legend: bool = False
) -> dict[str, Any]:
    return dict(
        type="scatter",
        x=x,
        y=y,
        mode="lines",
        fill="toself",
        fillcolor=fill,
        hoveron="points",  # no point-in-polygon tests on every mouse move
        name=name,
        line={"color": line, "width": width},
        hoverinfo="skip",
        showlegend=legend,
    )


def initial_view(geo: BoxGeometry, plot_px: float = 660.0) -> tuple[list[float], list[float]]:
    """Axis ranges of the first view: the top of the graph at the reading zoom (the whole graph if it fits).

    The x range is as wide as the y range is tall: with one scale on both axes
    plotly widens it to a wider plot, so the y range sets the zoom (and a plot
    narrower than tall, such as the stepper's panels, zooms out only a little).

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:mlp")
    >>> x_range, y_range = initial_view(box_geometry(g, layered(g)))
    >>> y_range[1] > 0 > y_range[0]
    True
    """
    if not geo.items:
        return [-1.0, 1.0], [-1.0, 1.0]
    top = float((geo.y + geo.height / 2).max()) + 0.3
    bottom = float((geo.y - geo.height / 2).min()) - 0.3
    span = plot_px / PX_PER_UNIT
    full = top - bottom
    if full <= plot_px / TEXT_ZOOM:  # the whole graph is readable: show all of it
        span = max(full, plot_px / (1.5 * PX_PER_UNIT))
    in_view = geo.y >= top - span
    left = float((geo.x - geo.width / 2)[in_view].min())
    right = float((geo.x + geo.width / 2)[in_view].max())
    center, half = (left + right) / 2, 0.5 * span
    return [center - half, center + half], [top - span, top]


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
