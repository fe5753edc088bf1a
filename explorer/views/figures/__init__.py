"""Figures: pure functions from results to plotly figures (no widgets, no state).

The CLI, the HTML report and the notebook widgets all draw with these. A graph
is drawn the way people read graphs (as Netron does): each op is a box sized
to its text, with a header naming the op, coloured by its category (see
:mod:`explorer.core.op_categories`, shown in the legend), and a body with the
weights' shapes and key attributes; collapsed scopes are stacked boxes with
their name, node count and op mix; edges are smooth curves (vertical
tangents at every point of the layout's route) with tensor shapes beside
them. Box text shows from :data:`~explorer.views.node_boxes.TEXT_ZOOM` pixels per
layout unit on, edge shapes when at most :data:`EDGE_LABEL_LIMIT` are in
view (:func:`text_visibility`; GraphView and the report's script follow the
zoom). The axes keep one scale (``scaleanchor``), so boxes keep their shape.

One module per job; this package re-exports their public names:

- :mod:`~explorer.views.figures.graph`: :func:`graph_figure`, which puts the parts together;
- :mod:`~explorer.views.figures.order`: the fixed trace order (the indices below);
- :mod:`~explorer.views.figures.items`: an item's data and hover text;
- :mod:`~explorer.views.figures.colors`: category, diff, colour-by and overlay colours;
- :mod:`~explorer.views.figures.geometry`: where the boxes are (:class:`BoxGeometry`);
- :mod:`~explorer.views.figures.edges`: edge routes, curves, arrowheads and shape labels;
- :mod:`~explorer.views.figures.boxes`: the filled box traces (shadows, bodies, headers);
- :mod:`~explorer.views.figures.selection`: the selection ring and outline;
- :mod:`~explorer.views.figures.view`: the first view and when text is readable;
- :mod:`~explorer.views.figures.overlays`: diff overlays and fusion notes;
- :mod:`~explorer.views.figures.histogram`, :mod:`~explorer.views.figures.timeline` and
  :mod:`~explorer.views.figures.dialects`: the bar charts (ops, nodes per step, ops per MLIR dialect).

The graph figure has a fixed trace order, so widgets can update it in place.
Edges, arrows and the hover markers are SVG (``scatter``) when at most
:data:`SVG_MAX_ITEMS` items are drawn, and WebGL (``scattergl``) above: a first WebGL
plot costs a context and shaders (about 0.35 s of a small graph's 0.5 s in headless
Chromium), while SVG markers get slow to pan in the thousands. WebGL traces are drawn
above the SVG ones whatever their index; SVG edges run under the boxes, as in Netron:

0. ``edges``: one line trace, curves separated by NaN (one gap per edge);
1. ``arrows``: arrowheads (triangles) on each target's top edge, where they fit;
2. ``nodes``: one invisible marker per item at its box centre, for hover and
   clicks; ``customdata`` = item id, ``marker.color`` = the item's colour (category, colour-by
   or overlay), ``marker.line`` = :func:`selection_ring`;
3. ``shadows``: the stacked look of collapsed scopes (SVG, filled);
4. ``BODIES`` (:data:`BODY_SLOTS` SVG traces, filled): box bodies, one trace per body colour
   (white; or the overlay / colour-by colour, tinted, with a strong outline);
5. ``HEADS`` (one SVG trace per category of the data file, filled): headers, in the legend;
6. ``selection``: the outline of the selected box;
7. ``labels``: header text (op type, scope name);
8. ``details``: body text (weights, attributes, op mix, shapes);
9. ``edge labels``: tensor shapes beside the edges.

Examples
--------
>>> from explorer import load
>>> fig = graph_figure(load("zoo:mlp"))
>>> [fig.data[i].name for i in (EDGES, ARROWS, NODES, LABELS, DETAILS, EDGE_LABELS)]
['edges', 'arrows', 'nodes', 'labels', 'details', 'edge labels']
>>> len(fig.data[NODES].x), len(fig.data) == TRACE_COUNT
(8, True)
"""

from explorer.views.figures.colors import COLOR_BY, DIFF_COLORS, category_color, node_colors, op_color
from explorer.views.figures.dialects import dialect_figure
from explorer.views.figures.edges import ARROW_LIMIT
from explorer.views.figures.geometry import BoxGeometry, box_geometry
from explorer.views.figures.graph import GRAPH_TEMPLATE, SVG_MAX_ITEMS, graph_figure
from explorer.views.figures.histogram import op_histogram_figure
from explorer.views.figures.items import item_data, node_hover
from explorer.views.figures.order import (
    ARROWS,
    BODIES,
    BODY_SLOTS,
    DETAILS,
    EDGE_LABELS,
    EDGES,
    HEADS,
    LABELS,
    NODES,
    SELECTION,
    SHADOWS,
    TRACE_COUNT,
)
from explorer.views.figures.overlays import diff_overlay, fusion_notes
from explorer.views.figures.selection import selection_outline, selection_ring
from explorer.views.figures.timeline import timeline_figure
from explorer.views.figures.view import (
    EDGE_LABEL_LIMIT,
    LABEL_LIMIT,
    initial_view,
    plot_height,
    text_in_view,
    text_visibility,
)

__all__ = [
    "EDGES",
    "GRAPH_TEMPLATE",
    "ARROWS",
    "NODES",
    "SHADOWS",
    "BODIES",
    "HEADS",
    "SELECTION",
    "LABELS",
    "DETAILS",
    "EDGE_LABELS",
    "TRACE_COUNT",
    "BODY_SLOTS",
    "LABEL_LIMIT",
    "EDGE_LABEL_LIMIT",
    "ARROW_LIMIT",
    "SVG_MAX_ITEMS",
    "DIFF_COLORS",
    "COLOR_BY",
    "BoxGeometry",
    "box_geometry",
    "item_data",
    "graph_figure",
    "node_colors",
    "node_hover",
    "diff_overlay",
    "fusion_notes",
    "op_color",
    "category_color",
    "selection_ring",
    "selection_outline",
    "text_visibility",
    "text_in_view",
    "plot_height",
    "op_histogram_figure",
    "dialect_figure",
    "timeline_figure",
    "initial_view",
]
