"""ONNX Runtime as a Runtime: a model it refuses for the model's sake is a typed error naming the op,
its domain and opset, and the runtime (real ONNX Runtime, models built in code)."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from explorer import load
from explorer.core.errors import ExplorerError, RuntimeUnsupportedError
from explorer.runtimes.ort_refusals import ort_refusal
from explorer.runtimes.ort_runtime import OrtRuntime


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


@pytest.mark.parametrize("where", ["raw_data", "float_data", "constant"])
def test_a_tensor_whose_values_disagree_with_its_shape_is_a_bad_model_not_a_bare_fail(where: str) -> None:
    """A graph that reaches ONNX Runtime without ``load``'s check (built in code, as a tab may hold one):
    ORT's ``[ONNXRuntimeError] : 1 : FAIL : ... Initializer 'W': raw_data size ...`` is read into an
    InvalidModelError naming the tensor and the model (exit 2), not left as an internal error (#39)."""
    from explorer.core.errors import InvalidModelError
    from explorer.onnx_adapter.graph_builder import build_graph
    from tests.explorer.bad_models import stored_values_mismatch

    graph = build_graph(stored_values_mismatch(where), source="short.onnx")
    with pytest.raises(InvalidModelError) as caught:
        OrtRuntime().prepare(graph)
    message = str(caught.value)
    assert message.startswith("short.onnx: tensor 'W' holds ") and "its shape and type need" in message
    assert "FAIL" not in message and "re-export it" in message


def test_ort_bad_tensor_reads_each_of_onnx_runtimes_size_checks() -> None:
    from explorer.runtimes.ort_refusals import ort_bad_tensor

    head = "[ONNXRuntimeError] : 1 : FAIL : tensorprotoutils.cc:1805 ValidateEmbeddedTensorProto... "
    count = ort_bad_tensor(
        head + "Initializer 'b.0': data field count (3) does not match expected count from shape (4)"
    )
    assert count == "tensor 'b.0' holds 3 values in its typed data field but its shape and type need 4"
    strings = "Initializer 's': string_data count (1) does not match expected count from shape (2)"
    assert (
        ort_bad_tensor(head + strings)
        == "tensor 's' holds 1 strings (string_data) but its shape and type need 2"
    )
    past = "External initializer: W offset: 1000000 size to read: 16 given file_length: 16 are out of bounds"
    assert "offset 1,000,000 + length 16 bytes points past the end of the 16-byte file" in ort_bad_tensor(
        past
    )
    assert ort_bad_tensor("Could not find an implementation for AveragePool(1) node with name ''") is None


def test_a_contrib_op_refusing_inputs_made_here_is_the_runtimes_not_a_bare_error() -> None:
    from explorer.onnx_adapter.graph_builder import build_graph
    from explorer.runtimes.ort_runtime import run_refused
    from tests.explorer.quirk_models import biased_gqa_decoder

    graph = build_graph(biased_gqa_decoder(), source="granite.onnx")
    shapes = {"input_ids": [1, 32], "past_key_values.0.key": [1, 2, 32, 8]}
    gqa = RuntimeError(
        "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Non-zero status code returned while running "
        "GroupQueryAttention node. Name:'/model/layers.0/attn/GroupQueryAttention' Status Message: Input "
        "'past_key' dimension 3 should match the packed KV head dimension, got 8 expected 16"
    )
    made = run_refused(gqa, graph, "ONNX Runtime CPU (all)", shapes, given=False)
    assert isinstance(made, RuntimeUnsupportedError)
    assert (made.op_type, made.domain, made.opset, made.path) == (
        "GroupQueryAttention",
        "com.microsoft",
        1,
        "granite.onnx",
    )
    assert "refused the inputs made for it" in str(made) and "--input-shape" in str(made)
    standard = RuntimeError(str(gqa).replace("GroupQueryAttention node", "MatMul node"))
    assert run_refused(standard, graph, "ONNX Runtime CPU (all)", shapes, given=False) is None  # ours: a bug
    assert type(run_refused(standard, graph, "ort", shapes, given=True)).__name__ == "UsageError"
