"""Notebook widgets of onnx-graph-explorer (the only package that imports ipywidgets).

The widget classes import on first use (``from widgets import GraphView``), and the first
of them starts, before importing anything else, the warm worker in the background
(:func:`widgets.warm.warm_up`), so the first GraphView of a kernel waits less. A bare
``import widgets`` (as the kernel extension :mod:`widgets.kernel_warm` does at start-up)
imports and starts nothing.

Examples
--------
>>> from widgets import GraphView
>>> GraphView("zoo:mlp").graph.summary().nodes
6
"""

from __future__ import annotations

import importlib
from typing import Any

from .warm import warm_up

__all__ = [
    "Explorer",
    "GraphView",
    "PassStepper",
    "TimelineStepper",
    "BenchPanel",
    "CoveragePanel",
    "warm_up",
]

#: Public name -> the module that defines it (imported on first use).
_WIDGETS = {
    "BenchPanel": "bench_panel",
    "CoveragePanel": "coverage_panel",
    "Explorer": "explorer_app",
    "GraphView": "graph_view",
    "PassStepper": "stepper",
    "TimelineStepper": "timeline_stepper",
}


def __getattr__(name: str) -> Any:
    if name not in _WIDGETS:
        raise AttributeError(f"module 'widgets' has no attribute {name!r}")
    warm_up()  # first: the worker starts on the other core while the widgets import
    value = getattr(importlib.import_module(f".{_WIDGETS[name]}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
