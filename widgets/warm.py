"""Warm up, in the background, what the first GraphView of a kernel would otherwise wait for.

``import widgets`` calls :func:`warm_up`, which starts two daemon threads and returns at once:

- the warm worker (:func:`explorer.worker.prestart`): the child process starts and imports
  onnx while the notebook goes on, so ``explorer.load``'s shape inference finds it ready;
- plotly's widget stack (:data:`WIDGET_IMPORTS`): ``go.FigureWidget`` imports
  ``plotly.basewidget``, which imports ``plotly.io._renderers``, ``nbformat`` and
  ``jsonschema`` (seconds on a small machine, most of it building a grammar in
  ``rfc3987_syntax``). Imported here while the model loads, it is done (or partly done)
  when the figure widget is made. Python's import lock is per module: if the main thread
  needs a module this thread is importing, it waits for that one module, never for a
  half-initialised one.

Set the environment variable ``EXPLORER_NO_WARMUP=1`` to skip both.

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

import contextlib
import importlib
import os
import threading

from explorer import worker

__all__ = ["WIDGET_IMPORTS", "warm_up"]

#: Modules the first ``go.FigureWidget`` imports, heaviest chain first.
WIDGET_IMPORTS: tuple[str, ...] = ("plotly.basewidget", "plotly.graph_objs._figurewidget")
_LOCK = threading.Lock()
_THREADS: tuple[threading.Thread, ...] | None = None


def _import_widget_stack() -> None:
    for name in WIDGET_IMPORTS:
        with contextlib.suppress(ImportError):  # the main thread will raise it where it matters
            importlib.import_module(name)


def warm_up() -> tuple[threading.Thread, ...]:
    """Start the warm worker and import plotly's widget stack, both in the background.

    Returns
    -------
    tuple of threading.Thread
        The threads doing it (join them to wait; they are daemons). The same tuple on every
        call; empty when ``EXPLORER_NO_WARMUP`` is set.

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
        if os.environ.get("EXPLORER_NO_WARMUP", "").strip() not in ("", "0"):
            _THREADS = ()
            return _THREADS
        imports = threading.Thread(target=_import_widget_stack, name="widgets-warm-imports", daemon=True)
        imports.start()
        prestarted = worker.prestart()
        _THREADS = (imports,) if prestarted is None else (imports, prestarted)
        return _THREADS
