""":func:`layered`: from the visible graph to a memoized :class:`~explorer.views.layout.Layout`."""

from __future__ import annotations

import gc
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from explorer.core.errors import UsageError
from explorer.views.layout.cache import _cache_get, _cache_put, graph_fingerprint, layout_digest
from explorer.views.layout.layering import _layering, _rank_of
from explorer.views.layout.ordering import MAXITER, _Placement, _refine, _sugiyama
from explorer.views.layout.sizes import _item_sizes, _size_key
from explorer.views.layout.stabilize import _stabilize
from explorer.views.layout.straighten import _slot_of, _straighten
from explorer.views.layout.value import BOX_GAP, Collapse, Edge, Layout, NodeSize, Point, Size
from explorer.views.layout.visible import _normalize_collapse, _Visible, _visible

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph


__all__ = ["layered"]


def _place(
    vis: _Visible,
    hgap: float,
    maxiter: int | None,
    previous: Layout | None,
    straight: bool = True,
    widths: list[float] | None = None,
    pad: float = 0.0,
) -> _Placement:
    n = len(vis.items)
    floor: list[int] | None = None
    pinned: list[bool] | None = None
    if previous is not None:
        floor = [previous.layers.get(item, 0) for item in vis.items]
        pinned = [item in previous.layers for item in vis.items]
    layer, back = _layering(n, vis.edges, lambda: _rank_of(vis), floor, pinned)
    oriented = [(b, a) if flip else (a, b) for (a, b), flip in zip(vis.edges, back, strict=True)]
    iters = MAXITER if maxiter is None else maxiter
    x, bends = _sugiyama(n, oriented, layer, hgap, iters)
    placement = _Placement(
        layer=layer, x=x, bends=bends, oriented=oriented, back=back, width=widths or [], pad=pad, hgap=hgap
    )
    graph = _refine(placement, hgap)
    if straight:
        _straighten(graph, _slot_of(vis))
    if previous is not None:
        _stabilize(vis, placement, previous)
    return placement


def _assemble(
    vis: _Visible,
    placement: _Placement,
    hgap: float,
    vgap: float,
    version: str,
    sizes: Sequence[Size] | None = None,
    box_gap: float = BOX_GAP,
    node_size: NodeSize = None,
) -> Layout:
    items = vis.items
    positions = {item: (placement.x[i], -placement.layer[i] * vgap) for i, item in enumerate(items)}
    layers = {item: placement.layer[i] for i, item in enumerate(items)}
    edges: list[Edge] = []
    edge_points: dict[Edge, tuple[Point, ...]] = {}
    edge_tensors: dict[Edge, tuple[str, ...]] = {}
    backs: list[Edge] = []
    for j, (a, b) in enumerate(vis.edges):
        top = placement.oriented[j][0]
        start = placement.layer[top] + 1
        inner = [(x, -(start + k) * vgap) for k, x in enumerate(placement.bends[j])]
        if placement.back[j]:
            inner.reverse()
        edge = (items[a], items[b])
        edges.append(edge)
        edge_points[edge] = (positions[edge[0]], *inner, positions[edge[1]])
        edge_tensors[edge] = vis.tensors[j]
        if placement.back[j]:
            backs.append(edge)
    return Layout(
        positions=positions,
        layers=layers,
        edges=tuple(edges),
        edge_points=edge_points,
        edge_tensors=edge_tensors,
        groups=vis.groups,
        scopes=vis.scopes,
        kinds=dict(zip(items, vis.kinds, strict=True)),
        collapsed=vis.collapsed,
        back_edges=frozenset(backs),
        version=version,
        hgap=hgap,
        vgap=vgap,
        sizes={} if sizes is None else dict(zip(items, sizes, strict=True)),
        box_gap=box_gap,
        node_size=node_size,
    )


