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

from typing import TYPE_CHECKING

from explorer.core.errors import ExplorerError, ModelLoadError
from explorer.core.lazy_exports import lazy_exports
from explorer.onnx_adapter.load import load

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph
    from explorer.core.summary import ModelSummary

__all__ = ["load", "ModelGraph", "ModelSummary", "ExplorerError", "ModelLoadError", "__version__"]

__version__ = "0.1.0"

#: Names imported on first use: the graph model imports networkx, which a worker process that
#: only infers shapes or runs a pass never needs (``import explorer.isolation.worker`` stays light).
_LAZY = {"ModelGraph": "explorer.core.graph", "ModelSummary": "explorer.core.summary"}


lazy_exports(__name__, _LAZY)
