"""A static, self-contained HTML report of a model: summary, op histogram, the graph, pipeline steps.

plotly.js is bundled inline once, so the file opens with no network (teaching
sessions, bug reports, machines without Jupyter). Box text and tensor shapes appear
when you zoom in far enough, as in the notebook view. The file is written atomically.

Examples
--------
>>> import tempfile, os
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = save("zoo:mlp", os.path.join(tmp, "mlp.html"))
...     text = path.read_text()
>>> "plotly" in text and "Gemm" in text
True
"""

from __future__ import annotations

import html
import json
import os
import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import plotly.io as pio

from explorer import __version__
from explorer.core.graph import ModelGraph
from explorer.isolation.io import write_text_atomic
from explorer.onnx_adapter.load import load
from explorer.views.figures import (
    DETAILS,
    EDGE_LABEL_LIMIT,
    EDGE_LABELS,
    LABEL_LIMIT,
    LABELS,
    NODES,
    diff_overlay,
    graph_figure,
    op_histogram_figure,
    timeline_figure,
)
from explorer.views.layout import auto_collapse, layered
from explorer.views.node_boxes import TEXT_ZOOM

__all__ = ["build_html", "save", "LABEL_TOGGLE_JS"]

LABEL_TOGGLE_JS = string.Template("""
(function () {
  var gd = document.getElementById('{plot_id}');
  if (!gd) { return; }
  var area = null;
  function inView(xs, ys, x0, x1, y0, y1) {
    var n = 0;
    for (var i = 0; i < xs.length; i++) {
      if (xs[i] >= x0 && xs[i] <= x1 && ys[i] >= y0 && ys[i] <= y1) { n++; }
    }
    return n;
  }
  function near(meta, box) {
    var keep = [];
    for (var i = 0; i < meta.x.length; i++) {
      if (meta.x[i] >= box[0] && meta.x[i] <= box[1] && meta.y[i] >= box[2] && meta.y[i] <= box[3]) {
        keep.push(i);
      }
    }
    return keep;
  }
  function update() {
    var xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    var x0 = Math.min(xa.range[0], xa.range[1]), x1 = Math.max(xa.range[0], xa.range[1]);
    var y0 = Math.min(ya.range[0], ya.range[1]), y1 = Math.max(ya.range[0], ya.range[1]);
    var text = false, shapes = false, edges = gd.data[$edge_labels].meta || {x: [], y: []};
    if (y1 > y0 && ya._length / (y1 - y0) >= $zoom) {
      text = inView(gd.data[$nodes].x, gd.data[$nodes].y, x0, x1, y0, y1) <= $limit;
      shapes = text && inView(edges.x, edges.y, x0, x1, y0, y1) <= $edge_limit;
    }
    // the text drawn covers the view widened by half its size on each side (as text_in_view does):
    // it is culled again only when the view leaves that area, all three traces in one restyle
    var escaped = !(area && x0 >= area[0] && x1 <= area[1] && y0 >= area[2] && y1 <= area[3]);
    if (escaped && (text || shapes)) {
      var dx = (x1 - x0) / 2, dy = (y1 - y0) / 2;
      area = [x0 - dx, x1 + dx, y0 - dy, y1 + dy];
    }
    var wanted = [[$labels, text], [$details, text], [$edge_labels, shapes]];
    var change = {x: [], y: [], text: [], 'textfont.color': [], visible: []}, which = [];
    for (var k = 0; k < wanted.length; k++) {
      var index = wanted[k][0], visible = wanted[k][1], trace = gd.data[index], meta = trace.meta;
      var cull = visible && meta && (escaped || !trace.visible);
      if (!cull && trace.visible === visible) { continue; }
      var keep = cull ? near(meta, area) : null;
      var pick = function (values, current) {
        return keep ? keep.map(function (i) { return values[i]; }) : current;
      };
      which.push(index);
      change.visible.push(visible);
      change.x.push(pick(meta ? meta.x : [], trace.x));
      change.y.push(pick(meta ? meta.y : [], trace.y));
      change.text.push(pick(meta ? meta.text : [], trace.text));
      change['textfont.color'].push(pick(meta ? meta.color : [], trace.textfont.color));
    }
    if (which.length) { Plotly.restyle(gd, change, which); }
  }
  gd.on('plotly_relayout', update);
  update();
})();
""").substitute(
    nodes=NODES,
    labels=LABELS,
    details=DETAILS,
    edge_labels=EDGE_LABELS,
    limit=LABEL_LIMIT,
    edge_limit=EDGE_LABEL_LIMIT,
    zoom=TEXT_ZOOM,
)
"""Shows box text and edge shapes in the report's graphs once the zoom makes them readable (``post_script``).

The same rule as :func:`explorer.views.figures.text_visibility` (GraphView's), in the page.
"""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 24px; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border-bottom: 1px solid #ddd; padding: 2px 10px 2px 0; text-align: left; vertical-align: top; }
pre { background: #f6f6f6; padding: 8px; font-size: 12px; overflow-x: auto; }
.oge-footer { color: #888; font-size: 12px; margin-top: 24px; }
"""


def _figure_html(fig: Any, include_plotlyjs: bool, div_id: str, post_script: str | None = None) -> str:
    return pio.to_html(
        fig,
        include_plotlyjs=include_plotlyjs,
        full_html=False,
        div_id=div_id,
        post_script=post_script,
        config={"scrollZoom": True, "displaylogo": False},
    )


def _steps_table(timeline: Any) -> str:
    frame = timeline.to_frame()
    return frame.to_html(index=False, border=0, classes="oge-steps", na_rep="")


def build_html(
    graph: ModelGraph,
    *,
    title: str | None = None,
    timeline: Any = None,
    collapse: Any = "auto",
    overlay: Any = None,
) -> str:
    """Build the report's HTML text for a graph (and, optionally, the pipeline run on it).

    Parameters
    ----------
    graph : ModelGraph
        The model.
    title : str, optional
        Page title (default: the model's source).
    timeline : Timeline, optional
        A pipeline run: adds the per-step table, the node-count chart, and the
        final graph coloured by its diff against the original.
    collapse : int, scopes, None or "auto"
        Collapse of the graph drawing.
    overlay : Overlay, optional
        Another tool's data (or ours) on the graph: a section with its top nodes and the names that
        did not map, and the graph coloured by it (:mod:`explorer.views.overlay_view`).

    Examples
    --------
    >>> from explorer import load
    >>> text = build_html(load("zoo:mlp"))
    >>> text.startswith("<!DOCTYPE html>"), "oge-summary" in text
    (True, True)
    """
    summary = graph.summary()
    title = title or f"onnx-graph-explorer: {graph.source}"
    depth = auto_collapse(graph) if collapse == "auto" else collapse
    layout = layered(graph, collapse=depth, node_size="auto")
    parts = [
        "<!DOCTYPE html>",
        f'<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>',
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        '<h2>Summary</h2><pre class="oge-summary">' + html.escape(summary.to_text()) + "</pre>",
        _figure_html(op_histogram_figure(summary), True, "oge-ops"),
        "<h2>Graph</h2><p>Drag to pan, scroll to zoom, hover a node for its shapes and weights.</p>",
        _figure_html(graph_figure(graph, layout, height=800), False, "oge-graph", LABEL_TOGGLE_JS),
    ]
    if overlay is not None:
        parts += _overlay_parts(graph, layout, overlay)
    if timeline is not None and len(timeline) > 1:
        final = timeline.snapshots[-1]
        overlay = diff_overlay(timeline.diff(len(timeline) - 1, against=0))
        final_layout = layered(
            final.graph,
            collapse=auto_collapse(final.graph) if collapse == "auto" else collapse,
            node_size="auto",
        )
        parts += [
            "<h2>Pipeline</h2>",
            _steps_table(timeline),
            _figure_html(timeline_figure(timeline), False, "oge-timeline"),
            "<h2>After the pipeline</h2><p>Colour: added green, changed amber, fused purple, kept grey.</p>",
            _figure_html(
                graph_figure(final.graph, final_layout, overlay, height=800),
                False,
                "oge-final",
                LABEL_TOGGLE_JS,
            ),
        ]
    parts.append(
        f'<div class="oge-footer">onnx-graph-explorer {__version__}; '
        f"summary JSON:<pre>{html.escape(json.dumps(summary.to_dict(), indent=1))}</pre></div></body></html>"
    )
    return "\n".join(parts)


def _overlay_parts(graph: ModelGraph, layout: Any, overlay: Any) -> list[str]:
    """The overlay's section, and the graph coloured by its first colouring."""
    from explorer.views.overlay_view import overlay_colorings, overlay_section

    parts = ["<h2>Overlay</h2>", overlay_section(overlay)]
    colorings = overlay_colorings(overlay)
    if colorings:
        name, (values, palette) = next(iter(colorings.items()))
        parts += [
            f"<p>The graph coloured by {html.escape(name)} (grey: nodes it has no value for).</p>",
            _figure_html(
                graph_figure(graph, layout, values, palette=palette, height=800),
                False,
                "oge-overlay-graph",
                LABEL_TOGGLE_JS,
            ),
        ]
    return parts


def save(
    source: ModelGraph | Any,
    path: str | os.PathLike[str],
    *,
    pipeline: str | Sequence[Any] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    title: str | None = None,
    collapse: Any = "auto",
    overlay: Any = None,
) -> Path:
    """Write a self-contained HTML report of a model (atomically) and return its path.

    Parameters
    ----------
    source : ModelGraph or anything :func:`explorer.load` accepts
        The model.
    path : path
        Where to write the ``.html`` file.
    pipeline : str or list, optional
        Passes to run and report step by step (see :func:`explorer.passes.pipeline.run_pipeline`).
    input_shapes : mapping, optional
        Fixed input shapes for loading and the passes.
    title : str, optional
        Page title.
    collapse : int, scopes, None or "auto"
        Collapse of the graph drawings.
    overlay : Overlay, path or dict, optional
        Another tool's results on the model (read by :func:`explorer.overlays.read` unless an
        :class:`~explorer.overlays.value.Overlay` already): a section and a coloured graph.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = save("zoo:resnet18", os.path.join(tmp, "r.html"), pipeline="fuse_bn_into_conv")
    ...     out.stat().st_size > 10**6
    True
    """
    graph = source if isinstance(source, ModelGraph) else load(source, input_shapes=input_shapes)
    timeline = None
    if pipeline:
        from explorer.passes.pipeline import run_pipeline

        timeline = run_pipeline(graph, pipeline, input_shapes=input_shapes)
    if overlay is not None:
        from explorer.overlays import Overlay, read

        overlay = overlay if isinstance(overlay, Overlay) else read(overlay, graph)
    text = build_html(graph, title=title, timeline=timeline, collapse=collapse, overlay=overlay)
    return write_text_atomic(text, path)
