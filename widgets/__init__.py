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

from .warm import warm_up

warm_up()  # first: the worker starts on the other core while the rest of the widgets import

from .bench_panel import BenchPanel  # noqa: E402
from .coverage_panel import CoveragePanel  # noqa: E402
from .graph_view import GraphView  # noqa: E402
from .stepper import PassStepper  # noqa: E402
from .timeline_stepper import TimelineStepper  # noqa: E402

__all__ = ["GraphView", "PassStepper", "TimelineStepper", "BenchPanel", "CoveragePanel", "warm_up"]
