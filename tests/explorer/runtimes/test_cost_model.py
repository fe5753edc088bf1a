"""FLOPs and bytes per node from the shapes, the numbers the roofline sets measured times against."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from explorer import load, zoo
from explorer.runtimes.cost_model import bind_shape, node_costs


def _model() -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.ones((8, 3, 3, 3), np.float32), "w")
    fc = numpy_helper.from_array(np.ones((8, 4), np.float32), "fc")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "fc"], ["y"], name="matmul"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [weight, fc],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_each_op_family_counts_its_work_for_the_given_input_shapes() -> None:
    costs = node_costs(load(_model()), {"x": [2, 3, 8, 8]})
    assert costs.get("conv").flops == 2 * (2 * 8 * 8 * 8) * (3 * 3 * 3)  # 2 * outputs * reduction
    assert costs.get("conv").bytes == 4 * (2 * 3 * 8 * 8 + 8 * 3 * 3 * 3 + 2 * 8 * 8 * 8)
    assert costs.get("relu").flops == 2 * 8 * 8 * 8  # one per element
    assert costs.get("pool").flops == (2 * 8 * 4 * 4) * 4  # one per window element
    assert costs.get("gap").flops == 2 * 8 * 4 * 4  # one per input element
    assert costs.get("flatten").flops == 0  # data movement
    assert costs.get("matmul").flops == 2 * (2 * 4) * 8
    assert costs.get("conv").intensity == pytest.approx(costs.get("conv").flops / costs.get("conv").bytes)
    frame = costs.to_frame()
    assert frame["node"].tolist() == ["conv", "relu", "pool", "gap", "flatten", "matmul"]


def test_a_batch_scales_the_work_and_the_graph_itself_is_untouched() -> None:
    graph = load(_model())
    one, four = node_costs(graph, {"x": [1, 3, 8, 8]}), node_costs(graph, {"x": [4, 3, 8, 8]})
    assert four.get("conv").flops == 4 * one.get("conv").flops
    assert graph.model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def test_dimensions_computed_at_run_time_are_known_once_the_inputs_are_fixed() -> None:
    costs = node_costs(load("zoo:transformer"))  # seq comes from Shape/Gather/Range: unk__ when loaded
    assert costs.to_frame()["flops"].notna().all()
    assert costs.total_flops > 0.09e9  # 2 layers of hidden 256, FFN 1024, 32 tokens: about 0.1 GFLOP


def test_shapes_bind_only_when_every_dimension_is_known() -> None:
    assert bind_shape(("batch", 4), {"batch": 2}) == (2, 4)
    assert bind_shape(("batch", None), {"batch": 2}) is None and bind_shape(None, {}) is None
    assert node_costs(load(zoo.build("mlp"))).to_dict()["total_flops"] > 0
