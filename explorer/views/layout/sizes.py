"""Room for boxes: item sizes from a ``node_size`` rule, and the default rule :func:`label_size`."""

from __future__ import annotations

import hashlib
import math
import weakref
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError
from explorer.views.layout.value import NodeSize, Size
from explorer.views.layout.visible import _Visible
from explorer.views.node_boxes import PX_PER_UNIT, node_box_size

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph


__all__ = ["PX_PER_UNIT", "label_size"]


def label_size(data: Mapping[str, Any]) -> Size:
    """Default ``(width, height)`` of an item's box in layout units: the size of the box the figure draws.

    The one rule is :func:`explorer.views.node_boxes.node_box_size` (header: the op
    type, a collapsed scope's ``"name · N ops"``, an input's name; body: weight
    shapes, key attributes, a scope's op mix, an input's shape), whose text fits
    at :data:`PX_PER_UNIT` pixels per unit. ``data`` is a node's data dict
    (``graph.nx.nodes[node]``) or, for a collapsed scope, ``{"kind": "group",
    "scope": ..., "members": ..., "ops": Counter of op types}``: what
    ``layered(..., node_size=f)`` passes to ``f``.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.node_boxes import node_box_size
    >>> g = load("zoo:resnet18")
    >>> label_size(g.nx.nodes["/conv1/Conv"]) == node_box_size(g.nx.nodes["/conv1/Conv"])
    True
    """
    return node_box_size(data)


def _item_data(vis: _Visible, i: int) -> Mapping[str, Any]:
    """What a ``node_size`` callable gets for visible item ``i``."""
    item = vis.items[i]
    members = vis.groups.get(item)
    if members is None:
        return vis.graph.nodes[item]
    nodes = vis.graph.nodes
    ops = Counter(  # graph inputs and outputs drawn in the box are no ops (visible._absorb_terminals)
        nodes[m].get("op_type") or nodes[m].get("kind", "?")
        for m in members
        if nodes[m].get("kind") not in ("input", "output")
    )
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
    for i in range(len(vis.items)) if indices is None else indices:
        item = vis.items[i]
        value = given.get(item)
        if value is None:
            value = rule(_item_data(vis, i))
        sizes.append(_pair(item, value))
    return sizes


_LABELS: weakref.WeakKeyDictionary[Any, tuple[int, str]] = weakref.WeakKeyDictionary()


def _pair(item: str, value: Any) -> Size:
    """``value`` as a ``(width, height)`` of finite numbers >= 0, or an error naming ``item``."""
    try:
        w, h = (float(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(f"node_size gave {value!r} for {item!r}; expected (width, height)") from None
    if not (math.isfinite(w) and math.isfinite(h) and w >= 0 and h >= 0):
        raise UsageError(f"node_size gave {value!r} for {item!r}; sizes must be finite and >= 0")
    return w, h


def _size_key(graph: ModelGraph, node_size: NodeSize) -> Hashable:
    """The cache-key part for ``node_size`` (a callable's key is the sizes it gives)."""
    if node_size is None:
        return None
    if isinstance(node_size, Mapping):
        return ("given", tuple((k, _pair(k, v)) for k, v in node_size.items()), _labels(graph))
    if node_size == "auto":
        return ("auto", _labels(graph))
    raise TypeError(f"node_size must be None, 'auto', a mapping or a callable, not {node_size!r}")


def _labels(graph: ModelGraph) -> str:
    """Hash of what :func:`label_size` reads (ops, attributes, weights, I/O names and shapes), memoized."""
    g = graph.nx
    known = _LABELS.get(g)
    if known is not None and known[0] == g.number_of_nodes():
        return known[1]
    digest = hashlib.blake2b(digest_size=16)
    for node, data in g.nodes(data=True):
        weights = ",".join(f"{w.shape}{w.values}" for w in data.get("weights") or ())
        digest.update(f"{node}\x1f{data.get('op_type')}\x1f{data.get('name')}\x1f{weights}".encode())
        digest.update(repr(data.get("attributes")).encode())
        digest.update(f"\x1f{data.get('shape')}\x1e".encode())
    value = digest.hexdigest()
    _LABELS[g] = (g.number_of_nodes(), value)
    return value
