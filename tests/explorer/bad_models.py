"""Builders of malformed and hostile ONNX models for the worker's bad-input matrix.

Every builder makes its model in code (no downloads) and walks nothing recursively: nested
graphs are built from the inside out in a loop, so depth never touches Python's stack.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = [
    "OPSET",
    "tiny_valid_model",
    "gathernd_negative_dim",
    "gathernd_negative_initializer_dim",
    "squeeze_without_input",
    "terabyte_constant_of_shape",
    "terabyte_expand",
    "gigabyte_constant_of_shape",
    "nested_if",
    "nested_loop",
    "long_chain",
    "endless_loop",
    "external_data_past_eof",
    "external_data_huge_length",
    "declared_shape_past_file",
    "stored_values_mismatch",
    "external_data_wrong_length",
]

OPSET = 17
INT64_MAX = 2**63 - 1
TERA_SHAPE = [1_000_000, 1_000_000]  # 1e12 float32 elements: 4 TB


def _model(graph: onnx.GraphProto, opset: int = OPSET) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def tiny_valid_model() -> onnx.ModelProto:
    """``y = Relu(x)`` on a float [1, 4]: the healthy model run after every bad one."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    return _model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "tiny", [x], [y]))


def gathernd_negative_dim() -> onnx.ModelProto:
    """A real native crash (141 bytes): GatherND whose indices are declared with dimension -1.

    The checker without shape inference accepts it; onnx 1.23's GatherND shape inference then
    reads past the end of the data's dimensions: ``onnx.shape_inference.infer_shapes`` and
    ``onnx.checker.check_model(full_check=True)`` die with SIGSEGV, ``onnxsim.simplify``
    (which bundles the same inference) with SIGBUS or SIGSEGV. ONNX Runtime treats the -1 as
    unknown and loads the model.
    """
    data = helper.make_tensor_value_info("data", TensorProto.FLOAT, [3, 3])
    indices = helper.make_tensor_value_info("indices", TensorProto.INT64, [-1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])
    node = helper.make_node("GatherND", ["data", "indices"], ["y"])
    return _model(helper.make_graph([node], "gathernd_negative_dim", [data, indices], [y]), opset=13)


def gathernd_negative_initializer_dim() -> onnx.ModelProto:
    """A real native crash through loading: GatherND whose indices are an initializer of dims ``[-1]``.

    Loading reads a *declared* -1 (an input's, an output's, a ``value_info``'s) as a dynamic
    dim before shape inference, so :func:`gathernd_negative_dim` no longer crashes it; a
    corrupt initializer's dims are data, not a declaration, and still reach onnx 1.23's
    GatherND inference, which dies with SIGSEGV.
    """
    data = helper.make_tensor_value_info("data", TensorProto.FLOAT, [3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])
    indices = TensorProto(name="indices", data_type=TensorProto.INT64, dims=[-1])
    node = helper.make_node("GatherND", ["data", "indices"], ["y"])
    graph = helper.make_graph([node], "gathernd_negative_initializer_dim", [data], [y], initializer=[indices])
    return _model(graph, opset=13)


def squeeze_without_input() -> onnx.ModelProto:
    """A real native crash (64 bytes): a Squeeze node with no input at all.

    onnxoptimizer 0.4's ``fuse_consecutive_squeezes`` (one of its default passes) reads the
    missing input and dies with SIGSEGV. The onnx checker and ONNX Runtime reject the node.
    """
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    node = helper.make_node("Squeeze", [], ["y"])
    return _model(helper.make_graph([node], "squeeze_without_input", [], [y]))


def _constant_of_shape(shape: list[int], name: str) -> onnx.ModelProto:
    dims = numpy_helper.from_array(np.array(shape, np.int64), "shape")
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"])
    return _model(helper.make_graph([node], name, [], [y], initializer=[dims]))


def terabyte_constant_of_shape() -> onnx.ModelProto:
    """About 100 bytes that ask for a 4 TB float tensor through ConstantOfShape."""
    return _constant_of_shape(TERA_SHAPE, "terabyte")


def gigabyte_constant_of_shape() -> onnx.ModelProto:
    """A 3 GiB float tensor: the machine could hold it, a 2 GiB memory cap cannot.

    Terabytes fail even without a cap (malloc refuses them); this one proves the cap works.
    """
    return _constant_of_shape([3 * 2**28], "gigabytes")


