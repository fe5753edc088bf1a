"""A plotly FigureWidget that takes plotly's front-end code from one shared widget per kernel.

``go.FigureWidget`` is an anywidget: every instance carries plotly's whole JavaScript bundle
(``_esm``, about 5 MB) in its first message, and the browser evaluates it again for every widget
(anywidget imports it from a fresh ``blob:`` URL each time). `GraphFigureWidget` instead carries a
few KB of ESM that takes the bundle from the kernel's
:func:`widgets.plotly_bundle.bundle_widget`, never displayed, whose model starts evaluating
plotly.js the moment it arrives in the page (``GraphView`` and the kernel's warm-up make it
first, so the browser works while the kernel loads) and keeps the evaluated module in the page.
So the second graph of a kernel (and every one after it) ships only its data, and its view starts
without evaluating plotly.js again. The bundle is the partial one (only the trace types the
explorer draws: a quarter of plotly.js's evaluation time) when the figure's traces allow it
(:func:`widgets.plotly_bundle.bundle_source`). Everything else (traces, layout, ``batch_update``,
``on_click``) is plotly's own FigureWidget.

Examples
--------
>>> import plotly.graph_objects as go
>>> fig = GraphFigureWidget(go.Figure(go.Scatter(x=[0, 1], y=[1, 0])))
>>> isinstance(fig, go.FigureWidget), len(fig._esm) < 10_000
(True, True)
>>> fig._oge_bundle is bundle_widget() is GraphFigureWidget()._oge_bundle
True
>>> GraphFigureWidget(go.Figure(go.Sankey()))._oge_bundle_key == bundle_source(["sankey"]).key
True
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import ipywidgets as w
import plotly.graph_objects as go
import traitlets

from .plotly_bundle import LOAD_JS, bundle_source, bundle_widget

__all__ = ["GraphFigureWidget", "bundle_widget", "trace_types"]


def trace_types(data: Any) -> set[str]:
    """The trace types of what ``go.FigureWidget`` takes as ``data``: a figure, its dict, or traces.

    Examples
    --------
    >>> sorted(trace_types({"data": [{"type": "bar"}, {"y": [1]}]}))
    ['bar', 'scatter']
    >>> trace_types(None), trace_types(go.Figure(go.Heatmap(z=[[1]])))
    (set(), {'heatmap'})
    """
    if data is None:
        return set()
    if isinstance(data, go.Figure):
        return {trace.type for trace in data.data}
    if isinstance(data, Mapping):
        data = data.get("data") or ()
    elif not isinstance(data, list | tuple):
        data = [data]
    return {
        (trace.get("type") if isinstance(trace, Mapping) else getattr(trace, "type", None)) or "scatter"
        for trace in data
    }


#: The ESM every GraphFigureWidget carries: the bundle model's evaluation (or, should this view
#: come first, its own of the same bundle, under the same key), then plotly's own code. Like
#: anywidget, it calls the bundle's default export once per model: plotly's ``{initialize,
#: render}`` keep that model's state in a closure, so two figures must never share one.
_SHIM_ESM = (
    LOAD_JS
    + """\
