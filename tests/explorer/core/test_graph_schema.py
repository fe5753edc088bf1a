"""Every node and edge the ONNX adapter builds has the one declared schema, at every depth."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from explorer import load
from explorer.core.graph_schema import EDGE_KEYS, NODE_KEYS, NODE_KINDS, node_data
from explorer.onnx_adapter.graph_builder import build_graph


@pytest.mark.parametrize("name", ["mlp", "resnet18", "control_flow"])
def test_every_node_and_edge_has_exactly_the_declared_keys(name: str) -> None:
    graph = load(f"zoo:{name}")
    graphs = [graph, graph.with_constant_nodes(), *(sub for _, sub in graph.iter_subgraphs())]
    kinds = set()
    for g in graphs:
        for _, data in g.nx.nodes(data=True):
            assert tuple(data) == NODE_KEYS
            kinds.add(data["kind"])
        for _, _, data in g.nx.edges(data=True):
            assert tuple(data) == EDGE_KEYS
    assert {"op", "input", "output"} <= kinds <= set(NODE_KINDS)


def test_ops_are_qualified_by_domain_and_tensor_nodes_carry_their_type() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    nodes = [
        helper.make_node("Relu", ["x"], ["h"], name="relu"),
        helper.make_node("FastGelu", ["h"], ["y"], name="gelu", domain="com.microsoft"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    graph = build_graph(model)
    assert graph.nx.nodes["relu"]["op"] == "Relu"
    assert graph.nx.nodes["gelu"]["op"] == "com.microsoft.FastGelu"
    assert graph.nx.nodes["gelu"]["op_type"] == "FastGelu" and graph.nx.nodes["gelu"]["shape"] is None
    assert graph.nx.nodes["input:x"]["shape"] == ("n", 4) and graph.nx.nodes["input:x"]["dtype"] == "float32"
    assert all(data["origin"] == () for _, data in graph.nx.nodes(data=True))  # ONNX is lowered from nothing


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="node kind"):
        node_data("binding", "relax.add", "lv0")
    assert node_data("op", "add", "lv0", op="relax.add")["op"] == "relax.add"  # another IR names its op
