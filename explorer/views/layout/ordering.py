"""Order inside the layers: igraph's Sugiyama (order, x, bends) and our crossing-reduction sweeps."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Sequence
from dataclasses import dataclass, field

import igraph
import numpy as np

__all__ = ["MAXITER"]


MAXITER = 20
"""igraph's crossing-reduction sweeps; our own sweeps (:func:`_refine`) finish the job."""


_WHOLE_GRAPH_MINCROSS = 6000
"""Up to this many vertices (items plus bends), our crossing reduction sweeps the whole graph."""


@dataclass
class _Placement:
    """Layers, x of every item, and x of the bends of every edge (oriented downwards), top end first."""

    layer: list[int]
    x: list[float]
    bends: list[list[float]]
    oriented: list[tuple[int, int]]
    back: list[bool]
    width: list[float] = field(default_factory=list)  # per item; empty: every item is a point
    pad: float = 0.0  # least room beside a box (``box_gap``)
    hgap: float = 1.0

    def sep(self, a: float, b: float) -> float:
        """Least distance between the centres of neighbours of widths ``a`` and ``b`` (bends: 0)."""
        return _separation(a, b, self.hgap, self.pad)

    def item_width(self, i: int) -> float:
        return self.width[i] if self.width else 0.0


def _separation(a: float, b: float, hgap: float, pad: float) -> float:
    """Least distance between the centres of layer neighbours of widths ``a`` and ``b``.

    ``hgap`` for points (edge bends, or items laid out without sizes); boxes keep ``pad`` between them.
    """
    return max(hgap, (a + b) / 2 + pad) if a or b else hgap


def _sugiyama(
    n: int, oriented: list[tuple[int, int]], layer: list[int], hgap: float, maxiter: int
) -> tuple[list[float], list[list[float]]]:
    """Run igraph: the x of every item and, per oriented edge, the x of its bend on every layer crossed."""
    if n == 0:
        return [], []
    g = igraph.Graph(n=n, edges=oriented, directed=True)
    result = g.layout_sugiyama(layers=layer, hgap=hgap, vgap=1, maxiter=maxiter)
    x = [float(c[0]) for c in result.coords[:n]]
    bends: list[list[float]] = []
    for (a, b), route in zip(oriented, result.edge_routing, strict=True):
        span = layer[b] - layer[a] - 1
        if len(route) == span:
            bends.append([float(p[0]) for p in route])
        else:  # igraph skips empty layers: put a bend on each of them too
            bends.append(_fill_bends(x[a], layer[a], x[b], layer[b], route))
    return x, bends


def _fill_bends(xa: float, la: int, xb: float, lb: int, route: Sequence[Sequence[float]]) -> list[float]:
    known = [(la, xa), *((round(p[1]), float(p[0])) for p in route), (lb, xb)]
    ys = [k[0] for k in known]
    xs = [k[1] for k in known]
    return [float(np.interp(lay, ys, xs)) for lay in range(la + 1, lb)]


