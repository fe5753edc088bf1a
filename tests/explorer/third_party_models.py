"""Models built the way third-party exporters write them, for the explorer's tests.

Each builder returns an ``onnx.ModelProto`` that mimics one exporter's habits,
small enough to build in milliseconds and (unless said otherwise) runnable in
ONNX Runtime:

* :func:`paddle_cnn`: paddle2onnx (``p2o.Conv.0`` node names, ``conv2d_0.tmp_0``
  tensors, ``conv2d_0.w_0`` weights, ``p2o.DynamicDimension.0`` dims and a
  flatten whose ``Reshape`` target is computed with Shape/Slice/Concat).
* :func:`keras_cnn`: tf2onnx from a Keras ``Sequential`` (``StatefulPartitionedCall/...``
  names, ``:0`` tensors, NHWC input transposed to NCHW, ``unk__6`` dims,
  ``const_fold_opt__12`` weights, ``ai.onnx.ml`` imported, a final ``Identity``).
* :func:`constant_heavy`: ``Constant`` nodes of every attribute kind feeding
  Reshape/Add/Mul, as the TorchScript exporter emits them.
* :func:`contrib_ops`: ``com.microsoft`` ops ONNX Runtime implements.
* :func:`custom_op`: an op of a domain nobody implements (loads, never runs).
* :func:`control_flow`: ``If`` reading outer-scope values and a ``Loop`` with a
  loop-carried value, a scan output and an ``If`` nested in its body.
* :func:`branches_reusing_names`: sibling ``If`` branches defining the same tensor name.
* :func:`unnamed_nodes` and :func:`duplicate_names`: node names missing or repeated.

The PyTorch modules (:func:`torch_cnn`, :func:`torch_encoder`, :func:`torch_mlp`)
import ``torch`` only when called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = [
    "CONTROL_FLOW_SUBGRAPHS",
    "Dim",
    "branches_reusing_names",
    "constant_heavy",
    "contrib_ops",
    "control_flow",
    "custom_op",
    "duplicate_names",
    "keras_cnn",
    "paddle_cnn",
    "random_feeds",
    "torch_cnn",
    "torch_encoder",
    "torch_mlp",
    "unnamed_nodes",
]

Dim = int | str | None

CONTROL_FLOW_SUBGRAPHS = 5
"""Subgraphs in :func:`control_flow`: two ``If`` branches, the ``Loop`` body, two nested branches."""


def _value(name: str, elem_type: int, shape: Sequence[Dim] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, None if shape is None else list(shape))


def _tensor(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(np.array(array, order="C"), name=name)  # keeps 0-d arrays 0-d


def _model(
    graph: onnx.GraphProto,
    opsets: Mapping[str, int],
    *,
    producer: tuple[str, str] = ("", ""),
    ir_version: int | None = None,
) -> onnx.ModelProto:
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid(domain, version) for domain, version in opsets.items()],
        producer_name=producer[0],
        producer_version=producer[1],
    )
    model.ir_version = ir_version or helper.find_min_ir_version_for(
        list(model.opset_import), ignore_unknown=True
    )
    return model


def random_feeds(
    model: onnx.ModelProto, dims: Mapping[str, int] | None = None, seed: int = 0
) -> dict[str, np.ndarray]:
    """Random inputs for every graph input that is not an initializer.

    Symbolic dimensions take their size from ``dims`` (2 when not listed), unknown ones are 2.
    """
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    weights = {t.name for t in model.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    for value in model.graph.input:
        if value.name in weights:
            continue
        tensor_type = value.type.tensor_type
        shape = []
        for dim in tensor_type.shape.dim:
            if dim.HasField("dim_value"):
                shape.append(int(dim.dim_value))
            else:
                shape.append(dims.get(dim.dim_param, 2))
        np_type = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        if np.issubdtype(np_type, np.floating):
            feeds[value.name] = rng.standard_normal(shape).astype(np_type)
        else:
            feeds[value.name] = rng.integers(0, 4, shape).astype(np_type)
    return feeds


# --------------------------------------------------------------------------------------
# paddle2onnx
# --------------------------------------------------------------------------------------


class _PaddleNames:
    """paddle2onnx's ``MapperHelper::GenName``: ``p2o.<OpType>.<counter per op type>``."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def __call__(self, op_type: str) -> str:
        count = self.counts.get(op_type, -1) + 1
        self.counts[op_type] = count
        return f"p2o.{op_type}.{count}"


