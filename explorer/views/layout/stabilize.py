"""Stable relayout: items and bends of the previous version keep their x where they can."""

from __future__ import annotations

import math

import numpy as np

from explorer.views.layout.ordering import _Placement
from explorer.views.layout.value import Layout
from explorer.views.layout.visible import _Visible

__all__: list[str] = []


def _stabilize(vis: _Visible, placement: _Placement, previous: Layout) -> None:
    """Keep the previous x of retained items and bends; fit new ones in between (in place).

    Per layer, every entity (item or bend) gets a wanted x: its previous x when
    it existed before, else a spot between its retained neighbours in igraph's
    order. Entities are sorted by wanted x and swept left to right, each at
    ``max(wanted, left neighbour + hgap)``: a layer where nothing was added
    keeps every x exactly; where something was added, only what lies right of
    it moves, and only as far as needed. With box sizes, neighbours keep
    :meth:`_Placement.sep` apart instead of ``hgap``.
    """
    rows: dict[int, list[tuple[float, float | None, int, int]]] = {}
    # entity: (igraph x, previous x or None, edge index or -1, item index or bend position)
    for i, item in enumerate(vis.items):
        old = previous.positions.get(item)
        rows.setdefault(placement.layer[i], []).append(
            (placement.x[i], None if old is None else old[0], -1, i)
        )
    for j, (a, _) in enumerate(placement.oriented):
        wanted = _previous_bends(vis, placement, previous, j)
        for k, bx in enumerate(placement.bends[j]):
            rows.setdefault(placement.layer[a] + 1 + k, []).append(
                (bx, None if wanted is None else wanted[k], j, k)
            )
    shift = _frame_shift(vis, placement, previous)
    for row in rows.values():
        for (_, _, j, k), x in zip(row, _fit_row(row, shift, placement), strict=True):
            if j < 0:
                placement.x[k] = x
            else:
                placement.bends[j][k] = x


def _previous_bends(vis: _Visible, placement: _Placement, previous: Layout, j: int) -> list[float] | None:
    a, b = vis.edges[j]
    old = previous.edge_points.get((vis.items[a], vis.items[b]))
    bends = placement.bends[j]
    if old is None or len(old) != len(bends) + 2:
        return None
    inner = [p[0] for p in old[1:-1]]
    return inner[::-1] if placement.back[j] else inner


def _frame_shift(vis: _Visible, placement: _Placement, previous: Layout) -> float:
    """Median offset from igraph's x to the previous layout's x over retained items."""
    deltas = [
        previous.positions[item][0] - placement.x[i]
        for i, item in enumerate(vis.items)
        if item in previous.positions
    ]
    return float(np.median(deltas)) if deltas else 0.0


def _fit_row(
    row: list[tuple[float, float | None, int, int]], shift: float, placement: _Placement
) -> list[float]:
    """Final x for one layer's entities (same order as ``row``); see :func:`_stabilize`."""
    hgap = placement.hgap
    widths = [placement.item_width(k) if j < 0 else 0.0 for _, _, j, k in row]
    by_igraph = sorted(range(len(row)), key=lambda e: row[e][0])
    known = [e for e in by_igraph if row[e][1] is not None]
    if not known:
        return [entity[0] + shift for entity in row]
    wanted = [math.nan if entity[1] is None else entity[1] for entity in row]
    run: list[int] = []
    left = math.nan
    for e in [*by_igraph, -1]:
        if e >= 0 and row[e][1] is None:
            run.append(e)
            continue
        right = wanted[e] if e >= 0 else math.nan
        for t, new in enumerate(run, start=1):
            wanted[new] = _between(left, right, t, len(run), hgap)
        run, left = [], right
    rank = {e: r for r, e in enumerate(by_igraph)}
    final = [0.0] * len(row)
    last = -math.inf
    before = 0.0
    for e in sorted(range(len(row)), key=lambda e: (wanted[e], rank[e])):
        last = max(wanted[e], last + placement.sep(before, widths[e]))
        final[e] = last
        before = widths[e]
    return final


def _between(left: float, right: float, t: int, count: int, hgap: float) -> float:
    """Where the ``t``-th of ``count`` new entities goes between retained neighbours (NaN: none)."""
    if not math.isnan(left) and not math.isnan(right) and right > left:
        return left + (right - left) * t / (count + 1)
    if not math.isnan(left):
        return left + hgap * t
    return right - hgap * (count + 1 - t)