def terabyte_expand() -> onnx.ModelProto:
    """A scalar expanded to a 4 TB tensor."""
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    shape = numpy_helper.from_array(np.array(TERA_SHAPE, np.int64), "shape")
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, TERA_SHAPE)
    node = helper.make_node("Expand", ["one", "shape"], ["y"])
    return _model(helper.make_graph([node], "terabyte_expand", [], [y], initializer=[one, shape]))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


# Field numbers in onnx.proto: GraphProto.node, NodeProto.attribute, AttributeProto.g, ModelProto.graph.
_GRAPH_NODE, _NODE_ATTRIBUTE, _ATTRIBUTE_G, _MODEL_GRAPH = 1, 5, 6, 7


def _wrap_graph(graph: bytes, attribute: str, node: onnx.NodeProto, outer: onnx.GraphProto) -> bytes:
    """Serialize ``outer`` with ``node`` appended, ``node`` holding ``graph`` as ``attribute``.

    Built from bytes because Python's protobuf refuses to build or parse messages nested
    deeper than 100 levels; the nested models below go far past that on purpose.
    """
    attr = helper.make_attribute(attribute, onnx.GraphProto()).SerializeToString()
    attr_bytes = attr[: -len(_field(_ATTRIBUTE_G, b""))] if attr.endswith(_field(_ATTRIBUTE_G, b"")) else attr
    node_bytes = node.SerializeToString() + _field(_NODE_ATTRIBUTE, attr_bytes + _field(_ATTRIBUTE_G, graph))
    return outer.SerializeToString() + _field(_GRAPH_NODE, node_bytes)


def _model_bytes(graph: bytes, opset: int = OPSET) -> bytes:
    shell = _model(helper.make_graph([], "placeholder", [], []), opset)
    shell.ClearField("graph")
    return shell.SerializeToString() + _field(_MODEL_GRAPH, graph)


def nested_if(depth: int = 300) -> bytes:
    """Serialized model: ``depth`` If nodes, each in the then-branch of the one above.

    Returned as bytes: Python's protobuf cannot hold a message this deep (neither can the onnx
    checker's parser), which is part of what the matrix checks.
    """
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])

    def leaf(name: str) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(name, TensorProto.FLOAT, [1])
        return helper.make_graph([helper.make_node("Identity", ["x"], [name])], f"g_{name}", [], [out])

    branch = leaf("then_0").SerializeToString()
    for level in range(1, depth + 1):
        name = f"then_{level}" if level < depth else "y"
        node = helper.make_node("If", ["cond"], [name], else_branch=leaf(f"else_{level}"))
        out = helper.make_tensor_value_info(name, TensorProto.FLOAT, [1])
        inputs = [x, cond] if level == depth else []
        shell = helper.make_graph([], "nested_if" if level == depth else f"g_{name}", inputs, [out])
        branch = _wrap_graph(branch, "then_branch", node, shell)
    return _model_bytes(branch)


def nested_loop(depth: int = 300) -> bytes:
    """Serialized model: ``depth`` Loop nodes (one trip each), each in the body of the one above."""
    trip = numpy_helper.from_array(np.array(1, np.int64), "trip")
    cond = numpy_helper.from_array(np.array(True), "cond")
    inner = [helper.make_node("Identity", ["c_0"], ["co_0"]), helper.make_node("Neg", ["v_0"], ["vo_0"])]
    body = helper.make_graph(inner, "body_0", *_loop_signature("0")).SerializeToString()
    for level in range(1, depth + 1):
        suffix = str(level)
        if level < depth:
            identity = helper.make_node("Identity", [f"c_{suffix}"], [f"co_{suffix}"])
            shell = helper.make_graph([identity], f"body_{suffix}", *_loop_signature(suffix))
            node = helper.make_node("Loop", ["trip", "cond", f"v_{suffix}"], [f"vo_{suffix}"])
        else:
            x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
            y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
            shell = helper.make_graph([], "nested_loop", [x], [y], initializer=[trip, cond])
            node = helper.make_node("Loop", ["trip", "cond", "x"], ["y"])
        body = _wrap_graph(body, "body", node, shell)
    return _model_bytes(body)


def _loop_signature(suffix: str) -> tuple[list[onnx.ValueInfoProto], list[onnx.ValueInfoProto]]:
    inputs = [
        helper.make_tensor_value_info(f"i_{suffix}", TensorProto.INT64, []),
        helper.make_tensor_value_info(f"c_{suffix}", TensorProto.BOOL, []),
        helper.make_tensor_value_info(f"v_{suffix}", TensorProto.FLOAT, [1]),
    ]
    outputs = [
        helper.make_tensor_value_info(f"co_{suffix}", TensorProto.BOOL, []),
        helper.make_tensor_value_info(f"vo_{suffix}", TensorProto.FLOAT, [1]),
    ]
    return inputs, outputs