def paddle_cnn(*, channels: int = 8, classes: int = 10, seed: int = 0) -> onnx.ModelProto:
    """A Paddle ``conv2d -> batch_norm -> relu -> pool2d -> flatten -> linear -> softmax`` net.

    Written as paddle2onnx (opset 11) writes it: nodes ``p2o.Conv.0``,
    ``p2o.BatchNormalization.0``...; the Paddle variable names on the tensors
    (``conv2d_0.tmp_0``, ``batch_norm_0.tmp_2``) and weights (``conv2d_0.w_0``,
    ``batch_norm_0.w_1``); helper tensors named like nodes (``p2o.Shape.1``);
    and ``flatten_contiguous_range`` lowered to ``Reshape`` with a target
    computed at run time by ``Shape -> Slice -> Concat``.
    """
    rng = np.random.default_rng(seed)
    gen = _PaddleNames()
    c = channels
    f32 = np.float32
    inits = [
        _tensor("conv2d_0.w_0", rng.standard_normal((c, 3, 3, 3)).astype(f32) * f32(0.2)),
        _tensor("batch_norm_0.w_0", rng.uniform(0.5, 1.5, c).astype(f32)),  # scale
        _tensor("batch_norm_0.b_0", rng.standard_normal(c).astype(f32) * f32(0.1)),  # bias
        _tensor("batch_norm_0.w_1", rng.standard_normal(c).astype(f32) * f32(0.1)),  # mean
        _tensor("batch_norm_0.w_2", rng.uniform(0.5, 1.5, c).astype(f32)),  # variance
        _tensor("linear_0.w_0", rng.standard_normal((c, classes)).astype(f32) * f32(0.3)),
        _tensor("linear_0.b_0", rng.standard_normal(classes).astype(f32) * f32(0.1)),
    ]
    nodes: list[onnx.NodeProto] = []

    def constant(values: Sequence[int]) -> str:
        name = gen("Constant")
        out = gen("Constant")
        nodes.append(
            helper.make_node(
                "Constant", [], [out], name=name, value=_tensor("value", np.array(values, np.int64))
            )
        )
        return out

    def helper_node(op_type: str, inputs: Sequence[str], **attrs: Any) -> str:
        name = gen(op_type)
        out = gen(op_type)
        nodes.append(helper.make_node(op_type, list(inputs), [out], name=name, **attrs))
        return out

    nodes.append(
        helper.make_node(
            "Conv",
            ["x", "conv2d_0.w_0"],
            ["conv2d_0.tmp_0"],
            name=gen("Conv"),
            dilations=[1, 1],
            group=1,
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            strides=[1, 1],
        )
    )
    nodes.append(
        helper.make_node(
            "BatchNormalization",
            [
                "conv2d_0.tmp_0",
                "batch_norm_0.w_0",
                "batch_norm_0.b_0",
                "batch_norm_0.w_1",
                "batch_norm_0.w_2",
            ],
            ["batch_norm_0.tmp_2"],
            name=gen("BatchNormalization"),
            epsilon=1e-5,
            momentum=0.9,
        )
    )
    nodes.append(helper.make_node("Relu", ["batch_norm_0.tmp_2"], ["relu_0.tmp_0"], name=gen("Relu")))
    nodes.append(
        helper.make_node(
            "GlobalAveragePool", ["relu_0.tmp_0"], ["pool2d_0.tmp_0"], name=gen("GlobalAveragePool")
        )
    )
    # flatten_contiguous_range(start_axis=1): Reshape(x, Concat(Slice(Shape(x), 0, 1), [-1]))
    shape = helper_node("Shape", ["pool2d_0.tmp_0"])
    head = helper_node("Slice", [shape, constant([0]), constant([1]), constant([0])])
    target = helper_node("Concat", [head, constant([-1])], axis=0)
    nodes.append(
        helper.make_node("Reshape", ["pool2d_0.tmp_0", target], ["flatten_0.tmp_0"], name=gen("Reshape"))
    )
    nodes.append(
        helper.make_node(
            "MatMul", ["flatten_0.tmp_0", "linear_0.w_0"], ["linear_0.tmp_0"], name=gen("MatMul")
        )
    )
    nodes.append(
        helper.make_node("Add", ["linear_0.tmp_0", "linear_0.b_0"], ["linear_0.tmp_1"], name=gen("Add"))
    )
    nodes.append(
        helper.make_node("Softmax", ["linear_0.tmp_1"], ["softmax_0.tmp_0"], name=gen("Softmax"), axis=1)
    )
    graph = helper.make_graph(
        nodes,
        "paddle-paddle",
        [_value("x", TensorProto.FLOAT, ["p2o.DynamicDimension.0", 3, 16, 16])],
        [_value("softmax_0.tmp_0", TensorProto.FLOAT, ["p2o.DynamicDimension.1", classes])],
        inits,
    )
    return _model(graph, {"": 11}, producer=("PaddlePaddle", "1.3.1"), ir_version=7)