class _Layers:
    """The layered graph with bends as vertices, for crossing reduction on a few layers."""

    def __init__(self, placement: _Placement) -> None:
        layer = placement.layer
        self.placement = placement
        self.layer = list(layer)
        self.x = list(placement.x)
        self.n = len(layer)
        self.bend_of: list[tuple[int, int]] = []
        self.first_bend: list[int] = []
        top: list[int] = []
        bottom: list[int] = []
        for j, (a, b) in enumerate(placement.oriented):
            prev = a
            self.first_bend.append(len(self.layer))
            for k, bx in enumerate(placement.bends[j]):
                e = len(self.layer)
                self.layer.append(layer[a] + 1 + k)
                self.x.append(bx)
                self.bend_of.append((j, k))
                top.append(prev)
                bottom.append(e)
                prev = e
            top.append(prev)
            bottom.append(b)
        self.top = np.asarray(top, dtype=np.int64)
        self.bottom = np.asarray(bottom, dtype=np.int64)

    def crossed_layers(self) -> list[int]:
        """Layers ``l`` such that some edges between ``l`` and ``l + 1`` cross."""
        if len(self.top) < 2:
            return []
        layer = np.asarray(self.layer)[self.top]
        xs = np.asarray(self.x)
        upper, lower = xs[self.top], xs[self.bottom]
        order = np.lexsort((lower, upper, layer))
        layer, lower = layer[order], lower[order]
        descent = (layer[1:] == layer[:-1]) & (lower[1:] < lower[:-1])
        return sorted({int(v) for v in layer[1:][descent]})

    def separate(self, hgap: float) -> None:
        """Push apart vertices of a layer closer than ``hgap`` (left to right, only where needed)."""
        layer = np.asarray(self.layer)
        xs = np.asarray(self.x)
        order = np.lexsort((xs, layer))
        same = layer[order][1:] == layer[order][:-1]
        close = same & (np.diff(xs[order]) < hgap - 1e-9)
        if not close.any():
            return
        crowded = {int(v) for v in layer[order][1:][close]}
        rows: dict[int, list[int]] = {}
        for e, lay in enumerate(self.layer):
            if lay in crowded:
                rows.setdefault(lay, []).append(e)
        above: dict[int, list[float]] = {}
        for t, b in zip(self.top.tolist(), self.bottom.tolist(), strict=True):
            if self.layer[b] in crowded:
                above.setdefault(b, []).append(self.x[t])
        for row in rows.values():
            row.sort(key=lambda e: (self.x[e], sum(above.get(e, [0.0])) / len(above.get(e, [0.0])), e))
            last = -math.inf
            for e in row:
                x = max(self.x[e], last + hgap)
                if x != self.x[e]:
                    self.set_x(e, x)
                last = x

    def set_x(self, e: int, x: float) -> None:
        self.x[e] = x
        if e < self.n:
            self.placement.x[e] = x
        else:
            j, k = self.bend_of[e - self.n]
            self.placement.bends[j][k] = x


def _refine(placement: _Placement, hgap: float, margin: int = 2, iterations: int = 8) -> _Layers:
    """Separate overlapping vertices and reduce the crossings igraph left (in place).

    igraph's Brandes-Koepf placement can put two vertices of a layer on the
    same x (seen on detection heads); those layers are swept left to right
    so that neighbours are at least ``hgap`` apart.

    igraph's barycenter sweeps do not keep their best ordering and misplace
    vertices with no neighbour on one side (e.g. weights drawn as nodes).
    Around every pair of layers with crossings (plus ``margin`` layers each
    side), this runs Graphviz-style ``mincross`` sweeps of our own: median
    re-ordering layer by layer, down then up, each followed by swaps of
    neighbours that remove crossings ("transpose"), keeping the best ordering
    seen (igraph's included, so it never gets worse). A re-ordered layer
    re-uses its own sorted x values, so spacing stays as igraph made it.
    Layers without crossings nearby are not touched.
    """
    graph = _Layers(placement)
    graph.separate(hgap)
    crossed = graph.crossed_layers()
    if not crossed:
        return graph
    deepest = max(graph.layer)
    windows: list[list[int]] = []
    for lay in crossed:
        lo, hi = max(lay - margin, 0), min(lay + 1 + margin, deepest)
        if windows and lo <= windows[-1][1] + 1:
            windows[-1][1] = max(windows[-1][1], hi)
        else:
            windows.append([lo, hi])
    if len(graph.layer) <= _WHOLE_GRAPH_MINCROSS:
        windows = [[0, deepest]]
    for lo, hi in windows:
        _Window(graph, lo, hi).mincross(iterations)
    return graph


