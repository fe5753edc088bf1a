"""Models with the quirks real exports have, built in code in their exporters' style.

Each builder returns an ``onnx.ModelProto`` that ONNX Runtime runs, small enough
to build in milliseconds, with one quirk seen in models from the wild:

* :func:`paddle_minus_one`: paddle2onnx writes ``dim_value: -1`` for dynamic
  dimensions (invalid by the spec, accepted by ONNX Runtime), here on the batch
  and width of an OCR-like ``x: [-1, 3, 48, -1]``.
* :func:`initializers_as_inputs`: exporters for IR < 4 (PyTorch 1.0 and
  ``keep_initializers_as_inputs=True``, keras2onnx) list every weight among the
  graph inputs too, with its full shape.
* :func:`unnamed_dims`: dims with neither ``dim_param`` nor ``dim_value`` (tf2onnx's
  ``[?, 16, 16, 3]``, hand-edited graphs).
* :func:`old_opset`: opsets 7-10 with their version-specific op forms
  (``BatchNormalization`` with ``spatial``, ``Dropout`` with a ``ratio`` attribute,
  ``Upsample`` with ``scales`` as an attribute or an input, ``Slice`` with attributes).
* :func:`subgraph_name_collisions`: node names repeated within a graph and across an
  ``If``'s branches and the main graph, and nodes with empty names.
* :func:`stale_value_info`: ``value_info`` that contradicts inference (left behind
  after a graph edit changed a stride): a wrong spatial size and a wrong rank.
* :func:`biased_gqa_decoder`: a decoder LLM in onnxruntime-genai's builder style (``GroupQueryAttention``,
  a symbolic ``kv_cache_dim``) whose attention ``scale`` is not ``1/sqrt(head_size)`` (Granite's
  ``attention_multiplier``) and whose packed Q/K/V projection has a bias ``Add``. Not in :data:`QUIRKS`.

:data:`QUIRKS` maps a name to ``(builder, input name, shape to fix)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.explorer import third_party_models as tpm

__all__ = [
    "QUIRKS",
    "biased_gqa_decoder",
    "initializers_as_inputs",
    "old_opset",
    "paddle_minus_one",
    "stale_value_info",
    "subgraph_name_collisions",
    "unnamed_dims",
]

F32 = np.float32


def _tensor(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(np.asarray(array), name=name)


def _set_dims(value: onnx.ValueInfoProto, dims: Sequence[int | str | None]) -> None:
    """Write dims exactly as given: ints as ``dim_value`` (even -1 or 0), str as ``dim_param``, None empty."""
    shape = value.type.tensor_type.shape
    shape.ClearField("dim")
    for d in dims:
        dim = shape.dim.add()
        if isinstance(d, int):
            dim.dim_value = d
        elif isinstance(d, str):
            dim.dim_param = d


def paddle_minus_one(*, dim: int = -1) -> onnx.ModelProto:
    """:func:`~tests.explorer.third_party_models.paddle_cnn` as paddle2onnx writes it for a dynamic shape.

    The input is ``x: [dim, 3, 48, dim]`` and the output ``[dim, 10]``, with ``dim``
    written as a ``dim_value`` (-1 by default, as paddle2onnx does).
    """
    model = tpm.paddle_cnn()
    _set_dims(model.graph.input[0], [dim, 3, 48, dim])
    _set_dims(model.graph.output[0], [dim, 10])
    return model


def initializers_as_inputs(*, channels: int = 4, classes: int = 5, seed: int = 0) -> onnx.ModelProto:
    """A CNN as PyTorch 1.0's exporter wrote it (IR 3, opset 9): every weight is also a graph input.

    Nodes have no names, tensors are numbered (``input.1``, ``7``, ``8``...), weights
    are named by module path (``conv1.weight``, ``bn1.running_mean``) and listed after
    the real input in ``graph.input``, each with its full shape.
    """
    rng = np.random.default_rng(seed)
    c = channels
    weights = [
        _tensor("conv1.weight", (rng.standard_normal((c, 3, 3, 3)) * 0.3).astype(F32)),
        _tensor("conv1.bias", (rng.standard_normal(c) * 0.1).astype(F32)),
        _tensor("bn1.weight", rng.uniform(0.5, 1.5, c).astype(F32)),
        _tensor("bn1.bias", (rng.standard_normal(c) * 0.1).astype(F32)),
        _tensor("bn1.running_mean", (rng.standard_normal(c) * 0.1).astype(F32)),
        _tensor("bn1.running_var", rng.uniform(0.5, 1.5, c).astype(F32)),
        _tensor("fc.weight", (rng.standard_normal((classes, c * 4 * 4)) * 0.2).astype(F32)),
        _tensor("fc.bias", (rng.standard_normal(classes) * 0.1).astype(F32)),
    ]
    nodes = [
        helper.make_node(
            "Conv", ["input.1", "conv1.weight", "conv1.bias"], ["7"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]
        ),
        helper.make_node(
            "BatchNormalization",
            ["7", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"],
            ["8"],
            epsilon=1e-5,
            momentum=0.9,
        ),
        helper.make_node("Relu", ["8"], ["9"]),
        helper.make_node("MaxPool", ["9"], ["10"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["10"], ["11"], axis=1),
        helper.make_node("Gemm", ["11", "fc.weight", "fc.bias"], ["12"], alpha=1.0, beta=1.0, transB=1),
    ]
    inputs = [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["batch", 3, 8, 8])]
    inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in weights]
    graph = helper.make_graph(
        nodes,
        "torch-jit-export",
        inputs,
        [helper.make_tensor_value_info("12", TensorProto.FLOAT, ["batch", classes])],
        weights,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 9)], producer_name="pytorch", producer_version="1.0"
    )
    model.ir_version = 3
    return model


def unnamed_dims(*, filters: int = 4, seed: int = 0) -> onnx.ModelProto:
    """A tf2onnx-style NHWC conv net whose input and output dims are empty (no value, no name)."""
    rng = np.random.default_rng(seed)
    nodes = [
        helper.make_node("Transpose", ["input_1:0"], ["t:0"], name="conv2d/Conv2D__6", perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["t:0", "kernel:0"], ["c:0"], name="conv2d/Conv2D", kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c:0"], ["r:0"], name="conv2d/Relu"),
        helper.make_node(
            "ReduceMean", ["r:0"], ["m:0"], name="global_average_pooling2d/Mean", axes=[2, 3], keepdims=0
        ),
        helper.make_node("Identity", ["m:0"], ["dense:0"], name="Identity"),
    ]
    graph = helper.make_graph(
        nodes,
        "tf2onnx",
        [helper.make_tensor_value_info("input_1:0", TensorProto.FLOAT, [None, None, None, 3])],
        [helper.make_tensor_value_info("dense:0", TensorProto.FLOAT, [None, None])],
        [_tensor("kernel:0", (rng.standard_normal((filters, 3, 3, 3)) * 0.3).astype(F32))],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="tf2onnx", producer_version="1.9.3"
    )
    model.ir_version = 7
    return model


_IR_FOR_OPSET = {7: 3, 8: 3, 9: 4, 10: 5}


def old_opset(opset: int, *, channels: int = 4, seed: int = 0) -> onnx.ModelProto:
    """A small net in the op forms of ``opset`` (7, 8, 9 or 10), with that opset's IR version.

    ``Conv -> BatchNormalization -> Relu -> Dropout -> Upsample -> MaxPool -> Slice ->
    Flatten -> Gemm``: BatchNormalization carries ``spatial=1`` below opset 9, Dropout
    its ``ratio`` attribute, Upsample takes ``scales`` as an attribute in opsets 7-8
    and as an input in 9 (Resize in 10), and Slice takes attributes below opset 10.
    Weights are also graph inputs below IR 4, as those exporters wrote them.
    """
    if opset not in _IR_FOR_OPSET:
        raise ValueError(f"opset must be one of {sorted(_IR_FOR_OPSET)}")
    rng = np.random.default_rng(seed)
    c = channels
    weights = [
        _tensor("W", (rng.standard_normal((c, 3, 3, 3)) * 0.3).astype(F32)),
        _tensor("scale", rng.uniform(0.5, 1.5, c).astype(F32)),
        _tensor("B", (rng.standard_normal(c) * 0.1).astype(F32)),
        _tensor("mean", (rng.standard_normal(c) * 0.1).astype(F32)),
        _tensor("var", rng.uniform(0.5, 1.5, c).astype(F32)),
        _tensor("fc_W", (rng.standard_normal((c * 4 * 8, 6)) * 0.2).astype(F32)),
        _tensor("fc_B", (rng.standard_normal(6) * 0.1).astype(F32)),
    ]
    bn_attrs = {"epsilon": 1e-5, "momentum": 0.9}
    if opset < 9:
        bn_attrs["spatial"] = 1
    nodes = [
        helper.make_node(
            "Conv", ["data", "W"], ["conv"], name="conv0", kernel_shape=[3, 3], pads=[1, 1, 1, 1]
        ),
        helper.make_node(
            "BatchNormalization", ["conv", "scale", "B", "mean", "var"], ["bn"], name="bn0", **bn_attrs
        ),
        helper.make_node("Relu", ["bn"], ["relu"], name="relu0"),
        helper.make_node("Dropout", ["relu"], ["drop"], name="drop0", ratio=0.5),
    ]
    scales = [1.0, 1.0, 2.0, 2.0]
    if opset < 9:
        nodes.append(
            helper.make_node("Upsample", ["drop"], ["up"], name="up0", mode="nearest", scales=scales)
        )
    else:
        weights.append(_tensor("up_scales", np.array(scales, F32)))
        if opset == 9:
            nodes.append(
                helper.make_node("Upsample", ["drop", "up_scales"], ["up"], name="up0", mode="nearest")
            )
        else:
            nodes.append(
                helper.make_node("Resize", ["drop", "up_scales"], ["up"], name="up0", mode="nearest")
            )
    nodes.append(
        helper.make_node("MaxPool", ["up"], ["pool"], name="pool0", kernel_shape=[2, 2], strides=[2, 2])
    )
    if opset < 10:  # keep the top half: [N, c, 8, 8] -> [N, c, 4, 8]
        nodes.append(
            helper.make_node("Slice", ["pool"], ["half"], name="slice0", axes=[2], starts=[0], ends=[4])
        )
    else:
        weights += [
            _tensor("s_starts", np.array([0], np.int64)),
            _tensor("s_ends", np.array([4], np.int64)),
            _tensor("s_axes", np.array([2], np.int64)),
        ]
        nodes.append(
            helper.make_node("Slice", ["pool", "s_starts", "s_ends", "s_axes"], ["half"], name="slice0")
        )
    nodes += [
        helper.make_node("Flatten", ["half"], ["flat"], name="flatten0", axis=1),
        helper.make_node("Gemm", ["flat", "fc_W", "fc_B"], ["out"], name="fc0"),
    ]
    inputs = [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 3, 8, 8])]
    ir_version = _IR_FOR_OPSET[opset]
    if ir_version < 4:
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in weights]
    graph = helper.make_graph(
        nodes,
        f"opset{opset}",
        inputs,
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 6])],
        weights,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name="onnx-mxnet",
        producer_version="1.3",
    )
    model.ir_version = ir_version
    return model


def subgraph_name_collisions(*, features: int = 3) -> onnx.ModelProto:
    """An ``If`` whose branches reuse the main graph's node names, with duplicated and empty names.

    The main graph has two nodes named ``node`` and an unnamed ``If``; both branches
    name their nodes ``node``, ``Relu`` and ``""``, and so does the main graph's ``Relu``.
    """

    def branch(name: str, op_type: str) -> onnx.GraphProto:
        return helper.make_graph(
            [
                helper.make_node(op_type, ["x"], [f"{name}_a"], name="node"),
                helper.make_node("Relu", [f"{name}_a"], [f"{name}_b"], name="Relu"),
                helper.make_node("Neg", [f"{name}_b"], [f"{name}_out"], name=""),
            ],
            name,
            [],
            [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, ["batch", features])],
        )

    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="Relu"),
        helper.make_node("ReduceSum", ["r"], ["total"], name="node", keepdims=0),
        helper.make_node("Constant", [], ["zero"], name="node", value_float=0.0),
        helper.make_node("Greater", ["total", "zero"], ["positive"], name=""),
        helper.make_node(
            "If",
            ["positive"],
            ["y"],
            name="",
            then_branch=branch("then", "Sigmoid"),
            else_branch=branch("else", "Tanh"),
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "collisions",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", features])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def stale_value_info(*, channels: int = 4, seed: int = 0) -> onnx.ModelProto:
    """A conv net whose ``value_info`` was written before its first Conv's stride became 2.

    ``conv_out`` is declared ``[batch, c, 16, 16]`` (inference: ``[batch, c, 8, 8]``) and
    ``pooled`` is declared with rank 2 (inference: rank 4). ONNX Runtime warns and runs it.
    """
    rng = np.random.default_rng(seed)
    c = channels
    nodes = [
        helper.make_node(
            "Conv",
            ["x", "w"],
            ["conv_out"],
            name="conv",
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            strides=[2, 2],
        ),
        helper.make_node("Relu", ["conv_out"], ["relu_out"], name="relu"),
        helper.make_node("GlobalAveragePool", ["relu_out"], ["pooled"], name="pool"),
        helper.make_node("Flatten", ["pooled"], ["y"], name="flatten", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "stale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", c])],
        [_tensor("w", (rng.standard_normal((c, 3, 3, 3)) * 0.3).astype(F32))],
        value_info=[
            helper.make_tensor_value_info("conv_out", TensorProto.FLOAT, ["batch", c, 16, 16]),
            helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", c]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def biased_gqa_decoder(
    *, scale: float = 1 / 64, vocab: int = 32, context: int = 256, seed: int = 0
) -> onnx.ModelProto:
    """One layer of onnxruntime-genai's Llama-family graph, as its builder writes a Granite checkpoint with
    Q/K/V biases: ``Gather`` embedding, packed QKV ``MatMul`` then a bias ``Add``, the mask subgraph
    (``seqlens_k``, ``total_sequence_length``), ``com.microsoft::GroupQueryAttention`` (4 heads of 16, 2 KV
    heads, rotary, ``scale``), a logits ``MatMul``. ``kv_cache_dim`` is symbolic; GroupQueryAttention
    refuses any value but 16. ONNX Runtime runs it."""
    rng = np.random.default_rng(seed)
    hidden, heads, kv_heads, head = 64, 4, 2, 16
    width = (heads + 2 * kv_heads) * head
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info(
            "attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]
        ),
    ]
    outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", vocab])
    ]
    for kind in ("key", "value"):
        dims = ["batch_size", kv_heads, "past_sequence_length", "kv_cache_dim"]
        inputs.append(helper.make_tensor_value_info(f"past_key_values.0.{kind}", TensorProto.FLOAT, dims))
        dims = ["batch_size", kv_heads, "total_sequence_length", "kv_cache_dim"]
        outputs.append(helper.make_tensor_value_info(f"present.0.{kind}", TensorProto.FLOAT, dims))
    angles = np.outer(np.arange(context), 1.0 / 10000 ** (np.arange(0, head, 2) / head))
    initializers = [
        _tensor("embed_tokens", rng.standard_normal((vocab, hidden)).astype(F32)),
        _tensor("qkv_proj.weight", (rng.standard_normal((hidden, width)) * 0.1).astype(F32)),
        _tensor("qkv_proj.bias", (rng.standard_normal(width) * 0.1).astype(F32)),
        _tensor("lm_head.weight", (rng.standard_normal((hidden, vocab)) * 0.1).astype(F32)),
        _tensor("cos_cache", np.cos(angles).astype(F32)),
        _tensor("sin_cache", np.sin(angles).astype(F32)),
        _tensor("one", np.array(1, np.int64)),
        _tensor("axis_1", np.array([1], np.int64)),
        _tensor("index_1", np.array(1, np.int64)),
    ]
    nodes = [
        helper.make_node("Gather", ["embed_tokens", "input_ids"], ["hidden"]),
        helper.make_node("MatMul", ["hidden", "qkv_proj.weight"], ["qkv_mm"]),
        helper.make_node("Add", ["qkv_mm", "qkv_proj.bias"], ["qkv"]),
        helper.make_node("ReduceSum", ["attention_mask", "axis_1"], ["mask_sum"], keepdims=0),
        helper.make_node("Sub", ["mask_sum", "one"], ["mask_sub"]),
        helper.make_node("Cast", ["mask_sub"], ["seqlens_k"], to=TensorProto.INT32),
        helper.make_node("Shape", ["attention_mask"], ["mask_shape"]),
        helper.make_node("Gather", ["mask_shape", "index_1"], ["total"]),
        helper.make_node("Cast", ["total"], ["total_sequence_length"], to=TensorProto.INT32),
        helper.make_node(
            "GroupQueryAttention",
            ["qkv", "", "", "past_key_values.0.key", "past_key_values.0.value", "seqlens_k",
             "total_sequence_length", "cos_cache", "sin_cache"],
            ["attn", "present.0.key", "present.0.value"],
            domain="com.microsoft",
            name="/model/layers.0/attn/GroupQueryAttention",
            num_heads=heads,
            kv_num_heads=kv_heads,
            scale=scale,
            do_rotary=1,
        ),
        helper.make_node("MatMul", ["attn", "lm_head.weight"], ["logits"]),
    ]  # fmt: skip
    graph = helper.make_graph(nodes, "biased_gqa_decoder", inputs, outputs, initializer=initializers)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


QUIRKS: dict[str, tuple[Callable[[], onnx.ModelProto], str, list[int]]] = {
    "paddle_minus_one": (paddle_minus_one, "x", [1, 3, 48, 192]),
    "initializers_as_inputs": (initializers_as_inputs, "input.1", [2, 3, 8, 8]),
    "unnamed_dims": (unnamed_dims, "input_1:0", [1, 16, 16, 3]),
    **{f"opset{v}": (lambda v=v: old_opset(v), "data", [2, 3, 8, 8]) for v in (7, 8, 9, 10)},
    "subgraph_name_collisions": (subgraph_name_collisions, "x", [2, 3]),
    "stale_value_info": (stale_value_info, "x", [1, 3, 16, 16]),
}
"""Quirk name -> (builder, the input to fix, the shape ``--input-shape`` gives it)."""
