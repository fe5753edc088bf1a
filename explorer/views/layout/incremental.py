"""Open and close one group in place, without laying the whole graph out again: expand, collapse_group."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

from explorer.core.errors import UsageError
from explorer.views.layout.build import layered
from explorer.views.layout.cache import _expanded_from, _remember_expansion, graph_fingerprint
from explorer.views.layout.layering import _layering, _rank_of
from explorer.views.layout.ordering import MAXITER, _Placement, _refine, _separation, _sugiyama
from explorer.views.layout.sizes import _item_sizes
from explorer.views.layout.straighten import _slot_of, _straighten
from explorer.views.layout.value import Edge, Layout, Point, Scope, Size, group_id
from explorer.views.layout.visible import _Visible, _visible

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph


__all__ = ["expand", "collapse_group"]


def _layer_of_y(y: float, vgap: float) -> int:
    return round(-y / vgap)


def _check_version(layout: Layout, graph: ModelGraph) -> str:
    version = graph_fingerprint(graph)
    if layout.version and layout.version != version:
        raise UsageError("the layout belongs to another version of the graph; call layered() for this one")
    return version


def _children(graph: ModelGraph, members: Iterable[str], scope: Scope) -> set[Scope]:
    depth = len(scope) + 1
    nodes = graph.nx.nodes
    return {s[:depth] for s in (nodes[m].get("scope", ()) for m in members) if len(s) >= depth}


def expand(layout: Layout, graph: ModelGraph, group: str) -> Layout:
    """Open one collapsed group: its members (nodes and sub-scope boxes) replace its box.

    Only the group's members are laid out (locally, with igraph). They take
    the box's place, centred on its x; the box's layer becomes as many
    layers as the members need. Everything above the box stays exactly where
    it was; everything below moves down by the added layers, keeping its x;
    items on the box's own layer move sideways (left ones left, right ones
    right) by half the members' width. Long edges passing the box's layer get
    a vertical run through the added layers. Falls back to a full
    :func:`layered` (with ``previous=layout``) when the layout has upward
    (cycle) edges or the in-place result fails its own consistency check
    (every edge one point per layer, no two items on one spot).

    Parameters
    ----------
    layout : Layout
        The current layout, of ``graph``.
    graph : ModelGraph
        The graph ``layout`` was made from.
    group : str
        A group id of ``layout`` (``"scope:..."``).

    Returns
    -------
    Layout
        With ``collapsed`` minus the group's scope plus its direct sub-scopes:
        the same items and edges as ``layered(graph, collapse=result.collapsed)``.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:resnet18")
    >>> closed = layered(g, collapse=1)
    >>> opened = expand(closed, g, "scope:layer1")
    >>> "scope:layer1/layer1.0" in opened.positions and "scope:layer1" not in opened.positions
    True
    >>> opened.positions["input:input"] == closed.positions["input:input"]
    True
    """
    if group not in layout.groups:
        raise KeyError(f"{group!r} is not a collapsed group of this layout")
    version = _check_version(layout, graph)
    scope = layout.scopes[group]
    mode = frozenset(s for s in layout.collapsed if s != scope) | _children(
        graph, layout.groups[group], scope
    )
    vis = _visible(graph, mode)
    result = None if layout.back_edges else _expand_in_place(layout, vis, group, version)
    if result is None:
        result = _relayout(layout, graph, mode)
    _remember_expansion(result, layout, scope)
    return result


def _expand_in_place(layout: Layout, vis: _Visible, group: str, version: str) -> Layout | None:
    hgap, vgap = layout.hgap, layout.vgap
    members = [i for i, item in enumerate(vis.items) if item not in layout.positions]
    inside = set(members)
    sizes: dict[str, Size] = {}
    widths: list[float] | None = None
    if layout.sizes:
        new = _item_sizes(vis, layout.node_size, members)
        if max(h for _, h in new) + layout.box_gap > vgap + 1e-9:
            return None  # taller boxes: the layers must move apart, lay it all out again
        sizes = {item: layout.sizes[item] for item in layout.positions if item != group}
        sizes.update((vis.items[i], size) for i, size in zip(members, new, strict=True))
        widths = [w for w, _ in new]
    local = _LocalLayout(vis, members, hgap, widths, layout.box_gap)
    g_layer = layout.layers[group]
    gx = layout.positions[group][0]
    grow = local.height - 1
    half = local.width / 2

    def moved(x: float, lay: int) -> Point:
        if lay > g_layer:
            return x, -(lay + grow) * vgap
        if lay == g_layer:
            x = x - half if x < gx else x + half
        return x, -lay * vgap

    positions: dict[str, Point] = {}
    layers: dict[str, int] = {}
    for item, (x, _) in layout.positions.items():
        if item == group:
            continue
        lay = layout.layers[item]
        positions[item] = moved(x, lay)
        layers[item] = lay + grow if lay > g_layer else lay
    for i in members:
        lx, ll = local.position(i)
        positions[vis.items[i]] = (gx + lx, -(g_layer + ll) * vgap)
        layers[vis.items[i]] = g_layer + ll

    def stretch(points: Sequence[Point]) -> list[Point]:
        """An edge not touching the members: what passes the box's layer runs down beside the band."""
        out: list[Point] = []
        last = len(points) - 1
        for k, (x, y) in enumerate(points):
            lay = _layer_of_y(y, vgap)
            nx_, ny = moved(x, lay)
            if lay == g_layer and k != last:
                out.extend((nx_, -(g_layer + t) * vgap) for t in range(grow + 1))
            else:
                out.append((nx_, ny))
        return out

    edge_points: dict[Edge, tuple[Point, ...]] = {}
    edges: list[Edge] = []
    backs: list[Edge] = []
    for j, (a, b) in enumerate(vis.edges):
        edge = (vis.items[a], vis.items[b])
        edges.append(edge)
        if a in inside or b in inside:
            points = _member_edge(layout, local, vis, j, inside, group, gx, g_layer, grow, vgap)
            if points is None:
                return None
            if j in local.back:
                backs.append(edge)
        else:
            points = stretch(layout.edge_points[edge])
        edge_points[edge] = tuple(points)
    return _patched_layout(vis, positions, layers, edges, edge_points, backs, version, layout, sizes)


