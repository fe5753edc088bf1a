"""A node followed through a timeline's diffs, and down to the Relax bindings lowered from it."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from explorer import load
from explorer.core.node_trace import lowered_from, trace_node
from explorer.lower import relax_import, relax_pipeline
from explorer.passes.pipeline import run_pipeline


def test_a_fused_node_ends_at_the_step_that_fused_it() -> None:
    timeline = run_pipeline("zoo:resnet18", "eliminate_identity,fuse_bn_into_conv", verify=False)
    trace = trace_node(timeline, "/layer1/layer1.0/bn1/BatchNormalization")
    assert trace.ended_by == 2 and trace.fused_into == "/layer1/layer1.0/conv1/Conv"
    assert trace.names[:2] == ("/layer1/layer1.0/bn1/BatchNormalization",) * 2 and trace.names[2] is None
    kept = trace_node(timeline, "/layer1/layer1.0/conv1/Conv")
    assert kept.ended_by is None and kept.name_at(2) == "/layer1/layer1.0/conv1/Conv"
    assert trace.to_frame().shape == (3, 1) and trace.to_dict()["fate"].startswith("fused into")


def test_a_removed_node_says_which_step_removed_it() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Identity", ["x"], ["t"], name="copy"),
        helper.make_node("Relu", ["t"], ["y"], name="act"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    timeline = run_pipeline(load(model), "eliminate_identity", verify=False)
    assert trace_node(timeline, "copy").fate == "removed by step 1 (eliminate_identity)"
    assert trace_node(timeline, "act").name_at(1) == "act"


def test_a_node_not_in_the_first_graph_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="no node"):
        trace_node(run_pipeline("zoo:mlp", "eliminate_identity", verify=False), "nope")


def test_every_onnx_conv_has_a_relax_binding_and_a_kernel_after_fusion() -> None:
    graph = load("zoo:resnet18")
    shapes = {"input": [1, 3, 224, 224]}
    imported = relax_import(graph, shapes).graph
    convs = [n for n, d in graph.nx.nodes(data=True) if d.get("op_type") == "Conv"]
    assert all(lowered_from(imported, conv) for conv in convs)
    fused = relax_pipeline(graph, shapes, "zero")
    last = fused[len(fused) - 1].graph
    assert all(lowered_from(last, conv) for conv in convs)
