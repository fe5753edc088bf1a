"""Make the first GraphView of a kernel wait less: a warm worker started early, nbformat deferred.

The first widget class taken from ``widgets`` (``from widgets import GraphView``) calls
:func:`warm_up`, which returns at once after:

- starting the warm worker in the background (:func:`explorer.isolation.worker.prestart`): the child
  process starts and imports what ``explorer.load`` runs there
  (:data:`explorer.onnx_adapter.PRESTART_IMPORTS`: shape inference, onnx) on the other core while
  the notebook goes on, so ``explorer.load``'s shape inference finds it ready;
- deferring :data:`DEFERRED_IMPORTS` (:func:`defer_import`). The first ``go.FigureWidget``
  imports ``plotly.basewidget`` -> ``plotly.io._renderers``, which imports ``nbformat``
  (only ``fig.show()`` uses it, to check its version); nbformat imports ``jsonschema``,
  whose format checkers import ``rfc3987_syntax``, which builds some 40 Lark grammars at
  import time: 2-5 s on a small machine (python-jsonschema/jsonschema#1428). Deferred,
  ``import nbformat`` returns at once and the real import happens on first use of the
  module (never, on the GraphView path).

Importing plotly's widget stack in a background thread instead was measured and dropped:
the import is pure Python, so it shared the GIL with ``explorer.load`` and the total did
not move (see docs/performance.md). Set ``EXPLORER_NO_WARMUP=1`` to skip both steps.

Examples
--------
>>> from widgets.warm import warm_up
>>> threads = warm_up()
>>> warm_up() == threads  # idempotent: the same threads, nothing started twice
True
>>> for thread in threads:
...     thread.join()
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import types
from collections.abc import Mapping

__all__ = ["DEFERRED_IMPORTS", "defer_import", "switched_off", "warm_plotly", "warm_up"]

#: Modules that plotly imports eagerly but the widgets never use (see the module docstring).
DEFERRED_IMPORTS: tuple[str, ...] = ("nbformat",)
_LOCK = threading.Lock()
_PLOTLY_LOCK = threading.Lock()
_THREADS: tuple[threading.Thread, ...] | None = None
_PLOTLY_WARM = False


def defer_import(name: str) -> bool:
    """Put a stand-in for module ``name`` in ``sys.modules`` that imports it on first use.

    This is :class:`importlib.util.LazyLoader`, plus one change: reading the stand-in's
    ``__spec__`` does not load it, because ``import name`` (and ``importlib.import_module``)
    read ``__spec__`` of a module already in ``sys.modules``; any other attribute loads the
    real module into the same object, so everyone who imported it sees the real thing.

    Parameters
    ----------
    name : str
        A top-level module or package.

    Returns
    -------
    bool
        True if the stand-in was installed; False if ``name`` is imported already or cannot
        be found (nothing changes then).

    Examples
    --------
    >>> import sys
    >>> defer_import("sys")  # imported already: left alone
    False
    >>> defer_import("no_such_module_here")
    False
    """
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return False
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)  # LazyLoader: makes ``module`` load on attribute access

    lazy_class = type(module)

    class _Deferred(lazy_class):  # type: ignore[misc, valid-type]
        def __getattribute__(self, attr: str) -> object:
            if attr == "__spec__":  # what the import system checks: answer without loading
                return types.ModuleType.__getattribute__(self, "__dict__")["__spec__"]
            return super().__getattribute__(attr)

    module.__class__ = _Deferred
    return True


def switched_off(name: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the switch ``name`` (say ``EXPLORER_NO_WARMUP``) is set: any value but empty or ``0``.

    Examples
    --------
    >>> switched_off("EXPLORER_NO_WARMUP", {"EXPLORER_NO_WARMUP": "1"})
    True
    >>> switched_off("EXPLORER_NO_WARMUP", {"EXPLORER_NO_WARMUP": " 0 "}), switched_off("X", {})
    (False, False)
    """
    return environ.get(name, "").strip() not in ("", "0")


def warm_up() -> tuple[threading.Thread, ...]:
    """Defer nbformat and start the warm worker in the background (once per process).

    Returns
    -------
    tuple of threading.Thread
        The thread starting the worker (join it to wait; a daemon), or an empty tuple when
        ``EXPLORER_NO_WARMUP`` is set or workers are not reused. The same tuple on every call.

    Examples
    --------
    >>> from widgets.warm import warm_up
    >>> all(thread.daemon for thread in warm_up())
    True
    """
    global _THREADS
    with _LOCK:
        if _THREADS is not None:
            return _THREADS
        if switched_off("EXPLORER_NO_WARMUP"):
            _THREADS = ()
            return _THREADS
        for name in DEFERRED_IMPORTS:
            defer_import(name)
        from explorer.isolation import worker  # here, not at the top: a bare ``import widgets`` stays light
        from explorer.onnx_adapter import PRESTART_IMPORTS

        prestarted = worker.prestart(PRESTART_IMPORTS)
        _THREADS = () if prestarted is None else (prestarted,)
        return _THREADS


def warm_plotly() -> None:
    """Pay plotly's first-figure costs now: its default template and validator tables (two JSON
    files), and the modules of the trace types the graph figure uses (once per process).

    ``GraphView`` runs it while the worker infers shapes (``load``'s ``while_inferring``), so
    the first figure of a kernel does not pay them after the wait. Later calls return at once.

    Examples
    --------
    >>> from widgets.warm import warm_plotly
    >>> warm_plotly(); warm_plotly()
    """
    global _PLOTLY_WARM
    if _PLOTLY_WARM:
        return
    with _PLOTLY_LOCK:  # a second caller (the kernel's warm-up and a cell) waits, does not redo it
        if not _PLOTLY_WARM:
            _warm_plotly_now()
            _PLOTLY_WARM = True


def _warm_plotly_now() -> None:
    import plotly.graph_objects as go

    go.Figure(  # validated, as a FigureWidget validates the figure it is given
        data=[
            {"type": "scatter", "mode": "lines", "line": {"width": 1}, "marker": {"size": 1}},
            {"type": "scattergl", "mode": "markers", "marker": {"size": 1}},
            {"type": "scatter", "mode": "text", "fill": "toself", "text": [""], "textfont": {"size": 1}},
        ],
        layout={"xaxis": {"visible": False}, "legend": {"orientation": "h"}, "hoverlabel": {"align": "left"}},
    )
