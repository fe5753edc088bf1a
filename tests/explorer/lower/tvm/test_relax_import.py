"""Importing into TVM Relax (real TVM, in the worker): the graph it gives, failures mapped to ONNX nodes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from explorer import load, zoo
from explorer.lower import FIX, REWRITE_FIXES, relax_import
from explorer.onnx_adapter.inputs import concrete_input_shapes


def _computed_reshape_model() -> object:
    """A Paddle/TF-style export: the Reshape's target shape is computed from the input's shape at run time."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 32])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="/shape"),
        helper.make_node("Cast", ["s"], ["sf"], name="/cast_float", to=TensorProto.FLOAT),
        helper.make_node("Div", ["sf", "one"], ["h"], name="/div"),
        helper.make_node("Cast", ["h"], ["hi"], name="/cast_int", to=TensorProto.INT64),
        helper.make_node("Slice", ["hi", "start", "end"], ["batch"], name="/slice"),
        helper.make_node("Concat", ["batch", "minus_one"], ["shape"], name="/concat", axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="/flatten/Reshape"),
        helper.make_node("Relu", ["r"], ["y"], name="/relu"),
    ]
    inits = [
        numpy_helper.from_array(np.ones(3, np.float32), "one"),
        numpy_helper.from_array(np.array([0], np.int64), "start"),
        numpy_helper.from_array(np.array([1], np.int64), "end"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus_one"),
    ]
    graph = helper.make_graph(nodes, "computed_reshape", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


#: Zoo models with operators TVM 0.27's importer has no converter for, and the rewrites that remove them.
IMPORTER_LACKS = {
    "control_flow": ({"Loop"}, ["explorer:unroll_loops"]),
    "custom_domain": ({"FusedMatMul", "Swish"}, ["onnxscript:inline", "explorer:decompose_contrib"]),
}
#: Zoo models that import only after the one-call fix (fixed shapes, onnxsim).
NEED_THE_FIX = {"transformer", "llama"}


@pytest.mark.parametrize("name", zoo.names())
def test_every_zoo_model_imports_into_a_relax_graph_or_names_what_the_importer_lacks(name: str) -> None:
    graph = load(f"zoo:{name}")
    result = relax_import(graph, concrete_input_shapes(graph.model))
    if name in IMPORTER_LACKS:
        lacks, rewrites = IMPORTER_LACKS[name]
        assert not result.ok and {f.op_type for f in result.failures} == lacks
        assert all(graph.nx.has_node(f.node) for f in result.failures)  # named by their ONNX node ids
        assert result.to_dict()["fix_pipeline"] == rewrites  # no shapes can help: rewrites remove the ops
        assert result.fix == ", then ".join(f"{REWRITE_FIXES[r]} ({r})" for r in rewrites)
        result = result.retry()
        assert result.ok, result.failures
        assert not lacks & set(result.source.summary().ops)  # its source is the rewritten ONNX graph
    assert result.ok == (name not in NEED_THE_FIX), result.failures
    if not result.ok:
        assert result.fix == FIX and graph.nx.has_node(result.failures[0].node)
        result = result.retry()
        assert result.ok, result.failures
    relax = result.graph
    assert relax.ir == "relax" and relax.proto is None and sum(relax.op_counts.values()) > 0
    assert "R.function" in result.text or "@R." in result.text
    assert all(
        data["op"].startswith("relax.") for _, data in relax.nx.nodes(data=True) if data["kind"] == "op"
    )
    kinds = {data["kind"] for _, data in relax.nx.nodes(data=True)}
    assert {"input", "op", "output"} <= kinds


def test_resnet18_keeps_its_convolutions_and_weights() -> None:
    graph = load("zoo:resnet18")
    relax = relax_import(graph, {"input": [1, 3, 224, 224]}).graph
    assert relax.op_counts["nn.conv2d"] == graph.summary().ops["Conv"]
    assert relax.summary().params == graph.summary().params  # every weight became a constant of a binding
    conv = next(d for _, d in relax.nx.nodes(data=True) if d["op"] == "relax.nn.conv2d")
    assert conv["attributes"]["strides"] == [2, 2] and conv["weights"][0].shape == (64, 3, 7, 7)
    nodes = relax.nx.nodes
    tensors = [d for u, _, d in relax.nx.edges(data=True) if nodes[u]["op"] != "relax.nn.batch_norm"]
    assert tensors and all(d["shape"] is not None for d in tensors)  # static shapes (batch_norm gives tuples)


def _celu_model() -> object:
    """Relu then Celu, an operator the importer lacks and no rewrite removes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [
        helper.make_node("Relu", ["x"], ["h"], name="/relu"),
        helper.make_node("Celu", ["h"], ["y"], name="/celu"),
    ]
    return helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )


def test_an_operator_the_importer_lacks_is_named_on_its_node() -> None:
    result = relax_import(load(_celu_model()))
    assert not result.ok and result.graph is None
    assert [(f.node, f.op_type) for f in result.failures] == [("/celu", "Celu")]
    assert "not an operator" in result.failures[0].reason and result.to_frame().shape == (1, 3)
    assert result.fix is None and result.to_dict()["fix_pipeline"] == [] and result.fixed() is result


def test_a_computed_reshape_fails_on_its_node_and_the_one_call_fix_imports_it() -> None:
    graph = load(_computed_reshape_model())
    result = relax_import(graph)
    assert not result.ok
    (failure,) = result.failures
    assert failure.node == "/flatten/Reshape" and failure.op_type == "Reshape"
    assert "Shape" in failure.reason  # the importer's words: the new shape is a tensor, not a shape
    assert result.fix == FIX and result.to_dict()["fix"] == FIX
    fixed = result.retry({"x": [2, 4, 8]})
    assert fixed.ok and fixed.graph.op_counts["reshape"] == 1
    assert next(d for _, d in fixed.graph.nx.nodes(data=True) if d["kind"] == "output")["shape"] == (2, 32)
