"""Loops with a constant trip count written out: the same outputs on ONNX Runtime, or kept with a reason."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from explorer import zoo
from explorer.passes.loop_unrolling import unroll_loops


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def test_the_zoo_loop_is_unrolled_into_the_same_outputs_on_both_if_branches() -> None:
    model = zoo.build("control_flow")
    before = model.SerializeToString()
    unrolled, log = unroll_loops(model)
    assert model.SerializeToString() == before
    assert log == ["/loop/Loop: unrolled 3 iterations (18 nodes)"]
    ops = [n.op_type for n in unrolled.graph.node]
    assert "Loop" not in ops and ops.count("Tanh") == 3 and ops.count("Concat") == 1
    assert {n.name.rsplit("/", 1)[0] for n in unrolled.graph.node if n.op_type == "Tanh"} == {
        f"/loop/Loop/iter{i}" for i in range(3)
    }  # one scope per iteration, so the graph view groups them
    onnx.checker.check_model(unrolled, full_check=True)
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    for feed in (x, -x):
        for want, got in zip(_run(model, {"x": feed}), _run(unrolled, {"x": feed}), strict=True):
            np.testing.assert_array_equal(got, want)


def _counting_loop(
    trips: int | None, *, opset: int = 17, cond: str = "const", initializer_in_body: bool = True
):
    """``acc += iteration * step`` for ``trips`` iterations, scanning ``acc`` (reads the iteration)."""
    body_nodes = [
        helper.make_node("Cast", ["i"], ["fi"], name="/body/Cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["fi", "step"], ["inc"], name="/body/Mul"),
        helper.make_node("Add", ["acc_in", "inc"], ["acc_out"], name="/body/Add"),
        helper.make_node("Identity", ["acc_out"], ["scan"], name="/body/Identity"),
    ]
    if cond == "computed":
        body_nodes.append(helper.make_node("Less", ["fi", "limit"], ["c_out"], name="/body/Less"))
        limit = [numpy_helper.from_array(np.array(2.0, np.float32), "limit")]
    else:
        body_nodes.append(helper.make_node("Identity", ["c_in"], ["c_out"], name="/body/Identity_cond"))
        limit = []
    step = numpy_helper.from_array(np.array(0.5, np.float32), "step")
    body = helper.make_graph(
        body_nodes,
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("scan", TensorProto.FLOAT, [2]),
        ],
        [step, *limit] if initializer_in_body else limit,
    )
    trip_input = "n" if trips is not None else "n_in"
    loop = helper.make_node("Loop", [trip_input, "go", "x"], ["y", "trace"], name="/count/Loop", body=body)
    inits = [numpy_helper.from_array(np.array(True), "go")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])]
    if trips is not None:
        inits.append(numpy_helper.from_array(np.array(trips, np.int64), "n"))
    else:
        inputs.append(helper.make_tensor_value_info("n_in", TensorProto.INT64, []))
    if not initializer_in_body:
        inits.append(step)
    graph = helper.make_graph(
        [loop],
        "count",
        inputs,
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("trace", TensorProto.FLOAT, [None, 2]),
        ],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize(("opset", "in_body"), [(17, True), (11, False)])
def test_iteration_numbers_scan_outputs_and_body_constants_unroll_exactly(opset: int, in_body: bool) -> None:
    model = _counting_loop(4, opset=opset, initializer_in_body=in_body)
    unrolled, log = unroll_loops(model)
    assert log[0].startswith("/count/Loop: unrolled 4 iterations")
    onnx.checker.check_model(unrolled, full_check=True)
    feeds = {"x": np.array([1.0, -1.0], np.float32)}
    for want, got in zip(_run(model, feeds), _run(unrolled, feeds), strict=True):
        np.testing.assert_array_equal(got, want)
    assert _run(unrolled, feeds)[1].shape == (4, 2)


def test_loops_that_cannot_be_unrolled_exactly_are_kept_with_the_reason() -> None:
    cases = {
        "its trip count is not a constant": _counting_loop(None),
        "its body computes the condition (it may stop early)": _counting_loop(4, cond="computed"),
        "it runs 100 times, more than max_trips=64": _counting_loop(100),
    }
    for reason, model in cases.items():
        kept, log = unroll_loops(model)
        assert log == [f"/count/Loop: kept: {reason}"]
        assert [n.op_type for n in kept.graph.node] == ["Loop"]
    assert unroll_loops(zoo.build("mlp"))[1] == ["no Loop in the main graph"]