def _member_edge(
    layout: Layout,
    local: _LocalLayout,
    vis: _Visible,
    j: int,
    inside: set[int],
    group: str,
    gx: float,
    g_layer: int,
    grow: int,
    vgap: float,
) -> list[Point] | None:
    """Polyline of an edge touching the group's members, in the expanded layout."""
    a, b = vis.edges[j]
    if a in inside and b in inside:
        return [(gx + x, -(g_layer + lay) * vgap) for x, lay in local.route(j)]
    if b in inside:  # from an outside item above into a member
        old = layout.edge_points.get((vis.items[a], group))
        if old is None:
            return None
        band = [(gx + x, -(g_layer + lay) * vgap) for x, lay in local.route(j)]
        return [*old[:-1], *band]
    old = layout.edge_points.get((group, vis.items[b]))
    if old is None:
        return None
    band = [(gx + x, -(g_layer + lay) * vgap) for x, lay in local.route(j)]
    below = [(x, -(_layer_of_y(y, vgap) + grow) * vgap) for x, y in old[1:]]
    return [*band, *below]


class _LocalLayout:
    """igraph layout of a group's members, with one port above per outside predecessor
    and one port below per outside successor, so edges to the outside enter and leave
    the band in a sensible order. Member layers are 0..height-1, x is centred on 0."""

    def __init__(
        self,
        vis: _Visible,
        members: list[int],
        hgap: float,
        member_widths: Sequence[float] | None = None,
        pad: float = 0.0,
    ) -> None:
        inside = set(members)
        local_index = {m: k for k, m in enumerate(members)}
        tops: dict[int, int] = {}
        bottoms: dict[int, int] = {}
        n = len(members)
        edges: list[tuple[int, int]] = []
        self.edge_of: dict[int, int] = {}
        for j, (a, b) in enumerate(vis.edges):
            if a in inside and b in inside:
                pair = (local_index[a], local_index[b])
            elif b in inside:
                if a not in tops:
                    tops[a] = n + len(tops) + len(bottoms)
                pair = (tops[a], local_index[b])
            elif a in inside:
                if b not in bottoms:
                    bottoms[b] = n + len(tops) + len(bottoms)
                pair = (local_index[a], bottoms[b])
            else:
                continue
            self.edge_of[j] = len(edges)
            edges.append(pair)
        total = n + len(tops) + len(bottoms)

        def rank() -> list[float]:
            ranks = _rank_of(vis)
            return [ranks[m] for m in members] + [math.inf] * (total - n)

        floor = [1] * n + [0] * (total - n)
        pinned = [k >= n for k in range(total)]
        layer, back = _layering(total, edges, rank, floor, pinned)
        high = max(layer[:n])
        for t in bottoms.values():
            floor[t] = high + 1
        layer, back = _layering(total, edges, rank, floor, pinned)
        self.back = {j for j, k in self.edge_of.items() if back[k]}
        member_layers = layer[:n]
        low, high = min(member_layers), max(member_layers)
        for t in tops.values():
            layer[t] = low - 1
        for t in bottoms.values():
            layer[t] = high + 1
        base = low - 1
        layer = [lay - base for lay in layer]
        oriented = [(b, a) if flip else (a, b) for (a, b), flip in zip(edges, back, strict=True)]
        x, bends = _sugiyama(total, oriented, layer, hgap, MAXITER)
        widths = [*member_widths, *([0.0] * (total - n))] if member_widths else []
        refined = _Placement(
            layer=layer, x=x, bends=bends, oriented=oriented, back=back, width=widths, pad=pad, hgap=hgap
        )
        laid = _refine(refined, hgap)
        vis_edge = [0] * len(edges)
        for j, k in self.edge_of.items():
            vis_edge[k] = j
        _straighten(laid, _slot_of(vis, vis_edge))
        half = [w / 2 for w in member_widths] if member_widths else [0.0] * n
        lefts = [x[k] - half[k] for k in range(n)]
        rights = [x[k] + half[k] for k in range(n)]
        for k, (a, _) in enumerate(oriented):
            inner = [bx for t, bx in enumerate(bends[k]) if 1 <= layer[a] + 1 + t <= high - base]
            lefts.extend(inner)
            rights.extend(inner)
        self.centre = (min(lefts) + max(rights)) / 2
        self.width = max(rights) - min(lefts) + hgap
        self.height = high - low + 1
        self._x, self._layer, self._bends, self._oriented, self._back = x, layer, bends, oriented, back
        self._local_index = local_index

    def position(self, member: int) -> tuple[float, int]:
        k = self._local_index[member]
        return self._x[k] - self.centre, self._layer[k] - 1

    def route(self, j: int) -> list[tuple[float, int]]:
        """Points of edge ``j`` (source to target) inside the band: members and bends."""
        k = self.edge_of[j]
        a, b = self._oriented[k]
        points = [(self._x[a] - self.centre, self._layer[a] - 1)]
        points += [(bx - self.centre, self._layer[a] + t) for t, bx in enumerate(self._bends[k])]
        points.append((self._x[b] - self.centre, self._layer[b] - 1))
        if self._back[k]:
            points.reverse()
        height = self.height
        return [p for p in points if 0 <= p[1] < height]


