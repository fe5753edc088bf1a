"""The graph figure's edges: routes between boxes, smooth curves, arrowheads and tensor-shape labels.

An edge leaves its source's bottom edge straight down, runs vertically past each layer it
crosses (where the layout bent it) and enters its target's top edge from above, as a cubic
Bezier curve with vertical tangents at every point of its route. Its label, the tensor's
shape, sits just below the source, right of where the edges leave.

Examples
--------
>>> from explorer import load
>>> from explorer.views.figures.geometry import box_geometry
>>> from explorer.views.layout import layered
>>> g = load("zoo:mlp")
>>> layout = layered(g)
>>> routes = edge_routes(layout, box_geometry(g, layout))
>>> len(routes) == len(layout.edges), len(arrow_heads(layout, routes)[0]) == len(routes)
(True, True)
>>> edge_labels(g, layout, routes)[0][:2]
[' batch×1×28×28', ' batch×784']
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from explorer.views.figures.geometry import BoxGeometry
from explorer.views.layout import Layout
from explorer.views.node_boxes import PX_PER_UNIT, dims_text

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["ARROW_LIMIT", "edge_routes", "edge_curves", "arrow_heads", "edge_labels"]

ARROW_LIMIT = 3000
"""Arrowheads are drawn when the figure has at most this many edges."""

_EDGE_LABEL_MAX = 5000  # no edge labels at all above this many edges (they could never show)
_CURVE_SAMPLES = 10  # points per curved segment of an edge
_ARROW = 5.0 / PX_PER_UNIT  # arrowhead centre above the target's top edge
_LABEL_DX, _LABEL_DY = 2.0 / PX_PER_UNIT, 10.0 / PX_PER_UNIT  # a tensor shape's place below its source


def edge_routes(layout: Layout, geo: BoxGeometry) -> list[np.ndarray]:
    """Each edge's route in figure coordinates, from the source's bottom edge to the target's top edge.

    Each route is an array of points, one row per point: the start, two points per bend
    (a vertical run past the boxes of the bend's layer) and the end, room for an arrowhead
    above the target.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.figures.geometry import box_geometry
    >>> from explorer.views.layout import layered
    >>> g = load("zoo:mlp")
    >>> layout = layered(g)
    >>> geo = box_geometry(g, layout)
    >>> route = edge_routes(layout, geo)[0]
    >>> route.shape, bool(route[0, 1] > route[-1, 1])
    ((2, 2), True)
    """
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


def edge_curves(routes: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Smooth curves through the routes (cubic Beziers with vertical tangents), one NaN after each.

    Examples
    --------
    >>> xs, ys = edge_curves([np.array([[0.0, 0.0], [1.0, -1.0]])])
    >>> len(xs), float(xs[0]), float(xs[-2]), float(ys[-2]), bool(np.isnan(xs[-1]))
    (12, 0.0, 1.0, -1.0, True)
    """
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


def arrow_heads(layout: Layout, routes: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Arrowhead centres, just above where each route ends (none above :data:`ARROW_LIMIT` edges).

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.figures.geometry import box_geometry
    >>> from explorer.views.layout import layered
    >>> g = load("zoo:mlp")
    >>> layout = layered(g)
    >>> routes = edge_routes(layout, box_geometry(g, layout))
    >>> xs, ys = arrow_heads(layout, routes)
    >>> bool(xs[0] == routes[0][-1, 0]), bool(ys[0] < routes[0][-1, 1])
    (True, True)
    """
    if len(layout.edges) <= ARROW_LIMIT and routes:
        ends = np.array([r[-1] for r in routes])
        return ends[:, 0], ends[:, 1] - _ARROW
    arrow_x = arrow_y = np.empty(0)
    return arrow_x, arrow_y


def edge_labels(
    graph: ModelGraph,
    layout: Layout,
    routes: Sequence[np.ndarray],
    edge_marks: Mapping[str, str] | None = None,
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The tensor-shape labels of the edges: their text and where they are written.

    One label per tensor, just below its source and right of where its edges leave: the
    edges start straight down and only then bend away, so the label crosses none of them.
    None at all above a few thousand edges (they could never show).

    Parameters
    ----------
    graph, layout
        What is drawn.
    routes : sequence of array
        The edges' routes (:func:`edge_routes`).
    edge_marks : mapping, optional
        Tensor -> a mark written before its shape (e.g. a partition boundary).

    Returns
    -------
    tuple
        The texts, and the x and y of each.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.figures.geometry import box_geometry
    >>> from explorer.views.layout import layered
    >>> g = load("zoo:mlp")
    >>> layout = layered(g)
    >>> routes = edge_routes(layout, box_geometry(g, layout))
    >>> text, xs, ys = edge_labels(g, layout, routes, {"input": "⇄ CPU"})
    >>> text[0], len(text) == len(xs) == len(ys)
    (' ⇄ CPU batch×1×28×28', True)
    """
    if len(layout.edges) > _EDGE_LABEL_MAX or not routes:
        return [], np.empty(0), np.empty(0)
    shapes = _tensor_shapes(graph, layout)
    first: dict[tuple[str, str], int] = {}
    texts = [_edge_label(layout.edge_tensors.get(e, ()), shapes, edge_marks or {}) for e in layout.edges]
    for k, (u, _) in enumerate(layout.edges):
        first.setdefault((u, texts[k]), k)
    chosen = sorted(first.values())
    edge_text = [texts[k] for k in chosen]
    starts = np.array([routes[k][0] for k in chosen], dtype=float).reshape(-1, 2)
    return edge_text, starts[:, 0] + _LABEL_DX, starts[:, 1] - _LABEL_DY


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
            for _, _, key, data in nx_graph.out_edges(source, keys=True, data=True):
                shapes.setdefault(key, _value_type(data))
    return shapes


_MLIR_SCALAR = re.compile(r"^(index|[isuf]\d+|bf16)$")
_TYPE_LIMIT = 28


def _value_type(data: Mapping[str, Any]) -> Any:
    """What an edge's label shows: its shape, or for a value with no shape that MLIR types (a
    ``!hal.buffer_view``, an ``index``), the type as MLIR writes it; nothing for an ordering edge."""
    dtype = data.get("dtype")
    if data.get("shape") is None and isinstance(dtype, str):
        if dtype == "order":
            return _Label("")
        if dtype.startswith("!") or _MLIR_SCALAR.match(dtype):
            return _Label(dtype if len(dtype) <= _TYPE_LIMIT else dtype[: _TYPE_LIMIT - 1] + "…")
    return data.get("shape")


class _Label(str):
    """A label written as it is (not a shape)."""


def _edge_label(tensors: Sequence[str], shapes: Mapping[str, Any], marks: Mapping[str, str]) -> str:
    if not tensors:
        return ""
    first = tensors[0]
    shape = shapes.get(first, "")
    text = str(shape) if isinstance(shape, _Label) or first not in shapes else dims_text(shape)
    marked = [marks[t] for t in tensors if t in marks]
    if marked:
        text = f"{marked[0]} {text}".strip()
    if len(tensors) > 1:
        text += f" +{len(tensors) - 1}"
    return " " + text
