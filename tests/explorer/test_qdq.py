"""Hiding Q/DQ: the quantised graph drawn like the float one, the graph itself untouched."""

from __future__ import annotations

from explorer import load, zoo
from explorer.qdq import hide_qdq


def test_hidden_qdq_rewires_data_paths_and_moves_weights_to_their_consumers() -> None:
    graph = load(zoo.build("qdq_cnn"))
    before = graph.nx.number_of_nodes()
    view = hide_qdq(graph)
    assert graph.nx.number_of_nodes() == before  # the original graph model is not changed
    ops = {view.nx.nodes[n]["op_type"] for n in view.op_nodes()}
    assert not ops & {"QuantizeLinear", "DequantizeLinear"} and "Conv" in ops
    conv = next(n for n in view.op_nodes() if view.nx.nodes[n]["op_type"] == "Conv")
    data = view.nx.nodes[conv]
    assert data["quantized"] and any(w.dtype in ("int8", "uint8") for w in data["weights"])
    assert list(view.nx.predecessors(conv))  # the data path reaches the Conv without its Q/DQ
    assert "hidden" in view.notes[-1] and view.model is graph.model


def test_a_float_graph_is_unchanged() -> None:
    graph = load(zoo.build("mlp"))
    view = hide_qdq(graph)
    assert sorted(view.nx.edges(keys=True)) == sorted(graph.nx.edges(keys=True))
