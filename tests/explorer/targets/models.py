"""Small models built to hit one support rule each (dynamic shapes, a missing op, an attribute note...)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["unknown_op", "chain", "conv_transpose", "maxpool_with_indices", "reshape_from_shape", "diamond"]


def _model(nodes, inputs, outputs, initializers=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="tests")


def chain(middle: str = "Erf", batch: int | str = 1) -> onnx.ModelProto:
    """x[batch, 16] -> Relu -> MIDDLE -> Relu -> y: the middle op alone can fall back."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="first"),
        helper.make_node(middle, ["a"], ["b"], name="middle"),
        helper.make_node("Relu", ["b"], ["y"], name="last"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 16])
    return _model(nodes, [x], [y])


def unknown_op() -> onnx.ModelProto:
    """x -> Relu -> my.ops::Frobnicate -> y: an op no runtime has (and no function defines)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Frobnicate", ["a"], ["y"], name="frob", domain="my.ops"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
    graph = helper.make_graph(nodes, "m", [x], [y])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 1)]
    return helper.make_model(graph, opset_imports=opsets, producer_name="tests")


def conv_transpose(auto_pad: str = "SAME_UPPER") -> onnx.ModelProto:
    """A ConvTranspose with a constant weight and the given ``auto_pad`` (CoreML's table notes it)."""
    w = numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w")
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", auto_pad=auto_pad, strides=[2, 2])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])
    return _model([node], [x], [y], [w])


def maxpool_with_indices() -> onnx.ModelProto:
    """MaxPool with its optional Indices output (TVM's importer has MaxPool, but not this)."""
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], name="pool", kernel_shape=[2, 2], strides=[2, 2])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])
    i = helper.make_tensor_value_info("i", TensorProto.INT64, [1, 4, 4, 4])
    return _model([node], [x], [y, i])


def reshape_from_shape() -> onnx.ModelProto:
    """x[1, 4, 4] -> Reshape(x, Shape(x) flattened by Concat) : the shape input is computed at run time."""
    minus_one = numpy_helper.from_array(np.array([-1], np.int64), "minus_one")
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape", end=1),
        helper.make_node("Concat", ["s", "minus_one"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
    return _model(nodes, [x], [y], [minus_one])


def diamond() -> onnx.ModelProto:
    """a = Relu(x); b = Erf(a); c = Add(a, b): the two Relu-side nodes must not share a partition
    around the Erf (a path out through Erf and back in would be a cycle between devices)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        helper.make_node("Erf", ["a"], ["b"], name="b"),
        helper.make_node("Add", ["a", "b"], ["y"], name="c"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
    return _model(nodes, [x], [y])
