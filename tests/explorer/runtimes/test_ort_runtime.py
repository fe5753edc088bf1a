"""ONNX Runtime as a Runtime: a model it refuses for the model's sake is a typed error naming the op,
its domain and opset, and the runtime (real ONNX Runtime, models built in code)."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from explorer import load
from explorer.core.errors import ExplorerError, RuntimeUnsupportedError
from explorer.runtimes.ort_runtime import OrtRuntime
from explorer.runtimes.sessions import ort_refusal


def _one_node(op: str, elem: int, opsets: dict[str, int], domain: str = "", rank: int = 1) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", elem, [2] * rank)
    y = helper.make_tensor_value_info("y", elem, [2] * rank)
    node = helper.make_node(op, ["x"], ["y"], name="the_node", domain=domain)
    model = helper.make_model(
        helper.make_graph([node], "g", [x], [y]),
        opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
    )
    model.ir_version = 8
    return model


def _refusal(model: onnx.ModelProto) -> RuntimeUnsupportedError:
    with pytest.raises(RuntimeUnsupportedError) as caught:
        OrtRuntime().prepare(load(model))
    assert "onnxruntime" in caught.value.runtime and "CPUExecutionProvider" in caught.value.runtime
    return caught.value


def test_an_op_of_an_unknown_custom_domain_is_refused_by_name() -> None:
    err = _refusal(_one_node("Foo", TensorProto.FLOAT, {"": 17, "my.ops": 3}, domain="my.ops"))
    assert (err.op_type, err.domain, err.opset) == ("Foo", "my.ops", 3)
    assert "my.ops::Foo (opset 3)" in str(err) and "register_custom_ops_library" in str(err)


def test_an_op_older_than_every_kernel_is_refused_with_the_versions() -> None:
    err = _refusal(_one_node("Relu", TensorProto.FLOAT, {"": 5}))  # Relu-1: kernels start at 6
    assert (err.op_type, err.domain, err.opset) == ("Relu", "", 5)
    assert "version 1" in str(err) and "version_converter" in str(err) and "the_node" in str(err)


def test_a_type_the_op_does_not_take_is_refused() -> None:
    err = _refusal(_one_node("Sin", TensorProto.INT32, {"": 17}))
    assert (err.op_type, err.opset) == ("Sin", 17) and "tensor(int32)" in str(err)
    det = _refusal(_one_node("Det", TensorProto.DOUBLE, {"": 17}, rank=2))  # no CPU kernel takes double
    assert det.op_type == "Det" and "types" in str(det)


def test_an_opset_newer_than_the_build_is_read_from_the_message() -> None:
    # explorer.load refuses an opset newer than the installed onnx knows; ORT's own check, for an
    # onnx newer than ONNX Runtime, is read from its message
    message = (
        "[ONNXRuntimeError] : 1 : FAIL : ... ONNX Runtime only *guarantees* support for models stamped "
        "with official released onnx opset versions. Opset 29 is under development and support for "
        "this is limited. ... Current official support for domain ai.onnx is till opset 28."
    )
    refusal = ort_refusal(message)
    assert refusal is not None and refusal["domain"] == "ai.onnx" and "up to 28" in refusal["reason"]


def test_only_the_models_refusals_are_typed() -> None:
    assert ort_refusal("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : bad allocation") is None
    assert issubclass(RuntimeUnsupportedError, ExplorerError)
    assert OrtRuntime().prepare(load(_one_node("Relu", TensorProto.FLOAT, {"": 17}))).info["runtime"] == "ort"
