"""Hiding Q/DQ: the quantised graph drawn like the float one, the graph itself untouched."""

from __future__ import annotations

from explorer import load, zoo
from explorer.views.qdq import hide_qdq


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


def test_a_weight_behind_a_hidden_dq_is_labelled_by_its_role_and_type() -> None:
    from explorer.views.node_boxes import box_text

    graph = load(zoo.build("qdq_cnn"))
    view = hide_qdq(graph)
    conv = box_text(view.nx.nodes["/conv1/Conv"]).body
    assert conv[0].startswith("W int8 32×3×3×3")  # as the float graph's "W 32×3×3×3", with its type
    assert not any("quantized" in line for line in conv)
    assert box_text(view.nx.nodes["/fc/Gemm"]).body[0].startswith("B int8 10×128")  # Gemm's weight is B
    # the DQ of the full graph says its weight's type; a float graph's boxes are as before
    assert box_text(graph.nx.nodes["/conv1/DequantizeLinear"]).body[0] == "x int8 32×3×3×3"
    assert box_text(load("zoo:resnet18").nx.nodes["/conv1/Conv"]).body[0] == "W 64×3×7×7"
    assert view.nx.nodes["/conv1/Conv"]["weight_inputs"] == {
        "conv1.weight_quantized": "/conv1/DequantizeLinear_output_0"
    }
    assert "weight_inputs" not in graph.nx.nodes["/conv1/Conv"]  # the graph itself is untouched
