"""A plotly FigureWidget that sends plotly's 5 MB front-end bundle once per kernel, not once per widget.

``go.FigureWidget`` is an anywidget: every instance carries plotly's whole JavaScript
bundle (``_esm``, about 5 MB) in its first message, and the browser evaluates it again for
every widget (anywidget imports it from a fresh ``blob:`` URL each time). `GraphFigureWidget`
instead carries a few hundred bytes of ESM that takes the bundle from one shared widget that is
never displayed (:func:`bundle_widget`, made once per kernel, the bundle zlib-compressed in a
binary buffer: 1.8 MB). That widget's model starts evaluating plotly.js the moment it arrives in
the page (``GraphView`` makes it before loading its model, so the browser works while the kernel
loads) and keeps the evaluated module in the page, so the second graph of a kernel (and every
one after it) ships only its data, and its view starts without evaluating plotly.js again.
Everything else (traces, layout, ``batch_update``, ``on_click``) is plotly's own FigureWidget.

Examples
--------
>>> import plotly.graph_objects as go
>>> fig = GraphFigureWidget(go.Figure(go.Scatter(x=[0, 1], y=[1, 0])))
>>> isinstance(fig, go.FigureWidget), len(fig._esm) < 4000
(True, True)
>>> fig._oge_bundle is bundle_widget() is GraphFigureWidget()._oge_bundle
True
"""

from __future__ import annotations

import hashlib
import threading
import zlib
from pathlib import Path

import anywidget
import ipywidgets as w
import plotly
import plotly.graph_objects as go
import traitlets

__all__ = ["GraphFigureWidget", "bundle_widget"]

#: plotly's front-end bundle, as ``go.FigureWidget`` ships it.
_BUNDLE_PATH = Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"
_LOCK = threading.Lock()
_BUNDLE: _PlotlyBundle | None = None


#: Evaluate plotly's bundle from a bundle model, once per page and key: a promise of the module
#: that anywidget's front end takes (``{initialize, render}``), kept on ``globalThis``.
_LOAD_JS = """\
const CACHE = (globalThis.__oge_plotly_bundles ||= new Map());
function loadBundle(key, packed) {
  if (!CACHE.has(key)) {
    const loading = (async () => {
      const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("deflate"));
      const code = await new Response(stream).text();
      const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
      let mod;
      try { mod = await import(url); } finally { URL.revokeObjectURL(url); }
      if (mod.render) return { render: mod.render };  // the forms anywidget accepts
      return typeof mod.default === "function" ? await mod.default() : mod.default;
    })();
    loading.catch(() => CACHE.delete(key));
    CACHE.set(key, loading);
  }
  return CACHE.get(key);
}
"""

#: The bundle model's own code: start evaluating plotly.js as soon as the model arrives, while
#: the kernel is still building the figure, instead of when the first figure's view asks for it.
_BUNDLE_ESM = (
    _LOAD_JS
    + """\
export default {
  initialize({ model }) { loadBundle(model.get("key"), model.get("code")); },
};
"""
)


class _PlotlyBundle(anywidget.AnyWidget):
    """A widget never displayed, holding plotly's front-end bundle; its model evaluates it on arrival."""

    _esm = _BUNDLE_ESM
    #: The bundle, zlib-compressed (level 1: 5.0 -> 1.8 MB): a binary buffer, no JSON string.
    code = traitlets.Bytes().tag(sync=True)
    key = traitlets.Unicode().tag(sync=True)

    def open(self) -> None:
        super().open()
        self.closed_by_page = False
        if self.comm is not None:  # the page may refuse it (sent before its widget manager was ready)
            self.comm.on_close(self._closed_by_page)

    def _closed_by_page(self, _message: object) -> None:
        self.closed_by_page = True


def bundle_widget() -> w.Widget:
    """The kernel's one widget that carries plotly's bundle to the browser (made on first use).

    Call it early (``GraphView`` does, before loading its model): the browser starts
    evaluating plotly.js as soon as this widget's model arrives, in parallel with the kernel.

    Examples
    --------
    >>> bundle_widget() is bundle_widget()
    True
    >>> len(zlib.decompress(bundle_widget().code)) > 1_000_000
    True
    """
    global _BUNDLE
    with _LOCK:
        if _BUNDLE is None or _BUNDLE.comm is None or _BUNDLE.closed_by_page:  # closed: make a new one
            code = _BUNDLE_PATH.read_bytes()
            key = f"plotly-{plotly.__version__}-{hashlib.sha1(code).hexdigest()[:12]}"
            _BUNDLE = _PlotlyBundle(code=zlib.compress(code, 1), key=key)
        return _BUNDLE


#: The ESM every GraphFigureWidget carries: the bundle model's evaluation (or, should this view
#: come first, its own of the same bundle, under the same key), then plotly's own code.
_SHIM_ESM = (
    _LOAD_JS
    + """\
async function plotlyModule(model) {
  const ref = model.get("_oge_bundle") || "";
  const id = ref.startsWith("IPY_MODEL_") ? ref.slice("IPY_MODEL_".length) : ref;
  const key = model.get("_oge_bundle_key");
  if (CACHE.has(key)) return CACHE.get(key);
  const bundle = await model.widget_manager.get_model(id);
  return loadBundle(key, bundle.get("code"));
}
export default {
  async initialize(ctx) {
    const widget = await plotlyModule(ctx.model);
    return widget.initialize ? widget.initialize(ctx) : undefined;
  },
  async render(ctx) {
    const widget = await plotlyModule(ctx.model);
    return widget.render(ctx);
  },
};
"""
)


class GraphFigureWidget(go.FigureWidget):
    """``go.FigureWidget`` whose front-end code comes from the shared `bundle_widget`.

    Examples
    --------
    >>> GraphFigureWidget()._oge_bundle_key.startswith("plotly-")
    True
    """

    _esm = _SHIM_ESM
    _oge_bundle = traitlets.Instance(w.Widget).tag(sync=True, **w.widget_serialization)
    _oge_bundle_key = traitlets.Unicode().tag(sync=True)

    @traitlets.default("_oge_bundle")
    def _default_bundle(self) -> w.Widget:  # in the first message: the view needs it at once
        return bundle_widget()

    @traitlets.default("_oge_bundle_key")
    def _default_bundle_key(self) -> str:
        return bundle_widget().key
