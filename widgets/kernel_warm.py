"""Warm a notebook's kernel as it starts, so its first GraphView waits only for its own model.

An IPython extension (``c.InteractiveShellApp.extensions``; the project's environment loads it
from ``etc/ipython/ipython_kernel_config.py``, which ``scripts/install_kernel_config.sh`` puts
there; loading it imports nothing but the standard library). When a
kernel starts for a document in JupyterLab (Jupyter's server names the document in
``JPY_SESSION_NAME``), it returns at once, so the kernel is ready as quickly as before, and a
background thread then pays, while the user reads the notebook, what the first
``GraphView`` of a kernel would otherwise pay in the cell:

- plotly's front-end bundle goes to the page first (:func:`widgets.plotly_bundle.bundle_widget`,
  which needs only ipywidgets and anywidget), and the page evaluates plotly.js (0.3 s in the
  browser for the partial bundle, 1 s for plotly's full one) while the kernel goes on;
- the warm worker starts (:func:`widgets.warm.warm_up`);
- the widgets and what they use import (numpy, onnx, networkx, plotly's widget stack: about
  0.5 s on a small machine);
- plotly's first-figure costs (:func:`widgets.warm.warm_plotly`);
- once the page has said that the bundle arrived (sent again if it has not: a widget opened
  before the page listened is lost), the first graph's costs: a tiny model is loaded (shape
  inference in the worker) into a whole ``GraphView`` that is never shown: the layouts, styles
  and CSS every view shares (:mod:`widgets.shared_models`) reach the page, and the view's own
  models are closed again.

A cell run meanwhile waits for what it needs (Python's import locks), never does it twice, and
stops the warm-up's optional steps (:func:`warm_kernel`'s ``stop``).
Kernels started elsewhere (nbclient, ``jupyter console``, a plain IPython) are left alone;
``EXPLORER_NO_KERNEL_WARM=1`` switches this off, ``EXPLORER_NO_WARMUP=1`` every warm-up.

Examples
--------
>>> from widgets import kernel_warm
>>> kernel_warm.should_warm({"JPY_SESSION_NAME": "/work/notebooks/00_tour.ipynb"})
True
>>> kernel_warm.should_warm({"JPY_SESSION_NAME": "x.ipynb", "EXPLORER_NO_WARMUP": "1"})
False
>>> kernel_warm.should_warm({})  # not a JupyterLab document's kernel
False
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from .warm import switched_off

__all__ = ["failure", "load_ipython_extension", "should_warm", "start_warming", "steps", "warm_kernel"]

_LOG = logging.getLogger(__name__)
_LOCK = threading.Lock()
_THREAD: threading.Thread | None = None
#: Set when the kernel starts running a cell (IPython's ``pre_run_cell`` event).
_CELL_STARTED = threading.Event()
#: Why the last warm-up failed (None: it did not); the first view then pays instead.
failure: BaseException | None = None
#: ``(step, time.time())`` as the warm-up went: "start", then each step of `warm_kernel` when done
#: ("page": the page said plotly's bundle arrived; "cell": a cell started).
steps: list[tuple[str, float]] = []
#: How long the warm-up waits for the page to confirm plotly's bundle (then once more, sent again).
PAGE_WAIT_S = 5.0


def should_warm(environ: Mapping[str, str]) -> bool:
    """Whether a kernel with this environment warms up: a JupyterLab document's, not switched off.

    Parameters
    ----------
    environ : mapping
        The kernel's environment (``os.environ``).

    Returns
    -------
    bool

    Examples
    --------
    >>> should_warm({"JPY_SESSION_NAME": "tour.ipynb", "EXPLORER_NO_WARMUP": "0"})
    True
    >>> should_warm({"JPY_SESSION_NAME": "tour.ipynb", "EXPLORER_NO_KERNEL_WARM": "1"})
    False
    """
    off = any(switched_off(name, environ) for name in ("EXPLORER_NO_WARMUP", "EXPLORER_NO_KERNEL_WARM"))
    return bool(environ.get("JPY_SESSION_NAME")) and not off


def warm_kernel(stop: threading.Event | None = None, page_wait_s: float | None = None) -> list[str]:
    """Pay the first GraphView's one-off costs now (see the module docstring); run in a thread.

    Parameters
    ----------
    stop : threading.Event, optional
        Set when a cell starts (the extension sets it): the steps left that the cell does not
        need at once (plotly's first-figure warm-up, the off-screen graph) are skipped, so they
        do not compete with the cell for the GIL. The imports and the bundle are always done:
        the cell needs them anyway.
    page_wait_s : float, optional
        Before the off-screen graph, wait this long for the page to say that plotly's bundle
        arrived, and send it again if not. A widget the kernel opens before the page listens to
        it never reaches the page, and the graph's shared layouts must (a later view refers to
        them). None: do not wait (no page).

    Returns
    -------
    list of str
        The steps done, in order.

    Examples
    --------
    >>> warm_kernel()  # a second call costs little: everything is imported and cached
    ['bundle', 'imports', 'plotly', 'graph']
    >>> stop = threading.Event(); stop.set()
    >>> warm_kernel(stop)
    ['bundle', 'imports']
    >>> warm_kernel(page_wait_s=0.1)  # no page here: no graph, whose widgets could be lost
    ['bundle', 'imports', 'plotly']
    """
    from .plotly_bundle import bundle_widget

    done: list[str] = []

    def mark(step: str) -> None:  # the steps returned, and the kernel's timeline of them
        done.append(step)
        steps.append((step, time.time()))

    bundle = bundle_widget()  # first (ipywidgets and anywidget only): the page evaluates plotly.js now
    mark("bundle")
    from . import GraphView  # the widget classes and everything they import; starts the worker
    from .warm import warm_plotly

    mark("imports")
    if stop is not None and stop.is_set():
        return done
    warm_plotly()
    mark("plotly")
    if page_wait_s is not None and not _page_has(bundle, page_wait_s):
        return done  # no page listens: the view's shared models could be lost too
    if stop is not None and stop.is_set():
        return done
    from explorer import load

    from .shared_models import close_own

    # a whole view, never shown: its code paths warm, and the layouts, styles and CSS that every
    # view shares reach the page now; its own models are closed again
    close_own(GraphView(load("zoo:mlp")))
    mark("graph")
    return done


def _page_has(bundle: Any, wait_s: float) -> bool:
    """Whether the page said plotly's bundle arrived within ``wait_s`` (sent again once if not)."""
    from .plotly_bundle import send_again

    for attempt in range(2):
        if bundle.arrived.wait(wait_s):
            steps.append(("page", time.time()))
            return True
        if attempt == 0:  # sent before the page listened: lost; the page listens by now
            bundle = send_again(bundle.key) or bundle
            steps.append(("bundle again", time.time()))
    return False


