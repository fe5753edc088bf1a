"""The ONNX-to-torch translation follows each op at the model's opset, and refuses what it cannot follow."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from onnx import TensorProto, helper

from explorer.onnx_adapter.ort_run import run_onnxruntime
from explorer.runtimes.torch_eager import TorchUnsupported, torch_program

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _one_node(node: object, shape: list[int], opset: int) -> object:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_follows_the_model_opset(opset: int) -> None:
    model = _one_node(helper.make_node("Softmax", ["x"], ["y"]), [2, 3, 4], opset)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    with torch.inference_mode():
        (got,) = torch_program(model)({"x": torch.from_numpy(x)})
    np.testing.assert_allclose(got.numpy(), run_onnxruntime(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_attributes_it_cannot_follow_are_refused_when_the_program_is_made() -> None:
    pads = [0, 0, 1, 1]
    uneven = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=pads, name="pool")
    with pytest.raises(TorchUnsupported, match="uneven pads") as err:
        torch_program(_one_node(uneven, [1, 1, 8, 8], 17))
    again = pickle.loads(pickle.dumps(err.value))  # whole across the worker's pipe
    assert (again.op_type, again.node, str(again)) == ("AveragePool", "pool", str(err.value))
    same = helper.make_node("Conv", ["x", "x"], ["y"], auto_pad="SAME_UPPER")
    with pytest.raises(TorchUnsupported, match="auto_pad=SAME_UPPER"):
        torch_program(_one_node(same, [1, 1, 8, 8], 17))