async function plotlyModule(model) {
  const ref = model.get("_oge_bundle") || "";
  const id = ref.startsWith("IPY_MODEL_") ? ref.slice("IPY_MODEL_".length) : ref;
  const key = model.get("_oge_bundle_key");
  if (CACHE.has(key)) return CACHE.get(key);
  return bundleCode(model.widget_manager, id, key);
}
// The bundle: its model is here already (the kernel sends it before any figure), unless the kernel
// opened it before this page listened. Then ask the kernel, once idle, to send it again (a silent
// execution that binds no name), and take it, or the old model should the manager's restore bring
// it, whichever comes first.
async function bundleCode(manager, id, key) {
  const fromModel = async () => loadBundle(key, (await manager.get_model(id)).get("code"));
  if (manager.has_model(id)) return fromModel();
  const again = `__import__("widgets.plotly_bundle", fromlist=["_"]).send_again(${JSON.stringify(key)})`;
  if (manager.kernel) manager.kernel.requestExecute({ code: again, silent: true, store_history: false });
  for (let waited = 0; waited < 300000; waited += 100) {
    if (CACHE.has(key)) return CACHE.get(key);  // the bundle sent again has arrived
    if (manager.has_model(id)) return fromModel();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`plotly's bundle ${key} never reached this page`);
}
// plotly's initialize, once plotly.js is here: it listens to the model through a proxy that also
// hands it the changes made meanwhile (held), in order, as if it had been listening from the start.
function initializeLate(plotly, ctx, held) {
  if (!plotly.initialize) return;
  const listeners = new Map();  // "change:NAME" -> plotly's callbacks
  const replaying = new Map();  // NAME -> the held value plotly reads while its callbacks replay
  const model = {
    ...ctx.model,
    get: (name) => (replaying.has(name) ? replaying.get(name) : ctx.model.get(name)),
    on: (name, callback) => {
      if (!listeners.has(name)) listeners.set(name, []);
      listeners.get(name).push(callback);
      ctx.model.on(name, callback);
    },
  };
  plotly.initialize({ ...ctx, model });
  // The figure's whole data and layout, sent again when it is displayed, hold every edit before
  // them: replay only what came after the last of them.
  const whole = held.findLastIndex((changed) => "_widget_data" in changed || "_widget_layout" in changed);
  for (const changed of held.slice(whole + 1)) {
    for (const [name, value] of Object.entries(changed)) {
      replaying.set(name, value);
      for (const callback of listeners.get(`change:${name}`) || []) callback();
      replaying.delete(name);
    }
  }
}
// The trace deltas plotly.js sends back after every edit: plotly.js's defaults for each trace, so the
// kernel can answer reads of unset properties. Nothing here reads them, and they cost a click dearly:
// about 40 KB for ResNet-18's graph, with the typed arrays the figure's data arrive as written out
// as {"0": x0, "1": x1, ...}, which plotly's Python handler then fails on (a ValueError, and
// seconds of the kernel formatting its traceback, while the next click waits behind it). Only each
// trace's uid goes back: the kernel still learns that the edit is done.
function withoutDefaults(value) {
  if (!value || !Array.isArray(value.trace_deltas)) return value;
  const uidOnly = (delta) => (delta && "uid" in delta ? { uid: delta.uid } : delta);
  return { ...value, trace_deltas: value.trace_deltas.map(uidOnly) };
}
// The model plotly's figure and its views listen to, with the views' edits (restyles, relayouts:
// "change:_py2js_*", listened to once startViews() is called) held until the page has painted what
// came with them: a click's details, sent just before the selection's restyle, show in the next
// frame instead of after plotly.js redraws the graph. The edits run in the order they came, each
// reading the value it came with. The figure's own listeners (its copy of the data, which a view
// drawn later reads) run at once, as before.
function paintFirst(model) {
  const queue = [];
  const replaying = new Map();
  let pending = false;
  let views = false;
  const flush = () => {
    pending = false;
    for (const [name, value, callback] of queue.splice(0)) {
      replaying.set(name, value);
      try {
        callback();
      } catch (error) {  // as when it ran on arrival: this edit fails, the ones after it still run
        console.error(error);
      } finally {
        replaying.delete(name);
        globalThis.__oge_held_edits -= 1;
      }
    }
  };
  const schedule = () => {
    if (pending) return;
    pending = true;
    let done = false;
    const once = () => { if (!done) { done = true; flush(); } };
    requestAnimationFrame(() => setTimeout(once, 0));  // after the next paint
    setTimeout(once, 100);  // a hidden page paints nothing: never hold an edit longer
  };
  return {
    ...model,
    startViews: () => { views = true; },
    get: (name) => (replaying.has(name) ? replaying.get(name) : model.get(name)),
    set: (name, value) => model.set(name, name === "_js2py_traceDeltas" ? withoutDefaults(value) : value),
    on: (event, callback) => {
      if (!views || !event.startsWith("change:_py2js_")) return model.on(event, callback);
      const name = event.slice("change:".length);
      return model.on(event, () => {
        queue.push([name, model.get(name), callback]);
        globalThis.__oge_held_edits = (globalThis.__oge_held_edits || 0) + 1;  // the page's tests wait on it
        schedule();
      });
    },
  };
}
// plotly's anywidget view sizes the plot once, when it draws it: a plot drawn before its box had its
// width (a big graph, drawn as its output is attached) kept plotly's default 700 px, its right part
// and the modebar under the panel beside it, and a plot never followed its box when the page
// changed. The plot follows its element's width (the figure's config has responsive: true, so
// plotly has its resize handler; a layout with its own width stays as it is).
function followWidth(el) {
  if (typeof ResizeObserver === "undefined") return () => {};
  el.style.minWidth = "0";  // a flex item as wide as its box, not as its drawn content
  const observer = new ResizeObserver(() => {
    const full = el._fullLayout;
    const handler = el._responsiveChartHandler;
    if (!full || !handler || (el.layout && el.layout.width) || el.clientWidth === 0) return;
    if (Math.abs(el.clientWidth - full.width) > 1) handler();
  });
  observer.observe(el);
  return () => observer.disconnect();
}
export default () => {  // anywidget calls this once per model, as it would plotly's own export
  let widget = null;  // this model's plotly {initialize, render}, made once
  let ready = null;  // plotly's initialize done
  let painted = null;  // the model plotly listens to (paintFirst)
  const widgetOf = (model) => (widget ||= plotlyModule(model).then(async (mod) => {
    if (mod.render) return { initialize: mod.initialize, render: mod.render };  // anywidget's forms
    return typeof mod.default === "function" ? await mod.default() : mod.default;
  }));
  return {
    // Returns at once: anywidget drops a model's messages (the figure's data comes in them) when
    // its initialize takes over 2 s, and plotly.js may still be on its way (being evaluated, or
    // sent again). The model's changes until then are held for plotly's own initialize.
    initialize(ctx) {
      const held = [];
      const hold = (model) => held.push({ ...model.changed });  // Backbone: what this set() changed
      ctx.model.on("change", hold);
      ready = widgetOf(ctx.model).then((plotly) => {
        ctx.model.off("change", hold);
        painted = paintFirst(ctx.model);
        initializeLate(plotly, { ...ctx, model: painted }, held);
      });
    },
    async render(ctx) {
      const plotly = await widgetOf(ctx.model);
      await ready;
      painted.startViews();
      const cleanup = await plotly.render(ctx);
      const unfollow = followWidth(ctx.el);
      return () => { unfollow(); if (typeof cleanup === "function") cleanup(); };
    },
  };
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

    def __init__(self, data: Any = None, *args: Any, **kwargs: Any) -> None:
        # the bundle is chosen before the widget opens (its first message names it), from the
        # figure's traces; traces of other types added later are not drawn by a partial bundle
        self._oge_trace_types = trace_types(data)
        checked = isinstance(data, go.Figure) and not isinstance(data, go.FigureWidget)
        if checked and not args and "_validate" not in kwargs:
            # a go.Figure was validated when it was built: plotly would validate every trace again
            # (half of this widget's cost: 10 of 18 ms for ResNet-18's graph). Take its values as
            # they are, then validate every later edit, as plotly does (an object built without
            # validation also stops sending its edits to the page).
            super().__init__(data, *args, _validate=False, **kwargs)
            for part in (self, self._layout_obj, *self._data_objs):
                part._validate = True
        else:
            super().__init__(data, *args, **kwargs)
        # plotly's resize handler (window resizes), which the page also calls when the plot's box
        # changes width (the ESM's followWidth)
        self._config = {**self._config, "responsive": True}

    def __repr__(self) -> str:
        """A one-line summary: the trace types and the plot's size, not plotly's dump of the figure.

        Displaying a widget computes its ``repr`` (the output's ``text/plain``, cut to 110
        characters), and so does displaying any box that holds it. plotly's repr prints the whole
        figure as JSON: 72 KB and 35 ms for ResNet-18's graph, every time a view is shown.
        ``to_dict()`` / ``to_json()`` still give the whole figure.

        Examples
        --------
        >>> repr(GraphFigureWidget(go.Figure([go.Scatter(y=[1]), go.Bar(y=[2]), go.Bar(y=[3])])))
        'GraphFigureWidget(3 traces: bar ×2, scatter; height auto)'
        """
        kinds = Counter(trace.type for trace in self.data)
        traces = ", ".join(kind if n == 1 else f"{kind} ×{n}" for kind, n in sorted(kinds.items()))
        height = self.layout.height
        return (
            f"{type(self).__name__}({len(self.data)} trace{'s' * (len(self.data) != 1)}"
            f"{': ' + traces if traces else ''}; height {'auto' if height is None else f'{height:g} px'})"
        )

    @traitlets.default("_oge_bundle")
    def _default_bundle(self) -> w.Widget:  # in the first message: the view needs it at once
        return bundle_widget(getattr(self, "_oge_trace_types", ()))

    @traitlets.default("_oge_bundle_key")
    def _default_bundle_key(self) -> str:
        return bundle_source(getattr(self, "_oge_trace_types", ())).key