def _relayout(layout: Layout, graph: ModelGraph, mode: frozenset[Scope]) -> Layout:
    """A full :func:`layered` of another view, with ``layout``'s gaps and sizes and ``previous=layout``."""
    return layered(
        graph,
        collapse=mode,
        previous=layout,
        hgap=layout.hgap,
        vgap=layout.vgap,
        node_size=layout.node_size,
        box_gap=layout.box_gap,
    )


def _consistent(layout: Layout) -> bool:
    """Every edge goes down (or up, for back edges) one layer per point; no two items share a spot."""
    for u, v in layout.edges:
        lu, lv = layout.layers[u], layout.layers[v]
        down = lu < lv
        if down == ((u, v) in layout.back_edges) or lu == lv:
            return False
        if len(layout.edge_points[(u, v)]) != abs(lv - lu) + 1:
            return False
    spots = {(layout.layers[i], round(p[0], 9)) for i, p in layout.positions.items()}
    if len(spots) != len(layout.positions):
        return False
    return not layout.sizes or not _overlapping(layout)


def _overlapping(layout: Layout) -> list[tuple[str, str]]:
    """What breaks the room boxes need: boxes of a layer that overlap (``(a, b)``), boxes taller
    than the layer distance (``(a, a)``), edge bends inside a box or its ``box_gap`` (``(box, "u->v")``).
    """
    rows: dict[int, list[tuple[float, str]]] = {}
    for item, (x, _) in layout.positions.items():
        rows.setdefault(layout.layers[item], []).append((x, item))
    sizes = layout.sizes
    found = [(i, i) for i, (_, h) in sizes.items() if h > layout.vgap + 1e-9]
    for row in rows.values():
        row.sort()
        for (xa, a), (xb, b) in pairwise(row):
            if xb - xa < (sizes[a][0] + sizes[b][0]) / 2 - 1e-9:
                found.append((a, b))
    xs = {lay: [x for x, _ in row] for lay, row in rows.items()}
    room = layout.box_gap - 1e-9
    for (u, v), points in layout.edge_points.items():
        for x, y in points[1:-1]:
            lay = _layer_of_y(y, layout.vgap)
            row = rows.get(lay)
            if not row:
                continue
            k = bisect_left(xs[lay], x)
            for bx, item in row[max(k - 1, 0) : k + 1]:
                if abs(x - bx) < sizes[item][0] / 2 + room:
                    found.append((item, f"{u}->{v}"))
    return found


