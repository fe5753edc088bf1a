"""Compilers below the ONNX graph: TVM Relax import (its lowering pipeline and build come next).

Examples
--------
>>> from explorer import load
>>> from explorer.lower import relax_import
>>> relax_import(load("zoo:mlp")).ok
True
"""

from __future__ import annotations

from .relax_import import FIX, ImportFailure, RelaxImport, relax_graph, relax_import

__all__ = ["FIX", "ImportFailure", "RelaxImport", "relax_graph", "relax_import"]
