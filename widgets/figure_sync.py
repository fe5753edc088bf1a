"""Copy a freshly built graph figure into a live FigureWidget, property by property, in one round trip.

Replacing whole traces (``overwrite=True``) makes plotly's front end drop and
re-add nested objects such as ``marker.line``, which can fail while a view is
still being created; setting only the data properties is both safe and smaller.

:func:`follow_zoom` keeps the box text and edge shapes of a graph figure
shown exactly when the zoom makes them readable (:func:`explorer.figures.text_visibility`).

Examples
--------
>>> import plotly.graph_objects as go
>>> from explorer import load
>>> from explorer.figures import graph_figure
>>> target = go.FigureWidget(graph_figure(load("zoo:mlp")))
>>> sync_figure(target, graph_figure(load("zoo:resnet18")))
>>> len(target.data[2].x)
71
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from explorer.figures import (
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


def sync_figure(target: go.FigureWidget, fig: go.Figure, *, view: bool = False) -> None:
    """Make ``target`` show ``fig`` (a :func:`explorer.figures.graph_figure` result).

    Every trace's data properties (x, y, text, visibility, legend entry, fill
    and line colours, marker) are set in one ``batch_update``; the trace order
    of graph figures is fixed, so trace ``i`` of one is trace ``i`` of the other.

    Parameters
    ----------
    target : plotly.graph_objects.FigureWidget
        The live widget, built from an earlier graph figure.
    fig : plotly.graph_objects.Figure
        The new figure.
    view : bool
        Also move the axes to the new figure's initial view.

    Examples
    --------
    >>> sync_figure.__name__
    'sync_figure'
    """
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
        target.layout.meta = fig.layout.meta
        if view:
            target.layout.xaxis.range = fig.layout.xaxis.range
            target.layout.yaxis.range = fig.layout.yaxis.range


def show_text_for_view(target: go.FigureWidget, x_range: Any, y_range: Any) -> None:
    """Show the box text and edge shapes of a graph FigureWidget near a view (axis ranges), or hide them.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.figures import graph_figure
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
    with target.batch_update():
        for i, show in ((LABELS, text), (DETAILS, text), (EDGE_LABELS, shapes)):
            trace = target.data[i]
            if show and trace.meta:  # draw only the text near the view
                shown = text_in_view(trace.meta, x_range, y_range)
                if list(trace.x or ()) != shown["x"] or list(trace.y or ()) != shown["y"]:
                    trace.x, trace.y, trace.text = shown["x"], shown["y"], shown["text"]
                    trace.textfont.color = shown["color"]
            if trace.visible != show:
                trace.visible = show


def follow_zoom(target: go.FigureWidget) -> None:
    """Call :func:`show_text_for_view` whenever the view of ``target`` changes.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.figures import graph_figure
    >>> follow_zoom(go.FigureWidget(graph_figure(load("zoo:mlp"))))
    """
    target.layout.on_change(
        lambda _, x_range, y_range: show_text_for_view(target, x_range, y_range), "xaxis.range", "yaxis.range"
    )
