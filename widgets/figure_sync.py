"""Copy a freshly built graph figure into a live FigureWidget, property by property, in one round trip.

Replacing whole traces (``overwrite=True``) makes plotly's front end drop and
re-add nested objects such as ``marker.line``, which can fail while a view is
still being created; setting only the data properties is both safe and smaller.

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

import plotly.graph_objects as go

from explorer.figures import ARROWS, EDGES, LABELS, NODES

__all__ = ["sync_figure"]


def sync_figure(target: go.FigureWidget, fig: go.Figure, *, view: bool = False) -> None:
    """Make ``target`` show ``fig`` (a :func:`explorer.figures.graph_figure` result).

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
        edges, arrows, nodes, labels = (target.data[i] for i in (EDGES, ARROWS, NODES, LABELS))
        new_edges, new_arrows, new_nodes, new_labels = (fig.data[i] for i in (EDGES, ARROWS, NODES, LABELS))
        edges.x, edges.y = new_edges.x, new_edges.y
        arrows.x, arrows.y = new_arrows.x, new_arrows.y
        arrows.marker.angle = new_arrows.marker.angle
        arrows.marker.color, arrows.marker.size = new_arrows.marker.color, new_arrows.marker.size
        arrows.marker.symbol = new_arrows.marker.symbol
        nodes.x, nodes.y = new_nodes.x, new_nodes.y
        nodes.customdata, nodes.hovertext = new_nodes.customdata, new_nodes.hovertext
        marker = new_nodes.marker
        nodes.marker.size, nodes.marker.symbol = marker.size, marker.symbol
        nodes.marker.line.width, nodes.marker.line.color = marker.line.width, marker.line.color
        nodes.marker.color = marker.color
        nodes.marker.colorscale = marker.colorscale
        nodes.marker.showscale = bool(marker.showscale)
        labels.x, labels.y, labels.text = new_labels.x, new_labels.y, new_labels.text
        labels.visible = new_labels.visible
        if view:
            target.layout.xaxis.range = fig.layout.xaxis.range
            target.layout.yaxis.range = fig.layout.yaxis.range