# --------------------------------------------------------------------------------------
# tf2onnx (Keras)
# --------------------------------------------------------------------------------------


def keras_cnn(*, filters: int = 4, units: int = 10, seed: int = 0) -> onnx.ModelProto:
    """A Keras ``Sequential([Conv2D, MaxPooling2D, Flatten, Dense(softmax)])`` as tf2onnx writes it.

    NHWC ``input_1`` with batch ``unk__6`` is transposed to NCHW for ``Conv``
    and back for ``Flatten``; weights are ``const_fold_opt__*`` initializers
    and ``.../ReadVariableOp:0`` tensors; node outputs end in ``:0``; the model
    imports ``ai.onnx.ml`` (tf2onnx always does) and ends with ``Identity``.
    """
    rng = np.random.default_rng(seed)
    f32 = np.float32
    scope = "StatefulPartitionedCall/sequential"
    pooled = 4 * 4 * filters  # 10x10 input, valid 3x3 conv -> 8x8, 2x2 max pooling -> 4x4
    inits = [
        _tensor("const_fold_opt__12", rng.standard_normal((filters, 1, 3, 3)).astype(f32) * f32(0.3)),
        _tensor(
            f"{scope}/conv2d/BiasAdd/ReadVariableOp:0", rng.standard_normal(filters).astype(f32) * f32(0.1)
        ),
        _tensor("const_fold_opt__15", np.array([-1, pooled], np.int64)),
        _tensor(
            f"{scope}/dense/MatMul/ReadVariableOp:0",
            rng.standard_normal((pooled, units)).astype(f32) * f32(0.2),
        ),
        _tensor(f"{scope}/dense/BiasAdd/ReadVariableOp:0", rng.standard_normal(units).astype(f32) * f32(0.1)),
    ]
    nodes = [
        helper.make_node(
            "Transpose",
            ["input_1"],
            [f"{scope}/conv2d/Conv2D__6:0"],
            name=f"{scope}/conv2d/Conv2D__6",
            perm=[0, 3, 1, 2],
        ),
        helper.make_node(
            "Conv",
            [f"{scope}/conv2d/Conv2D__6:0", "const_fold_opt__12", f"{scope}/conv2d/BiasAdd/ReadVariableOp:0"],
            [f"{scope}/conv2d/BiasAdd:0"],
            name=f"{scope}/conv2d/BiasAdd",
            dilations=[1, 1],
            kernel_shape=[3, 3],
            strides=[1, 1],
            auto_pad="VALID",
        ),
        helper.make_node(
            "Relu", [f"{scope}/conv2d/BiasAdd:0"], [f"{scope}/conv2d/Relu:0"], name=f"{scope}/conv2d/Relu"
        ),
        helper.make_node(
            "MaxPool",
            [f"{scope}/conv2d/Relu:0"],
            [f"{scope}/max_pooling2d/MaxPool:0"],
            name=f"{scope}/max_pooling2d/MaxPool",
            kernel_shape=[2, 2],
            strides=[2, 2],
            auto_pad="VALID",
        ),
        helper.make_node(
            "Transpose",
            [f"{scope}/max_pooling2d/MaxPool:0"],
            [f"{scope}/max_pooling2d/MaxPool__14:0"],
            name=f"{scope}/max_pooling2d/MaxPool__14",
            perm=[0, 2, 3, 1],
        ),
        helper.make_node(
            "Reshape",
            [f"{scope}/max_pooling2d/MaxPool__14:0", "const_fold_opt__15"],
            [f"{scope}/flatten/Reshape:0"],
            name=f"{scope}/flatten/Reshape",
        ),
        helper.make_node(
            "MatMul",
            [f"{scope}/flatten/Reshape:0", f"{scope}/dense/MatMul/ReadVariableOp:0"],
            [f"{scope}/dense/MatMul:0"],
            name=f"{scope}/dense/MatMul",
        ),
        helper.make_node(
            "Add",
            [f"{scope}/dense/MatMul:0", f"{scope}/dense/BiasAdd/ReadVariableOp:0"],
            [f"{scope}/dense/BiasAdd:0"],
            name=f"{scope}/dense/BiasAdd",
        ),
        helper.make_node(
            "Softmax",
            [f"{scope}/dense/BiasAdd:0"],
            [f"{scope}/dense/Softmax:0"],
            name=f"{scope}/dense/Softmax",
            axis=-1,
        ),
        helper.make_node("Identity", [f"{scope}/dense/Softmax:0"], ["Identity:0"], name="Identity"),
    ]
    graph = helper.make_graph(
        nodes,
        "tf2onnx",
        [_value("input_1", TensorProto.FLOAT, ["unk__6", 10, 10, 1])],
        [_value("Identity:0", TensorProto.FLOAT, ["unk__7", units])],
        inits,
    )
    return _model(graph, {"": 13, "ai.onnx.ml": 2}, producer=("tf2onnx", "1.16.1 15c810"), ir_version=7)


