"""The MLIR adapter's answers to the core (:class:`~explorer.core.adapter.GraphAdapter`).

An MLIR graph model is built from the records the worker reads out of an MLIR module
(:func:`explorer.lower.iree.mlir_graph_data.mlir_graph_data`: ops as nodes, SSA values as edges,
dispatch and execution regions as scopes, ``origin`` back to ONNX nodes through locations).
Its scopes are regions, not names, and its weights are the constants the module holds (their
dtype and shape; the values stay elided), so everything else (summary, diff, layout, figures,
the stepper) reads it as it reads ONNX and Relax graphs.

Examples
--------
>>> MLIR.ir, MLIR.scopes_from_names
('mlir', False)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import networkx as nx

from explorer.core.adapter import GraphAdapter
from explorer.core.graph import ModelGraph

__all__ = ["MlirAdapter", "MLIR", "mlir_graph"]


class MlirAdapter(GraphAdapter):
    """The adapter of MLIR graph models (IREE's path; summary and digests from the graph model).

    Examples
    --------
    >>> MlirAdapter().ir
    'mlir'
    """

    ir = "mlir"
    _instance_name = "MLIR"
    node_noun = "MLIR op"


MLIR = MlirAdapter()
"""The MLIR adapter, shared by every MLIR graph model."""


def mlir_graph(data: Mapping[str, Any], source: str = "<mlir>") -> ModelGraph:
    """Build the graph model of an MLIR function from the records the worker made.

    Examples
    --------
    >>> from explorer.core.graph_schema import node_data
    >>> g = mlir_graph({"name": "main", "nodes": [("%0", node_data("op", "linalg.fill", "%0",
    ...                 domain="linalg", op="linalg.fill"))], "edges": []})
    >>> g.ir, g.op_counts
    ('mlir', Counter({'linalg.fill': 1}))
    """
    graph = nx.MultiDiGraph(name=data["name"])
    graph.add_nodes_from(data["nodes"])
    graph.add_edges_from(data["edges"])
    weights = {w.name: w for _, d in data["nodes"] for w in d["weights"]}
    return ModelGraph(graph, name=data["name"], source=source, weights=weights, adapter=MLIR)
