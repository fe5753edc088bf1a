"""Edge crossings of any :class:`~explorer.views.layout.Layout`, bends included."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

from explorer.views.layout.value import Layout, Point

__all__ = ["count_crossings"]


def count_crossings(layout: Layout) -> int:
    """Count edge crossings between consecutive layers, bends included.

    Every edge is cut into one segment per pair of consecutive layers it
    spans (at its bend points when it has one per layer, else where its
    polyline meets each layer's height); two segments between the same layers
    cross when their ends are in opposite orders. Segments that share an end
    do not cross. O(E log^2 E) with numpy.

    Works on any :class:`Layout`, e.g. one built from another tool's
    positions with layers found from distinct ``y`` values.

    Examples
    --------
    >>> lay = Layout(
    ...     positions={"a": (0.0, 0.0), "b": (1.0, 0.0), "c": (0.0, -1.0), "d": (1.0, -1.0)},
    ...     layers={"a": 0, "b": 0, "c": 1, "d": 1},
    ...     edges=(("a", "d"), ("b", "c")),
    ...     edge_points={}, edge_tensors={}, groups={}, scopes={}, kinds={}, collapsed=frozenset(),
    ... )
    >>> count_crossings(lay)
    1
    """
    heights = _layer_heights(layout)
    tops: list[int] = []
    upper: list[float] = []
    lower: list[float] = []
    for u, v in layout.edges:
        lu, lv = layout.layers[u], layout.layers[v]
        if lu == lv:
            continue
        points = layout.edge_points.get((u, v)) or (layout.positions[u], layout.positions[v])
        if lu > lv:
            lu, lv, points = lv, lu, tuple(reversed(points))
        xs = _xs_per_layer(points, lu, lv, heights)
        tops.extend(range(lu, lv))
        upper.extend(xs[:-1])
        lower.extend(xs[1:])
    if not tops:
        return 0
    layer = np.asarray(tops)
    top = np.asarray(upper)
    bottom = np.asarray(lower)
    order = np.lexsort((bottom, top, layer))
    keys = np.stack([layer[order], bottom[order]], axis=1)
    _, ranks = np.unique(keys, axis=0, return_inverse=True)
    return _inversions(ranks.ravel().astype(np.int64))


def _layer_heights(layout: Layout) -> dict[int, float]:
    sums: dict[int, list[float]] = {}
    for item, lay in layout.layers.items():
        sums.setdefault(lay, []).append(layout.positions[item][1])
    return {lay: sum(ys) / len(ys) for lay, ys in sums.items()}


def _xs_per_layer(points: Sequence[Point], lu: int, lv: int, heights: dict[int, float]) -> list[float]:
    """x of a polyline at every layer from ``lu`` to ``lv`` (inclusive)."""
    if len(points) == lv - lu + 1 and all(
        math.isclose(p[1], heights.get(lu + k, math.nan), abs_tol=1e-9) for k, p in enumerate(points)
    ):
        return [p[0] for p in points]
    known = sorted(heights)
    ys = np.asarray([p[1] for p in points])
    xs = np.asarray([p[0] for p in points])
    order = np.argsort(ys, kind="stable")
    ys, xs = ys[order], xs[order]
    out = [points[0][0]]
    for lay in range(lu + 1, lv):
        if lay in heights:
            y = heights[lay]
        else:
            i = bisect_left(known, lay)
            lo, hi = known[max(i - 1, 0)], known[min(i, len(known) - 1)]
            y = (
                heights[lo]
                if hi == lo
                else heights[lo] + (heights[hi] - heights[lo]) * (lay - lo) / (hi - lo)
            )
        out.append(float(np.interp(y, ys, xs)))
    out.append(points[-1][0])
    return out


def _inversions(values: np.ndarray) -> int:
    """Pairs ``i < j`` with ``values[i] > values[j]``, by a vectorized bottom-up merge sort."""
    a = values.copy()
    n = len(a)
    if n < 2:
        return 0
    big = int(a.max()) + 1
    positions = np.arange(n)
    total = 0
    width = 1
    while width < n:
        block = positions // (2 * width)
        right = (positions % (2 * width)) >= width
        keys = block * big + a
        left_keys = keys[~right]
        right_blocks = block[right]
        at_most = np.searchsorted(left_keys, keys[right], side="right")
        block_end = np.searchsorted(left_keys, (right_blocks + 1) * big, side="left")
        total += int((block_end - at_most).sum())
        a = np.sort(keys) % big
        width *= 2
    return total
