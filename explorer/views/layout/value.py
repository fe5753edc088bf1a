"""The Layout value: where every visible item goes and how its edges are drawn, and its id types."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


__all__ = ["GROUP_PREFIX", "BOX_GAP", "group_id", "Layout"]


GROUP_PREFIX = "scope:"
"""Item-id prefix of a collapsed name scope: ``"scope:" + "/".join(scope)``."""


Point = tuple[float, float]


Edge = tuple[str, str]


Scope = tuple[str, ...]


Collapse = int | Iterable[Sequence[str]] | None


Size = tuple[float, float]


NodeSize = str | Mapping[str, Sequence[float]] | Callable[[Mapping[str, Any]], Sequence[float]] | None


BOX_GAP = 0.25
"""Least room (layout units) between two boxes of a layer, or a box and an edge beside it."""


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
    >>> from explorer.views.layout import layered
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
        >>> from explorer.views.layout import graph_fingerprint, layered
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
        >>> from explorer.views.layout import layered
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
        >>> from explorer.views.layout import layered
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
        >>> from explorer.views.layout import layered
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
        >>> from explorer.views.layout import layered
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
