"""The graph figure: a ModelGraph drawn the way people read graphs (boxes, curved edges, a legend).

:func:`graph_figure` puts together the parts the other modules of
:mod:`explorer.views.figures` draw: the edges (:mod:`~explorer.views.figures.edges`), the
hover markers, the boxes (:mod:`~explorer.views.figures.boxes`), the selection outline and
the text, in the fixed trace order of :mod:`~explorer.views.figures.order`, and lays out the
figure (one scale on both axes, the legend below the plot, the first view from
:func:`~explorer.views.figures.view.initial_view`).

Examples
--------
>>> from explorer import load
>>> from explorer.views.figures.order import LABELS, NODES, TRACE_COUNT
>>> fig = graph_figure(load("zoo:mlp"), selected="/fc1/Gemm")
>>> len(fig.data) == TRACE_COUNT, float(fig.data[NODES].marker.line.width[2])
(True, 2.5)
>>> sorted(fig.data[LABELS].text)
['Flatten', 'Gemm', 'Gemm', 'Gemm', 'Relu', 'Relu', 'input', 'logits']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go

from explorer.core.op_categories import CATEGORIES
from explorer.views.figures.boxes import box_traces
from explorer.views.figures.colors import item_colors
from explorer.views.figures.edges import arrow_heads, edge_curves, edge_labels, edge_routes
from explorer.views.figures.geometry import BoxGeometry, box_geometry
from explorer.views.figures.items import item_data, item_hover
from explorer.views.figures.selection import selection_outline, selection_ring
from explorer.views.figures.view import initial_view, text_in_view, text_visibility
from explorer.views.layout import Layout, auto_collapse, layered
from explorer.views.node_boxes import BODY_FONT, HEADER_FONT, HEADER_PX, PX_PER_UNIT

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["GRAPH_TEMPLATE", "SVG_MAX_ITEMS", "graph_figure"]

SVG_MAX_ITEMS = 500
"""Figures of at most this many drawn items draw edges, arrows and hover markers as SVG; more, WebGL."""

GRAPH_TEMPLATE: dict[str, Any] = {
    "layout": {
        "font": {"color": "#2a3f5f"},
        "title": {"x": 0.05},
        "hoverlabel": {"align": "left"},
        "colorway": ["#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692"],
    }
}
"""The graph figure's plotly template: what it takes from plotly's default one (the figure sets
the rest itself). The default template is 7 KB of JSON that FigureWidget validates again (0.03-0.06
s of a GraphView in the kernel) and plotly.js applies in the page."""

_MARGIN = {"l": 10, "r": 10, "b": 46}  # the legend sits below the plot (two rows fit)
_INSET = 6.0 / PX_PER_UNIT  # body text starts this far right of the box's left edge

_View = tuple[Sequence[float], Sequence[float]]  # x range, y range


def graph_figure(
    graph: ModelGraph,
    layout: Layout | None = None,
    overlay: Mapping[str, Any] | None = None,
    *,
    color_by: str = "op_type",
    palette: Mapping[str, str] | None = None,
    colorscale: str = "Viridis",
    title: str | None = None,
    height: int = 700,
    labels: bool | None = None,
    selected: str | None = None,
    notes: Mapping[str, str] | None = None,
    webgl: bool | None = None,
    edge_marks: Mapping[str, str] | None = None,
) -> go.Figure:
    """Draw a ModelGraph: op boxes by category, smooth edges with arrowheads and shapes, hover details.

    Parameters
    ----------
    graph : ModelGraph
        The graph.
    layout : Layout, optional
        Positions; by default :func:`explorer.views.layout.layered` with
        :func:`~explorer.views.layout.auto_collapse` (big graphs open collapsed).
    overlay : mapping, optional
        Per-node values or categories to colour by (see
        :func:`~explorer.views.figures.colors.node_colors`), e.g.
        :func:`~explorer.views.figures.overlays.diff_overlay`, partitions or latencies: box
        bodies take the colour (tinted) and a strong outline; headers keep the op category.
    color_by : str
        One of :data:`~explorer.views.figures.colors.COLOR_BY` when there is no overlay (``"op_type"``: plain
        white bodies under category headers; the others colour the bodies).
    palette : mapping, optional
        Category colours of a categorical overlay.
    colorscale : str
        Colour scale of a numeric overlay.
    title : str, optional
        Figure title.
    height : int
        Figure height in pixels.
    labels : bool, optional
        Show box text; by default when the first view is close enough
        (:func:`~explorer.views.figures.view.text_visibility`).
    selected : str, optional
        An item to outline.
    notes : mapping, optional
        Item -> a line added to its hover text (e.g. the fusion it took part in).
    webgl : bool, optional
        Draw edges, arrows and hover markers with WebGL (``scattergl``) rather than SVG;
        by default when more than :data:`SVG_MAX_ITEMS` items are drawn. A widget that
        redraws one figure in place passes the same value every time (trace types stay).
    edge_marks : mapping, optional
        Tensor -> a mark written before its shape on its edges (e.g. a partition boundary:
        ``"⇄ CPU"``), shown with the tensor shapes.

    Returns
    -------
    plotly.graph_objects.Figure

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.figures.order import EDGES, HEADS, NODES
    >>> fig = graph_figure(load("zoo:resnet18"), title="ResNet-18")
    >>> fig.data[NODES].type, fig.data[EDGES].mode, fig.data[HEADS].fill
    ('scatter', 'lines', 'toself')
    >>> graph_figure(load("zoo:mlp"), webgl=True).data[EDGES].type
    'scattergl'
    """
    if layout is None:
        layout = layered(graph, collapse=auto_collapse(graph), node_size="auto")
    items = list(layout.positions)
    point_trace = "scattergl" if (len(items) > SVG_MAX_ITEMS if webgl is None else webgl) else "scatter"
    datas = [item_data(graph, layout, i) for i in items]
    geo = box_geometry(graph, layout, datas)
    colors = item_colors(layout, datas, color_by, overlay, palette)
    numeric = any(isinstance(c, float) for c in colors)  # colour strings, or values for a scale

    routes = edge_routes(layout, geo)
    edge_text, label_x, label_y = edge_labels(graph, layout, routes, edge_marks)
    x_range, y_range = initial_view(geo, plot_height_px := float(height - _top_margin(title) - _MARGIN["b"]))
    auto_text, auto_edges = text_visibility(geo.x, geo.y, label_x, label_y, x_range, y_range, plot_height_px)
    show_text = auto_text if labels is None else labels
    show_edges = auto_edges if labels is None else labels
    # plotly widens the narrow x range of the first view to the plot: draw the text of a wide view
    center, span = (x_range[0] + x_range[1]) / 2, y_range[1] - y_range[0]
    view = ([center - 2 * span, center + 2 * span], y_range)

    traces: list[Any] = [  # in the order of explorer.views.figures.order
        *_edge_traces(point_trace, layout, routes),
        _node_trace(point_trace, graph, geo, datas, colors, numeric, colorscale, selected, notes),
        *box_traces(
            geo,
            datas,
            colors,
            plain=overlay is None and color_by == "op_type",
            legend=overlay is not None and not numeric,
            palette=palette,
            colorscale=colorscale,
        ),
        _selection_trace(graph, layout, geo, selected),
        *_box_text_traces(geo, show_text, view),
        _text_trace(
            "edge labels",
            label_x,
            label_y,
            edge_text,
            ["#666"] * len(edge_text),
            "middle right",
            8,
            show_edges,
            view,
        ),
    ]
    layout_props = _figure_layout(layout, geo, title, height, x_range, y_range)
    # the traces are built here, with numpy arrays: plotly's validation would cost more than the drawing
    return go.Figure(data=traces, layout=layout_props, _validate=False)


def _edge_traces(point_trace: str, layout: Layout, routes: Sequence[np.ndarray]) -> list[dict[str, Any]]:
    """The ``edges`` (curves) and ``arrows`` (arrowheads) traces."""
    edge_x, edge_y = edge_curves(routes)
    arrow_x, arrow_y = arrow_heads(layout, routes)
    return [
        dict(
            type=point_trace,
            x=edge_x,
            y=edge_y,
            mode="lines",
            name="edges",
            hoverinfo="skip",
            line={"width": 1.2, "color": "#5f5f5f"},
            showlegend=False,
        ),
        dict(
            type=point_trace,
            x=arrow_x,
            y=arrow_y,
            mode="markers",
            name="arrows",
            hoverinfo="skip",
            showlegend=False,
            marker={"symbol": "triangle-down", "size": 7, "color": "#5f5f5f"},
        ),
    ]


def _node_trace(
    point_trace: str,
    graph: ModelGraph,
    geo: BoxGeometry,
    datas: Sequence[Mapping[str, Any]],
    colors: Sequence[Any],
    numeric: bool,
    colorscale: str,
    selected: str | None,
    notes: Mapping[str, str] | None,
) -> dict[str, Any]:
    """The ``nodes`` trace: one invisible marker per item, with its id, colour, hover text and ring."""
    items = list(geo.items)
    hover = [item_hover(graph, d, i) for d, i in zip(datas, items, strict=True)]
    if notes:
        hover = [f"{h}<br><i>{notes[i]}</i>" if i in notes else h for h, i in zip(hover, items, strict=True)]
    line_widths, line_colors = selection_ring(items, selected)
    marker: dict[str, Any] = {
        "size": 10,
        "symbol": "square",
        "line": {"width": line_widths, "color": line_colors},
        "opacity": 0,
    }
    if numeric:
        known = [c for c in colors if isinstance(c, float)]
        floor = min(known)  # items without a value take the bottom of the scale
        values = np.array([c if isinstance(c, float) else floor for c in colors], dtype=float)
        marker.update(
            color=values, colorscale=colorscale, showscale=True, colorbar={"thickness": 12, "len": 0.5}
        )
    else:
        marker["color"] = colors
    return dict(
        type=point_trace,
        x=geo.x,
        y=geo.y,
        mode="markers",
        name="nodes",
        customdata=items,
        hovertext=hover,
        hoverinfo="text",
        marker=marker,
        showlegend=False,
    )


def _selection_trace(
    graph: ModelGraph, layout: Layout, geo: BoxGeometry, selected: str | None
) -> dict[str, Any]:
    """The ``selection`` trace: the outline around the selected box (empty when none is)."""
    if selected is not None and selected in layout.positions:
        k = geo.items.index(selected)
        sel_x, sel_y = selection_outline(graph, layout, selected, (geo.x[k], geo.y[k]))
    else:
        sel_x, sel_y = np.empty(0), np.empty(0)
    return dict(
        type="scatter",
        x=sel_x,
        y=sel_y,
        mode="lines",
        name="selection",
        hoverinfo="skip",
        showlegend=False,
        line={"width": 3, "color": "#111"},
    )


def _box_text_traces(geo: BoxGeometry, show: bool, view: _View) -> list[dict[str, Any]]:
    """The ``labels`` (header text) and ``details`` (body text) traces."""
    head_h = HEADER_PX / PX_PER_UNIT
    x0, y0, y1 = geo.left, geo.bottom, geo.top
    has_body = np.array([bool(t.body) for t in geo.texts], dtype=bool)
    return [
        _text_trace(
            "labels",
            geo.x,
            y1 - head_h / 2,
            [t.header for t in geo.texts],
            [CATEGORIES[t.category].text for t in geo.texts],
            "middle center",
            HEADER_FONT,
            show,
            view,
        ),
        _text_trace(
            "details",
            (x0 + _INSET)[has_body],
            ((y1 - head_h + y0) / 2)[has_body],
            ["<br>".join(t.body) for t in geo.texts if t.body],
            ["#333"] * int(has_body.sum()),
            "middle right",
            BODY_FONT,
            show,
            view,
        ),
    ]


def _text_trace(
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    text: Sequence[str],
    colors: Sequence[str],
    position: str,
    size: int,
    show: bool,
    view: _View,
) -> dict[str, Any]:
    """A text trace holding all its text in ``meta``, drawing what is near the view.

    The part near the view is :func:`~explorer.views.figures.view.text_in_view`'s.
    """
    meta = {"x": np.asarray(x, dtype=float).tolist(), "y": np.asarray(y, dtype=float).tolist()}
    meta.update(text=list(text), color=list(colors))
    shown = text_in_view(meta, *view) if show else text_in_view(meta, [0.0, 0.0], [1.0, -1.0])
    return dict(
        type="scatter",
        mode="text",
        name=name,
        x=shown["x"],
        y=shown["y"],
        text=shown["text"],
        textposition=position,
        textfont={"size": size, "color": shown["color"]},
        hoverinfo="skip",
        visible=show,
        showlegend=False,
        meta=meta,
    )


def _top_margin(title: str | None) -> int:
    return 40 if title else 10


def _figure_layout(
    layout: Layout,
    geo: BoxGeometry,
    title: str | None,
    height: int,
    x_range: Sequence[float],
    y_range: Sequence[float],
) -> dict[str, Any]:
    """The figure's layout: one scale on both axes, hidden axes, the legend in a row below the plot."""
    return dict(
        title=title,
        height=height,
        margin={**_MARGIN, "t": _top_margin(title)},
        plot_bgcolor="white",
        paper_bgcolor="white",
        dragmode="pan",
        hovermode="closest",
        hoverdistance=40,
        uirevision=layout.version or "graph",
        xaxis={"visible": False, "range": x_range},
        yaxis={"visible": False, "range": y_range, "scaleanchor": "x", "scaleratio": 1},
        hoverlabel={"align": "left", "font": {"family": "monospace", "size": 11}},
        legend={
            "orientation": "h",
            "x": 0,
            "y": 0,
            "yanchor": "top",
            "font": {"size": 11},
            "itemclick": False,
            "itemdoubleclick": False,
            "bgcolor": "rgba(255,255,255,0.8)",
        },
        showlegend=True,
        meta={"x_scale": geo.x_scale},
        template=GRAPH_TEMPLATE,
    )
