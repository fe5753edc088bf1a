"""onnx-graph-explorer core: load ONNX models into networkx graphs and explain what compilers do to them.

This package never imports Jupyter or ipywidgets; the widgets live in :mod:`widgets`.

Examples
--------
>>> import explorer
>>> g = explorer.load("zoo:mlp")
>>> g.summary().nodes > 0
True
"""

from __future__ import annotations

from .errors import ExplorerError, ModelLoadError
from .graph import ModelGraph
from .load import load
from .summary import ModelSummary

__all__ = ["load", "ModelGraph", "ModelSummary", "ExplorerError", "ModelLoadError", "__version__"]

__version__ = "0.1.0"
