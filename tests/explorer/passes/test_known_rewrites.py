"""Known rewrites, checked precisely through the diff, and numerically through ONNX Runtime."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from explorer import load, zoo
from explorer.core.diff import diff
from explorer.passes import get_pass
from explorer.passes.pipeline import run_pipeline


def test_fuse_bn_into_conv_removes_exactly_the_batchnorms_and_changes_conv_weights() -> None:
    before = load(zoo.build("resnet18", width=8, image_size=64))
    result = get_pass("fuse_bn_into_conv").run(before.model)
    after = load(result.model)
    d = diff(before, after)
    bns = {n for n in before.op_nodes() if before.node(n)["op_type"] == "BatchNormalization"}
    convs = {n for n in before.op_nodes() if before.node(n)["op_type"] == "Conv"}
    assert set(d.removed) == bns and not d.added
    assert d.op_deltas == {"BatchNormalization": -20}
    assert {c.before for c in d.changed} == convs
    assert all(c.what == ("weights",) for c in d.changed)
    assert len(d.fusions) == 20
    assert all(f.pattern == "Conv + BatchNormalization -> Conv" for f in d.fusions)
    assert {s for f in d.fusions for s in f.sources} == bns | convs


def test_onnxsim_on_the_detection_head_removes_the_shape_chains() -> None:
    shapes = {"image": [1, 3, 128, 128]}
    timeline = run_pipeline("zoo:detection_head", "onnxsim", input_shapes=shapes)
    d = timeline.diff(1)
    for op in ("Shape", "Gather", "Unsqueeze", "Slice"):
        assert d.op_deltas.get(op, 0) == -Counter(n.op_type for n in timeline[0].graph.model.graph.node)[op]
    after_ops = Counter(n.op_type for n in timeline[1].graph.model.graph.node)
    assert after_ops["Shape"] == 0 and after_ops["Gather"] == 0
    folded = [f for f in d.fusions if f.kind == "folded"]
    assert folded and all(f.pattern.endswith(("-> Reshape", "-> Resize")) for f in folded)
    assert timeline[1].max_abs_diff is not None and timeline[1].max_abs_diff < 1e-4


def _model(nodes, inputs, outputs, initializers, opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_matmul_add_becomes_gemm_as_one_fusion() -> None:
    rng = np.random.default_rng(0)
    model = _model(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"], name="/fc/MatMul"),
            helper.make_node("Add", ["h", "b"], ["y"], name="/fc/Add"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
        [
            numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "W"),
            numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b"),
        ],
    )
    timeline = run_pipeline(model, "fuse_matmul_add_bias_into_gemm")
    d = timeline.diff(1)
    assert d.op_deltas == {"Add": -1, "Gemm": 1, "MatMul": -1}
    assert [f.pattern for f in d.fusions] == ["MatMul + Add -> Gemm"]
    assert timeline[1].max_abs_diff < 1e-5


def test_pad_into_conv_is_a_fusion() -> None:
    rng = np.random.default_rng(0)
    model = _model(
        [
            helper.make_node("Pad", ["x", "pads"], ["p"], name="/pad/Pad", mode="constant"),
            helper.make_node("Conv", ["p", "W"], ["y"], name="/conv/Conv", kernel_shape=[3, 3]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [
            numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),
            numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "W"),
        ],
    )
    timeline = run_pipeline(model, "fuse_pad_into_conv")
    d = timeline.diff(1)
    assert d.removed == ("/pad/Pad",)
    assert [f.pattern for f in d.fusions] == ["Conv + Pad -> Conv"]
    assert d.changed[0].what == ("attributes", "inputs")
    assert timeline[1].max_abs_diff < 1e-5


def test_ort_extended_emits_contrib_ops_that_the_summary_flags() -> None:
    timeline = run_pipeline(zoo.build("transformer", hidden=32, layers=1), "ort:extended")
    assert timeline[1].changed
    summary = timeline[1].graph.summary()
    assert "com.microsoft" in summary.opsets
    assert timeline[1].max_abs_diff < 1e-3


def test_version_converter_changes_the_opset() -> None:
    timeline = run_pipeline("zoo:mlp", "opset:19,opset:13")
    assert timeline[1].graph.summary().opsets["ai.onnx"] == 19
    assert timeline[1].max_abs_diff == 0.0
    # going down fails for ops without an adapter: a clear error on the step, the model unchanged
    assert "No Adapter" in timeline[2].error and timeline[2].graph is timeline[1].graph


def test_a_pass_that_fails_is_recorded_and_the_pipeline_goes_on() -> None:
    timeline = run_pipeline("zoo:mlp", "lift_lexical_references,fuse_matmul_add_bias_into_gemm", verify=False)
    assert timeline[1].error and "RuntimeError" in timeline[1].error
    assert timeline[1].graph is timeline[0].graph
    assert timeline[2].error is None


def test_a_pass_that_breaks_the_model_shows_in_max_abs_diff() -> None:
    timeline = run_pipeline("zoo:mlp", "split_predict")
    assert timeline[1].changed and timeline[1].max_abs_diff == float("inf")


@pytest.mark.parametrize("name", ["onnxsim:constant_folding", "onnxsim:shape_ops"])
def test_onnxsim_sub_stages(name: str) -> None:
    timeline = run_pipeline("zoo:transformer", name)
    assert timeline[1].changed
    assert timeline[1].max_abs_diff < 1e-4
    ops = Counter(n.op_type for n in timeline[1].graph.model.graph.node)
    if name == "onnxsim:shape_ops":
        assert ops["Shape"] == 0
    else:
        assert ops["Constant"] < Counter(n.op_type for n in timeline[0].graph.model.graph.node)["Constant"]
