"""Where the graph figure draws each box: centres and sizes, and rounded rectangles as plotly lines.

Box sizes come from their text (:mod:`explorer.views.node_boxes`); centres from the layout,
with x stretched (:attr:`BoxGeometry.x_scale`) where neighbouring boxes, or a box and an edge
passing it, would otherwise be too close.

Examples
--------
>>> from explorer import load
>>> from explorer.views.layout import layered
>>> g = load("zoo:mlp")
>>> geo = box_geometry(g, layered(g))
>>> geo.items[:2], geo.x_scale
(('input:input', '/Flatten'), 1.0)
>>> xs, ys = rounded_rects(geo.x[:1] - 0.5, geo.x[:1] + 0.5, geo.y[:1] - 0.2, geo.y[:1] + 0.2, 0.05, 0.05)
>>> len(xs), bool(np.isnan(xs[-1]))
(14, True)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from explorer.views.figures.items import item_data
from explorer.views.layout import BOX_GAP, Layout
from explorer.views.node_boxes import PX_PER_UNIT, BoxText, box_size_px, box_text

if TYPE_CHECKING:
    import pandas as pd

    from explorer.core.graph import ModelGraph

__all__ = ["BOX_RADIUS", "BoxGeometry", "box_geometry", "rounded_rects"]

BOX_RADIUS = 5.0 / PX_PER_UNIT
"""Corner radius of a box, in layout units."""

_GAP_BOXES = BOX_GAP  # least room between neighbouring boxes of one layer: the layout's rule
_GAP_BEND = 12.0 / PX_PER_UNIT  # least room between a box and an edge passing it
_MAX_X_SCALE = 3.0
_CORNER_POINTS = 3  # points per rounded box corner (fewer points: faster redraws)


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
        Box sizes (layout units, :func:`~explorer.views.node_boxes.node_box_size`).
    texts : tuple of BoxText
        Header and body text of each box.
    x_scale : float
        How much the layout's x was stretched so neighbouring boxes do not
        overlap (1 when the layout already leaves room for the boxes).

    Examples
    --------
    >>> geo = BoxGeometry(("a",), np.array([1.0]), np.array([0.0]), np.array([2.0]), np.array([0.5]), (), 1.0)
    >>> geo.left.tolist(), geo.right.tolist(), geo.bottom.tolist(), geo.top.tolist()
    ([0.0], [2.0], [-0.25], [0.25])
    """

    items: tuple[str, ...]
    x: np.ndarray
    y: np.ndarray
    width: np.ndarray
    height: np.ndarray
    texts: tuple[BoxText, ...]
    x_scale: float

    @property
    def left(self) -> np.ndarray:
        """The boxes' left edges."""
        return self.x - self.width / 2

    @property
    def right(self) -> np.ndarray:
        """The boxes' right edges."""
        return self.x + self.width / 2

    @property
    def bottom(self) -> np.ndarray:
        """The boxes' bottom edges."""
        return self.y - self.height / 2

    @property
    def top(self) -> np.ndarray:
        """The boxes' top edges."""
        return self.y + self.height / 2

    def to_frame(self) -> pd.DataFrame:
        """One row per box.

        Examples
        --------
        >>> from explorer import load
        >>> from explorer.views.layout import layered
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
        >>> from explorer.views.layout import layered
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
    >>> from explorer.views.layout import layered
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


def rounded_rects(
    x0: np.ndarray, x1: np.ndarray, y0: np.ndarray, y1: np.ndarray, top: float, bottom: float
) -> tuple[np.ndarray, np.ndarray]:
    """Rounded rectangles (corner radius ``top`` above, ``bottom`` below), each closed and followed by NaN.

    One line trace draws them all (``fill="toself"`` fills each closed part).

    Examples
    --------
    >>> xs, ys = rounded_rects(np.array([0.0, 2.0]), np.array([1.0, 3.0]), np.zeros(2), np.ones(2), 0.1, 0.0)
    >>> len(xs), float(xs[0]), float(ys[0])
    (28, 1.0, 0.9)
    >>> bool(np.isnan(xs[13])), float(xs[14])
    (True, 3.0)
    """
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
