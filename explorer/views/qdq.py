"""A quantised (QDQ) graph read like the float one: its QuantizeLinear / DequantizeLinear nodes hidden.

A QDQ model puts a QuantizeLinear and a DequantizeLinear on nearly every tensor and a
DequantizeLinear on every weight, which triples the node count and hides the network's
shape. :func:`hide_qdq` gives a view of the graph model without them: a Q or DQ on a data
path becomes a plain edge from its producer to its consumers (the edge keeps the tensor
the consumer reads, so its shape and name are right), a DQ of a weight hands its weight
to the nodes it feeds, and every node that touched one is marked ``quantized``. A node
given a weight records which of its inputs the weight stands for (``weight_inputs``:
weight name -> the DQ output it read), so its box labels the weight by that input's role
and type, ``W int8 32×3×3×3`` as in the float graph, not by the quantiser's tensor name.
The view is for drawing and diffing; the model itself is untouched.

Examples
--------
>>> from explorer import load
>>> g = load("zoo:qdq_cnn")
>>> view = hide_qdq(g)
>>> g.op_counts["DequantizeLinear"] > 0, view.op_counts["DequantizeLinear"]
(True, 0)
>>> len(view.op_nodes()) < len(g.op_nodes())
True
>>> from explorer.views.node_boxes import box_text
>>> box_text(view.nx.nodes["/conv1/Conv"]).body[0]  # the float graph's "W 32×3×3×3", with its type
'W int8 32×3×3×3  B 32'
"""

from __future__ import annotations

from collections import Counter

from explorer.core.graph import ModelGraph

__all__ = ["QDQ_OPS", "hide_qdq", "is_qdq"]

QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
"""The ops :func:`hide_qdq` removes (in the ONNX domain and com.microsoft's 16-bit variants)."""


def is_qdq(data: dict) -> bool:
    """Whether a node's data is a QuantizeLinear or DequantizeLinear.

    Examples
    --------
    >>> dq = {"kind": "op", "op_type": "DequantizeLinear", "domain": "com.microsoft"}
    >>> is_qdq(dq), is_qdq({"kind": "input"})
    (True, False)
    """
    return (
        data.get("kind") == "op"
        and data.get("op_type") in QDQ_OPS
        and data.get("domain", "")
        in (
            "",
            "ai.onnx",
            "com.microsoft",
        )
    )


def hide_qdq(graph: ModelGraph) -> ModelGraph:
    """A view of ``graph`` without its QuantizeLinear / DequantizeLinear nodes (see the module docs).

    Parameters
    ----------
    graph : ModelGraph
        Any graph (its nodes and edges are copied, never changed).

    Returns
    -------
    ModelGraph
        The same model and protos, a graph model without Q/DQ; ``notes`` says how many were hidden.

    Examples
    --------
    >>> from explorer import load
    >>> view = hide_qdq(load("zoo:qdq_cnn"))
    >>> any(d.get("quantized") for _, d in view.nx.nodes(data=True))
    True
    """
    nx_graph = graph.nx.copy()  # node and edge dicts are copies: the graph's own stay as they are
    hidden = [n for n, d in graph.nx.nodes(data=True) if is_qdq(d)]
    order = {n: graph.nx.nodes[n].get("index", 0) for n in hidden}
    for node in sorted(hidden, key=order.__getitem__):
        data = nx_graph.nodes[node]
        producers = list(nx_graph.in_edges(node, keys=True, data=True))
        consumers = list(nx_graph.out_edges(node, keys=True, data=True))
        for source, _, _, _ in producers:
            if nx_graph.nodes[source].get("kind") == "op":
                nx_graph.nodes[source]["quantized"] = True
        for _, target, key, edge in consumers:
            target_data = nx_graph.nodes[target]
            if target_data.get("kind") == "op":
                target_data["quantized"] = True
            if producers:
                source, _, _, _ = producers[0]  # a Q/DQ has one data input; scale and zero point are weights
                nx_graph.add_edge(source, target, key=key, **edge)
            elif data.get("weights"):  # a DQ of a weight: the weight moves to its consumer's box
                weight = data["weights"][0]  # x; its scale and zero point stay with the hidden DQ
                target_data["weights"] = (*(target_data.get("weights") or ()), weight)
                # the box names the weight by the input it feeds (Conv's W), not by its own name
                target_data["weight_inputs"] = {**(target_data.get("weight_inputs") or {}), weight.name: key}
        nx_graph.remove_node(node)
    counts = Counter(graph.op_counts)
    for op in QDQ_OPS:
        counts.pop(op, None)
    view = graph.derive(
        nx_graph,
        notes=[*graph.notes, f"{len(hidden)} QuantizeLinear / DequantizeLinear nodes hidden"],
        op_counts=counts,
    )
    return view
