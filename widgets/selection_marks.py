"""Ring nodes in a live graph figure: the one place a selection is drawn (GraphView, TimelineStepper).

A node hidden in a collapsed scope rings the box that holds it. The ring is the ``nodes``
trace's marker outline plus a rounded outline in the selection trace
(:func:`explorer.views.figures.selection_ring`, :func:`explorer.views.figures.selection_outline`), sent
in one ``batch_update`` (:func:`ring` has an example).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from explorer.core.graph import ModelGraph
from explorer.views.figures import NODES, SELECTION, selection_outline, selection_ring
from explorer.views.layout import Layout

__all__ = ["ring", "drawn_item"]


def drawn_item(layout: Layout, node: str) -> str | None:
    """The item drawn for ``node``: itself, or the collapsed box that holds it (None if neither).

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.layout import layered
    >>> g = load("zoo:resnet18")
    >>> drawn_item(layered(g, collapse=1), "/layer1/layer1.0/conv1/Conv")
    'scope:layer1'
    """
    if node in layout.positions:
        return node
    holder = layout.item_of.get(node)
    return holder if holder in layout.positions else None


def ring(figure: Any, graph: ModelGraph, layout: Layout, nodes: Iterable[str]) -> list[str]:
    """Ring ``nodes`` (node ids of ``graph``) in ``figure``, drawn from ``layout``; clear the ring when empty.

    Returns
    -------
    list of str
        The drawn items ringed (boxes for nodes in collapsed scopes), in order, without repeats.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.figures import graph_figure
    >>> from explorer.views.layout import layered
    >>> import plotly.graph_objects as go
    >>> g = load("zoo:resnet18"); layout = layered(g, collapse=1)
    >>> figure = go.FigureWidget(graph_figure(g, layout))
    >>> ring(figure, g, layout, ["/layer1/layer1.0/conv1/Conv", "/layer1/layer1.1/conv2/Conv"])
    ['scope:layer1']
    >>> ring(figure, g, layout, []), figure.data[NODES].marker.line.width
    ([], 0.5)
    """
    trace = figure.data[NODES]
    drawn = list(trace.customdata)
    index = {item: k for k, item in enumerate(drawn)}
    shown: list[str] = []
    for node in nodes:
        item = drawn_item(layout, node)
        if item is not None and item in index and item not in shown:
            shown.append(item)
    widths, colors = selection_ring(drawn, shown or None)
    centers = [(trace.x[index[i]], trace.y[index[i]]) for i in shown]
    outline = selection_outline(graph, layout, shown, centers)
    with figure.batch_update():
        trace.marker.line.width = widths
        trace.marker.line.color = colors
        figure.data[SELECTION].x, figure.data[SELECTION].y = outline
    return shown
