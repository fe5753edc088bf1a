"""What a graph figure shows of itself: the first view, and when box text and edge shapes are readable.

Box text shows from :data:`~explorer.views.node_boxes.TEXT_ZOOM` pixels per layout unit on,
with at most :data:`LABEL_LIMIT` boxes in view; edge shapes also need at most
:data:`EDGE_LABEL_LIMIT` labels in view. The figure, GraphView and the report's script ask
the same functions (:func:`text_visibility`, :func:`text_in_view`) when the view moves.

Examples
--------
>>> text_visibility([0], [0], [0], [-0.5], [-3, 3], [-3, 3], plot_px=600)
(True, True)
>>> meta = {"x": [0, 50], "y": [0, 0], "text": ["near", "far"], "color": ["#000", "#000"]}
>>> text_in_view(meta, [-1, 1], [-1, 1])["text"]
['near']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from explorer.views.figures.geometry import BoxGeometry
from explorer.views.node_boxes import PX_PER_UNIT, TEXT_ZOOM

__all__ = [
    "LABEL_LIMIT",
    "EDGE_LABEL_LIMIT",
    "text_visibility",
    "text_in_view",
    "plot_height",
    "initial_view",
]

LABEL_LIMIT = 250
"""Box text is drawn when at most this many items are in view (and the zoom is close enough)."""

EDGE_LABEL_LIMIT = 60
"""Tensor shapes beside edges are drawn when at most this many edges are in view."""


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

    Box text shows when the zoom reaches :data:`~explorer.views.node_boxes.TEXT_ZOOM`
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
    >>> from explorer.views.figures import graph_figure
    >>> plot_height(graph_figure(load("zoo:mlp"), height=500).layout)
    444.0
    """
    margin = layout.margin
    return float((layout.height or 700) - (margin.t or 0) - (margin.b or 0))


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


def initial_view(geo: BoxGeometry, plot_px: float = 660.0) -> tuple[list[float], list[float]]:
    """Axis ranges of the first view: the top of the graph at the reading zoom (the whole graph if it fits).

    The x range is as wide as the y range is tall: with one scale on both axes
    plotly widens it to a wider plot, so the y range sets the zoom (and a plot
    narrower than tall, such as the stepper's panels, zooms out only a little).

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.figures.geometry import box_geometry
    >>> from explorer.views.layout import layered
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
    if right - left > span:  # wider than the view: centre on where most of its items are, not on the
        # middle of its extent (a decoder's row of KV-cache inputs would put the main path at the edge)
        center = min(max(float(np.median(geo.x[in_view])), left + half), right - half)
    return [center - half, center + half], [top - span, top]