class _Window:
    """Layers ``lo..hi`` of a :class:`_Layers`, re-ordered between the fixed layers around them."""

    def __init__(self, graph: _Layers, lo: int, hi: int) -> None:
        self.graph, self.lo, self.hi = graph, lo, hi
        rows: dict[int, list[int]] = {}
        for e, lay in enumerate(graph.layer):
            if lo - 1 <= lay <= hi + 1:
                rows.setdefault(lay, []).append(e)
        self.rows = {lay: sorted(es, key=graph.x.__getitem__) for lay, es in rows.items()}
        self.pos = {e: i for row in self.rows.values() for i, e in enumerate(row)}
        self.up: dict[int, list[int]] = {}
        self.down: dict[int, list[int]] = {}
        layer = graph.layer
        for t, b in zip(graph.top.tolist(), graph.bottom.tolist(), strict=True):
            if lo <= layer[b] <= hi + 1 and layer[t] >= lo - 1:
                self.up.setdefault(b, []).append(t)
                self.down.setdefault(t, []).append(b)
        self.inner = [lay for lay in range(lo, hi + 1) if lay in self.rows]

    def crossings(self) -> int:
        return sum(
            _row_crossings(self.rows[lay], self.pos, self.down)
            for lay in range(self.lo - 1, self.hi + 1)
            if lay in self.rows
        )

    def mincross(self, iterations: int) -> None:
        """Sweep from igraph's ordering and from a depth-first one, then once more from igraph's with
        items placed by their item neighbours (:func:`_sort_row`'s ``items``); keep the best ordering
        found."""
        start = self.crossings()
        igraph_rows = {lay: list(self.rows[lay]) for lay in self.inner}
        best, best_rows = self._sweeps(iterations, start)
        if best > 0:
            self._set_rows(self._depth_first())
            found, rows = self._sweeps(iterations, self.crossings())
            if found < best:
                best, best_rows = found, rows
        if best > 0:
            self._set_rows(igraph_rows)
            found, rows = self._sweeps(iterations, start, items=self.graph.n)
            if found < best:
                best, best_rows = found, rows
        if best >= start:
            self._set_rows(igraph_rows)
            return
        self._set_rows(best_rows)
        for lay in self.inner:
            slots = sorted(self.graph.x[e] for e in best_rows[lay])
            for e, x in zip(best_rows[lay], slots, strict=True):
                self.graph.set_x(e, x)

    def _set_rows(self, rows: dict[int, list[int]]) -> None:
        for lay, row in rows.items():
            self.rows[lay][:] = row
            for i, e in enumerate(row):
                self.pos[e] = i

    def _sweeps(
        self, iterations: int, start: int, items: int | None = None
    ) -> tuple[int, dict[int, list[int]]]:
        """Median/barycenter sweeps, alternately down and up, each followed by transposition (``items``:
        see :func:`_sort_row`)."""
        best = start
        best_rows = {lay: list(self.rows[lay]) for lay in self.inner}
        stall = 0
        for it in range(iterations):
            if best == 0 or stall >= 6:
                break
            downward = it % 2 == 0
            flip = it % 4 >= 2
            for lay in self.inner if downward else self.inner[::-1]:
                _sort_row(
                    self.rows[lay],
                    self.pos,
                    self.up if downward else self.down,
                    median=it % 8 < 4,
                    flip=flip,
                    items=items,
                )
            self._transpose(equal=flip)
            found = self.crossings()
            if found < best:
                best, stall = found, 0
                best_rows = {lay: list(self.rows[lay]) for lay in self.inner}
            else:
                stall += 1
        return best, best_rows

    def _transpose(self, equal: bool) -> None:
        """Swap neighbours while that removes crossings (Graphviz's transpose), layer by layer.

        A layer is revisited only when it or a layer next to it changed. With
        ``equal``, the first visit of each layer also swaps pairs whose
        crossings stay the same, to leave a plateau.
        """
        inner = set(self.inner)
        todo = list(self.inner)
        queued = set(todo)
        visited: set[int] = set()
        while todo:
            lay = todo.pop()
            queued.discard(lay)
            first = lay not in visited
            visited.add(lay)
            if _transpose(self.rows[lay], self.pos, self.up, self.down, equal and first):
                for near in (lay - 1, lay, lay + 1):
                    if near in inner and near not in queued:
                        queued.add(near)
                        todo.append(near)

    def _depth_first(self) -> dict[int, list[int]]:
        """Each layer in the order a depth-first walk down from the top meets its entities."""
        seen: dict[int, int] = {}
        for lay in [self.lo - 1, *self.inner]:
            for root in self.rows.get(lay, ()):
                if root in seen:
                    continue
                stack = [root]
                while stack:
                    e = stack.pop()
                    if e in seen:
                        continue
                    seen[e] = len(seen)
                    below = self.down.get(e, ())
                    stack.extend(
                        sorted((f for f in below if f not in seen), key=self.pos.__getitem__, reverse=True)
                    )
        return {lay: sorted(self.rows[lay], key=lambda e: seen.get(e, len(seen))) for lay in self.inner}


