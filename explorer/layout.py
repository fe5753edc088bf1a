"""Layered (Sugiyama) layout of a ModelGraph, with collapsible name-scope groups.

The layout runs top to bottom in data-flow order, in five steps:

1. *Layers*, computed here in linear time: longest path from the inputs, then
   every item pulled down to just above its first (highest) consumer, so
   nodes fed only by weights or constants sit next to their consumer instead
   of at the top with edges spanning the whole graph.
2. *Order and x*: python-igraph's C implementation of the Sugiyama method
   (``Graph.layout_sugiyama(layers=..., maxiter=...)``) orders every layer
   and places it with Brandes-Koepf. igraph 1.0 returns the bends of long
   edges (the dummy vertices of its extended graph) as ``edge_routing``;
   they become one bend point per layer crossed, so long edges route around
   items.
3. *Clean-up* (Python, only where needed): vertices igraph put on the same
   spot are pushed apart, and around the layers where edges still cross, our
   own Graphviz-style sweeps (median ordering plus neighbour swaps, keeping
   the best) remove crossings igraph's plain barycenter sweeps leave.
4. *Straight main paths* (``straight=True``, the default): keeping every
   layer's order (so the crossings stay as they are), x is chosen again so
   that each op sits directly below its main producer (a SiLU block
   ``Conv -> Sigmoid -> Mul`` is one column, a ResNet block's and a
   transformer layer's main path one straight line), long edges run down as
   straight side lanes beside what they skip, and edges from one item share
   a lane while they run side by side (:func:`_straighten`).
5. *Stability* (with ``previous=``): items and bends present in the previous
   version keep their layer and x where possible.

Coordinates: ``x`` grows to the right; ``y = -layer * vgap``, so the first
layer is at ``y = 0`` and data flows towards negative ``y``. A plotly figure
can use the positions as they are (no reversed axis) and the graph reads top
to bottom. These are *layout units*: by default neighbours in a layer are at
least ``hgap = 1`` apart and layers ``vgap = 1``. With ``node_size=`` every
item gets a box (``width, height`` in the same units, centred on its
position, in :attr:`Layout.sizes`) and the spacing grows so that boxes never
overlap and edges pass them with ``box_gap`` to spare; :func:`label_size` is
the default size rule, which fits 11 px text at :data:`PX_PER_UNIT` pixels
per unit.

Name scopes (``('encoder', 'layers.0', 'self_attn')``) can be collapsed into
one box each: a visible *item* is either a node id or a group id
``"scope:encoder/layers.0"``. :func:`auto_collapse` picks a depth that keeps a
big model to a few hundred items; :func:`expand` and :func:`collapse_group`
open and close one group without laying the whole graph out again.

Every walk is iterative (no recursion), so 100k-node chains lay out.

Examples
--------
>>> from explorer import load
>>> lay = layered(load("zoo:mlp"))
>>> lay.positions["input:input"]
(0.0, 0.0)
>>> all(lay.layers[u] < lay.layers[v] for u, v in lay.edges)
True
>>> count_crossings(lay)
0
"""

from __future__ import annotations

import gc
import hashlib
import math
import threading
import weakref
from bisect import bisect_left, bisect_right, insort
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from itertools import groupby, pairwise
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import igraph
import numpy as np

if TYPE_CHECKING:
    import networkx as nx
    import pandas as pd

    from .graph import ModelGraph

__all__ = [
    "GROUP_PREFIX",
    "Layout",
    "layered",
    "count_crossings",
    "auto_collapse",
    "expand",
    "collapse_group",
    "graph_fingerprint",
    "group_id",
    "clear_cache",
    "CACHE_SIZE",
    "MAXITER",
    "BOX_GAP",
    "PX_PER_UNIT",
    "label_size",
]

GROUP_PREFIX = "scope:"
"""Item-id prefix of a collapsed name scope: ``"scope:" + "/".join(scope)``."""

CACHE_SIZE = 16
"""How many layouts :func:`layered` keeps (least recently used first out)."""

MAXITER = 20
"""igraph's crossing-reduction sweeps; our own sweeps (:func:`_refine`) finish the job."""

_WHOLE_GRAPH_MINCROSS = 6000
"""Up to this many vertices (items plus bends), our crossing reduction sweeps the whole graph."""

Point = tuple[float, float]
Edge = tuple[str, str]
Scope = tuple[str, ...]
Collapse = int | Iterable[Sequence[str]] | None
Size = tuple[float, float]
NodeSize = str | Mapping[str, Sequence[float]] | Callable[[Mapping[str, Any]], Sequence[float]] | None

BOX_GAP = 0.25
"""Least room (layout units) between two boxes of a layer, or a box and an edge beside it."""

PX_PER_UNIT = 80.0
"""Pixels per layout unit at which :func:`label_size` boxes fit their text (11 px header, 9 px body);
the reading zoom of ``explorer.node_boxes`` (on the drawing branch) uses the same value."""


def group_id(scope: Sequence[str]) -> str:
    """Return the item id of a collapsed name scope.

    Examples
    --------
    >>> group_id(("encoder", "layers.0"))
    'scope:encoder/layers.0'
    """
    return GROUP_PREFIX + "/".join(scope)