# --------------------------------------------------------------------------------------
# Constant-heavy (TorchScript exporter style)
# --------------------------------------------------------------------------------------


def constant_heavy(*, features: int = 6, seed: int = 0) -> onnx.ModelProto:
    """Shape arithmetic and arithmetic on ``Constant`` nodes of every attribute kind.

    ``value`` (float and int64 tensors, a 0-d tensor, a bool scalar and a
    ``[features, features]`` matrix), ``value_int``, ``value_ints``,
    ``value_float`` and ``value_floats`` all feed ``Reshape``/``Add``/``Mul``;
    one ``Constant`` is read by two nodes. No initializers at all.
    """
    if features % 2:
        raise ValueError("features must be even")
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    counts: dict[str, int] = {}

    def node(op_type: str, inputs: Sequence[str], out: str = "", **attrs: Any) -> str:
        count = counts.get(op_type, 0)
        counts[op_type] = count + 1
        name = f"/{op_type}" if count == 0 else f"/{op_type}_{count}"
        out = out or f"{name}_output_0"
        nodes.append(helper.make_node(op_type, list(inputs), [out], name=name, **attrs))
        return out

    def const(value: Any, dtype: type = np.float32) -> str:
        return node("Constant", [], value=_tensor("value", np.asarray(value, dtype)))

    half = features // 2
    batch = node("Gather", [node("Shape", ["x"]), node("Constant", [], value_int=0)], axis=0)
    lead = node("Unsqueeze", [batch, node("Constant", [], value_ints=[0])])
    target = node("Concat", [lead, node("Constant", [], value_ints=[2, half])], axis=0)
    y = node("Reshape", ["x", target])
    scale = node("Constant", [], value_float=0.5)
    y = node("Mul", [y, scale])
    y = node("Add", [y, const(rng.standard_normal(half))])
    y = node("Mul", [y, node("Constant", [], value_floats=np.linspace(-1.0, 2.0, half).tolist())])
    y = node("Reshape", [y, const([-1, features], np.int64)])
    y = node("MatMul", [y, const(rng.standard_normal((features, features)) / np.sqrt(features))])
    y = node("Add", [y, const(0.25)])  # a 0-d tensor
    node("Mul", [y, scale], out="y")  # the value_float Constant is read a second time
    total = node("ReduceSum", ["y", node("Constant", [], value_ints=[1])], keepdims=1)
    positive = node("Greater", [total, const(0.0)])
    node("And", [positive, const(True, np.bool_)], out="mask")
    graph = helper.make_graph(
        nodes,
        "main_graph",
        [_value("x", TensorProto.FLOAT, ["batch", features])],
        [_value("y", TensorProto.FLOAT, ["batch", features]), _value("mask", TensorProto.BOOL, ["batch", 1])],
    )
    return _model(graph, {"": 13}, producer=("pytorch", "1.13.1"))


# --------------------------------------------------------------------------------------
# Second opset domains
# --------------------------------------------------------------------------------------


