"""Notebook widgets of onnx-graph-explorer (the only package that imports ipywidgets).

The graph view and the pass stepper arrive with later work; this package is the
place for them.

Examples
--------
>>> import widgets
>>> widgets.__all__
[]
"""

from __future__ import annotations

__all__: list[str] = []
