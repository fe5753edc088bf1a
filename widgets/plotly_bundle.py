"""plotly's front-end bundle, sent to the page once per kernel by a widget that is never displayed.

``go.FigureWidget`` is an anywidget whose ESM is plotly.py's whole front-end bundle: its widget
code and all of plotly.js (5 MB; the page needs about 1 s of main-thread time to evaluate it, on
a small machine). :class:`widgets.figure_widget.GraphFigureWidget` instead takes its code from the
kernel's :func:`bundle_widget`, whose model starts evaluating it the moment it reaches the page
and keeps the evaluated module there, under its ``key``.

The bundle sent is, when it fits, :data:`PARTIAL_BUNDLE` (``widgets/static``, made by
``scripts/plotly_bundle/build.sh``): plotly.py's own bundle with, in place of the full plotly.js,
one built with only the trace types the explorer's figures use (:data:`PARTIAL_TRACES`): 1.7 MB,
evaluated in about a quarter of the time. It is used only with the plotly.py it was built from
(the SHA-256 of that version's ``widgetbundle.js`` is in the ``.json`` beside it) and for figures
whose traces are all of those types; any other figure gets plotly's full bundle, under its own
key. This module imports no plotly, numpy or onnx, so a kernel can send the bundle first thing.

Examples
--------
>>> source = bundle_source()
>>> source.key.startswith("plotly-"), source.path.name in ("plotly-widget-partial.js", "widgetbundle.js")
(True, True)
>>> bundle_source(trace_types={"scatter", "scattergl"}).partial == bundle_source().partial
True
>>> bundle_source(trace_types={"sankey"}).partial
False
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import anywidget
import ipywidgets as w
import traitlets

__all__ = [
    "LOAD_JS",
    "PARTIAL_BUNDLE",
    "PARTIAL_TRACES",
    "BundleSource",
    "bundle_source",
    "bundle_widget",
    "send_again",
]

#: plotly.py's bundle with a plotly.js of only :data:`PARTIAL_TRACES` (``scripts/plotly_bundle``).
PARTIAL_BUNDLE = Path(__file__).parent / "static" / "plotly-widget-partial.js"
_PARTIAL_META = PARTIAL_BUNDLE.with_suffix(".json")
_LOCK = threading.Lock()
_BUNDLES: dict[str, _PlotlyBundle] = {}


@cache
def _partial_meta() -> dict[str, object]:
    try:
        return json.loads(_PARTIAL_META.read_text())
    except (OSError, ValueError):
        return {}


#: The trace types the partial bundle's plotly.js draws (``scatter`` is in plotly.js's core).
PARTIAL_TRACES: frozenset[str] = frozenset(_partial_meta().get("traces") or ())

#: Evaluate a bundle from a bundle model, once per page and key: a promise of the evaluated module
#: (plotly's default export: the factory anywidget calls once per model), kept on ``globalThis``.
LOAD_JS = """\
const CACHE = (globalThis.__oge_plotly_bundles ||= new Map());
function loadBundle(key, packed) {
  if (!CACHE.has(key)) {
    const loading = (async () => {
      const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("deflate"));
      const code = await new Response(stream).text();
      const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
      try { return await import(url); } finally { URL.revokeObjectURL(url); }
    })();
    loading.catch(() => CACHE.delete(key));
    CACHE.set(key, loading);
  }
  return CACHE.get(key);
}
"""

#: The bundle model's own code: start evaluating plotly.js as soon as the model arrives, while
#: the kernel is still building the figure, instead of when the first figure's view asks for it;
#: and tell the kernel it arrived (a widget opened before the page listened never does).
_BUNDLE_ESM = (
    LOAD_JS
    + """\
