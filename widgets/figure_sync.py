"""Copy a freshly built graph figure into a live FigureWidget, property by property, in one round trip.

Replacing whole traces (``overwrite=True``) makes plotly's front end drop and
re-add nested objects such as ``marker.line``, which can fail while a view is
still being created; setting only the data properties is both safe and smaller.

:func:`follow_zoom` keeps the box text and edge shapes of a graph figure
shown exactly when the zoom makes them readable (:func:`explorer.views.figures.text_visibility`).

Examples
--------
>>> import plotly.graph_objects as go
>>> from explorer import load
>>> from explorer.views.figures import graph_figure
>>> target = go.FigureWidget(graph_figure(load("zoo:mlp")))
>>> sync_figure(target, graph_figure(load("zoo:resnet18")))  # same trace types: updated in place
False
>>> len(target.data[2].x)
71
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from explorer.views.figures import (
    ARROWS,
    DETAILS,
    EDGE_LABELS,
    EDGES,
    LABELS,
    NODES,
    plot_height,
    text_in_view,
    text_visibility,
)

__all__ = ["sync_figure", "show_text_for_view", "follow_zoom"]

_PLAIN = ("x", "y", "text", "visible", "name", "showlegend", "meta")


def sync_figure(target: go.FigureWidget, fig: go.Figure, *, view: bool = False) -> bool:
    """Make ``target`` show ``fig`` (a :func:`explorer.views.figures.graph_figure` result).

    Every trace's data properties (x, y, text, visibility, legend entry, fill
    and line colours, marker) are set in one ``batch_update``; the trace order
    of graph figures is fixed, so trace ``i`` of one is trace ``i`` of the other.
    When the trace types differ (a graph grew past
    :data:`~explorer.views.figures.SVG_MAX_ITEMS` and is now drawn with WebGL, or the
    other way), the traces are replaced instead.

    Parameters
    ----------
    target : plotly.graph_objects.FigureWidget
        The live widget, built from an earlier graph figure.
    fig : plotly.graph_objects.Figure
        The new figure.
    view : bool
        Also move the axes to the new figure's initial view.

    Returns
    -------
    bool
        True when the traces were replaced: callbacks set on the old ones
        (``on_click``) must be set again on ``target.data``.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.figures import graph_figure
    >>> target = go.FigureWidget(graph_figure(load("zoo:mlp")))
    >>> sync_figure(target, graph_figure(load("zoo:mlp"), webgl=True)), target.data[2].type
    (True, 'scattergl')
    """
    if [t.type for t in target.data] != [t.type for t in fig.data]:
        target.data = ()
        target.add_traces(list(fig.data))
        with target.batch_update():
            _sync_layout(target, fig, view)
        return True
    with target.batch_update():
        for old, new in zip(target.data, fig.data, strict=True):
            for prop in _PLAIN:
                old[prop] = new[prop]
            if new.type == "scatter" and new.fill == "toself":
                old.fillcolor = new.fillcolor
                old.line.color, old.line.width = new.line.color, new.line.width
            if new.type == "scatter" and new.mode == "text":
                old.textfont.color = new.textfont.color
        nodes, new_nodes = target.data[NODES], fig.data[NODES]
        nodes.customdata, nodes.hovertext = new_nodes.customdata, new_nodes.hovertext
        marker = new_nodes.marker
        nodes.marker.line.width, nodes.marker.line.color = marker.line.width, marker.line.color
        nodes.marker.color = marker.color
        nodes.marker.colorscale = marker.colorscale
        nodes.marker.showscale = bool(marker.showscale)
        target.data[EDGES].line.width = fig.data[EDGES].line.width
        target.data[ARROWS].marker.size = fig.data[ARROWS].marker.size
        _sync_layout(target, fig, view)
    return False


def _sync_layout(target: go.FigureWidget, fig: go.Figure, view: bool) -> None:
    target.layout.meta = fig.layout.meta
    target._oge_text_view = None
    if view:
        target.layout.xaxis.range, target.layout.yaxis.range = _view_like(target, fig)


def _view_like(target: go.FigureWidget, fig: go.Figure) -> tuple[list[float], list[float]]:
    """The new figure's first view, as wide as the plot now shows (one scale on both axes).

    Given both ranges, plotly keeps the more zoomed-in one; the figure's x range
    assumes a square plot, so it is widened to the aspect of the current view.
    """
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    old_x, old_y = target.layout.xaxis.range, target.layout.yaxis.range
    if old_x and old_y and old_y[1] != old_y[0]:
        aspect = abs(old_x[1] - old_x[0]) / abs(old_y[1] - old_y[0])
        center, half = (x0 + x1) / 2, max(abs(x1 - x0), abs(y1 - y0) * aspect) / 2
        return [center - half, center + half], [y0, y1]
    return [x0, x1], [y0, y1]


def show_text_for_view(target: go.FigureWidget, x_range: Any, y_range: Any) -> None:
    """Show the box text and edge shapes of a graph FigureWidget near a view (axis ranges), or hide them.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.figures import graph_figure
    >>> target = go.FigureWidget(graph_figure(load("zoo:mlp")))
    >>> show_text_for_view(target, [-500, 500], [-500, 500]); target.data[LABELS].visible
    False
    """
    if not x_range or not y_range:
        return
    nodes, edges = target.data[NODES], target.data[EDGE_LABELS]
    edge_meta = edges.meta or {"x": [], "y": []}
    text, shapes = text_visibility(
        nodes.x, nodes.y, edge_meta["x"], edge_meta["y"], x_range, y_range, plot_height(target.layout)
    )
    (x0, x1), (y0, y1) = sorted(x_range), sorted(y_range)
    # the drawn text covers the view it was culled for, widened by half on each side (text_in_view):
    # cull again only when the view leaves that area
    culled = getattr(target, "_oge_text_view", None)
    escaped = culled is None
    if culled is not None:
        (cx0, cx1), (cy0, cy1) = culled
        dx, dy = (cx1 - cx0) / 2, (cy1 - cy0) / 2
        escaped = not (cx0 - dx <= x0 and x1 <= cx1 + dx and cy0 - dy <= y0 and y1 <= cy1 + dy)
    if escaped and (text or shapes):
        culled = ((x0, x1), (y0, y1))
        target._oge_text_view = culled
    with target.batch_update():
        for i, show in ((LABELS, text), (DETAILS, text), (EDGE_LABELS, shapes)):
            trace = target.data[i]
            if show and trace.meta and culled and (escaped or not trace.visible):
                shown = text_in_view(trace.meta, *culled)
                trace.x, trace.y, trace.text = shown["x"], shown["y"], shown["text"]
                trace.textfont.color = shown["color"]
            if trace.visible != show:
                trace.visible = show


def follow_zoom(target: go.FigureWidget) -> None:
    """Call :func:`show_text_for_view` whenever the view of ``target`` changes.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.figures import graph_figure
    >>> follow_zoom(go.FigureWidget(graph_figure(load("zoo:mlp"))))
    """
    target.layout.on_change(
        lambda _, x_range, y_range: show_text_for_view(target, x_range, y_range), "xaxis.range", "yaxis.range"
    )
