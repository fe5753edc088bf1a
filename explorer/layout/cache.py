"""Graph fingerprints (a graph's *version*) and the memo of layouts (least recently used out)."""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from .value import Layout, Scope

if TYPE_CHECKING:
    from ..graph import ModelGraph


__all__ = ["CACHE_SIZE", "graph_fingerprint", "layout_digest", "clear_cache"]


CACHE_SIZE = 16
"""How many layouts :func:`layered` keeps (least recently used first out)."""


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


def layout_digest(layout: Layout) -> str:
    """A hash of where a layout puts every item (graph version, layers, x): its identity as a ``previous``.

    :func:`~explorer.layout.layered` keys its memo on it when given ``previous``, so a
    stable relayout depends on the layout it follows, not on which one was asked first.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.layout import layered
    >>> g = load("zoo:resnet18")
    >>> layout_digest(layered(g)) == layout_digest(layered(load("zoo:resnet18")))
    True
    >>> layout_digest(layered(g)) == layout_digest(layered(g, collapse=1))
    False
    """
    digest = hashlib.blake2b(layout.version.encode(), digest_size=16)
    layers = layout.layers
    rows = sorted(f"{item}\x1f{layers.get(item, 0)}\x1f{x:.6g}" for item, (x, _) in layout.positions.items())
    digest.update("\x1e".join(rows).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


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
