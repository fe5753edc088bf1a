"""MLIR text as graph records (the worker's side of the MLIR adapter), on hand-written modules."""

from __future__ import annotations

import pytest

pytest.importorskip("iree.compiler")

from explorer.lower.iree.mlir_adapter import mlir_graph
from explorer.lower.iree.mlir_graph_data import dialect_histogram, mlir_graph_data, tensor_type

DISPATCH = """
util.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = arith.constant dense<1.0> : tensor<4xf32> loc("/w")
  %c = arith.constant 0.0 : f32
  %0 = flow.dispatch.region -> (tensor<4xf32>) {
    %1 = tensor.empty() : tensor<4xf32> loc("/Add")
    %2 = linalg.fill ins(%c : f32) outs(%1 : tensor<4xf32>) -> tensor<4xf32> loc("/Add")
    %4 = arith.addf %2, %cst : tensor<4xf32> loc(fused["/Add", "/Relu"])
    flow.return %4 : tensor<4xf32>
  } loc("/Add")
  %3 = math.exp %0 : tensor<4xf32> loc("/Exp")
  util.return %3 : tensor<4xf32>
}
"""


def test_ops_values_constants_and_regions() -> None:
    data = mlir_graph_data(DISPATCH, onnx_nodes=["/Add", "/Relu", "/Exp"])
    nodes = dict(data["nodes"])
    add = next(d for d in nodes.values() if d["op"] == "arith.addf")
    assert add["domain"] == "arith" and add["scope"] == ("dispatch_0_fill",)
    assert add["origin"] == ("/Add", "/Relu")  # a fused location names both nodes
    assert [w.shape for w in add["weights"]] == [(4,)]  # the constant is a weight, not a node
    assert not any(d["op"] == "arith.constant" for d in nodes.values())
    by_op = {d["op"]: n for n, d in nodes.items()}
    edges = {(s, t): e for s, t, _, e in data["edges"]}
    assert (by_op["linalg.fill"], by_op["arith.addf"]) in edges
    assert edges[(by_op["linalg.fill"], by_op["arith.addf"])]["shape"] == (4,)
    assert edges[(by_op["linalg.fill"], by_op["arith.addf"])]["dtype"] == "float32"
    assert "tensor.empty" not in by_op  # an init with a shape and no values: not a node
    assert (by_op["arith.addf"], by_op["math.exp"]) in edges  # the region's result: the op that made it
    assert (by_op["math.exp"], "output:" + by_op["math.exp"]) in edges
    assert data["dialects"] == {"arith": 3, "flow": 2, "linalg": 2, "math": 1, "tensor": 1, "util": 2}


def test_a_graph_model_of_ir_mlir() -> None:
    graph = mlir_graph(mlir_graph_data(DISPATCH), source="test")
    assert graph.ir == "mlir" and graph.source == "test"
    assert graph.summary().nodes == 3


def test_types() -> None:
    assert tensor_type("!torch.vtensor<[1,3,?],si64>") == ((1, 3, "?"), "int64")
    assert tensor_type("tensor<2x3xbf16>") == ((2, 3), "bfloat16")
    assert tensor_type("!hal.buffer_view") is None


def test_bad_text_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="the MLIR does not parse"):
        dialect_histogram("func.func @f( {")
