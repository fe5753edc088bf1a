"""IREE, the second compiler below the ONNX graph: MLIR import, its phases, parameter archives and the build.

``iree-compile`` and its importer run as child processes; the parent reads their MLIR dumps
as text. The compiler's one interface is :data:`explorer.lower.compilers.COMPILERS` ``["iree"]``.

Examples
--------
>>> from explorer.lower.iree.mlir_graph_data import dialects_in_text
>>> dialects_in_text("%0 = arith.addi %a, %b : i32")
{'arith': 1}
"""

from __future__ import annotations

__all__: list[str] = []
