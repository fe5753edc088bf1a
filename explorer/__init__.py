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

from typing import TYPE_CHECKING, Any

from .errors import ExplorerError, ModelLoadError
from .load import load

if TYPE_CHECKING:
    from .graph import ModelGraph
    from .summary import ModelSummary

__all__ = ["load", "ModelGraph", "ModelSummary", "ExplorerError", "ModelLoadError", "__version__"]

__version__ = "0.1.0"

#: Names imported on first use: the graph model imports networkx, which a worker process that
#: only infers shapes or runs a pass never needs (``import explorer.worker`` stays light).
_LAZY = {"ModelGraph": ".graph", "ModelSummary": ".summary"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