def collapse_group(layout: Layout, graph: ModelGraph, scope: Sequence[str]) -> Layout:
    """Close a name scope into one box.

    When ``layout`` came from :func:`expand` of the same scope, the layout it
    was expanded from comes back unchanged. Otherwise the box takes the place
    of the scope's top-most member that lies below all the box's producers and
    above all its consumers (centred on the members when that spot is free),
    the members are removed, layers left empty are closed up, and everything
    else keeps its x and its order. Falls back to a full :func:`layered` (with
    ``previous=layout``) when no such member exists or collapsing closes a cycle.

    Parameters
    ----------
    layout : Layout
        The current layout, of ``graph``.
    graph : ModelGraph
        The graph ``layout`` was made from.
    scope : sequence of str
        The scope to close, e.g. ``("encoder", "layers.0")``.

    Returns
    -------
    Layout

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:resnet18")
    >>> closed = layered(g, collapse=1)
    >>> collapse_group(expand(closed, g, "scope:layer1"), g, ("layer1",)) is closed
    True
    >>> "scope:layer2" in collapse_group(layered(g), g, ("layer2",)).positions
    True
    """
    scope = tuple(scope)
    gid = group_id(scope)
    if gid in layout.groups:
        return layout
    version = _check_version(layout, graph)
    undone = _expanded_from(layout, scope)
    if undone is not None:
        return undone
    mode = frozenset(s for s in layout.collapsed if s[: len(scope)] != scope) | {scope}
    vis = _visible(graph, mode)
    if gid not in vis.index:
        raise UsageError(f"no node of the graph lies in scope {'/'.join(scope)!r}")
    result = None if layout.back_edges else _collapse_in_place(layout, vis, gid, version)
    if result is None:
        result = _relayout(layout, graph, mode)
    return result


def _collapse_in_place(layout: Layout, vis: _Visible, gid: str, version: str) -> Layout | None:
    hgap, vgap = layout.hgap, layout.vgap
    members = [item for item in layout.positions if item not in vis.index]
    box = vis.index[gid]
    preds = [vis.items[a] for a, b in vis.edges if b == box]
    succs = [vis.items[b] for a, b in vis.edges if a == box]
    lowest = max((layout.layers[p] for p in preds), default=-1) + 1
    highest = min((layout.layers[s] for s in succs), default=math.inf) - 1
    fits = sorted(
        (layout.layers[m], layout.positions[m][0], m)
        for m in members
        if lowest <= layout.layers[m] <= highest
    )
    if not fits:
        return None
    box_layer = fits[0][0]
    xs = [layout.positions[m][0] for m in members]
    centre = (min(xs) + max(xs)) / 2
    gone = set(members)
    sizes: dict[str, Size] = {}
    box_w = 0.0
    if layout.sizes:
        box_w, box_h = _item_sizes(vis, layout.node_size, [box])[0]
        if box_h + layout.box_gap > vgap + 1e-9:
            return None
        sizes = {i: size for i, size in layout.sizes.items() if i not in gone}
        sizes[gid] = (box_w, box_h)
    taken = [
        (p[0], sizes.get(i, (0.0, 0.0))[0])
        for i, p in layout.positions.items()
        if i not in gone and layout.layers[i] == box_layer
    ]
    free = all(abs(x - centre) >= _separation(w, box_w, hgap, layout.box_gap) for x, w in taken)
    box_x = centre if free else fits[0][1]
    used = {layout.layers[i] for i in layout.positions if i not in gone} | {box_layer}
    close = _closer(set(layout.layers.values()) - used)
    positions = {
        i: (p[0], -close(layout.layers[i]) * vgap) for i, p in layout.positions.items() if i not in gone
    }
    positions[gid] = (box_x, -close(box_layer) * vgap)
    layers = {i: close(layout.layers[i]) for i in positions if i != gid}
    layers[gid] = close(box_layer)
    edges: list[Edge] = []
    edge_points: dict[Edge, tuple[Point, ...]] = {}
    via = _member_routes(layout, gone)
    for a, b in vis.edges:
        edge = (vis.items[a], vis.items[b])
        edges.append(edge)
        old = _old_route(layout, edge, gid, via)
        if old is None:
            return None
        edge_points[edge] = _reroute(old, edge, gid, box_layer, box_x, layers, positions, close, vgap)
    return _patched_layout(vis, positions, layers, edges, edge_points, (), version, layout, sizes)


