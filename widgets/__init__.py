"""Notebook widgets of onnx-graph-explorer (the only package that imports ipywidgets).

Examples
--------
>>> from widgets import GraphView
>>> GraphView("zoo:mlp").graph.summary().nodes
6
"""

from __future__ import annotations

from .graph_view import GraphView
from .stepper import PassStepper

__all__ = ["GraphView", "PassStepper"]