@dataclass(frozen=True)
class Layout:
    """Where every visible item of a ModelGraph goes, and how its edges are drawn.

    Treat the dicts as read-only: :func:`layered` caches and shares layouts.

    Attributes
    ----------
    positions : dict
        Visible item (node id or group id) -> ``(x, y)``, with
        ``y = -layer * vgap`` (0 at the top, negative below).
    layers : dict
        Visible item -> layer index (0 at the top).
    edges : tuple of (str, str)
        Visible edges in data-flow direction, without self-loops or duplicates.
    edge_points : dict
        Edge -> polyline from source to target, endpoints included, with one
        point per layer crossed (the bends that route long edges around items).
    edge_tensors : dict
        Edge -> names of the tensors it stands for.
    groups : dict
        Group id -> member node ids (graph order).
    scopes : dict
        Group id -> the collapsed scope tuple.
    kinds : dict
        Visible item -> node kind (``"op"``, ``"input"``, ...) or ``"group"``.
    collapsed : frozenset of tuple
        The collapsed scopes; ``layered(graph, collapse=layout.collapsed)``
        shows the same items.
    back_edges : frozenset of (str, str)
        Edges drawn upwards: collapsing scopes can close a cycle (``A -> b -> A``);
        one edge of each cycle then points up. Empty for an uncollapsed graph.
    version : str
        :func:`graph_fingerprint` of the graph laid out.
    hgap, vgap : float
        Least distance between the centres of neighbours in a layer; distance
        between layers (raised, when boxes are taller, to the tallest box plus
        ``box_gap``).
    sizes : dict
        Visible item -> ``(width, height)`` of its box in layout units (the
        units of ``positions``), centred on its position; empty when items
        were laid out as points (``node_size=None``).
    box_gap : float
        Least room kept between two boxes of a layer, and between a box and an
        edge passing it.
    node_size : None, "auto", mapping or callable
        The size rule the layout was made with (see :func:`layered`);
        :func:`expand` and :func:`collapse_group` size new items with it.

    Examples
    --------
    >>> from explorer import load
    >>> lay = layered(load("zoo:resnet18"), collapse=1)
    >>> lay.kinds["scope:layer1"], len(lay.groups["scope:layer1"]) > 10
    ('group', True)
    """

    positions: dict[str, Point]
    layers: dict[str, int]
    edges: tuple[Edge, ...]
    edge_points: dict[Edge, tuple[Point, ...]]
    edge_tensors: dict[Edge, tuple[str, ...]]
    groups: dict[str, tuple[str, ...]]
    scopes: dict[str, Scope]
    kinds: dict[str, str]
    collapsed: frozenset[Scope]
    back_edges: frozenset[Edge] = frozenset()
    version: str = ""
    hgap: float = 1.0
    vgap: float = 1.0
    sizes: dict[str, Size] = field(default_factory=dict)
    box_gap: float = BOX_GAP
    node_size: NodeSize = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> tuple[str, tuple[Scope, ...]]:
        """``(version, sorted collapsed scopes)``: which graph and which view this is.

        Examples
        --------
        >>> from explorer import load
        >>> g = load("zoo:mlp")
        >>> layered(g).key == (graph_fingerprint(g), ())
        True
        """
        return self.version, tuple(sorted(self.collapsed))

    @cached_property
    def item_of(self) -> dict[str, str]:
        """Node id -> the visible item that shows it (itself, or its group).

        Examples
        --------
        >>> from explorer import load
        >>> lay = layered(load("zoo:mlp"), collapse=1)
        >>> lay.item_of["/Flatten"]
        '/Flatten'
        """
        found = {item: item for item in self.positions if item not in self.groups}
        for gid, members in self.groups.items():
            found.update(dict.fromkeys(members, gid))
        return found

    def bbox(self) -> tuple[float, float, float, float]:
        """Return ``(xmin, ymin, xmax, ymax)`` over items and edge bends.

        Examples
        --------
        >>> from explorer import load
        >>> xmin, ymin, xmax, ymax = layered(load("zoo:mlp")).bbox()
        >>> ymax, ymin < 0
        (0.0, True)
        """
        xs = [p[0] for p in self.positions.values()]
        ys = [p[1] for p in self.positions.values()]
        for points in self.edge_points.values():
            xs.extend(p[0] for p in points)
            ys.extend(p[1] for p in points)
        if not xs:
            return 0.0, 0.0, 0.0, 0.0
        return min(xs), min(ys), max(xs), max(ys)

    def to_frame(self) -> pd.DataFrame:
        """Return one row per visible item: ``item, x, y, layer, kind, size``.

        ``size`` is the number of nodes the item stands for (1 for a node).

        Examples
        --------
        >>> from explorer import load
        >>> layered(load("zoo:mlp")).to_frame().columns.tolist()
        ['item', 'x', 'y', 'layer', 'kind', 'size']
        """
        import pandas as pd

        items = list(self.positions)
        return pd.DataFrame(
            {
                "item": items,
                "x": [self.positions[i][0] for i in items],
                "y": [self.positions[i][1] for i in items],
                "layer": [self.layers[i] for i in items],
                "kind": [self.kinds[i] for i in items],
                "size": [len(self.groups.get(i, (i,))) for i in items],
            }
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict: items, edges with their polylines, groups.

        Examples
        --------
        >>> import json
        >>> from explorer import load
        >>> d = layered(load("zoo:mlp")).to_dict()
        >>> sorted(d)
        ['collapsed', 'edges', 'groups', 'hgap', 'items', 'version', 'vgap']
        >>> len(json.dumps(d)) > 0
        True
        """
        return {
            "version": self.version,
            "collapsed": ["/".join(s) for s in sorted(self.collapsed)],
            "hgap": self.hgap,
            "vgap": self.vgap,
            "items": [
                {
                    "id": item,
                    "x": x,
                    "y": y,
                    "layer": self.layers[item],
                    "kind": self.kinds[item],
                    "size": len(self.groups.get(item, (item,))),
                    "width": self.sizes.get(item, (0.0, 0.0))[0],
                    "height": self.sizes.get(item, (0.0, 0.0))[1],
                }
                for item, (x, y) in self.positions.items()
            ],
            "edges": [
                {
                    "source": u,
                    "target": v,
                    "tensors": list(self.edge_tensors.get((u, v), ())),
                    "points": [list(p) for p in self.edge_points[(u, v)]],
                    "back": (u, v) in self.back_edges,
                }
                for u, v in self.edges
            ],
            "groups": {gid: list(members) for gid, members in self.groups.items()},
        }


# --------------------------------------------------------------------------- fingerprints and cache

_FINGERPRINTS: weakref.WeakKeyDictionary[Any, tuple[int, int, str]] = weakref.WeakKeyDictionary()
_CACHE: OrderedDict[Hashable, Layout] = OrderedDict()
_UNDO: OrderedDict[int, tuple[weakref.ref[Layout], Layout, Scope]] = OrderedDict()
_LOCK = threading.Lock()


def graph_fingerprint(graph: ModelGraph) -> str:
    """Return a hash of the node ids, kinds, scopes and edges: the graph's *version*.

    Two snapshots with the same nodes and edges have the same fingerprint,
    whatever object holds them. The value is memoized per networkx graph
    object (recomputed if its number of nodes or of connected node pairs
    changes; ModelGraphs are not meant to be edited in place).

    Examples
    --------
    >>> from explorer import load
    >>> graph_fingerprint(load("zoo:mlp")) == graph_fingerprint(load("zoo:mlp"))
    True
    >>> len(graph_fingerprint(load("zoo:mlp")))
    32
    """
    g = graph.nx
    counts = (g.number_of_nodes(), sum(len(nbrs) for _, nbrs in g.adjacency()))
    known = _FINGERPRINTS.get(g)
    if known is not None and known[:2] == counts:
        return known[2]
    digest = hashlib.blake2b(digest_size=16)
    nodes = sorted(f"{n}\x1f{d.get('kind')}\x1f{'/'.join(d.get('scope', ()))}" for n, d in g.nodes(data=True))
    digest.update("\x1e".join(nodes).encode("utf-8", "surrogatepass"))
    edges = sorted(f"{u}\x1f{v}\x1f{k}" for u, v, k in g.edges(keys=True))
    digest.update(b"\x1d" + "\x1e".join(edges).encode("utf-8", "surrogatepass"))
    value = digest.hexdigest()
    _FINGERPRINTS[g] = (*counts, value)
    return value


def clear_cache() -> None:
    """Forget every cached layout.

    Examples
    --------
    >>> clear_cache()
    """
    with _LOCK:
        _CACHE.clear()
        _UNDO.clear()


def _cache_get(key: Hashable) -> Layout | None:
    with _LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
        return found


def _cache_put(key: Hashable, layout: Layout) -> None:
    with _LOCK:
        _CACHE[key] = layout
        _CACHE.move_to_end(key)
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)


def _remember_expansion(child: Layout, parent: Layout, scope: Scope) -> None:
    with _LOCK:
        _UNDO[id(child)] = (weakref.ref(child), parent, scope)
        while len(_UNDO) > CACHE_SIZE:
            _UNDO.popitem(last=False)


def _expanded_from(child: Layout, scope: Scope) -> Layout | None:
    with _LOCK:
        entry = _UNDO.get(id(child))
    if entry is None or entry[0]() is not child or entry[2] != scope:
        return None
    return entry[1]


# --------------------------------------------------------------------------- visible graph


@dataclass
class _Visible:
    """The graph as drawn: items (nodes or groups) and deduplicated edges between them."""

    items: list[str]
    kinds: list[str]
    index: dict[str, int]
    item_of: dict[str, str]
    edges: list[tuple[int, int]]
    tensors: list[tuple[str, ...]]
    groups: dict[str, tuple[str, ...]]
    scopes: dict[str, Scope]
    collapsed: frozenset[Scope]
    graph: nx.MultiDiGraph = field(repr=False)


def _normalize_collapse(collapse: Collapse) -> int | frozenset[Scope] | None:
    if collapse is None:
        return None
    if isinstance(collapse, bool):
        raise TypeError("collapse must be None, a depth (int >= 1) or an iterable of scope tuples")
    if isinstance(collapse, int):
        if collapse < 1:
            raise ValueError(f"collapse depth must be at least 1, got {collapse}")
        return collapse
    if isinstance(collapse, str):
        raise TypeError("collapse must be None, a depth or an iterable of scope tuples, not a string")
    return frozenset(tuple(s) for s in collapse if len(s) > 0)


def _group_scope(scope: Scope, collapse: int | frozenset[Scope] | None) -> Scope | None:
    """The collapsed scope a node with this scope is drawn in, or None when it is drawn itself."""
    if collapse is None or not scope:
        return None
    if isinstance(collapse, int):
        return scope[:collapse] if len(scope) >= collapse else None
    for depth in range(1, len(scope) + 1):
        if scope[:depth] in collapse:
            return scope[:depth]
    return None


def _visible(graph: ModelGraph, collapse: int | frozenset[Scope] | None) -> _Visible:
    g = graph.nx
    memo: dict[Scope, Scope | None] = {}
    items: list[str] = []
    kinds: list[str] = []
    index: dict[str, int] = {}
    item_of: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    scopes: dict[str, Scope] = {}
    node_group: dict[str, Scope | None] = {}
    for node, data in g.nodes(data=True):
        scope = data.get("scope", ())
        if scope not in memo:
            memo[scope] = _group_scope(scope, collapse)
        node_group[node] = memo[scope]
    sizes = Counter(node_group.values())
    for node, data in g.nodes(data=True):
        group = node_group[node]
        if group is not None and sizes[group] == 1:
            group = None  # a box of one node is just that node
        if group is None:
            item, kind = node, data.get("kind", "op")
        else:
            item, kind = group_id(group), "group"
            if item not in members:
                members[item] = []
                scopes[item] = group
            members[item].append(node)
        if item not in index:
            index[item] = len(items)
            items.append(item)
            kinds.append(kind)
        item_of[node] = item
    pairs: dict[tuple[int, int], list[str]] = {}
    for u, nbrs in g.adjacency():
        a = index[item_of[u]]
        for v, keys in nbrs.items():
            b = index[item_of[v]]
            if a != b:
                pairs.setdefault((a, b), []).extend(keys)
    collapsed = collapse if isinstance(collapse, frozenset) else frozenset(scopes.values())
    return _Visible(
        items=items,
        kinds=kinds,
        index=index,
        item_of=item_of,
        edges=list(pairs),
        tensors=[tuple(dict.fromkeys(names)) for names in pairs.values()],
        groups={gid: tuple(m) for gid, m in members.items()},
        scopes=scopes,
        collapsed=collapsed,
        graph=g,
    )


def auto_collapse(
    graph: ModelGraph, max_items: int = 300, *, min_items: int = 20, hard_max: int = 1000
) -> int | None:
    """Choose a collapse depth that keeps the view to at most ``max_items`` items.

    Returns ``None`` when the graph already has at most ``max_items`` nodes;
    otherwise the deepest (most detailed) depth whose view fits, or 1 (the
    most collapsed view) when none does. When the depth that fits shows fewer
    than ``min_items`` items (a 50k-node transformer at depth 1 is four boxes:
    input, embeddings, encoder, output), the next depth is taken if it stays
    under ``hard_max`` (the encoder's layers, one box each).

    Parameters
    ----------
    graph : ModelGraph
        The graph.
    max_items : int
        Most visible items (nodes plus boxes) wanted.
    min_items : int
        Fewer items than this is too coarse to be useful.
    hard_max : int
        Most items accepted when going one level finer than ``max_items`` allows.

    Returns
    -------
    int or None
        A value for ``layered(graph, collapse=...)``.

    Examples
    --------
    >>> from explorer import load
    >>> auto_collapse(load("zoo:mlp")) is None
    True
    >>> auto_collapse(load("zoo:transformer"), max_items=30)
    3
    """
    g = graph.nx
    if g.number_of_nodes() <= max_items:
        return None
    by_scope = Counter(scope for _, scope in g.nodes(data="scope", default=()))
    deepest = max((len(s) for s in by_scope), default=0)
    for depth in range(deepest, 0, -1):
        if _items_at_depth(by_scope, depth) <= max_items:
            finer = depth + 1
            if (
                _items_at_depth(by_scope, depth) < min_items
                and finer <= deepest
                and _items_at_depth(by_scope, finer) <= hard_max
            ):
                return finer
            return depth
    return 1


def _items_at_depth(by_scope: Counter[Scope], depth: int) -> int:
    boxes = {scope[:depth] for scope in by_scope if len(scope) >= depth}
    return len(boxes) + sum(count for scope, count in by_scope.items() if len(scope) < depth)


# --------------------------------------------------------------------------- box sizes

_HEADER_CHAR = 6.6  # px per character of the 11 px header, at PX_PER_UNIT
_BODY_CHAR = 5.4  # px per character of a 9 px body line
_HEADER_PX, _LINE_PX, _PAD_PX, _SIDE_PX, _MIN_PX = 18.0, 12.0, 6.0, 8.0, 56.0
_LINE_CHARS = 26


def _dims(shape: Sequence[Any] | None) -> str:
    if shape is None:
        return "?"
    return "x".join("?" if d is None else str(d) for d in shape) if len(shape) else "scalar"


def label_size(data: Mapping[str, Any]) -> Size:
    """Default ``(width, height)`` of an item's box in layout units, from its label text.

    The box has a header line (the op type; a collapsed scope's
    ``"name · N ops"``; an input's or output's name) and body lines (an op's
    weight shapes, at most two; a scope's op mix, one line; an input's
    shape). At :data:`PX_PER_UNIT` pixels per unit, an 11 px header and 9 px
    body text fit. ``data`` is a node's data dict (``graph.nx.nodes[node]``)
    or, for a collapsed scope, ``{"kind": "group", "scope": ..., "members":
    ..., "ops": Counter of op types}``: what ``layered(..., node_size=f)``
    passes to ``f``.

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:resnet18")
    >>> w, h = label_size(g.nx.nodes["/conv1/Conv"])
    >>> round(w, 3), round(h, 3)
    (0.875, 0.45)
    >>> label_size({"kind": "op", "op_type": "Relu"})
    (0.7, 0.225)
    """
    kind = data.get("kind", "op")
    body: list[str] = []
    if kind == "group":
        scope = data.get("scope") or ("?",)
        header = f"{scope[-1]} · {len(data.get('members') or ())} ops"
        ops = Counter(data.get("ops") or {})
        mix = "  ".join(f"{op} x{count}" for op, count in ops.most_common(4))
        if mix:
            body.append(mix if len(mix) <= _LINE_CHARS else mix[: _LINE_CHARS - 1] + "…")
    elif kind == "op":
        header = str(data.get("op_type") or "?")
        shapes = list(dict.fromkeys(_dims(w.shape) for w in data.get("weights") or ()))
        body.extend(f"W {shape}" for shape in shapes[:2])
    else:
        header = str(data.get("name") or kind)[:28]
        if data.get("shape") is not None:
            body.append(_dims(data["shape"]))
    width = max(_MIN_PX, len(header) * _HEADER_CHAR + 2 * _SIDE_PX)
    if body:
        width = max(width, max(len(line) for line in body) * _BODY_CHAR + 2 * _SIDE_PX)
    height = _HEADER_PX + (len(body) * _LINE_PX + _PAD_PX if body else 0.0)
    return width / PX_PER_UNIT, height / PX_PER_UNIT


def _item_data(vis: _Visible, i: int) -> Mapping[str, Any]:
    """What a ``node_size`` callable gets for visible item ``i``."""
    item = vis.items[i]
    members = vis.groups.get(item)
    if members is None:
        return vis.graph.nodes[item]
    nodes = vis.graph.nodes
    ops = Counter(nodes[m].get("op_type") or nodes[m].get("kind", "?") for m in members)
    return {"kind": "group", "scope": vis.scopes[item], "members": list(members), "ops": ops}


def _item_sizes(vis: _Visible, node_size: NodeSize, indices: Iterable[int] | None = None) -> list[Size]:
    """``(width, height)`` of the visible items (all, or ``indices``) under a ``node_size`` rule.

    Values that are not two finite numbers >= 0 are refused with an error naming the item.
    """
    given: Mapping[str, Sequence[float]] = {}
    rule: Callable[[Mapping[str, Any]], Sequence[float]] = label_size
    if isinstance(node_size, Mapping):
        given = node_size
    elif callable(node_size):
        rule = node_size
    elif node_size != "auto":
        raise TypeError(f"node_size must be None, 'auto', a mapping or a callable, not {node_size!r}")
    sizes: list[Size] = []
    nodes = vis.graph.nodes
    memo: dict[Hashable, Size] = {}  # label_size of ops by (op type, weight shapes): many ops look alike
    for i in range(len(vis.items)) if indices is None else indices:
        item = vis.items[i]
        value = given.get(item)
        if value is None and rule is label_size and item not in vis.groups:
            data = nodes[item]
            if data.get("kind", "op") == "op":
                key = (data.get("op_type"), *(w.shape for w in data.get("weights") or ()))
                found = memo.get(key)
                if found is None:
                    found = memo[key] = label_size(data)
                sizes.append(found)
                continue
        if value is None:
            value = rule(_item_data(vis, i))
        try:
            w, h = (float(v) for v in value)
        except (TypeError, ValueError):
            raise TypeError(f"node_size gave {value!r} for {item!r}; expected (width, height)") from None
        if not (math.isfinite(w) and math.isfinite(h) and w >= 0 and h >= 0):
            raise ValueError(f"node_size gave {value!r} for {item!r}; sizes must be finite and >= 0")
        sizes.append((w, h))
    return sizes


_LABELS: weakref.WeakKeyDictionary[Any, tuple[int, str]] = weakref.WeakKeyDictionary()


def _size_key(graph: ModelGraph, node_size: NodeSize) -> Hashable:
    """The cache-key part for ``node_size`` (a callable's key is the sizes it gives)."""
    if node_size is None:
        return None
    if isinstance(node_size, Mapping):
        return ("given", tuple((k, tuple(float(x) for x in v)) for k, v in node_size.items()), _labels(graph))
    if node_size == "auto":
        return ("auto", _labels(graph))
    raise TypeError(f"node_size must be None, 'auto', a mapping or a callable, not {node_size!r}")


def _labels(graph: ModelGraph) -> str:
    """Hash of what :func:`label_size` reads (op types, weight shapes, I/O names and shapes), memoized."""
    g = graph.nx
    known = _LABELS.get(g)
    if known is not None and known[0] == g.number_of_nodes():
        return known[1]
    digest = hashlib.blake2b(digest_size=16)
    for node, data in g.nodes(data=True):
        weights = ",".join(_dims(w.shape) for w in data.get("weights") or ())
        digest.update(f"{node}\x1f{data.get('op_type')}\x1f{data.get('name')}\x1f{weights}".encode())
        digest.update(f"\x1f{data.get('shape')}\x1e".encode())
    value = digest.hexdigest()
    _LABELS[g] = (g.number_of_nodes(), value)
    return value


# --------------------------------------------------------------------------- layering


def _adjacency(n: int, edges: Sequence[tuple[int, int]]) -> tuple[list[list[int]], list[list[int]]]:
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        succ[a].append(b)
        pred[b].append(a)
    return succ, pred


def _topological(
    n: int, succ: list[list[int]], pred: list[list[int]], rank: Callable[[], Sequence[float]]
) -> list[int]:
    """Kahn's algorithm; when a cycle blocks it, the waiting item of lowest ``rank()`` goes next.

    ``rank`` is called only when there is a cycle to break.
    """
    missing = [len(p) for p in pred]
    order = [i for i in range(n) if missing[i] == 0]
    placed = [False] * n
    for i in order:
        placed[i] = True
    by_rank: list[int] | None = None
    cursor = 0
    head = 0
    while len(order) < n:
        while head < len(order):
            for b in succ[order[head]]:
                missing[b] -= 1
                if missing[b] == 0 and not placed[b]:
                    placed[b] = True
                    order.append(b)
            head += 1
        if len(order) == n:
            break
        if by_rank is None:
            by_rank = sorted(range(n), key=rank().__getitem__)
        while placed[by_rank[cursor]]:
            cursor += 1
        forced = by_rank[cursor]
        placed[forced] = True
        order.append(forced)
    return order


def _layering(
    n: int,
    edges: Sequence[tuple[int, int]],
    rank: Callable[[], Sequence[float]],
    floor: Sequence[int] | None = None,
    pinned: Sequence[bool] | None = None,
) -> tuple[list[int], list[bool]]:
    """Layers (longest path, then pulled down to the first consumer) and which edges point back.

    ``floor`` gives each item a lowest allowed layer (the previous layout's);
    ``pinned`` items are not pulled down.
    """
    succ, pred = _adjacency(n, edges)
    order = _topological(n, succ, pred, rank)
    where = [0] * n
    for position, i in enumerate(order):
        where[i] = position
    back = [where[a] > where[b] for a, b in edges]
    if any(back):
        succ, pred = _adjacency(
            n, [(b, a) if flip else (a, b) for (a, b), flip in zip(edges, back, strict=True)]
        )
    layer = list(floor) if floor is not None else [0] * n
    for a in order:
        below = layer[a] + 1
        for b in succ[a]:
            if layer[b] < below:
                layer[b] = below
    for a in reversed(order):
        if succ[a] and not (pinned is not None and pinned[a]):
            lowest = min(layer[b] for b in succ[a]) - 1
            if lowest > layer[a]:
                layer[a] = lowest
    return layer, back


def _rank_of(vis: _Visible) -> list[float]:
    """Position of each item's earliest member in a topological order of the full graph."""
    import networkx as nx

    position = {node: i for i, node in enumerate(nx.topological_sort(vis.graph))}
    rank = [math.inf] * len(vis.items)
    for node, item in vis.item_of.items():
        i = vis.index[item]
        rank[i] = min(rank[i], position[node])
    return rank


# --------------------------------------------------------------------------- placement


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
        return max(self.hgap, (a + b) / 2 + self.pad) if a or b else self.hgap

    def item_width(self, i: int) -> float:
        return self.width[i] if self.width else 0.0


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


def _slot_of(vis: _Visible, edge_map: Sequence[int] | None = None) -> Callable[[int], float]:
    """Edge index -> the lowest input slot its tensors have at the consumer (inf for boxes).

    ``edge_map`` turns the indices asked for into indices of ``vis.edges``.
    """
    g = vis.graph

    def slot(j: int) -> float:
        a, b = vis.edges[j if edge_map is None else edge_map[j]]
        u, v = vis.items[a], vis.items[b]
        if u in vis.groups or v in vis.groups or v not in g[u]:
            return math.inf
        return min((min(d.get("slots") or (math.inf,)) for d in g[u][v].values()), default=math.inf)

    return slot


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
        """Sweep from igraph's ordering and from a depth-first one; keep the best ordering found."""
        start = self.crossings()
        igraph_rows = {lay: list(self.rows[lay]) for lay in self.inner}
        best, best_rows = self._sweeps(iterations, start)
        if best > 0:
            self._set_rows(self._depth_first())
            found, rows = self._sweeps(iterations, self.crossings())
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

    def _sweeps(self, iterations: int, start: int) -> tuple[int, dict[int, list[int]]]:
        """Median/barycenter sweeps, alternately down and up, each followed by transposition."""
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
                    self.rows[lay], self.pos, self.up if downward else self.down, median=it % 8 < 4, flip=flip
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
    row: list[int], pos: dict[int, int], nbrs: dict[int, list[int]], median: bool, flip: bool
) -> None:
    """Sort a layer by the median (or barycenter) of its neighbours' places; lone entities stay put.

    Ties keep their order, or swap it with ``flip``.
    """
    keys: dict[int, float] = {}
    for e in row:
        near = sorted(pos[f] for f in nbrs.get(e, ()))
        if not near:
            continue
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


# --------------------------------------------------------------------------- straight main paths


def _straighten(graph: _Layers, slot: Callable[[int], float]) -> None:
    """Place every vertex (item or bend) again, keeping each layer's order, so main paths run straight.

    igraph's Brandes-Koepf placement balances four alignments and so bends
    chains sideways (a SiLU block ``Conv -> Sigmoid -> Mul`` zigzags). Here
    one alignment is chosen, by priority, and kept:

    1. Every vertex picks one *main* upper neighbour: a bend, the vertex above
       it on its own edge (so a long edge runs down as one straight lane); an
       item, a producer one layer up (the longest path) rather than the last
       bend of a long edge, the lowest input slot first (``Add(out, identity)``
       follows ``out``).
    2. Layer by layer, alignments are accepted best first (item to item, then
       along long edges, then the ends of long edges; among several consumers
       of one producer, the one whose own chain of main links goes furthest
       down, then the middle one) unless they would cross an accepted one or
       take an upper vertex already taken. Aligned vertices form *blocks*
       that share one x.
    3. Blocks are compacted to the left and to the right, keeping neighbours
       of a layer :meth:`_Placement.sep` apart (``hgap``, or half their widths
       plus ``box_gap`` when wider; bends of edges from the same item may share
       a lane: they are 0 apart), and the two results
       are averaged (both feasible, so the mean is too); then each block is
       pulled towards the median of what its edges connect to, inside the
       room its neighbours leave (:func:`_pull`).

    The order inside every layer is unchanged, so crossings stay as they were.
    """
    n = graph.n
    count = len(graph.layer)
    if count == 0:
        return
    placement = graph.placement
    top, bottom = graph.top, graph.bottom
    layer_of = np.asarray(graph.layer, dtype=np.int64)
    order = np.lexsort((np.asarray(graph.x), layer_of))
    row_of = layer_of[order]
    starts_row = np.ones(count, dtype=bool)
    starts_row[1:] = row_of[1:] != row_of[:-1]
    index = np.arange(count)
    pos = np.empty(count, dtype=np.int64)
    pos[order] = index - np.maximum.accumulate(np.where(starts_row, index, 0))
    pos_l = pos.tolist()

    # 1. the main upper neighbour of every vertex
    want = np.full(count, -1, dtype=np.int64)
    into_bend = bottom >= n
    want[bottom[into_bend]] = top[into_bend]
    segs = np.flatnonzero(~into_bend)
    ends = bottom[segs]
    single = np.bincount(ends, minlength=n)[ends] == 1
    want[ends[single]] = top[segs[single]]
    multi = segs[~single]
    if len(multi):
        multi = multi[np.argsort(bottom[multi], kind="stable")]
        lookup: dict[int, int] = {}
        pairs = zip(bottom[multi].tolist(), top[multi].tolist(), strict=True)
        for b, group in groupby(pairs, key=itemgetter(0)):
            tops = [t for _, t in group]
            direct = [t for t in tops if t < n]
            if len(direct) == 1:
                want[b] = direct[0]
            elif direct:
                if not lookup:
                    lookup = _edge_of_last_segment(graph)
                want[b] = min(direct, key=lambda u, b=b: (slot(lookup[u * count + b]), pos_l[u]))
            else:
                tops.sort(key=pos_l.__getitem__)
                want[b] = tops[(len(tops) - 1) // 2]
    prio = np.where(index >= n, np.where(want >= n, 2, 1), np.where(want < n, 3, 1))
    prio[want < 0] = 0
    want_l = want.tolist()
    order_l = order.tolist()

    # 2. alignment, best first, without crossings
    reach = [0] * count  # how far the chain of main links goes down from each vertex
    for v in reversed(order_l):
        u = want_l[v]
        if u >= 0 and reach[u] <= reach[v]:
            reach[u] = reach[v] + 1
    align = want.copy()
    claimed = want[want >= 0]
    shared = np.bincount(claimed, minlength=count) > 1
    wanted_sorted = want[order]
    cand = wanted_sorted >= 0
    cand_rows = row_of[cand]
    up_pos = pos[wanted_sorted[cand]]
    clash = (cand_rows[1:] == cand_rows[:-1]) & (up_pos[1:] <= up_pos[:-1])
    bad_rows = set(cand_rows[1:][clash].tolist())
    if bad_rows:
        central: dict[int, float] = {}
        claimants = np.flatnonzero((want >= 0) & shared[np.maximum(want, 0)])
        claimants = claimants[np.lexsort((pos[claimants], want[claimants]))].tolist()
        for _, group in groupby(claimants, key=want_l.__getitem__):
            vs = list(group)
            mid = (len(vs) - 1) / 2
            for i, v in enumerate(vs):
                central[v] = abs(i - mid)
        prio_l = prio.tolist()
        by_row: dict[int, list[int]] = {}
        for v in order[cand][np.isin(cand_rows, list(bad_rows))].tolist():
            by_row.setdefault(graph.layer[v], []).append(v)
        for vs in by_row.values():
            vs.sort(key=lambda v: (-prio_l[v], -reach[v], central.get(v, 0.0), pos_l[v]))
            ups: list[int] = []
            downs: list[int] = []
            for v in vs:
                pu, pv = pos_l[want_l[v]], pos_l[v]
                i = bisect_left(ups, pu)
                if (
                    (i < len(ups) and ups[i] == pu)
                    or (i > 0 and downs[i - 1] > pv)
                    or (i < len(downs) and downs[i] < pv)
                ):
                    align[v] = -1
                    continue
                ups.insert(i, pu)
                downs.insert(i, pv)
    root = np.where(align >= 0, align, index)
    while True:
        jumped = root[root]
        if np.array_equal(jumped, root):
            break
        root = jumped

    # 3. compaction of blocks: left, right, average; then pull
    source = np.full(count, -1, dtype=np.int64)
    bend_count = np.asarray([len(b) for b in placement.bends], dtype=np.int64)
    if count > n:
        sources = np.asarray([a for a, _ in placement.oriented], dtype=np.int64)
        source[n:] = np.repeat(sources, bend_count)
    same = ~starts_row[1:]
    a, b = order[:-1][same], order[1:][same]
    hgap = placement.hgap
    if placement.width:
        width = np.zeros(count)
        width[:n] = placement.width
        gap = np.maximum(hgap, (width[a] + width[b]) / 2 + placement.pad)
        gap[(width[a] == 0) & (width[b] == 0)] = hgap
    else:
        gap = np.full(len(a), hgap)
    gap[(source[a] >= 0) & (source[a] == source[b])] = 0.0
    blocks = np.flatnonzero(root == index)
    block_of = np.full(count, -1, dtype=np.int64)
    block_of[blocks] = np.arange(len(blocks))
    vb = block_of[root]
    pair = vb[a] * len(blocks) + vb[b]  # one constraint per pair of blocks: the largest gap
    by_pair = np.lexsort((gap, pair))
    pair, gap = pair[by_pair], gap[by_pair]
    last = np.ones(len(pair), dtype=bool)
    last[:-1] = pair[1:] != pair[:-1]
    keys, gaps = pair[last], gap[last]
    x = _compact(len(blocks), keys // len(blocks), keys % len(blocks), gaps)
    _pull(vb, top, bottom, keys // len(blocks), keys % len(blocks), gaps, x)
    xs = np.asarray(x)[vb]
    graph.x = xs.tolist()
    placement.x[:] = graph.x[:n]
    first = graph.first_bend
    for j, k in enumerate(bend_count.tolist()):
        if k:
            placement.bends[j] = graph.x[first[j] : first[j] + k]


def _compact(count: int, lefts: np.ndarray, rights: np.ndarray, gaps: np.ndarray) -> list[float]:
    """x of ``count`` blocks with ``x[right] - x[left] >= gap``: mean of leftmost and rightmost packing."""
    order = np.argsort(lefts, kind="stable")
    tails, lengths = rights[order].tolist(), gaps[order].tolist()
    offsets = np.searchsorted(lefts[order], np.arange(count + 1)).tolist()
    missing = np.bincount(rights, minlength=count).tolist()
    topo = [r for r in range(count) if missing[r] == 0]
    left = [0.0] * count
    head = 0
    while head < len(topo):
        r = topo[head]
        head += 1
        xr = left[r]
        for k in range(offsets[r], offsets[r + 1]):
            s = tails[k]
            if left[s] < xr + lengths[k]:
                left[s] = xr + lengths[k]
            missing[s] -= 1
            if missing[s] == 0:
                topo.append(s)
    span = max(left, default=0.0)
    right = [span] * count
    for r in reversed(topo):
        lo, hi = offsets[r], offsets[r + 1]
        if lo < hi:
            right[r] = min(right[tails[k]] - lengths[k] for k in range(lo, hi))
    return [(lx + rx) / 2 for lx, rx in zip(left, right, strict=True)]


def _edge_of_last_segment(graph: _Layers) -> dict[int, int]:
    """``top * count + bottom`` of each edge's last segment -> edge index."""
    count = len(graph.layer)
    oriented = np.asarray(graph.placement.oriented, dtype=np.int64).reshape(-1, 2)
    k = np.asarray([len(b) for b in graph.placement.bends], dtype=np.int64)
    last = np.where(k > 0, np.asarray(graph.first_bend, dtype=np.int64) + k - 1, oriented[:, 0])
    return dict(zip((last * count + oriented[:, 1]).tolist(), range(len(k)), strict=True))


def _pull(
    block: np.ndarray,
    top: np.ndarray,
    bottom: np.ndarray,
    lefts: np.ndarray,
    rights: np.ndarray,
    gaps: np.ndarray,
    x: list[float],
    passes: int = 3,
) -> None:
    """Move each block towards the median x of the blocks its edges connect it to, within its room.

    ``block`` is the block of every vertex; ``lefts[k]`` must stay ``gaps[k]``
    left of ``rights[k]``. Smaller blocks move first, as far as their
    neighbours in the layers allow (Gauss-Seidel, a few passes).
    """
    bt, bb = block[top], block[bottom]
    cut = bt != bb
    ends = np.concatenate([bt[cut], bb[cut]])
    others = np.concatenate([bb[cut], bt[cut]])
    if not len(ends):
        return
    by = np.argsort(ends, kind="stable")
    ends, others = ends[by], others[by]
    near: dict[int, list[int]] = {}
    bounds = np.flatnonzero(np.r_[True, ends[1:] != ends[:-1], True])
    others_l = others.tolist()
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        near[int(ends[lo])] = others_l[lo:hi]
    below: dict[int, list[tuple[int, float]]] = {}
    above: dict[int, list[tuple[int, float]]] = {}
    for a, b, g in zip(lefts.tolist(), rights.tolist(), gaps.tolist(), strict=True):
        below.setdefault(b, []).append((a, g))
        above.setdefault(a, []).append((b, g))
    size = np.bincount(block, minlength=len(x)).tolist()
    movers = [(r, near[r], below.get(r, ()), above.get(r, ())) for r in sorted(near, key=size.__getitem__)]
    for _ in range(passes):
        moved = False
        for r, others, lefts_r, rights_r in movers:
            xs = [x[o] for o in others]
            xs.sort()
            mid = len(xs) // 2
            target = xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2
            lo, hi = -math.inf, math.inf
            for a, g in lefts_r:
                if x[a] + g > lo:
                    lo = x[a] + g
            for b, g in rights_r:
                if x[b] - g < hi:
                    hi = x[b] - g
            new = hi if target > hi else lo if target < lo else target
            if lo <= hi and abs(new - x[r]) > 1e-9:
                x[r] = new
                moved = True
        if not moved:
            break


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
        collapse, gaps, options and sizes. The memo ignores ``previous``: a graph version seen
        before gets the same layout back, which is what stepping back and
        forth between snapshots wants.

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
        raise ValueError("node_size needs straight=True (igraph's own placement knows no box sizes)")
    version = graph_fingerprint(graph)
    vis: _Visible | None = None
    sizes: list[Size] | None = None
    if callable(node_size):
        vis = _visible(graph, mode)
        sizes = _item_sizes(vis, node_size)
        size_key: Hashable = ("sizes", tuple(sizes))
    else:
        size_key = _size_key(graph, node_size)
    key = (version, mode, float(hgap), float(vgap), maxiter, straight, size_key, float(box_gap))
    found = _cache_get(key)
    if found is not None:
        return found
    if previous is not None and previous.hgap != hgap:
        previous = None
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


# --------------------------------------------------------------------------- crossings


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


# --------------------------------------------------------------------------- expand / collapse


def _layer_of_y(y: float, vgap: float) -> int:
    return round(-y / vgap)


def _check_version(layout: Layout, graph: ModelGraph) -> str:
    version = graph_fingerprint(graph)
    if layout.version and layout.version != version:
        raise ValueError("the layout belongs to another version of the graph; call layered() for this one")
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
        raise ValueError(f"no node of the graph lies in scope {'/'.join(scope)!r}")
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
    room = _Placement([], [], [], [], [], pad=layout.box_gap, hgap=hgap)
    box_x = centre if all(abs(x - centre) >= room.sep(w, box_w) for x, w in taken) else fits[0][1]
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