def contrib_ops(*, features: int = 16, hidden: int = 32, seed: int = 0) -> onnx.ModelProto:
    """ONNX Runtime contrib ops (``com.microsoft``: FusedMatMul, BiasGelu, Gelu) around standard ones."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    inits = [
        _tensor("fc1.weight", rng.standard_normal((features, hidden)).astype(f32) / f32(4)),
        _tensor("fc1.bias", rng.standard_normal(hidden).astype(f32) / f32(10)),
        _tensor("fc2.weight", rng.standard_normal((features, hidden)).astype(f32) / f32(6)),
        _tensor("fc2.bias", rng.standard_normal(features).astype(f32) / f32(10)),
    ]
    ms = "com.microsoft"
    nodes = [
        helper.make_node(
            "FusedMatMul",
            ["input", "fc1.weight"],
            ["/fc1/FusedMatMul_output_0"],
            name="/fc1/FusedMatMul",
            domain=ms,
            alpha=1.0,
            transA=0,
            transB=0,
        ),
        helper.make_node(
            "BiasGelu",
            ["/fc1/FusedMatMul_output_0", "fc1.bias"],
            ["/fc1/BiasGelu_output_0"],
            name="/fc1/BiasGelu",
            domain=ms,
        ),
        helper.make_node(
            "FusedMatMul",
            ["/fc1/BiasGelu_output_0", "fc2.weight"],
            ["/fc2/FusedMatMul_output_0"],
            name="/fc2/FusedMatMul",
            domain=ms,
            alpha=0.5,
            transB=1,
        ),
        helper.make_node(
            "Add", ["/fc2/FusedMatMul_output_0", "fc2.bias"], ["/fc2/Add_output_0"], name="/fc2/Add"
        ),
        helper.make_node("Gelu", ["/fc2/Add_output_0"], ["output"], name="/act/Gelu", domain=ms),
    ]
    graph = helper.make_graph(
        nodes,
        "contrib",
        [_value("input", TensorProto.FLOAT, ["batch", "seq", features])],
        [_value("output", TensorProto.FLOAT, ["batch", "seq", features])],
        inits,
    )
    return _model(graph, {"": 17, ms: 1}, producer=("onnxruntime.transformers", "1.20.0"))


def custom_op() -> onnx.ModelProto:
    """A ``my.custom::MyOp`` that nothing implements, next to a ``com.microsoft::Gelu``.

    Loads and summarises, but ONNX Runtime cannot run it.
    """
    nodes = [
        helper.make_node("Relu", ["x"], ["/Relu_output_0"], name="/Relu"),
        helper.make_node(
            "Gelu", ["/Relu_output_0"], ["/Gelu_output_0"], name="/Gelu", domain="com.microsoft"
        ),
        helper.make_node(
            "MyOp", ["/Gelu_output_0", "scale"], ["y"], name="/custom/MyOp", domain="my.custom", mode="fast"
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "custom",
        [_value("x", TensorProto.FLOAT, ["batch", 4])],
        [_value("y", TensorProto.FLOAT, ["batch", 4])],
        [_tensor("scale", np.full(4, 2.0, np.float32))],
    )
    return _model(graph, {"": 17, "com.microsoft": 1, "my.custom": 1})


# --------------------------------------------------------------------------------------
# Control flow
# --------------------------------------------------------------------------------------


def control_flow(*, features: int = 4, trips: int = 3) -> onnx.ModelProto:
    """``If`` with branches that read outer ``x`` and ``bias``, then a ``Loop`` with a nested ``If``.

    The ``Loop`` carries ``v`` (halved on even iterations, ``+ x`` on odd ones,
    so the nested ``else`` branch reads ``x`` two levels up) and scans out the
    per-iteration column means (``trace``, ``[trips, features]``).
    """
    f = features
    f32 = np.float32

    def branch(
        name: str, op_type: str, a: str, b: str, out: str, extra: Sequence[onnx.NodeProto] = ()
    ) -> onnx.GraphProto:
        return helper.make_graph(
            [*extra, helper.make_node(op_type, [a, b], [out], name=f"{name}/{op_type}")],
            name.strip("/").replace("/", "_"),
            [],
            [_value(out, TensorProto.FLOAT, ["batch", f])],
        )

    half = helper.make_node(
        "Constant",
        [],
        ["/loop/body/then/Constant_output_0"],
        name="/loop/body/then/Constant",
        value_float=0.5,
    )
    body = helper.make_graph(
        [
            helper.make_node(
                "Constant", [], ["/loop/body/Constant_output_0"], name="/loop/body/Constant", value_int=2
            ),
            helper.make_node(
                "Mod",
                ["iteration", "/loop/body/Constant_output_0"],
                ["/loop/body/Mod_output_0"],
                name="/loop/body/Mod",
            ),
            helper.make_node(
                "Constant", [], ["/loop/body/Constant_1_output_0"], name="/loop/body/Constant_1", value_int=0
            ),
            helper.make_node(
                "Equal",
                ["/loop/body/Mod_output_0", "/loop/body/Constant_1_output_0"],
                ["/loop/body/Equal_output_0"],
                name="/loop/body/Equal",
            ),
            helper.make_node(
                "If",
                ["/loop/body/Equal_output_0"],
                ["v_out"],
                name="/loop/body/If",
                then_branch=branch("/loop/body/then", "Mul", "v_in", half.output[0], "body_then_out", [half]),
                else_branch=branch("/loop/body/else", "Add", "v_in", "x", "body_else_out"),
            ),
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="/loop/body/Identity"),
            helper.make_node(
                "ReduceMean", ["v_out"], ["step_mean"], name="/loop/body/ReduceMean", axes=[0], keepdims=0
            ),
        ],
        "loop_body",
        [
            _value("iteration", TensorProto.INT64, []),
            _value("cond_in", TensorProto.BOOL, []),
            _value("v_in", TensorProto.FLOAT, ["batch", f]),
        ],
        [
            _value("cond_out", TensorProto.BOOL, []),
            _value("v_out", TensorProto.FLOAT, ["batch", f]),
            _value("step_mean", TensorProto.FLOAT, [f]),
        ],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["/ReduceSum_output_0"], name="/ReduceSum", keepdims=0),
        helper.make_node("Constant", [], ["/Constant_output_0"], name="/Constant", value_float=0.0),
        helper.make_node(
            "Greater", ["/ReduceSum_output_0", "/Constant_output_0"], ["/Greater_output_0"], name="/Greater"
        ),
        helper.make_node(
            "If",
            ["/Greater_output_0"],
            ["/branch/If_output_0"],
            name="/branch/If",
            then_branch=branch("/branch/then", "Add", "x", "bias", "then_out"),
            else_branch=branch("/branch/else", "Sub", "x", "bias", "else_out"),
        ),
        helper.make_node("Constant", [], ["/loop/Constant_output_0"], name="/loop/Constant", value_int=trips),
        helper.make_node(
            "Constant",
            [],
            ["/loop/Constant_1_output_0"],
            name="/loop/Constant_1",
            value=_tensor("value", np.array(True)),
        ),
        helper.make_node(
            "Loop",
            ["/loop/Constant_output_0", "/loop/Constant_1_output_0", "/branch/If_output_0"],
            ["output", "trace"],
            name="/loop/Loop",
            body=body,
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "control_flow",
        [_value("x", TensorProto.FLOAT, ["batch", f])],
        [_value("output", TensorProto.FLOAT, ["batch", f]), _value("trace", TensorProto.FLOAT, ["steps", f])],
        [_tensor("bias", np.linspace(-1, 1, f).astype(f32))],
    )
    return _model(graph, {"": 17})


def branches_reusing_names(*, features: int = 3) -> onnx.ModelProto:
    """An ``If`` whose two branches both define a tensor ``tmp``, of different shapes.

    Legal ONNX (names need only be unique within a graph and not shadow outer
    ones): ``then`` makes ``tmp = Concat(x, x)`` (``[2 * features]``), ``else``
    makes ``tmp = Identity(x)`` (``[features]``); both reduce it to ``[1]``.
    """

    def branch(name: str, op_type: str, out: str, **attrs: Any) -> onnx.GraphProto:
        inputs = ["x", "x"] if op_type == "Concat" else ["x"]
        return helper.make_graph(
            [
                helper.make_node(op_type, inputs, ["tmp"], name=f"/{name}/{op_type}", **attrs),
                helper.make_node("ReduceSum", ["tmp"], [out], name=f"/{name}/ReduceSum", keepdims=1),
            ],
            name,
            [],
            [_value(out, TensorProto.FLOAT, [1])],
        )

    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], name="/ReduceSum", keepdims=0),
        helper.make_node("Constant", [], ["zero"], name="/Constant", value_float=0.0),
        helper.make_node("Greater", ["total", "zero"], ["positive"], name="/Greater"),
        helper.make_node(
            "If",
            ["positive"],
            ["y"],
            name="/If",
            then_branch=branch("then", "Concat", "then_out", axis=0),
            else_branch=branch("else", "Identity", "else_out"),
        ),
    ]
    graph = helper.make_graph(
        nodes, "branches", [_value("x", TensorProto.FLOAT, [features])], [_value("y", TensorProto.FLOAT, [1])]
    )
    return _model(graph, {"": 17})


# --------------------------------------------------------------------------------------
# Node names missing or repeated
# --------------------------------------------------------------------------------------


def _chain(names: Sequence[str]) -> onnx.GraphProto:
    """``x -> Relu -> Neg -> Add(., relu) -> Mul(., w) -> Constant-fed Add -> Sigmoid -> y``."""
    ops = [
        ("Relu", ["x"], ["a"], {}),
        ("Neg", ["a"], ["b"], {}),
        ("Add", ["b", "a"], ["c"], {}),
        ("Mul", ["c", "w"], ["d"], {}),
        ("Constant", [], ["k"], {"value_float": 1.5}),
        ("Add", ["d", "k"], ["e"], {}),
        ("Relu", ["e"], ["f"], {}),
        ("Sigmoid", ["f"], ["y"], {}),
    ]
    if len(names) != len(ops):
        raise ValueError(f"need {len(ops)} names")
    nodes = [
        helper.make_node(op, inputs, outputs, name=name or None, **attrs)
        for name, (op, inputs, outputs, attrs) in zip(names, ops, strict=True)
    ]
    return helper.make_graph(
        nodes,
        "chain",
        [_value("x", TensorProto.FLOAT, ["batch", 3])],
        [_value("y", TensorProto.FLOAT, ["batch", 3])],
        [_tensor("w", np.array([1.0, 2.0, 3.0], np.float32))],
    )


def unnamed_nodes() -> onnx.ModelProto:
    """A chain whose nodes have no names at all (old converters, hand-written graphs)."""
    return _model(_chain([""] * 8), {"": 13})


def duplicate_names() -> onnx.ModelProto:
    """The same chain with repeated names, and names that look like generated or reserved ids."""
    names = ["node", "node", "Relu#6", "input:x", "node", "", "", "output:y"]
    return _model(_chain(names), {"": 13})


# --------------------------------------------------------------------------------------
# PyTorch modules (torch imported lazily)
# --------------------------------------------------------------------------------------


def torch_cnn(seed: int = 0) -> Any:
    """A small CNN; its second ``BatchNorm2d`` follows a ReLU, so the exporter cannot fold it into a Conv."""
    import torch
    from torch import nn

    torch.manual_seed(seed)

    class SmallCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1),
                nn.BatchNorm2d(8),
                nn.ReLU(),
                nn.Conv2d(8, 8, 3, padding=1, stride=2),
                nn.ReLU(),
                nn.BatchNorm2d(8),
            )
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(8, 5)

        def forward(self, x: Any) -> Any:
            return self.fc(torch.flatten(self.pool(self.features(x)), 1))

    model = SmallCNN()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 1.5)
    return model.eval()


def torch_encoder(seed: int = 0, d_model: int = 32) -> Any:
    """Token features -> Linear -> one ``nn.TransformerEncoderLayer`` -> mean over seq -> Linear."""
    import torch
    from torch import nn

    torch.manual_seed(seed)

    class SmallEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(16, d_model)
            layer = nn.TransformerEncoderLayer(d_model, 4, 2 * d_model, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
            self.head = nn.Linear(d_model, 3)

        def forward(self, x: Any) -> Any:
            return self.head(self.encoder(self.embed(x)).mean(dim=1))

    return SmallEncoder().eval()


def torch_mlp(seed: int = 0) -> Any:
    """``fc1`` (Linear) -> ``act`` (GELU) -> ``norm`` (LayerNorm) -> ``fc2``: quick to export with dynamo."""
    import torch
    from torch import nn

    torch.manual_seed(seed)

    class SmallMLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.act = nn.GELU()
            self.norm = nn.LayerNorm(16)
            self.fc2 = nn.Linear(16, 4)

        def forward(self, x: Any) -> Any:
            return self.fc2(self.norm(self.act(self.fc1(x))))

    return SmallMLP().eval()
