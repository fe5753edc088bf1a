"""Zoo models made to exercise an ONNX feature more than an architecture.

``control_flow`` (an ``If`` and a ``Loop`` with subgraphs reading outer-scope values),
``custom_domain`` (``com.microsoft`` contrib ops and a model-local function) and ``qdq_cnn``
(a CNN quantized in QDQ format, as ONNX Runtime's static quantizer writes it).

Examples
--------
>>> from explorer import zoo
>>> [n.op_type for n in zoo.build("control_flow").graph.node if n.op_type in ("If", "Loop")]
['If', 'Loop']
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

from explorer.zoo.parts import (
    _Built,
    _check_positive,
    _Dim,
    _GraphBuilder,
    _image_input,
    _scope,
    _value,
)

__all__: list[str] = []


def _control_flow(*, features: int = 16, trip_count: int = 3, seed: int = 0) -> _Built:
    """An ``If`` on the sign of ``ReduceSum(x)`` and a ``Loop`` with a fixed trip count."""
    _check_positive(features=features, trip_count=trip_count)
    b = _GraphBuilder(np.random.default_rng(seed))
    f = features
    total = b.op("ReduceSum", ["x"], "", keepdims=0)
    cond = b.op("Greater", [total, b.const("", 0.0, np.float32)], "")
    w_then = b.normal("branch.then.weight", (f, f), 1.0 / math.sqrt(f))
    b_then = b.normal("branch.then.bias", (f,), 0.01)

    then = b.child()  # reads x and its weights from the outer scope
    y = then.op("Add", [then.op("MatMul", ["x", w_then], "/branch/then"), b_then], "/branch/then")
    then.node("Relu", [y], "/branch/then", outputs=["then_out"])
    other = b.child()  # owns its weight as a subgraph initializer
    w_else = other.normal("branch.else.weight", (f, f), 1.0 / math.sqrt(f))
    other.node(
        "Neg", [other.op("MatMul", ["x", w_else], "/branch/else")], "/branch/else", outputs=["else_out"]
    )
    branch_shape: list[_Dim] = ["batch", f]
    h = b.op(
        "If",
        [cond],
        "/branch",
        then_branch=then.graph("then_branch", [], [_value("then_out", TensorProto.FLOAT, branch_shape)]),
        else_branch=other.graph("else_branch", [], [_value("else_out", TensorProto.FLOAT, branch_shape)]),
    )

    body = b.child()
    w_loop = b.normal("loop.weight", (f, f), 1.0 / math.sqrt(f))
    b_loop = b.normal("loop.bias", (f,), 0.01)
    body.node("Identity", ["cond_in"], "/loop/body", outputs=["cond_out"])
    y = body.op("Add", [body.op("MatMul", ["state_in", w_loop], "/loop/body"), b_loop], "/loop/body")
    body.node("Tanh", [y], "/loop/body", outputs=["state_out"])
    body.node("ReduceMean", ["state_out"], "/loop/body", outputs=["step_mean"], axes=[1], keepdims=0)
    body_graph = body.graph(
        "loop_body",
        [
            _value("iteration", TensorProto.INT64, []),
            _value("cond_in", TensorProto.BOOL, []),
            _value("state_in", TensorProto.FLOAT, ["batch", f]),
        ],
        [
            _value("cond_out", TensorProto.BOOL, []),
            _value("state_out", TensorProto.FLOAT, ["batch", f]),
            _value("step_mean", TensorProto.FLOAT, ["batch"]),
        ],
    )
    trips = b.const("/loop", trip_count)
    keep_going = b.const("/loop", True, np.bool_)
    b.node("Loop", [trips, keep_going, h], "/loop", outputs=["output", "trace"], body=body_graph)
    graph = b.graph(
        "control_flow",
        [_value("x", TensorProto.FLOAT, ["batch", f])],
        [
            _value("output", TensorProto.FLOAT, ["batch", f]),
            _value("trace", TensorProto.FLOAT, [trip_count, "batch"]),
        ],
        "If on ReduceSum(x) > 0 (then: MatMul/Add/Relu with outer-scope weights; else: MatMul/Neg with "
        f"its own initializer), then a Loop of {trip_count} Tanh(MatMul+Add) steps with a scan output.",
    )
    return _Built(graph, 17)


_LOCAL_DOMAIN = "zoo.local"


def _swish_function() -> onnx.FunctionProto:
    """A model-local function ``zoo.local::Swish(X) = X * Sigmoid(X)``."""
    nodes = [
        helper.make_node("Sigmoid", ["X"], ["S"], name="Sigmoid"),
        helper.make_node("Mul", ["X", "S"], ["Y"], name="Mul"),
    ]
    return helper.make_function(
        _LOCAL_DOMAIN,
        "Swish",
        ["X"],
        ["Y"],
        nodes,
        [helper.make_opsetid("", 17)],
        doc_string="x * sigmoid(x)",
    )


def _custom_domain(*, features: int = 64, hidden: int = 128, seed: int = 0) -> _Built:
    """A model using ``com.microsoft`` contrib ops and a model-local function domain."""
    _check_positive(features=features, hidden=hidden)
    b = _GraphBuilder(np.random.default_rng(seed))
    w1 = b.normal("fc1.weight", (hidden, features), 1.0 / math.sqrt(features))
    y = b.op("FusedMatMul", ["input", w1], "/fc1", domain="com.microsoft", alpha=1.0, transA=0, transB=1)
    y = b.op("BiasGelu", [y, b.normal("fc1.bias", (hidden,), 0.01)], "/fc1", domain="com.microsoft")
    w2 = b.normal("fc2.weight", (hidden, hidden), 1.0 / math.sqrt(hidden))
    y = b.op("Add", [b.op("MatMul", [y, w2], "/fc2"), b.normal("fc2.bias", (hidden,), 0.01)], "/fc2")
    y = b.op("Swish", [y], "/act", domain=_LOCAL_DOMAIN)
    w3 = b.normal("head.weight", (features, hidden), 1.0 / math.sqrt(hidden))
    b.node("FusedMatMul", [y, w3], "/head", outputs=["output"], domain="com.microsoft", alpha=0.5, transB=1)
    graph = b.graph(
        "custom_domain",
        [_value("input", TensorProto.FLOAT, ["batch", features])],
        [_value("output", TensorProto.FLOAT, ["batch", features])],
        "Contrib ops from com.microsoft (FusedMatMul, BiasGelu) next to standard ops, and a call to the "
        "model-local function zoo.local::Swish.",
    )
    return _Built(graph, 17, {"com.microsoft": 1, _LOCAL_DOMAIN: 1}, (_swish_function(),))


def _qdq(b: _GraphBuilder, x: str, scope: str, scale: float) -> str:
    """Activation fake-quantization: ``QuantizeLinear`` then ``DequantizeLinear`` (uint8)."""
    s = b.const(scope, scale, np.float32)
    zp = b.const(scope, 128, np.uint8)
    return b.op("DequantizeLinear", [b.op("QuantizeLinear", [x, s, zp], scope), s, zp], scope)


def _int8_weight(b: _GraphBuilder, path: str, shape: Sequence[int], fan_in: int) -> str:
    """Per-output-channel symmetric int8 weights, dequantized by a ``DequantizeLinear``."""
    w = b.rng.standard_normal(tuple(shape)) * math.sqrt(2.0 / fan_in)
    scale = np.abs(w.reshape(shape[0], -1)).max(axis=1) / 127.0
    q = np.round(w / scale.reshape((-1,) + (1,) * (len(shape) - 1))).clip(-127, 127).astype(np.int8)
    inputs = [
        b.param(f"{path}.weight_quantized", q),
        b.param(f"{path}.weight_scale", scale.astype(np.float32)),
        b.param(f"{path}.weight_zero_point", np.zeros(shape[0], dtype=np.int8)),
    ]
    return b.op("DequantizeLinear", inputs, _scope(path), axis=0)


def _qdq_cnn(*, width: int = 32, image_size: int | None = 32, num_classes: int = 10, seed: int = 0) -> _Built:
    """A small CIFAR-style CNN in QDQ format, as ONNX Runtime's static quantizer writes it."""
    _check_positive(width=width, image_size=image_size, num_classes=num_classes)
    b = _GraphBuilder(np.random.default_rng(seed))
    x, cin = _qdq(b, "input", "/input", 0.02), 3
    for i, (cout, stride) in enumerate(((width, 1), (2 * width, 2), (4 * width, 2))):
        path = f"conv{i + 1}"
        w = _int8_weight(b, path, (cout, cin, 3, 3), cin * 9)
        bias = b.normal(f"{path}.bias", (cout,), 0.01)
        y = b.op(
            "Conv",
            [x, w, bias],
            _scope(path),
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            strides=[stride, stride],
        )
        x, cin = _qdq(b, b.op("Relu", [y], _scope(f"relu{i + 1}")), _scope(f"relu{i + 1}"), 0.05), cout
    x = _qdq(b, b.op("GlobalAveragePool", [x], ""), "/pool", 0.05)
    x = b.op("Flatten", [x], "", axis=1)
    w = _int8_weight(b, "fc", (num_classes, cin), cin)
    b.node(
        "Gemm", [x, w, b.normal("fc.bias", (num_classes,), 0.01)], _scope("fc"), outputs=["logits"], transB=1
    )
    graph = b.graph(
        "qdq_cnn",
        [_image_input("input", image_size)],
        [_value("logits", TensorProto.FLOAT, ["batch", num_classes])],
        "Three-conv CNN quantized in QDQ format: uint8 activations, per-channel int8 weights.",
    )
    return _Built(graph, 17)