def long_chain(length: int = 100_000) -> onnx.ModelProto:
    """``length`` Neg nodes in a single chain from x to y."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    names = ["x", *(f"t{i}" for i in range(1, length)), "y"]
    nodes = [helper.make_node("Neg", [names[i]], [names[i + 1]]) for i in range(length)]
    return _model(helper.make_graph(nodes, "long_chain", [x], [y]))


def endless_loop() -> onnx.ModelProto:
    """A Loop with trip count INT64_MAX and a condition that stays true: runs for ever.

    All its inputs are constants, so constant folding (onnxsim) runs it too.
    """
    trip = numpy_helper.from_array(np.array(INT64_MAX, np.int64), "trip")
    cond = numpy_helper.from_array(np.array(True), "cond")
    start = numpy_helper.from_array(np.zeros(1, np.float32), "start")
    one = numpy_helper.from_array(np.ones(1, np.float32), "one")
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Add", ["v_in", "one"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1]),
        ],
    )
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    node = helper.make_node("Loop", ["trip", "cond", "start"], ["y"], body=body)
    return _model(helper.make_graph([node], "endless_loop", [], [y], initializer=[trip, cond, start, one]))


def _external_model(folder: Path, name: str, offset: int, length: int) -> Path:
    """x + W where W (float [4]) lives in ``weights.bin`` (16 bytes) at ``offset``/``length``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "weights.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    weight = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[4])
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", str(offset)), ("length", str(length))):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "W"], ["y"])], name, [x], [y], initializer=[weight]
    )
    path = folder / f"{name}.onnx"
    path.write_bytes(_model(graph).SerializeToString())
    return path


def external_data_past_eof(folder: Path) -> Path:
    """Write a model whose external tensor starts 1 MB past the end of its 16-byte data file."""
    return _external_model(folder, "past_eof", offset=1_000_000, length=16)


def external_data_huge_length(folder: Path) -> Path:
    """Write a model whose external tensor claims 1e15 bytes of a 16-byte data file."""
    return _external_model(folder, "huge_length", offset=0, length=10**15)


def declared_shape_past_file(where: str = "initializer") -> onnx.ModelProto:
    """``x + W`` where W declares ``[1000000, 1000000]`` floats (4 TB) but holds 16 bytes of values.

    ``where``: ``"initializer"`` (W's bytes in ``raw_data``), ``"float_data"`` (four floats) or
    ``"constant"`` (W is a ``Constant`` node's value). The serialized model is about 120 bytes.
    """
    weight = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=TERA_SHAPE)
    if where == "float_data":
        weight.float_data.extend([0.0] * 4)
    else:
        weight.raw_data = bytes(16)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, TERA_SHAPE)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, TERA_SHAPE)
    nodes = [helper.make_node("Add", ["x", "W"], ["y"])]
    initializers = [weight]
    if where == "constant":
        nodes.insert(0, helper.make_node("Constant", [], ["W"], value=weight))
        initializers = []
    return _model(helper.make_graph(nodes, "declared_shape_past_file", [x], [y], initializer=initializers))


def stored_values_mismatch(where: str = "raw_data") -> onnx.ModelProto:
    """``x + W`` where W declares float ``[4]`` but holds three values (ONNX Runtime refuses it with a bare
    ``FAIL``; other runtimes misread it).

    ``where``: ``"raw_data"`` (12 bytes), ``"float_data"`` (three floats) or ``"constant"`` (W is a
    ``Constant`` node's value, 12 bytes of ``raw_data``).
    """
    weight = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[4])
    if where == "float_data":
        weight.float_data.extend([1.0, 2.0, 3.0])
    else:
        weight.raw_data = np.arange(3, dtype=np.float32).tobytes()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    nodes = [helper.make_node("Add", ["x", "W"], ["y"])]
    initializers = [weight]
    if where == "constant":
        nodes.insert(0, helper.make_node("Constant", [], ["W"], value=weight))
        initializers = []
    return _model(helper.make_graph(nodes, "stored_values_mismatch", [x], [y], initializer=initializers))


def external_data_wrong_length(folder: Path) -> Path:
    """Write a model whose external tensor (float [4]) says it stores 8 bytes of its 16-byte data file."""
    return _external_model(folder, "wrong_length", offset=0, length=8)
