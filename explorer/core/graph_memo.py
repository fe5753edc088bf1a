"""Values derived from a graph, memoized beside it rather than on it: one explicit object per kind.

A :class:`PerGraph` computes its value for a graph object the first time it is asked and
keeps it while that graph lives (weak keys: a dropped snapshot drops its memo too). The
diff's weight digests and matcher view, and the details panel's tensor index, each have
one; nothing is attached to ModelGraph objects with ``setattr``.

Examples
--------
>>> from explorer import load
>>> calls = []
>>> node_count = PerGraph("node count", lambda g: calls.append(1) or len(g.nx))
>>> g = load("zoo:mlp")
>>> node_count(g) == node_count(g) == len(g.nx), len(calls)
(True, 1)
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["PerGraph"]

T = TypeVar("T")


class PerGraph(Generic[T]):
    """A memo of one value per graph object, computed by ``compute(graph)`` on first use.

    Parameters
    ----------
    name : str
        What it holds (for ``repr``).
    compute : callable
        ``graph -> value``; graphs are never edited after loading, so the value stays right.

    Examples
    --------
    >>> memo = PerGraph("ids", lambda g: sorted(g.nx))
    >>> from explorer import load
    >>> g = load("zoo:mlp")
    >>> memo(g) is memo(g), len(memo)
    (True, 1)
    >>> memo.forget(g); len(memo)
    0
    """

    def __init__(self, name: str, compute: Callable[[Any], T]) -> None:
        self.name = name
        self._compute = compute
        self._values: weakref.WeakKeyDictionary[Any, T] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __call__(self, graph: Any) -> T:
        with self._lock:
            if graph in self._values:
                return self._values[graph]
        value = self._compute(graph)  # outside the lock: computing may ask other memos
        with self._lock:
            return self._values.setdefault(graph, value)

    def forget(self, graph: Any | None = None) -> None:
        """Drop the value of ``graph``, or of every graph."""
        with self._lock:
            if graph is None:
                self._values.clear()
            else:
                self._values.pop(graph, None)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"PerGraph({self.name!r}, {len(self)} graphs)"