def _row_crossings(row: list[int], pos: dict[int, int], nbrs: dict[int, list[int]]) -> int:
    """Crossings between ``row`` (in order) and one neighbouring layer."""
    seen: list[int] = []
    total = 0
    for e in row:
        targets = sorted(pos[f] for f in nbrs.get(e, ()))
        for q in targets:
            total += len(seen) - bisect_right(seen, q)
        for q in targets:
            insort(seen, q)
    return total


def _pair_crossings(u: int, v: int, pos: dict[int, int], nbrs: dict[int, list[int]]) -> tuple[int, int]:
    """Crossings between the edges of ``u`` and ``v`` to one neighbouring layer: ``u`` left, ``v`` left."""
    nu = nbrs.get(u)
    nv = nbrs.get(v)
    if not nu or not nv:
        return 0, 0
    if len(nu) == 1 and len(nv) == 1:
        a, b = pos[nu[0]], pos[nv[0]]
        return int(a > b), int(b > a)
    left = sorted(pos[f] for f in nu)
    right = sorted(pos[f] for f in nv)
    return sum(bisect_left(right, p) for p in left), sum(bisect_left(left, p) for p in right)


def _sort_row(
    row: list[int],
    pos: dict[int, int],
    nbrs: dict[int, list[int]],
    median: bool,
    flip: bool,
    items: int | None = None,
) -> None:
    """Sort a layer by the median (or barycenter) of its neighbours' places; lone entities stay put.

    Ties keep their order, or swap it with ``flip``. With ``items`` (entities below that number
    are items, the rest bends of long edges), an item with item neighbours on that side is placed
    by those alone: the bends of long edges passing by do not pull it among them. A decoder layer
    reads the layer above and a long edge from the attention mask; placed by both, it lands among
    the mask's other long edges, which then run down on both sides of the layers, crossing them.

    Examples
    --------
    Items 0 and 1 (the layers), bends 5, 6, 7 above and 8, 9, 10 below (three long edges):

    >>> up = {1: [0, 7], 8: [5], 9: [6], 10: [7]}  # item 1 reads item 0 and the bend 7
    >>> pos = {0: 0, 5: 1, 6: 2, 7: 3, 8: 0, 1: 1, 9: 2, 10: 3}
    >>> row = [8, 1, 9, 10]
    >>> _sort_row(row, pos, up, median=True, flip=False); row  # item 1 among the long edges
    [8, 1, 9, 10]
    >>> _sort_row(row, pos, up, median=True, flip=False, items=2); row  # below item 0
    [1, 8, 9, 10]
    """
    keys: dict[int, float] = {}
    for e in row:
        near = sorted(pos[f] for f in nbrs.get(e, ()))
        if not near:
            continue
        if items is not None and e < items and len(near) > 1:
            direct = sorted(pos[f] for f in nbrs[e] if f < items)
            near = direct or near
        if not median:
            keys[e] = sum(near) / len(near)
        else:
            mid = len(near) // 2
            keys[e] = near[mid] if len(near) % 2 else (near[mid - 1] + near[mid]) / 2
    slots = [i for i, e in enumerate(row) if e in keys]
    sign = -1 if flip else 1
    movable = sorted((row[i] for i in slots), key=lambda e: (keys[e], sign * pos[e]))
    for i, e in zip(slots, movable, strict=True):
        row[i] = e
    for i, e in enumerate(row):
        pos[e] = i


def _transpose(
    row: list[int], pos: dict[int, int], up: dict[int, list[int]], down: dict[int, list[int]], equal: bool
) -> bool:
    """One pass of neighbour swaps that remove crossings (or keep them equal, with ``equal``)."""
    swapped = False
    for i in range(len(row) - 1):
        u, v = row[i], row[i + 1]
        now_up, then_up = _pair_crossings(u, v, pos, up)
        now_down, then_down = _pair_crossings(u, v, pos, down)
        now, then = now_up + now_down, then_up + then_down
        if now == 0:
            continue
        if then < now or (equal and then == now):
            row[i], row[i + 1] = v, u
            pos[u], pos[v] = i + 1, i
            swapped = swapped or then < now
    return swapped