def _warm_quietly() -> None:
    global failure
    try:
        warm_kernel(_CELL_STARTED, PAGE_WAIT_S)
    except Exception as error:  # a warm-up never disturbs the notebook: the first view pays instead
        failure = error
        _LOG.warning("onnx-graph-explorer: warming the kernel failed", exc_info=True)


def start_warming() -> threading.Thread:
    """Start :func:`warm_kernel` in a daemon thread (once per process) and return the thread.

    Returns
    -------
    threading.Thread
        The thread (join it to wait); the same one on every call.

    Examples
    --------
    >>> thread = start_warming()
    >>> start_warming() is thread
    True
    >>> thread.join()
    """
    global _THREAD
    with _LOCK:
        if _THREAD is None:
            steps.append(("start", time.time()))
            _THREAD = threading.Thread(target=_warm_quietly, name="explorer-kernel-warm", daemon=True)
            _THREAD.start()
        return _THREAD


def load_ipython_extension(ipython: Any) -> None:
    """IPython's hook: start warming when this kernel is a JupyterLab document's (`should_warm`).

    Parameters
    ----------
    ipython : IPython.core.interactiveshell.InteractiveShell
        The shell loading the extension (unused: the warm-up needs no shell).

    Examples
    --------
    >>> load_ipython_extension(None)  # not in a JupyterLab kernel: nothing starts
    """
    if should_warm(os.environ):
        ipython.events.register("pre_run_cell", _cell_started)
        start_warming()


def _cell_started(*_info: Any) -> None:
    if not _CELL_STARTED.is_set():
        steps.append(("cell", time.time()))
    _CELL_STARTED.set()
