"""The memo of layouts (least recently used out), keyed by :mod:`explorer.core.fingerprint`."""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from typing import TYPE_CHECKING

from explorer.core.fingerprint import graph_fingerprint
from explorer.views.layout.value import Layout, Scope

if TYPE_CHECKING:
    pass


__all__ = ["CACHE_SIZE", "graph_fingerprint", "layout_digest", "clear_cache"]


CACHE_SIZE = 16
"""How many layouts :func:`layered` keeps (least recently used first out)."""


_CACHE: OrderedDict[Hashable, Layout] = OrderedDict()


_UNDO: OrderedDict[int, tuple[weakref.ref[Layout], Layout, Scope]] = OrderedDict()


_LOCK = threading.Lock()


def layout_digest(layout: Layout) -> str:
    """A hash of where a layout puts every item (graph version, layers, x): its identity as a ``previous``.

    :func:`~explorer.views.layout.layered` keys its memo on it when given ``previous``, so a
    stable relayout depends on the layout it follows, not on which one was asked first.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.layout import layered
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
