"""The selection in a graph figure: the ring on the ``nodes`` markers and the outline around the boxes.

The ``nodes`` trace keeps the selection as its markers' outline (:func:`selection_ring`,
the record widgets read back); the outline people see is a line around each selected box
(:func:`selection_outline`, the ``selection`` trace).

Examples
--------
>>> from explorer import load
>>> from explorer.views.layout import layered
>>> g = load("zoo:mlp")
>>> layout = layered(g)
>>> selection_ring(list(layout.positions), "/fc1/Gemm")[1][:3]
['#444', '#444', '#000']
>>> xs, _ = selection_outline(g, layout, "/fc1/Gemm")
>>> bool(np.nanmin(xs) < layout.positions["/fc1/Gemm"][0] < np.nanmax(xs))
True
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from explorer.views.figures.geometry import BOX_RADIUS, rounded_rects
from explorer.views.figures.items import item_data
from explorer.views.layout import Layout
from explorer.views.node_boxes import PX_PER_UNIT, box_size_px, box_text

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["selection_ring", "selection_outline"]


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
    >>> from explorer.views.layout import layered
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
    corner = BOX_RADIUS + pad
    return rounded_rects(x - w / 2 - pad, x + w / 2 + pad, y - h / 2 - pad, y + h / 2 + pad, corner, corner)