def _patched_layout(
    vis: _Visible,
    positions: dict[str, Point],
    layers: dict[str, int],
    edges: Sequence[Edge],
    edge_points: dict[Edge, tuple[Point, ...]],
    back_edges: Iterable[Edge],
    version: str,
    old: Layout,
    sizes: dict[str, Size],
) -> Layout | None:
    """The Layout an incremental :func:`expand` / :func:`collapse_group` made, or None if inconsistent."""
    result = Layout(
        positions={item: positions[item] for item in vis.items},
        layers={item: layers[item] for item in vis.items},
        edges=tuple(edges),
        edge_points=edge_points,
        edge_tensors=dict(zip(edges, vis.tensors, strict=True)),
        groups=vis.groups,
        scopes=vis.scopes,
        kinds=dict(zip(vis.items, vis.kinds, strict=True)),
        collapsed=vis.collapsed,
        back_edges=frozenset(back_edges),
        version=version,
        hgap=old.hgap,
        vgap=old.vgap,
        sizes={item: sizes[item] for item in vis.items} if sizes else {},
        box_gap=old.box_gap,
        node_size=old.node_size,
    )
    return result if _consistent(result) else None


def _closer(emptied: set[int]) -> Callable[[int], int]:
    """Map old layers to new ones with the ``emptied`` layers removed."""
    empty = sorted(emptied)

    def close(lay: int) -> int:
        return lay - bisect_left(empty, lay)

    return close


def _member_routes(layout: Layout, gone: set[str]) -> dict[tuple[str, bool], Edge]:
    """Outside item -> the old edge to its top-most member (``True``) / from its bottom-most member."""
    via: dict[tuple[str, bool], Edge] = {}
    for u, v in layout.edges:
        if v in gone and u not in gone:
            best = via.get((u, True))
            if best is None or layout.layers[v] < layout.layers[best[1]]:
                via[(u, True)] = (u, v)
        elif u in gone and v not in gone:
            best = via.get((v, False))
            if best is None or layout.layers[u] > layout.layers[best[0]]:
                via[(v, False)] = (u, v)
    return via


def _old_route(layout: Layout, edge: Edge, gid: str, via: dict[tuple[str, bool], Edge]) -> list[Point] | None:
    """The old polyline an edge of the collapsed view follows (via one member for box edges)."""
    u, v = edge
    if u != gid and v != gid:
        old = layout.edge_points.get(edge)
    else:
        member_edge = via.get((u, True)) if v == gid else via.get((v, False))
        old = None if member_edge is None else layout.edge_points[member_edge]
    return None if old is None else list(old)


def _reroute(
    old: list[Point],
    edge: Edge,
    gid: str,
    box_layer: int,
    box_x: float,
    layers: dict[str, int],
    positions: dict[str, Point],
    close: Callable[[int], int],
    vgap: float,
) -> tuple[Point, ...]:
    """Cut or extend an old polyline to the box, drop closed layers, one point per layer."""
    u, v = edge
    by_layer: dict[int, float] = {}
    for x, y in old[1:-1]:
        by_layer[_layer_of_y(y, vgap)] = x
    if v == gid:
        start_old = _layer_of_y(old[0][1], vgap)
        by_layer = {lay: x for lay, x in by_layer.items() if lay < box_layer}
        wanted = range(start_old + 1, box_layer)
    elif u == gid:
        end_old = _layer_of_y(old[-1][1], vgap)
        by_layer = {lay: x for lay, x in by_layer.items() if lay > box_layer}
        wanted = range(box_layer + 1, end_old)
    else:
        wanted = range(_layer_of_y(old[0][1], vgap) + 1, _layer_of_y(old[-1][1], vgap))
    inner: dict[int, float] = {}
    last = box_x if u == gid else old[0][0]
    for lay in wanted:
        last = by_layer.get(lay, last)
        inner.setdefault(close(lay), last)
    lu, lv = layers[u], layers[v]
    step = 1 if lv > lu else -1
    points = [positions[u]]
    for lay in range(lu + step, lv, step):
        x = inner.get(lay, points[-1][0])
        points.append((x, -lay * vgap))
    points.append(positions[v])
    return tuple(points)