def layered(
    graph: ModelGraph,
    collapse: Collapse = None,
    previous: Layout | None = None,
    *,
    hgap: float = 1.0,
    vgap: float = 1.0,
    maxiter: int | None = None,
    straight: bool = True,
    node_size: NodeSize = None,
    box_gap: float = BOX_GAP,
) -> Layout:
    """Lay a ModelGraph out in layers, top to bottom in data-flow order.

    Layers are computed here (longest path from the inputs, then each item
    pulled down to just above its first consumer); python-igraph's Sugiyama
    layout orders the layers to reduce crossings and routes long edges with one
    bend per layer crossed; our own sweeps then remove crossings igraph left
    (only around the layers that have some).

    Parameters
    ----------
    graph : ModelGraph
        The graph (a subgraph from ``graph.subgraphs`` works too).
    collapse : None, int or iterable of scope tuples
        ``None`` draws every node; an int ``d`` draws every node whose scope
        has at least ``d`` names as the box of ``scope[:d]``; a set of scope
        tuples collapses those scopes (a node goes into the outermost one
        that contains it). Boxes have ids ``"scope:" + "/".join(scope)``.
    previous : Layout, optional
        The layout of an earlier version of the graph (e.g. the snapshot
        before a pass). Items present in both keep their previous layer
        (unless a new predecessor pushes them down) and their previous x
        (unless something new is inserted beside them in their layer without
        room; then they and what lies right of them move right only as far as
        needed). Layers where nothing was added do not move at all.
    hgap, vgap : float
        Least distance between the centres of neighbours in a layer (items
        and edge bends); distance between layers. Layout units: the units of
        the positions.
    maxiter : int, optional
        igraph's crossing-reduction sweeps (default :data:`MAXITER`); our own
        sweeps then work on the layers where crossings are left.
    straight : bool
        Place items so that main paths run straight down (the default; see
        :func:`_straighten`): an item sits below its main producer, long edges
        run as straight side lanes and edges from one item share a lane where
        they run side by side. ``False`` keeps igraph's Brandes-Koepf x, as
        before this option existed.
    node_size : None, "auto", mapping or callable
        Room for each item's box, ``(width, height)`` in layout units, the box
        centred on the item's position. ``None`` lays items out as points.
        ``"auto"`` uses :func:`label_size` (sized from the label text). A
        mapping gives sizes by item id (items it lacks get :func:`label_size`);
        a callable gets :func:`item_data` of each item (a node's data dict, or
        for a collapsed scope ``{"kind": "group", "scope", "members", "ops"}``)
        and returns its size. Neighbours in a layer are then at least
        ``max(hgap, (w1 + w2) / 2 + box_gap)`` apart centre to centre (an edge
        bend counts as width 0), and layers ``max(vgap, tallest + box_gap)``
        apart, so no two boxes overlap and edges pass boxes with ``box_gap``
        to spare. The sizes are part of the cache key; they are in
        :attr:`Layout.sizes`. Needs ``straight=True``.
    box_gap : float
        Least room between boxes (see ``node_size``).

    Returns
    -------
    Layout
        Memoized (16 layouts, least recently used out) by graph fingerprint,
        collapse, gaps, options, sizes and ``previous`` (:func:`layout_digest`): the same graph
        version after the same layout gets the same layout back, whichever step was visited
        first, which is what stepping back and forth between snapshots wants.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:transformer")
    >>> full = layered(g)
    >>> len(full.positions) == g.nx.number_of_nodes()
    True
    >>> boxes = layered(g, collapse=2)
    >>> len(boxes.positions) < len(full.positions)
    True
    >>> layered(g, collapse=2) is boxes
    True
    >>> sized = layered(g, node_size="auto")
    >>> w, h = sized.sizes["/encoder/layers.0/self_attn/MatMul"]
    >>> 0.5 < w < 2 and 0.1 < h < 1 and sized.vgap >= h + BOX_GAP
    True
    """
    mode = _normalize_collapse(collapse)
    if node_size is not None and not straight:
        raise UsageError("node_size needs straight=True (igraph's own placement knows no box sizes)")
    version = graph_fingerprint(graph)
    vis: _Visible | None = None
    sizes: list[Size] | None = None
    if callable(node_size):
        vis = _visible(graph, mode)
        sizes = _item_sizes(vis, node_size)
        size_key: Hashable = ("sizes", tuple(sizes))
    else:
        size_key = _size_key(graph, node_size)
    if previous is not None and previous.hgap != hgap:
        previous = None
    after = None if previous is None else layout_digest(previous)
    key = (version, mode, float(hgap), float(vgap), maxiter, straight, size_key, float(box_gap), after)
    found = _cache_get(key)
    if found is not None:
        return found
    with _no_gc():
        if vis is None:
            vis = _visible(graph, mode)
        if sizes is None and node_size is not None:
            sizes = _item_sizes(vis, node_size)
        widths = None if sizes is None else [w for w, _ in sizes]
        pitch = vgap if not sizes else max(vgap, max(h for _, h in sizes) + box_gap)
        placement = _place(vis, hgap, maxiter, previous, straight, widths, box_gap)
        layout = _assemble(vis, placement, hgap, pitch, version, sizes, box_gap, node_size)
    _cache_put(key, layout)
    return layout


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: building many small tuples otherwise triggers it often."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
