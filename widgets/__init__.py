"""Notebook widgets of onnx-graph-explorer (the only package that imports ipywidgets).

Importing it starts, in the background, the warm worker and plotly's widget imports
(:func:`widgets.warm.warm_up`), so the first GraphView of a kernel waits less.

Examples
--------
>>> from widgets import GraphView
>>> GraphView("zoo:mlp").graph.summary().nodes
6
"""

from __future__ import annotations

from .graph_view import GraphView
from .stepper import PassStepper
from .warm import warm_up

warm_up()

__all__ = ["GraphView", "PassStepper", "warm_up"]
