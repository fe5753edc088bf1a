"""The Relax adapter's answers to the core (:class:`~explorer.core.adapter.GraphAdapter`).

A Relax graph model is built from the graph data the worker extracts from an
``IRModule`` (bindings as nodes, ``origin`` back to ONNX nodes, fused functions as
scopes). Its scopes are Relax functions, not names, so they are drawn collapsed and a
binding moving into a fused function is a structural change. Weights are digested
from what the graph model keeps of each bound constant (dtype, shape, small values), so
a Relax-to-Relax diff sees a constant change that alters them.

:func:`relax_graph` builds that graph model (the graph data comes from
:func:`explorer.lower.tvm.relax_graph_data.relax_graph_data`, in the worker).

Examples
--------
>>> RELAX.ir, RELAX.scopes_from_names
('relax', False)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import networkx as nx

from explorer.core.adapter import GraphAdapter
from explorer.core.graph import ModelGraph

__all__ = ["RelaxAdapter", "RELAX", "relax_graph"]


class RelaxAdapter(GraphAdapter):
    """The adapter of TVM Relax graph models (the summary and digests come from the graph model).

    Examples
    --------
    >>> RelaxAdapter().ir
    'relax'
    """

    ir = "relax"
    _instance_name = "RELAX"
    node_noun = "Relax binding"


RELAX = RelaxAdapter()
"""The Relax adapter, shared by every Relax graph model."""


def relax_graph(data: Mapping[str, Any], source: str = "<relax>") -> ModelGraph:
    """Build the graph model of a Relax function from the records the worker made.

    Examples
    --------
    >>> from explorer.core.graph_schema import node_data
    >>> g = relax_graph({"name": "main", "nodes": [("lv", node_data("op", "add", "lv", op="relax.add"))],
    ...                  "edges": []})
    >>> g.ir, g.op_counts
    ('relax', Counter({'add': 1}))
    """
    graph = nx.MultiDiGraph(name=data["name"])
    graph.add_nodes_from(data["nodes"])
    graph.add_edges_from(data["edges"])
    weights = {w.name: w for _, d in data["nodes"] for w in d["weights"]}
    return ModelGraph(graph, name=data["name"], source=source, weights=weights, adapter=RELAX)
