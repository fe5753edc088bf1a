"""The graph figure's trace order: a fixed index per trace, so widgets can update a figure in place.

:func:`~explorer.views.figures.graph.graph_figure` always draws :data:`TRACE_COUNT` traces, in
this order (see :mod:`explorer.views.figures` for what each one draws): ``edges``, ``arrows``,
``nodes``, ``shadows``, :data:`BODY_SLOTS` body traces, one header trace per op category
(the legend), ``selection``, ``labels``, ``details`` and ``edge labels``.

Examples
--------
>>> from explorer.core.op_categories import CATEGORIES
>>> (EDGES, ARROWS, NODES, SHADOWS, BODIES)
(0, 1, 2, 3, 4)
>>> HEADS == BODIES + BODY_SLOTS, SELECTION == HEADS + len(CATEGORIES)
(True, True)
>>> TRACE_COUNT == EDGE_LABELS + 1 == SELECTION + 4
True
"""

from __future__ import annotations

from explorer.core.op_categories import CATEGORIES

__all__ = [
    "EDGES",
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
]

BODY_SLOTS = 24
"""Body traces: at most this many body colours in one figure (more share the last one)."""

EDGES, ARROWS, NODES, SHADOWS = 0, 1, 2, 3
BODIES = 4
"""Index of the first body trace (:data:`BODY_SLOTS` of them)."""
HEADS = BODIES + BODY_SLOTS
"""Index of the first header trace (one per category, in :data:`~explorer.core.op_categories.CATEGORIES`
order)."""
SELECTION = HEADS + len(CATEGORIES)
LABELS, DETAILS, EDGE_LABELS = SELECTION + 1, SELECTION + 2, SELECTION + 3
TRACE_COUNT = EDGE_LABELS + 1
"""How many traces :func:`~explorer.views.figures.graph.graph_figure` draws (always the same)."""
