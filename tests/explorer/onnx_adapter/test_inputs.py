"""The one random-input generator: the same rule for a model's inputs and an ONNX Runtime session's."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from explorer.isolation import worker
from explorer.onnx_adapter.inputs import random_feeds, random_inputs
from explorer.onnx_adapter.ort_run import run_ort


def _gather_model() -> object:
    data = helper.make_tensor_value_info("data", TensorProto.FLOAT, [8, 4])
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Gather", ["data", "ids"], ["out"])], "g", [data, ids], [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_integer_inputs_are_valid_indices_and_dynamic_dims_take_the_defaults() -> None:
    feeds = random_feeds(_gather_model())
    assert feeds["ids"].shape == (1, 32) and feeds["ids"].dtype == np.int64
    assert feeds["ids"].min() >= 0 and feeds["ids"].max() < 8  # Gather over 8 rows never fails
    assert feeds["data"].shape == (8, 4) and feeds["data"].dtype == np.float32


def test_onnx_runtime_without_inputs_uses_the_same_generator() -> None:
    model = _gather_model()
    result = worker.run_on_model(run_ort, model, seed=3)
    expected = random_feeds(model, seed=3)
    data = expected["data"][expected["ids"]]  # what Gather computes on the very same inputs
    np.testing.assert_allclose(result["out"], data, rtol=1e-6)


def test_given_shapes_win_and_the_seed_reproduces() -> None:
    specs = [("x", ["n", None, 3], np.float16), ("mask", [2], np.bool_)]
    a, b = random_inputs(specs, {"x": [2, 5, 3]}, seed=7), random_inputs(specs, {"x": [2, 5, 3]}, seed=7)
    assert a["x"].shape == (2, 5, 3) and a["x"].dtype == np.float16 and a["mask"].dtype == np.bool_
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["x"], random_inputs(specs, {"x": [2, 5, 3]}, seed=8)["x"])
