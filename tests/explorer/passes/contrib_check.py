"""Shared by the contrib-decomposition tests: one-node models, and ONNX Runtime on both forms."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from explorer.passes.contrib_decompositions import CONTRIB_DOMAIN, decompose_contrib

__all__ = ["one_node_model", "run_ort", "max_diffs"]


def one_node_model(
    node: onnx.NodeProto,
    inputs: dict[str, tuple[int, tuple]],
    weights: dict[str, np.ndarray | onnx.TensorProto],
    outputs: dict[str, int],
    opset: int = 21,
) -> onnx.ModelProto:
    """``node`` alone: graph inputs (name -> (element type, shape)), initializers, outputs (name -> type)."""
    values = [helper.make_tensor_value_info(k, t, list(s)) for k, (t, s) in inputs.items()]
    outs = [helper.make_tensor_value_info(k, t, None) for k, t in outputs.items()]
    inits = []
    for name, value in weights.items():
        tensor = numpy_helper.from_array(value) if isinstance(value, np.ndarray) else value
        tensor.name = name
        inits.append(tensor)
    graph = helper.make_graph([node], "g", values, outs, inits)
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(CONTRIB_DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The model's outputs on ONNX Runtime's CPU provider (no graph optimisation: each kernel as is)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}  # a decomposition may not read every input
    return session.run(None, {k: v for k, v in feeds.items() if k in wanted})


def max_diffs(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], **options: object
) -> tuple[list[float], onnx.ModelProto, list[str]]:
    """Max |contrib kernel - decomposition| per output on ONNX Runtime, the decomposed model, its log."""
    decomposed, log = decompose_contrib(model, **options)
    assert all(n.domain == "" for n in decomposed.graph.node), log
    want, got = run_ort(model, feeds), run_ort(decomposed, feeds)
    diffs = []
    for a, b in zip(want, got, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        diffs.append(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0)
    return diffs, decomposed, log
