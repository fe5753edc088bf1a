"""Keep the last few models a notebook opened by path, so running the same cell again skips the load.

``GraphView("model.onnx")`` run twice in a kernel loads the same file twice. `load_recent`
keeps the last `RECENT_MAX` graphs loaded from files, keyed by the file's identity (resolved
path, inode, size and modification time in ns): a file that changed on disk is loaded again.
A ModelGraph is never mutated (passes and views start from it and make new values), so two
views can share one. Anything other than a path (``"zoo:NAME"``, bytes, a ModelProto, a
torch module) goes straight to :func:`explorer.load`, as do calls with keyword arguments.

Examples
--------
>>> from explorer import zoo
>>> path = zoo.save("mlp")
>>> load_recent(path) is load_recent(str(path))
True
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from explorer import load
from explorer.core.graph import ModelGraph

__all__ = ["RECENT_MAX", "load_recent", "forget_recent"]

RECENT_MAX = 2
"""How many graphs loaded from files are kept."""

_RECENT: OrderedDict[tuple[Any, ...], ModelGraph] = OrderedDict()
_LOCK = threading.Lock()


def _file_key(source: Any) -> tuple[Any, ...] | None:
    if not isinstance(source, (str, os.PathLike)) or str(source).startswith("zoo:"):
        return None
    try:
        path = Path(source).resolve()
        stat = path.stat()
    except (OSError, ValueError):
        return None  # let load raise its own typed error
    return (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)


def load_recent(
    source: Any, *, while_inferring: Callable[[], Any] | None = None, **kwargs: Any
) -> ModelGraph:
    """:func:`explorer.load`, reusing the graph of a file loaded recently that has not changed.

    Parameters
    ----------
    source : path or any source of :func:`explorer.load`
        What to open.
    while_inferring : callable, optional
        As for :func:`explorer.load` (work to overlap with shape inference); called at once
        when the graph is reused.
    **kwargs
        Other :func:`explorer.load` options; with any of them the graph is loaded each time.

    Returns
    -------
    ModelGraph

    Examples
    --------
    >>> load_recent("zoo:mlp") is load_recent("zoo:mlp")  # not a file: loaded each time
    False
    """
    key = None if kwargs else _file_key(source)
    if key is not None:
        with _LOCK:
            graph = _RECENT.get(key)
            if graph is not None:
                _RECENT.move_to_end(key)
        if graph is not None:
            if while_inferring is not None:
                while_inferring()
            return graph
    graph = load(source, while_inferring=while_inferring, **kwargs)
    if key is not None:
        with _LOCK:
            _RECENT[key] = graph
            while len(_RECENT) > RECENT_MAX:
                _RECENT.popitem(last=False)
    return graph


def forget_recent() -> None:
    """Drop every kept graph (the next view of any file loads it again).

    Examples
    --------
    >>> forget_recent()
    """
    with _LOCK:
        _RECENT.clear()
