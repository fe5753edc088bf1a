"""ModelGraph: node ids, edges, weights, constants, subgraphs, and iterative walks on huge graphs."""

from __future__ import annotations

import inspect
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from explorer import load
from explorer.core.tensors import TensorInfo
from explorer.onnx_adapter.graph_builder import build_graph
from explorer.onnx_adapter.protos import iter_graphs
from tests.conftest import tiny_model


def _model(nodes, inputs=(("x", [2, 3]),), outputs=(("y", [2, 3]),), initializers=(), opset=17):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_one_node_per_operator_plus_inputs_and_outputs(tiny: onnx.ModelProto) -> None:
    graph = load(tiny)
    kinds = dict(graph.nx.nodes(data="kind"))
    assert kinds == {
        "input:x": "input",
        "/fc/MatMul": "op",
        "/fc/Add": "op",
        "/act/Relu": "op",
        "output:y": "output",
    }
    assert graph.op_nodes() == ["/fc/MatMul", "/fc/Add", "/act/Relu"]
    assert len(graph) == 3


def test_edges_are_keyed_by_tensor_with_shape_dtype_bytes(tiny: onnx.ModelProto) -> None:
    graph = load(tiny, input_shapes={"x": [2, 4]})
    edges = {key: data for _, _, key, data in graph.nx.edges(keys=True, data=True)}
    assert set(edges) == {"x", "h", "z", "y"}
    assert edges["h"]["shape"] == (2, 3)
    assert edges["h"]["dtype"] == "float32"
    assert edges["h"]["bytes"] == 24
    assert graph.nx.has_edge("/fc/MatMul", "/fc/Add", key="h")


def test_initializers_are_attached_to_their_consumers_not_drawn(tiny: onnx.ModelProto) -> None:
    graph = load(tiny)
    weights = graph.node("/fc/MatMul")["weights"]
    assert [w.name for w in weights] == ["W"]
    assert isinstance(weights[0], TensorInfo)
    assert weights[0].shape == (4, 3) and weights[0].dtype == "float32" and weights[0].nbytes == 48
    assert graph.node("/fc/Add")["weights"][0].values == (0.0, 0.0, 0.0)  # small: values kept
    assert len(weights[0].values) == 12  # at most SMALL_VALUE_LIMIT elements: values kept
    assert not any(n.startswith("const:") for n in graph.nx)


def test_switch_draws_constants_as_nodes(tiny: onnx.ModelProto) -> None:
    shown = load(tiny).with_constant_nodes()
    assert shown.node("const:W")["kind"] == "constant"
    assert shown.nx.has_edge("const:W", "/fc/MatMul", key="W")


def test_constant_nodes_fold_into_consumers_or_show_on_request() -> None:
    shape = helper.make_node("Constant", [], ["shape"], name="/c/Constant", value_ints=[3, 2])
    scale = helper.make_node("Constant", [], ["scale"], name="/c/Constant_1", value_float=2.0)
    nodes = [
        shape,
        scale,
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="/r/Reshape"),
        helper.make_node("Mul", ["r", "scale"], ["y"], name="/m/Mul"),
    ]
    model = _model(nodes, outputs=(("y", [3, 2]),))
    folded = load(model)
    assert "/c/Constant" not in folded.nx
    assert folded.node("/r/Reshape")["weights"][0].values == (3, 2)
    assert folded.node("/r/Reshape")["weights"][0].source == "constant"
    assert folded.node("/m/Mul")["weights"][0].values == (2.0,)
    assert folded.summary().ops == {"Constant": 2, "Reshape": 1, "Mul": 1}
    shown = load(model, constants_as_nodes=True)
    assert shown.node("/c/Constant")["op_type"] == "Constant"
    assert shown.nx.has_edge("/c/Constant", "/r/Reshape", key="shape")


def test_node_ids_are_unique_and_stable_without_names_or_with_duplicates() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Neg", ["b"], ["c"], name="dup"),
        helper.make_node("Neg", ["c"], ["d"], name="dup"),
        helper.make_node("Identity", ["d"], ["y"], name="input:x"),  # collides with an input id
    ]
    model = _model(nodes)
    first = load(model).op_nodes()
    assert first == ["Relu#0", "Relu#1", "dup#2", "dup#3", "input:x#4"]
    assert load(model).op_nodes() == first


def test_tensor_used_twice_by_one_node_is_one_edge_with_two_slots() -> None:
    graph = load(_model([helper.make_node("Mul", ["x", "x"], ["y"], name="sq")]))
    assert graph.nx.number_of_edges("input:x", "sq") == 1
    assert graph.nx.edges["input:x", "sq", "x"]["slots"] == (0, 1)