export default {
  initialize({ model }) {
    loadBundle(model.get("key"), model.get("code"));
    model.send({ oge_bundle_arrived: model.get("key") });
  },
};
"""
)


@dataclass(frozen=True)
class BundleSource:
    """Which front-end bundle a figure gets.

    Attributes
    ----------
    path : Path
        The JavaScript file.
    key : str
        Names the evaluated module in the page (the plotly.py version and the file's hash).
    partial : bool
        True for :data:`PARTIAL_BUNDLE`, False for plotly's full ``widgetbundle.js``.

    Examples
    --------
    >>> bundle_source(trace_types=["sankey"]).to_dict()["partial"]
    False
    """

    path: Path
    key: str
    partial: bool

    def to_dict(self) -> dict[str, object]:
        """The fields, JSON-ready."""
        return {"path": str(self.path), "key": self.key, "partial": self.partial}


@cache
def _plotly_bundle_path() -> Path:
    spec = importlib.util.find_spec("plotly")  # not imported: its location is enough
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("plotly is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data" / "widgetbundle.js"


@cache
def _sources() -> tuple[BundleSource, BundleSource | None]:
    full_path = _plotly_bundle_path()
    full_code = full_path.read_bytes()
    version = importlib.metadata.version("plotly")
    full_hash = hashlib.sha256(full_code).hexdigest()
    full = BundleSource(full_path, f"plotly-{version}-{full_hash[:12]}", partial=False)
    meta = _partial_meta()
    if meta.get("plotly_py_widgetbundle_sha256") != full_hash or not PARTIAL_BUNDLE.is_file():
        return full, None  # built for another plotly.py: its widget code may not match this one's
    partial_hash = str(meta.get("sha256", ""))[:12]
    return full, BundleSource(PARTIAL_BUNDLE, f"plotly-{version}-partial-{partial_hash}", partial=True)


def bundle_source(trace_types: Iterable[str] = ()) -> BundleSource:
    """The bundle for a figure with these trace types: the partial one when it draws them all.

    Parameters
    ----------
    trace_types : iterable of str
        The figure's trace types (``"scatter"``, ``"bar"``, ...); none: a figure of the
        explorer's own kinds.

    Returns
    -------
    BundleSource

    Examples
    --------
    >>> bundle_source(["bar", "heatmap"]).key == bundle_source().key
    True
    """
    full, partial = _sources()
    if partial is None or not set(trace_types) <= PARTIAL_TRACES:
        return full
    return partial


class _PlotlyBundle(anywidget.AnyWidget):
    """A widget never displayed, holding plotly's front-end bundle; its model evaluates it on arrival."""

    _esm = _BUNDLE_ESM
    #: The bundle, zlib-compressed (level 1: about 2.8 to 1): a binary buffer, no JSON string.
    code = traitlets.Bytes().tag(sync=True)
    key = traitlets.Unicode().tag(sync=True)

    def open(self) -> None:
        super().open()
        self.closed_by_page = False
        #: Set when the page says the bundle arrived (the kernel hears it when idle).
        self.arrived = threading.Event()
        self.on_msg(self._page_said)
        if self.comm is not None:  # the page may refuse it (sent before its widget manager was ready)
            self.comm.on_close(self._closed_by_page)

    def _closed_by_page(self, _message: object) -> None:
        self.closed_by_page = True

    def _page_said(self, _widget: object, content: object, _buffers: object) -> None:
        if isinstance(content, dict) and content.get("oge_bundle_arrived") == self.key:
            self.arrived.set()


def bundle_widget(trace_types: Iterable[str] = ()) -> w.Widget:
    """The kernel's widget that carries the bundle for these trace types (made on first use).

    Call it early (``GraphView`` and the kernel's warm-up do): the browser starts evaluating
    plotly.js as soon as this widget's model arrives, in parallel with the kernel.

    Parameters
    ----------
    trace_types : iterable of str
        As in :func:`bundle_source`.

    Returns
    -------
    ipywidgets.Widget
        One widget per bundle and kernel (made again if the page closed it).

    Examples
    --------
    >>> bundle_widget() is bundle_widget(["scatter"])
    True
    >>> len(zlib.decompress(bundle_widget().code)) > 1_000_000
    True
    """
    source = bundle_source(trace_types)
    with _LOCK:
        widget = _BUNDLES.get(source.key)
        if widget is None or widget.comm is None or widget.closed_by_page:  # closed: make a new one
            widget = _BUNDLES[source.key] = _new_bundle(source)
        return widget


def _new_bundle(source: BundleSource) -> _PlotlyBundle:
    return _PlotlyBundle(code=zlib.compress(source.path.read_bytes(), 1), key=source.key)


def send_again(key: str) -> w.Widget | None:
    """Send the bundle named ``key`` to the page again, in a new widget (for a page that never got it).

    A widget the kernel opens before the page listens to it never reaches the page: the kernel's
    warm-up can send the bundle that early. A figure whose view finds no bundle model asks for
    this (a silent execution, run once the kernel is idle); the kernel's warm-up does it when
    the page has not said that the bundle arrived.

    Parameters
    ----------
    key : str
        A :attr:`BundleSource.key`.

    Returns
    -------
    ipywidgets.Widget or None
        The new bundle widget; None for a key this kernel never sent.

    Examples
    --------
    >>> old = bundle_widget()
    >>> new = send_again(old.key)
    >>> new is bundle_widget() is not old, old.comm is None
    (True, True)
    >>> send_again("no-such-bundle") is None
    True
    """
    with _LOCK:
        old = _BUNDLES.get(key)
        if old is None:
            return None
        source = next(s for s in _sources() if s is not None and s.key == key)
        widget = _BUNDLES[key] = _new_bundle(source)
    old.close()
    return widget