def test_attributes_are_decoded() -> None:
    node = helper.make_node(
        "Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[1, 1], auto_pad="NOTSET", group=1
    )
    w = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
    model = _model([node], inputs=(("x", [1, 1, 4, 4]),), outputs=(("y", [1, 1, 4, 4]),), initializers=[w])
    attrs = load(model).node("conv")["attributes"]
    assert attrs == {"kernel_shape": [1, 1], "auto_pad": "NOTSET", "group": 1}


def _if_model(depth: int) -> onnx.ModelProto:
    """An If nested DEPTH deep; the innermost branch reads the outer-scope tensor x."""
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])
    inner = helper.make_graph([helper.make_node("Relu", ["x"], ["out"], name="innermost")], "leaf", [], [out])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["out"], name="other")], "other", [], [out])
    for level in range(depth):
        inner = helper.make_graph(
            [
                helper.make_node(
                    "If", ["cond"], ["out"], name=f"if{level}", then_branch=inner, else_branch=other
                )
            ],
            f"level{level}",
            [],
            [out],
        )
    cond = helper.make_node(
        "Constant", [], ["cond"], name="cond", value=numpy_helper.from_array(np.array(True))
    )
    top = inner.node[0]
    top.output[0] = "y"
    return _model([cond, top])


def test_subgraphs_are_nested_model_graphs_with_outer_scope_edges() -> None:
    graph = load(_if_model(2))
    top_id = "if1"
    assert set(graph.node(top_id)["subgraphs"]) == {"then_branch", "else_branch"}
    # the If reads x only through its subgraphs: an implicit edge keeps the data-flow order
    assert graph.nx.edges["input:x", top_id, "x"]["implicit"] is True
    then = graph.subgraphs[top_id]["then_branch"]
    assert then.depth == 1
    assert then.node("outer:cond")["kind"] == "outer"
    leaf = then.subgraphs["if0"]["then_branch"]
    assert leaf.node("outer:x")["kind"] == "outer"
    assert leaf.nx.has_edge("outer:x", "innermost", key="x")
    assert len(list(graph.iter_subgraphs())) == 4
    assert graph.summary().subgraphs == 4 and graph.summary().max_depth == 2


def test_deeply_nested_control_flow_needs_no_recursion() -> None:
    # protobuf itself refuses messages nested over 100 levels (about 32 If levels)
    depth = 30
    model = _if_model(depth)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 40)  # our own walks must not depend on the stack
    try:
        graph = build_graph(model, source="deep")
        assert sum(1 for _ in iter_graphs(model.graph)) == 1 + 2 * depth
    finally:
        sys.setrecursionlimit(limit)
    assert max(sub.depth for _, sub in graph.iter_subgraphs()) == depth


@pytest.mark.slow
def test_chain_of_100k_nodes_loads_without_recursion() -> None:
    n = 100_000
    nodes = [
        helper.make_node("Relu", [f"t{i}" if i else "x"], [f"t{i + 1}" if i < n - 1 else "y"])
        for i in range(n)
    ]
    graph = load(_model(nodes), shape_inference=False)
    assert len(graph) == n
    assert graph.summary().nodes == n


def test_model_is_kept_and_never_mutated() -> None:
    model = tiny_model()
    graph = load(model)
    assert graph.model.SerializeToString() == model.SerializeToString()


def test_graph_repr_mentions_size() -> None:
    assert "3 ops" in repr(load(tiny_model()))


@pytest.mark.parametrize(
    "name", ["mlp", "resnet18", "transformer", "detection_head", "control_flow", "custom_domain"]
)
def test_apply_types_draws_what_building_with_the_types_draws(name: str) -> None:
    from explorer import zoo
    from explorer.onnx_adapter.graph_builder import apply_types
    from explorer.onnx_adapter.shape_inference import infer_types

    model = zoo.build(name)
    types, _ = infer_types(model)
    built = build_graph(model, types=types)
    later = build_graph(model)
    apply_types(later, types)
    pairs = [((), built, later)]
    pairs += [(path, sub, dict(later.iter_subgraphs())[path]) for path, sub in built.iter_subgraphs()]
    assert len(pairs) == 1 + len(dict(later.iter_subgraphs()))
    for path, a, b in pairs:
        assert list(a.nx.edges(keys=True, data=True)) == list(b.nx.edges(keys=True, data=True)), path
        assert list(a.nx.nodes(data=True)) == list(b.nx.nodes(data=True)), path
